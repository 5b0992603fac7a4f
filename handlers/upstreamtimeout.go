package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
)

// The gateway's upstream timeouts, for a provider whose config sets none
// (catalog.Timeouts) and a proxy transport that sets none: a provider that
// hangs fails the attempt as timed out (the next provider is tried, or the
// client gets a 408), nothing is charged and the hold is released, instead
// of holding the client and its credit until it leaves.
const (
	// DefaultDialTimeout bounds opening a connection to a provider.
	DefaultDialTimeout = 10 * time.Second
	// DefaultResponseHeaderTimeout bounds the wait for an answer's
	// headers: an answer that is not a stream comes whole, after the
	// model has produced all of it.
	DefaultResponseHeaderTimeout = 10 * time.Minute
	// DefaultFirstByteTimeout bounds the wait for a stream's first byte:
	// providers open a stream at once, before the model's first token.
	DefaultFirstByteTimeout = 2 * time.Minute
	// MaxDialTimeout is the longest dial timeout a provider may set: the
	// proxies' dialer gives up then whatever the provider asks.
	MaxDialTimeout = time.Minute
)

// upstreamTimeouts are a provider proxy's defaults: the operator's
// transport settings (dial_timeout, response_header_timeout) or the
// gateway's.
type upstreamTimeouts struct {
	dial, header, firstByte time.Duration
}

// of is the timeouts of an attempt to p: p's own, else the defaults.
func (u *upstreamTimeouts) of(p *catalog.Provider) catalog.Timeouts {
	t := p.Timeouts
	if t.Dial <= 0 {
		t.Dial = u.dial
	}
	if t.ResponseHeader <= 0 {
		t.ResponseHeader = u.header
	}
	if t.FirstByte <= 0 {
		t.FirstByte = u.firstByte
	}
	return t
}

// widenDial sets the dial timeout of a provider proxy's transport, in
// its JSON config raw, to MaxDialTimeout, so that a provider may ask for
// up to that, and returns the proxy's default dial timeout: the one the
// operator set, else DefaultDialTimeout. The per-attempt dial timeout is
// enforced by the dialer's wrapper (boundDials).
func widenDial(raw json.RawMessage) (json.RawMessage, time.Duration, error) {
	def := DefaultDialTimeout
	if gjson.GetBytes(raw, "handler").Str != "reverse_proxy" {
		return raw, def, nil // refused once loaded, with the handler's name
	}
	if v := gjson.GetBytes(raw, "transport.dial_timeout"); v.Exists() {
		var d caddy.Duration
		if err := json.Unmarshal([]byte(v.Raw), &d); err != nil {
			return nil, 0, err
		}
		if d > 0 {
			def = time.Duration(d)
		}
	}
	if !gjson.GetBytes(raw, "transport.protocol").Exists() {
		var err error
		if raw, err = sjson.SetBytes(raw, "transport.protocol", "http"); err != nil {
			return nil, 0, err
		}
	}
	raw, err := sjson.SetBytes(raw, "transport.dial_timeout", max(def, MaxDialTimeout).String())
	return raw, def, err
}

// upstreamLimits takes over the provisioned transport's response header
// timeout (the proxy's default from now on, DefaultResponseHeaderTimeout
// when it sets none), which keyTransport enforces per provider, and makes
// its dials honor each attempt's dial timeout.
func upstreamLimits(ht *reverseproxy.HTTPTransport, dial time.Duration) *upstreamTimeouts {
	u := &upstreamTimeouts{dial: dial, header: DefaultResponseHeaderTimeout, firstByte: DefaultFirstByteTimeout}
	if ht.Transport == nil {
		return u
	}
	if h := ht.Transport.ResponseHeaderTimeout; h > 0 {
		u.header = h
		ht.Transport.ResponseHeaderTimeout = 0
	}
	boundDials(ht.Transport)
	return u
}

// dialTimeoutKey is the context key of an attempt's dial timeout. The
// transport dials with a context that keeps the request's values but not
// its deadline, so the timeout travels as a value.
type dialTimeoutKey struct{}

