package integration

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// gatewayDirective is the harness's tollgate directive in the gateway site.
const gatewayDirective = "\ttollgate {\n\t\t# the gateway's options\n\t\tload_balancing ordered\n\t}\n"

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

// TestJSONConfigGetsProviderProxies: a JSON config whose tollgate handler
// names no https_proxy or http_proxy (as one written by hand might) gets
// the pipeline's reverse_proxy by default: a completion reaches the
// provider and is charged, and a path outside /api/v1 goes on to the
// site's next handler.
func TestJSONConfigGetsProviderProxies(t *testing.T) {
	dir := t.TempDir()
	cfg := gatewayCaddyfile(adminAddr, dir, gatewayAddr, mockAddr, "1ms")
	// file_server comes after tollgate in Caddy's directive order.
	site := t.TempDir()
	if err := os.WriteFile(filepath.Join(site, "other.txt"), []byte("next handler"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg = replaceOnce(t, cfg, gatewayDirective, gatewayDirective+"\troot * "+site+"\n\tfile_server\n")
	cfgJSON, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	var strip func(path string, v gjson.Result)
	strip = func(path string, v gjson.Result) {
		if v.Get("handler").Str == "tollgate" {
			for _, name := range []string{"https_proxy", "http_proxy"} {
				if v.Get(name).Exists() {
					if cfgJSON, err = sjson.DeleteBytes(cfgJSON, path+"."+name); err != nil {
						t.Fatal(err)
					}
					removed++
				}
			}
		}
		v.ForEach(func(k, child gjson.Result) bool {
			if child.IsObject() || child.IsArray() {
				strip(strings.TrimPrefix(path+"."+k.String(), "."), child)
			}
			return true
		})
	}
	strip("", gjson.ParseBytes(cfgJSON))
	if removed != 2 || strings.Contains(string(cfgJSON), "reverse_proxy") {
		t.Fatalf("removed %d proxies; config %s", removed, cfgJSON)
	}
	loadInProcess(t, string(cfgJSON), "json")

	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("personal", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"json"}`)
	before := c.snapshot(key, tn.MgmtKey)
	r := c.mustPost("/chat/completions", key, `{"model":"tollgate-mock","messages":[{"role":"user","content":"hi"}]}`, nil)
	cost := creditAmount(t, r.JSON.Get("usage.cost"))
	if r.Status != 200 || cost <= 0 {
		t.Fatalf("status %d, cost %s: %s", r.Status, cost, r.Body)
	}
	expectCharged(t, before, c.snapshot(key, tn.MgmtKey), cost, "completion through the default proxies")
	if other := c.do("GET", c.gateway+"/other.txt", "", nil); other.Status != 200 || string(other.Body) != "next handler" {
		t.Fatalf("outside /api/v1: %d %q", other.Status, other.Body)
	}
}
