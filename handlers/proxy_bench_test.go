package handlers

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// The end-to-end pair of bench/run.sh in process: Caddy's reverse_proxy
// handler over loopback to an upstream answering benchJSONAnswer, alone
// (A: bare Caddy) and behind the tollgate handler as the tollgate directive
// sets it up (B: ConfigureProviderProxy's placeholder upstream, its rewrite
// dropped by addProviderKeys as in a gateway). Their difference is
// what the chain adds per request, less Caddy's server, which both share;
// compare instruction counts (valgrind --tool=callgrind) rather than
// times, which the upstream's goroutines make noisy.

// newBenchUpstream is a loopback provider answering benchJSONAnswer.
func newBenchUpstream(b *testing.B) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(benchJSONAnswer)))
		_, _ = w.Write(benchJSONAnswer)
	}))
	b.Cleanup(up.Close)
	return up
}

// newBenchProxy provisions rp.
func newBenchProxy(b *testing.B, rp *reverseproxy.Handler) *reverseproxy.Handler {
	// reverse_proxy provisions against a running http app: a config
	// without servers (and without the admin endpoint) gives it one.
	if err := caddy.Load([]byte(`{"admin":{"disabled":true},"apps":{"http":{}}}`), true); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = caddy.Stop() })
	ctx, cancel := caddy.NewContext(caddy.ActiveContext())
	b.Cleanup(cancel)
	if err := rp.Provision(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rp.Cleanup() })
	return rp
}

// benchServer is the server reverse_proxy asks about logging.
var benchServer = new(caddyhttp.Server)

// withVars sets the request up as Caddy's server does for every request
// (the replacer, the vars reverse_proxy reads).
func withVars(h caddyhttp.Handler) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return h.ServeHTTP(w, caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, benchServer))
	})
}

// BenchmarkProxyBareJSON is A: reverse_proxy alone.
func BenchmarkProxyBareJSON(b *testing.B) {
	h := benchProxyBare(b)
	runServe(b, h, benchChatBody, "sk-bench")
}

// BenchmarkProxyChainJSON is B: the tollgate handler, then reverse_proxy to
// the provider it picked, through the placeholders.
func BenchmarkProxyChainJSON(b *testing.B) {
	h, secret := benchProxyChain(b)
	runServe(b, h, benchChatBody, secret)
}

// BenchmarkProxyBareJSONParallel is A under concurrent requests, as
// bench/run.sh loads it (run with -cpu 1 for its one gateway core).
func BenchmarkProxyBareJSONParallel(b *testing.B) {
	h := benchProxyBare(b)
	runServeParallel(b, h, benchChatBody, "sk-bench")
}

// BenchmarkProxyChainJSONParallel is B under concurrent requests: their
// charges share group commits.
func BenchmarkProxyChainJSONParallel(b *testing.B) {
	h, secret := benchProxyChain(b)
	runServeParallel(b, h, benchChatBody, secret)
}

func benchProxyBare(b *testing.B) caddyhttp.Handler {
	up := newBenchUpstream(b)
	// Default settings, as an operator runs it (and as the pipeline's:
	// Caddy flushes event streams by itself).
	rp := newBenchProxy(b, &reverseproxy.Handler{Upstreams: reverseproxy.UpstreamPool{{Dial: up.Listener.Addr().String()}}})
	h := withVars(caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return rp.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
	}))
	checkOnce(b, h, benchChatBody, "sk-bench", false)
	return h
}

func benchProxyChain(b *testing.B) (caddyhttp.Handler, string) {
	up := newBenchUpstream(b)
	s := newBenchSetupAt(b, up.Listener.Addr().String())
	rp := new(reverseproxy.Handler)
	if err := ConfigureProviderProxy(rp, false); err != nil {
		b.Fatal(err)
	}
	newBenchProxy(b, rp)
	if err := addProviderKeys(rp, DefaultDialTimeout); err != nil {
		b.Fatal(err)
	}
	h := withVars(s.chain(caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return rp.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }))
	})))
	checkOnce(b, h, benchChatBody, s.secret, true)
	return h, s.secret
}