// boundDials makes t's dials give up after the dial timeout their
// request carries.
func boundDials(t *http.Transport) {
	dial := t.DialContext
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if d, ok := ctx.Value(dialTimeoutKey{}).(time.Duration); ok && d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return dial(ctx, network, addr)
	}
}

// timedOut is an attempt that waited past one of its timeouts: a
// net.Error whose Timeout is true, which reverse_proxy answers 504 and
// the meter reports as the provider's timeout.
type timedOut struct {
	what string
	d    time.Duration
}

func (e timedOut) Error() string   { return "provider " + e.what + " timed out after " + e.d.String() }
func (e timedOut) Timeout() bool   { return true }
func (e timedOut) Temporary() bool { return true }

var _ net.Error = timedOut{}

// roundTripTimed sends out, the attempt's request to provider p, within
// its timeouts: its headers within the response header timeout and, for
// a stream, its first byte within the first-byte timeout, both counted
// from the request's start; its dial within the dial timeout.
func (t keyTransport) roundTripTimed(out *http.Request, p *catalog.Provider, stream bool) (*http.Response, error) {
	lim := t.limits.of(p)
	wait, what := lim.ResponseHeader, "response header"
	if stream && lim.FirstByte < wait {
		wait, what = lim.FirstByte, "first byte"
	}
	ctx, cancel := context.WithCancel(context.WithValue(out.Context(), dialTimeoutKey{}, lim.Dial))
	var fired atomic.Bool
	start := time.Now()
	timer := time.AfterFunc(wait, func() { fired.Store(true); cancel() })
	res, err := t.HTTPTransport.RoundTrip(out.WithContext(ctx))
	if err != nil {
		timer.Stop()
		cancel()
		var ne net.Error
		switch {
		case fired.Load():
			return nil, timedOut{what, wait}
		case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
			return nil, timedOut{"dial", lim.Dial}
		}
		return nil, err
	}
	if stream && res.StatusCode < 400 {
		// The headers came: the stream's first byte has what is left of
		// its own timeout.
		if !timer.Stop() {
			return nil, closeTimedOut(res, cancel, timedOut{what, wait})
		}
		timer.Reset(max(lim.FirstByte-time.Since(start), 0))
		var b [1]byte
		n, rerr := readSome(res.Body, b[:])
		if !timer.Stop() || fired.Load() {
			return nil, closeTimedOut(res, cancel, timedOut{"first byte", lim.FirstByte})
		}
		res.Body = &timedBody{r: io.MultiReader(bytesOrErr(b[:n], rerr), res.Body), body: res.Body, cancel: cancel}
		return res, nil
	}
	if !timer.Stop() {
		return nil, closeTimedOut(res, cancel, timedOut{what, wait})
	}
	res.Body = &timedBody{r: res.Body, body: res.Body, cancel: cancel}
	return res, nil
}

// readSome reads until it gets a byte or an error.
func readSome(r io.Reader, b []byte) (int, error) {
	for {
		n, err := r.Read(b)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// bytesOrErr replays b, then err (nil or io.EOF: what follows).
func bytesOrErr(b []byte, err error) io.Reader {
	if err != nil && err != io.EOF {
		return io.MultiReader(bytes.NewReader(b), failedRead{err})
	}
	return bytes.NewReader(b)
}

type failedRead struct{ err error }

func (e failedRead) Read([]byte) (int, error) { return 0, e.err }

// closeTimedOut discards a response whose wait ran out.
func closeTimedOut(res *http.Response, cancel context.CancelFunc, err error) error {
	cancel()
	_ = res.Body.Close()
	return err
}

// timedBody is an answer's body whose request context ends with it.
type timedBody struct {
	r      io.Reader
	body   io.ReadCloser
	cancel context.CancelFunc
}

func (b *timedBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *timedBody) Close() error {
	err := b.body.Close()
	b.cancel()
	return err
}
