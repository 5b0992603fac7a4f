package integration

import (
	"strings"
	"sync/atomic"
	"testing"
)

// gatewayDirective is the harness's tollgate directive in the gateway site.
const gatewayDirective = "\ttollgate {\n\t\t# the gateway's options\n\t}\n"

// TestProviderUnreachableWithoutTollgateHandler: a site that proxies with
// the tollgate placeholders but without the tollgate directive (the
// pipeline that sets them) never reaches a provider: nothing chose one, so
// there is nothing to dial and no provider key to send.
func TestProviderUnreachableWithoutTollgateHandler(t *testing.T) {
	var posts atomic.Int64
	tap := startTap(t, mockAddr, func(string, []byte) { posts.Add(1) }, nil)
	startInProcessWith(t, chain(withProxyAt(strings.TrimPrefix(tap.URL, "http://")), func(cfg string) string {
		return replaceOnce(t, cfg, gatewayDirective, "\treverse_proxy /api/v1/* {tollgate.upstream.dial} {\n"+
			"\t\trewrite {tollgate.upstream.uri}\n\t\tflush_interval -1\n\t}\n")
	}))
	c := newClient(t, gatewayAddr, adminAddr)
	r := c.api("POST", "/chat/completions", "sk-tg-v1-"+strings.Repeat("0", 64),
		`{"model":"tollgate-mock","messages":[{"role":"user","content":"hi"}]}`)
	if r.Status < 500 || posts.Load() != 0 {
		t.Fatalf("status %d, %d provider calls; want a 5xx and none", r.Status, posts.Load())
	}
}

// TestOperatorHandleErrorsComposes: the tollgate directive's error route
// writes the gateway's own errors as JSON, and the operator's handle_errors
// still handles every other error of the site, whichever comes first in
// the Caddyfile.
func TestOperatorHandleErrorsComposes(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(map[bool]string{false: "after", true: "before"}[before], func(t *testing.T) {
			startInProcessWith(t, func(cfg string) string {
				custom := "\terror /boom 418\n\thandle_errors {\n\t\trespond \"custom {err.status_code}\"\n\t}\n"
				if before {
					return replaceOnce(t, cfg, gatewayDirective, custom+gatewayDirective)
				}
				return replaceOnce(t, cfg, gatewayDirective, gatewayDirective+custom)
			})
			c := newClient(t, gatewayAddr, adminAddr)
			c.api("GET", "/keys", "", nil).expectError(t, 401, "Missing Authentication header")
			r := c.do("GET", c.gateway+"/boom", "", nil)
			if r.Status != 418 || string(r.Body) != "custom 418" {
				t.Fatalf("operator's error: %d %q", r.Status, r.Body)
			}
		})
	}
}
