package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
)

// The proxies' dialer waits up to MaxDialTimeout, so that a provider may
// ask for that; the default is the operator's dial_timeout or the
// gateway's.
func TestWidenDial(t *testing.T) {
	for _, tt := range []struct {
		raw      string
		def      time.Duration
		widened  string
		protocol string
	}{
		{`{"handler":"reverse_proxy"}`, DefaultDialTimeout, "1m0s", "http"},
		{`{"handler":"reverse_proxy","transport":{"protocol":"http","dial_timeout":"5s"}}`, 5 * time.Second, "1m0s", "http"},
		{`{"handler":"reverse_proxy","transport":{"protocol":"http","dial_timeout":120000000000}}`, 2 * time.Minute, "2m0s", "http"},
	} {
		raw, def, err := widenDial([]byte(tt.raw))
		if err != nil || def != tt.def || gjson.GetBytes(raw, "transport.dial_timeout").Str != tt.widened ||
			gjson.GetBytes(raw, "transport.protocol").Str != tt.protocol {
			t.Errorf("%s: %s, default %s, %v", tt.raw, raw, def, err)
		}
	}
	if _, _, err := widenDial([]byte(`{"handler":"reverse_proxy","transport":{"protocol":"http","dial_timeout":"soon"}}`)); err == nil {
		t.Error("an invalid dial_timeout was taken")
	}
	// Another handler is left as it is, for loading to refuse by name.
	if raw, _, err := widenDial([]byte(`{"handler":"static_response"}`)); err != nil || string(raw) != `{"handler":"static_response"}` {
		t.Errorf("static_response: %s, %v", raw, err)
	}
}

// The gateway's defaults, the operator's response_header_timeout taken
// over from the transport, and a provider's own timeouts over both.
func TestUpstreamTimeoutsOf(t *testing.T) {
	ht := &reverseproxy.HTTPTransport{Transport: &http.Transport{}}
	u := upstreamLimits(ht, DefaultDialTimeout)
	want := catalog.Timeouts{Dial: DefaultDialTimeout, ResponseHeader: DefaultResponseHeaderTimeout, FirstByte: DefaultFirstByteTimeout}
	if got := u.of(&catalog.Provider{}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	ht = &reverseproxy.HTTPTransport{Transport: &http.Transport{ResponseHeaderTimeout: time.Second}}
	u = upstreamLimits(ht, 3*time.Second)
	if got := u.of(&catalog.Provider{}); got.ResponseHeader != time.Second || got.Dial != 3*time.Second || ht.Transport.ResponseHeaderTimeout != 0 {
		t.Errorf("operator's: %+v, transport's own %s", got, ht.Transport.ResponseHeaderTimeout)
	}
	own := catalog.Timeouts{Dial: 20 * time.Second, ResponseHeader: time.Hour, FirstByte: time.Minute}
	if got := u.of(&catalog.Provider{Timeouts: own}); got != own {
		t.Errorf("provider's own: %+v, want %+v", got, own)
	}
}

// A dial gives up after the dial timeout its request carries.
func TestBoundDials(t *testing.T) {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done() // a provider whose host never answers
		return nil, ctx.Err()
	}}
	boundDials(tr)
	began := time.Now()
	ctx := context.WithValue(context.Background(), dialTimeoutKey{}, 50*time.Millisecond)
	if _, err := tr.DialContext(ctx, "tcp", "192.0.2.1:443"); !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 5*time.Second {
		t.Fatalf("dial: %v after %s", err, time.Since(began))
	}
}
