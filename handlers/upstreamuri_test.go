package handlers

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/rewrite"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// The meter points each attempt at its provider's URI itself
// (Route.withUpstreamURI) instead of the provider proxies' rewrite to
// {tollgate.upstream.uri}: the request reverse_proxy copies must carry the
// URL and RequestURI that rewrite gave it, for every value of the
// placeholder and every query the request had.
func TestRewriteUpstreamURIAsCaddy(t *testing.T) {
	uris := []string{
		"/v1/chat/completions", "/v1/chat/completions?debug=1", "/openai/v1/responses?a=1&b=2",
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "/v1/models/a%2Fb:generate",
		"/v1/x%zz", "/v1/chat/completions?", "/v1/chat?&a=1", "/v1/chat?a=1&&b=2", "/v1/chat?a=1&",
		"/v1/chat?a=", "/v1/chat?=a", "/v1/chat?a&=1", "/v1/chat?a==b", "/v1/chat?a=b=c&d",
		"/v1/chat?{env.HOME}=1", "/v1/chat?a={http.request.uri}", "/v1/chat#frag", "/v1/chat?a=1#frag",
		"/v1/a b?c d=e f", "/v1/%7Bx%7D?%7B=%7D", "", "?", "?a=1", "/v1/chat?a=1?b=2", "/v1/%2F%20/x?%26=%3D",
		"/v1/chat?a=1&b", "/v1/chat?&&", "/v1/chat?&", "/v1/chat?=",
	}
	queries := []string{"", "debug=1", "key=x&debug=1", "a=1&&b", "%7B=%7D"}
	for _, uri := range uris {
		for _, q := range queries {
			checkUpstreamURI(t, "/api/v1/chat/completions", uri, q)
			checkUpstreamURI(t, "/api/v1/chat%2Fcompletions", uri, q) // a raw path to drop
		}
	}
	// And random ones, from the bytes that matter to either side.
	const alphabet = "/?#&=%{}abAB0:+ "
	rng := rand.New(rand.NewPCG(38, 38))
	for range 20000 {
		b := make([]byte, rng.IntN(14))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		checkUpstreamURI(t, "/api/v1/chat/completions", "/v1/"+string(b), queries[rng.IntN(len(queries))])
	}
}

// checkUpstreamURI compares, for a request to path with the query q,
// Caddy's rewrite to the placeholder's value uri and rewriteUpstreamURI.
func checkUpstreamURI(t *testing.T, path, uri, q string) {
	t.Helper()
	target := path
	if q != "" {
		target += "?" + q
	}
	want := httptest.NewRequest(http.MethodPost, target, nil)
	repl := caddy.NewReplacer()
	repl.Map(func(key string) (any, bool) {
		if key == "tollgate.upstream.uri" {
			return uri, true
		}
		return nil, false
	})
	rw := rewrite.Rewrite{URI: upstreamURI}
	rw.Rewrite(want, repl)

	got := httptest.NewRequest(http.MethodPost, target, nil)
	u := *got.URL
	upstream.RewriteUpstreamURI(&u, uri)
	if u != *want.URL || u.RequestURI() != want.RequestURI {
		t.Errorf("uri %q, query %q: got %#v (%q), Caddy's rewrite %#v (%q)", uri, q, u, u.RequestURI(), *want.URL, want.RequestURI)
	}
}

// The provider proxies keep no rewrite of their own once provisioned
// (addProviderKeys), unless it does more than ConfigureProviderProxy's.
func TestProviderProxyDropsItsRewrite(t *testing.T) {
	rp := new(reverseproxy.Handler)
	if err := ConfigureProviderProxy(rp, false); err != nil {
		t.Fatal(err)
	}
	rp.Transport = new(reverseproxy.HTTPTransport)
	if err := addProviderKeys(rp, DefaultDialTimeout); err != nil {
		t.Fatal(err)
	}
	if rp.Rewrite != nil {
		t.Fatalf("rewrite kept: %+v", rp.Rewrite)
	}
	rp = &reverseproxy.Handler{Transport: new(reverseproxy.HTTPTransport),
		Rewrite: &rewrite.Rewrite{URI: upstreamURI, StripPathPrefix: "/x"}}
	if err := addProviderKeys(rp, DefaultDialTimeout); err != nil || rp.Rewrite == nil {
		t.Fatalf("an operator's rewrite was dropped (%v)", err)
	}
}
