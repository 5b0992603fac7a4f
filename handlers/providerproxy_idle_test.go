package handlers

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// The provider proxies keep providerIdleConns idle connections per host
// (Caddy's default, 32, is below a busy gateway's concurrency), unless the
// operator's transport sets its own.
func TestProviderProxiesKeepIdleConnections(t *testing.T) {
	if err := caddy.Load([]byte(`{"admin":{"disabled":true},"apps":{"http":{}}}`), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	t.Cleanup(cancel)

	own := new(reverseproxy.Handler)
	if err := ConfigureProviderProxy(own, false); err != nil {
		t.Fatal(err)
	}
	own.TransportRaw = json.RawMessage(`{"protocol":"http","keep_alive":{"max_idle_conns_per_host":7}}`)
	tg := &Tollgate{HTTPProxyRaw: caddyconfig.JSONModuleObject(own, "handler", "reverse_proxy", nil)}
	var provisioned []*reverseproxy.Handler
	loadedProxy = func(rp *reverseproxy.Handler) { provisioned = append(provisioned, rp) }
	t.Cleanup(func() { loadedProxy = nil })
	if _, err := tg.loadProxies(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(provisioned) != 2 {
		t.Fatalf("%d proxies provisioned, want 2", len(provisioned))
	}
	for i, want := range []int{providerIdleConns, 7} { // https_proxy (default), http_proxy (the operator's)
		tr, ok := provisioned[i].Transport.(keyTransport)
		if !ok {
			t.Fatalf("proxy %d: transport %T", i, provisioned[i].Transport)
		}
		rt := tr.Transport
		if rt.MaxIdleConnsPerHost != want {
			t.Fatalf("proxy %d keeps %d idle connections per host, want %d", i, rt.MaxIdleConnsPerHost, want)
		}
	}
}
