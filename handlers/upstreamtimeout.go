package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// upstreamTimeouts are a provider proxy's defaults (the operator's
// transport settings, dial_timeout and response_header_timeout, or the
// gateway's) and its lanes.
type upstreamTimeouts struct {
	dial, header, firstByte time.Duration
	// lanes are the proxy's transports for the catalog's providers whose
	// dial or response header timeout is not the default: each enforces
	// its own on every connection and request, so that an attempt needs
	// no context or timer of its own. Read-only once provisioned.
	lanes map[lane]*reverseproxy.HTTPTransport
}

// lane is the dial and response header timeouts of a transport.
type lane struct{ dial, header time.Duration }

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

// laneOf is the transport that enforces lim's dial and response header
// timeouts: nil for the defaults (the proxy's own transport); ok is
// false for timeouts no lane has (a provider outside the catalog the
// proxy was provisioned with).
func (u *upstreamTimeouts) laneOf(lim catalog.Timeouts) (ht *reverseproxy.HTTPTransport, ok bool) {
	l := lane{lim.Dial, lim.ResponseHeader}
	if l == (lane{u.dial, u.header}) {
		return nil, true
	}
	ht, ok = u.lanes[l]
	return ht, ok
}

// widenDial sets the dial timeout of a provider proxy's transport, in
// its JSON config raw, to MaxDialTimeout, so that a provider may ask for
// up to that, and returns the proxy's default dial timeout: the one the
// operator set, else DefaultDialTimeout. The dial timeout of each lane
// is enforced by the dialer's wrapper (boundDials).
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

// upstreamLimits makes the provisioned transport the default lane: its
// response header timeout the operator's, else
// DefaultResponseHeaderTimeout, and its dials bounded by dial.
func upstreamLimits(ht *reverseproxy.HTTPTransport, dial time.Duration) *upstreamTimeouts {
	u := &upstreamTimeouts{dial: dial, header: DefaultResponseHeaderTimeout, firstByte: DefaultFirstByteTimeout}
	if ht.Transport == nil {
		return u
	}
	if h := ht.Transport.ResponseHeaderTimeout; h > 0 {
		u.header = h
	}
	ht.Transport.ResponseHeaderTimeout = u.header
	boundDials(ht.Transport, dial)
	return u
}

// addLanes provisions, with ctx, a lane for the timeouts of each of
// providers that the default transport does not enforce. transport is
// the proxy's transport config (widenDial's), idle whether it sets its
// idle connections per host.
func (u *upstreamTimeouts) addLanes(ctx caddy.Context, transport json.RawMessage, idle bool, providers []*catalog.Provider) error {
	for _, p := range providers {
		lim := u.of(p)
		if _, ok := u.laneOf(lim); ok {
			continue
		}
		raw, err := sjson.DeleteBytes(transport, "protocol") // the inline key, not a field
		if err == nil {
			raw, err = sjson.SetBytes(raw, "response_header_timeout", lim.ResponseHeader.String())
		}
		if err != nil {
			return err
		}
		mod, err := ctx.LoadModuleByID("http.reverse_proxy.transport.http", raw)
		if err != nil {
			return fmt.Errorf("the transport for provider %s's timeouts: %v", p.Name, err)
		}
		ht := mod.(*reverseproxy.HTTPTransport)
		boundDials(ht.Transport, lim.Dial)
		if !idle {
			keepIdleConns(ht)
		}
		if u.lanes == nil {
			u.lanes = make(map[lane]*reverseproxy.HTTPTransport)
		}
		u.lanes[lane{lim.Dial, lim.ResponseHeader}] = ht
	}
	return nil
}

// dialTimeoutKey is the context key of an attempt's dial timeout, for an
// attempt without a lane of its own. The transport dials with a context
// that keeps the request's values but not its deadline, so the timeout
// travels as a value.
type dialTimeoutKey struct{}

// boundDials makes t's dials give up after d, or the dial timeout their
// request carries, as timed out (timedOut).
func boundDials(t *http.Transport, d time.Duration) {
	dial := t.DialContext
	if dial == nil {
		var nd net.Dialer
		dial = nd.DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		wait := d
		if v, ok := ctx.Value(dialTimeoutKey{}).(time.Duration); ok && v > 0 {
			wait = v
		}
		if wait <= 0 {
			return dial(ctx, network, addr)
		}
		dctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		conn, err := dial(dctx, network, addr)
		if err != nil && ctx.Err() == nil && dctx.Err() == context.DeadlineExceeded {
			// Caddy's dialer wraps the error in one that hides its cause.
			return nil, timedOut{"dial", wait}
		}
		return conn, err
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

// roundTrip sends out, the attempt's request to provider p, within its
// timeouts. An answer that is not a stream takes no timer or context of
// its own: its lane's transport enforces its dial and response header
// timeouts.
func (t keyTransport) roundTrip(out *http.Request, p *catalog.Provider, stream bool) (*http.Response, error) {
	lim := t.limits.of(p)
	ht, ok := t.limits.laneOf(lim)
	if ht == nil {
		ht = t.HTTPTransport
	}
	if stream || !ok {
		return roundTripTimed(ht, out, lim, stream, !ok)
	}
	res, err := ht.RoundTrip(out)
	if err != nil {
		return nil, headerTimedOut(err, lim)
	}
	return res, nil
}

// headerTimedOut is err, or, when it is the transport's response header
// timeout, the attempt's timedOut.
func headerTimedOut(err error, lim catalog.Timeouts) error {
	var to timedOut
	var ne net.Error
	if !errors.As(err, &to) && errors.As(err, &ne) && ne.Timeout() {
		return timedOut{"response header", lim.ResponseHeader}
	}
	return err
}

// roundTripTimed sends out with ht, within lim: its headers within the
// response header timeout and, for a stream, its first byte within the
// first-byte timeout, both counted from the request's start; with
// ownDial, its dial within the dial timeout (ht's lane is not lim's).
func roundTripTimed(ht *reverseproxy.HTTPTransport, out *http.Request, lim catalog.Timeouts, stream, ownDial bool) (*http.Response, error) {
	wait, what := lim.ResponseHeader, "response header"
	if stream && lim.FirstByte < wait {
		wait, what = lim.FirstByte, "first byte"
	}
	ctx := out.Context()
	if ownDial {
		ctx = context.WithValue(ctx, dialTimeoutKey{}, lim.Dial)
	}
	ctx, cancel := context.WithCancel(ctx)
	var fired atomic.Bool
	start := time.Now()
	timer := time.AfterFunc(wait, func() { fired.Store(true); cancel() })
	res, err := ht.RoundTrip(out.WithContext(ctx))
	if err != nil {
		timer.Stop()
		cancel()
		if fired.Load() {
			return nil, timedOut{what, wait}
		}
		return nil, headerTimedOut(err, lim)
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
	_ = res.Body.Close() // the attempt already failed with err; closing only frees the connection
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
