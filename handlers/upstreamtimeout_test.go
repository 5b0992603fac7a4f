package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
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
	if got := u.of(&catalog.Provider{}); got.ResponseHeader != time.Second || got.Dial != 3*time.Second || ht.Transport.ResponseHeaderTimeout != time.Second {
		t.Errorf("operator's: %+v, transport's own %s", got, ht.Transport.ResponseHeaderTimeout)
	}
	own := catalog.Timeouts{Dial: 20 * time.Second, ResponseHeader: time.Hour, FirstByte: time.Minute}
	if got := u.of(&catalog.Provider{Timeouts: own}); got != own {
		t.Errorf("provider's own: %+v, want %+v", got, own)
	}
}

// A dial gives up after its lane's dial timeout, or the one its request
// carries, as timed out.
func TestBoundDials(t *testing.T) {
	for _, tt := range []struct {
		lane, carried, want time.Duration
	}{{50 * time.Millisecond, 0, 50 * time.Millisecond}, {time.Hour, 50 * time.Millisecond, 50 * time.Millisecond}} {
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()                                    // a provider whose host never answers
			return nil, errors.New("dial tcp: i/o timeout") // Caddy's dialer hides the cause
		}}
		boundDials(tr, tt.lane)
		began := time.Now()
		ctx := context.Background()
		if tt.carried > 0 {
			ctx = context.WithValue(ctx, dialTimeoutKey{}, tt.carried)
		}
		_, err := tr.DialContext(ctx, "tcp", "192.0.2.1:443")
		if err != (timedOut{"dial", tt.want}) || time.Since(began) > 5*time.Second {
			t.Fatalf("lane %s, carried %s: %v after %s", tt.lane, tt.carried, err, time.Since(began))
		}
	}
}

// A catalog provider with timeouts of its own gets a lane, a transport
// that enforces them, and its attempts that are not streams take no
// timer: the lane's response header timeout fails a hung answer.
func TestProviderTimeoutLanes(t *testing.T) {
	if err := caddy.Load([]byte(`{"admin":{"disabled":true},"apps":{"http":{}}}`), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	t.Cleanup(cancel)
	done := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(func() { close(done); up.Close() })

	quick := catalog.Timeouts{ResponseHeader: 100 * time.Millisecond}
	plain := &catalog.Provider{Name: "plain", Scheme: "http"}
	own := &catalog.Provider{Name: "own", Scheme: "http", Timeouts: quick}
	same := &catalog.Provider{Name: "same", Scheme: "http", Timeouts: quick}
	tls := &catalog.Provider{Name: "tls", Scheme: "https", Timeouts: catalog.Timeouts{Dial: time.Second}}
	cat := catalog.New([]*catalog.Model{{ID: "m", Providers: []*catalog.Provider{plain, own, same, tls}}})
	var provisioned []*reverseproxy.Handler
	loadedProxy = func(rp *reverseproxy.Handler) { provisioned = append(provisioned, rp) }
	t.Cleanup(func() { loadedProxy = nil })
	if _, err := new(Tollgate).loadProxies(ctx, cat); err != nil {
		t.Fatal(err)
	}
	https, plainHTTP := limits(provisioned[0]), limits(provisioned[1])
	if len(https.lanes) != 1 || len(plainHTTP.lanes) != 1 {
		t.Fatalf("lanes: https %v, http %v", https.lanes, plainHTTP.lanes)
	}
	ht, ok := plainHTTP.laneOf(plainHTTP.of(own))
	if !ok || ht == nil || ht.Transport.ResponseHeaderTimeout != quick.ResponseHeader || ht.Transport.MaxIdleConnsPerHost != providerIdleConns {
		t.Fatalf("own's lane: %+v", ht)
	}
	if ht, ok := plainHTTP.laneOf(plainHTTP.of(plain)); !ok || ht != nil {
		t.Fatalf("plain's lane: %v, %v (want the proxy's own transport)", ht, ok)
	}
	if _, ok := plainHTTP.laneOf(catalog.Timeouts{Dial: time.Second, ResponseHeader: time.Second}); ok {
		t.Fatal("timeouts of no catalog provider have a lane")
	}

	tr := provisioned[1].Transport.(keyTransport)
	send := func(p *catalog.Provider, path string, stream bool) (*http.Response, error) {
		req := httptest.NewRequest(http.MethodPost, up.URL+path, nil)
		req.RequestURI = ""
		return tr.RoundTrip(metering.WithRoute(req, &upstream.Route{Provider: p, Stream: stream}))
	}
	began := time.Now()
	if _, err := send(own, "/hang", false); err != (timedOut{"response header", quick.ResponseHeader}) || time.Since(began) > 5*time.Second {
		t.Fatalf("hung answer: %v after %s", err, time.Since(began))
	}
	res, err := send(plain, "/", false)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("plain: %v, %v", res, err)
	}
	_ = res.Body.Close()
	// Outside the catalog: the attempt's own timer.
	outside := &catalog.Provider{Name: "outside", Scheme: "http", Timeouts: catalog.Timeouts{ResponseHeader: 50 * time.Millisecond}}
	if _, err := send(outside, "/hang", false); err != (timedOut{"response header", 50 * time.Millisecond}) {
		t.Fatalf("outside the catalog: %v", err)
	}
}
