package dashboard

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The session cookie is Secure when TLS ended at Caddy, or when one of
// the server's trusted proxies says the browser used HTTPS; the header
// from any other client changes nothing.
func TestCookieSecureBehindATrustedProxyOnly(t *testing.T) {
	d := &Dashboard{Prefix: "/dashboard"}
	for _, c := range []struct {
		name    string
		tls     bool
		trusted any // the request's trusted_proxy var; nil: unset
		proto   string
		secure  bool
	}{
		{"plain HTTP", false, nil, "", false},
		{"TLS at Caddy", true, false, "", true},
		{"trusted proxy, https", false, true, "https", true},
		{"trusted proxy, HTTPS in a list", false, true, "HTTPS, http", true},
		{"trusted proxy, http", false, true, "http", false},
		{"trusted proxy, no header", false, true, "", false},
		{"untrusted client, https", false, false, "https", false},
		{"no trusted-proxy decision, https", false, nil, "https", false},
	} {
		r := httptest.NewRequest("GET", "/dashboard/", nil)
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if c.trusted != nil {
			r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{caddyhttp.TrustedProxyVarKey: c.trusted}))
		}
		if c.proto != "" {
			r.Header.Set("X-Forwarded-Proto", c.proto)
		}
		if got := d.cookie(r, "v", time.Now()).Secure; got != c.secure {
			t.Errorf("%s: Secure %v, want %v", c.name, got, c.secure)
		}
	}
}
