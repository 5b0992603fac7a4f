package answer

import (
	"errors"
	"maps"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// Failure is one attempt that got no usable answer.
type Failure struct {
	Status   int    // the provider's status, or the gateway's for transport errors
	Provider string // provider name
	Code     any    // the provider's own error code, when it gave one
	Message  string
	Raw      string
	Retry    time.Duration // the provider's Retry-After; 0: none
}

// Retryable reports whether an attempt failed before anything reached the
// client in a way another provider may not: rate limited, a server error,
// a timeout, no connection or an invalid answer.
func (mw *Writer) Retryable(proxyErr error) bool {
	switch {
	case mw.Mode == sse.Undecided:
		return proxyErr != nil
	case mw.UpstreamFailed():
		return mw.Status == http.StatusTooManyRequests || mw.Status == http.StatusRequestTimeout || mw.Status >= 500
	case mw.AnswerHeld():
		return !mw.UsableJSON()
	}
	return false
}

// Transient reports whether an attempt that failed before anything
// reached the client (Retryable) may succeed on the same endpoint a
// moment later: no connection or a broken one, a timeout, the provider's
// 502 or 503, or its 429 with a Retry-After in seconds (retryAfter, which
// a retry must wait). Any other failure goes to the next endpoint at once.
func (mw *Writer) Transient(proxyErr error) (retryAfter time.Duration, ok bool) {
	switch {
	case mw.Mode == sse.Undecided:
		return 0, proxyErr != nil
	case !mw.UpstreamFailed():
		return 0, false
	case mw.Status == http.StatusBadGateway || mw.Status == http.StatusServiceUnavailable:
		return 0, true
	case mw.Status == http.StatusTooManyRequests:
		secs, err := strconv.Atoi(mw.Header().Get("Retry-After"))
		if err != nil || secs < 0 {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	return 0, false
}

// Failure describes a failed attempt.
func (mw *Writer) Failure(route *upstream.Route, proxyErr error) Failure {
	f := Failure{Provider: route.Provider.Name}
	switch {
	case mw.UpstreamFailed():
		f.Status, f.Message = mw.Status, http.StatusText(mw.Status)
		if body := mw.Body.Bytes(); len(body) > 0 {
			code, m := route.Provider.D().Failure(mw.Status, mw.Header(), body)
			if m != "" {
				// Bounded as raw is: the redaction's cost grows with it.
				f.Message = route.Redact(truncateText(m, 2000))
			}
			f.Code = code
			if s, ok := code.(string); ok {
				f.Code = route.Redact(s)
			}
			// Cut, then redacted: a run of a secret cut short is still
			// one.
			f.Raw = route.Redact(truncate(string(body), 2000))
		}
		if f.Code == nil {
			f.Code = mw.Status
		}
		if secs, err := strconv.Atoi(mw.Header().Get("Retry-After")); err == nil && secs >= 0 {
			f.Retry = time.Duration(max(secs, 1)) * time.Second
		}
	case mw.AnswerHeld() && mw.empty:
		f.Status, f.Message = http.StatusBadGateway, "Provider returned an empty answer"
	case mw.AnswerHeld():
		f.Status, f.Message = http.StatusBadGateway, "Provider returned an invalid response"
	default:
		f.Status, f.Message = http.StatusBadGateway, "Provider is unavailable"
		var he caddyhttp.HandlerError
		if errors.As(proxyErr, &he) && he.StatusCode == http.StatusGatewayTimeout {
			f.Status, f.Message = http.StatusRequestTimeout, "Provider timed out"
		}
	}
	return f
}

// FailuresError is the client's answer when every attempt failed: the
// last attempt's error; a provider's 429 carries its own code and, when
// every attempted provider gave a retry hint, Retry-After.
func FailuresError(failed []Failure) *apierror.Error {
	last := failed[len(failed)-1]
	md := map[string]any{"provider_name": last.Provider}
	if last.Raw != "" {
		md["raw"] = last.Raw
	}
	e := &apierror.Error{Status: last.Status, Message: last.Message, Metadata: md}
	if last.Status != http.StatusTooManyRequests {
		return e
	}
	e.Message = "Rate limit exceeded"
	md["error_type"] = "rate_limit_exceeded"
	md["provider_code"] = last.Code
	hint := time.Duration(0)
	for _, f := range failed {
		if f.Retry == 0 {
			return e
		}
		if hint == 0 || f.Retry < hint {
			hint = f.Retry
		}
	}
	e.Header = http.Header{"Retry-After": {strconv.Itoa(int(hint.Seconds()))}}
	return e
}

// truncateText is truncate, cut at a character's start.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// HeaderSnapshot is a copy of a response header, as Header.Clone makes
// it (each value slice copied, nil ones kept nil, each full so that an
// append copies it), kept in the request state's allocation when the
// header is as small as it is before any provider answered (Caddy's
// Server, maybe Alt-Svc); a larger one is a Header.Clone.
type HeaderSnapshot struct {
	n     int
	keys  [snapshotEntries]string
	vals  [snapshotEntries][]string
	store [snapshotEntries]string // the values' copies
	large http.Header             // more than fits above, when not nil
}

// snapshotEntries is how many entries, and values, HeaderSnapshot holds
// in place.
const snapshotEntries = 3

// Take snapshots h.
func (s *HeaderSnapshot) Take(h http.Header) {
	s.n, s.large = 0, nil
	used := 0
	for _, vv := range h {
		used += len(vv)
	}
	if len(h) > snapshotEntries || used > snapshotEntries {
		s.large = h.Clone()
		return
	}
	used = 0
	for k, vv := range h {
		s.keys[s.n] = k
		if vv == nil {
			s.vals[s.n] = nil
		} else {
			n := copy(s.store[used:], vv)
			s.vals[s.n] = s.store[used : used+n : used+n]
			used += n
		}
		s.n++
	}
}

// Restore puts w's response headers back to the snapshot: what
// clear(w.Header()) and maps.Copy of the Header.Clone did.
func (s *HeaderSnapshot) Restore(w http.ResponseWriter) {
	h := w.Header()
	clear(h)
	if s.large != nil {
		maps.Copy(h, s.large)
		return
	}
	for i := range s.n {
		h[s.keys[i]] = s.vals[i]
	}
}
