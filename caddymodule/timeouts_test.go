package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
)

// A provider's own upstream timeouts, from the Caddyfile and checked.
func TestProviderTimeouts(t *testing.T) {
	app := provisioned(t, adaptApp(t, `	tollgate {
		model acme/t {
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider plain http://127.0.0.1:1/v1
			provider slow http://127.0.0.1:2/v1 {
				dial_timeout 30s
				response_header_timeout 20m
				first_byte_timeout 5m
			}
		}
	}`))
	m, ok := app.Catalog().Lookup("acme/t")
	if !ok || len(m.Providers) != 2 {
		t.Fatalf("model = %+v", m)
	}
	if got := m.Providers[0].Timeouts; got != (catalog.Timeouts{}) {
		t.Errorf("plain: %+v, want the gateway's defaults (zero)", got)
	}
	// From a models file too, in its JSON form.
	for _, p := range []ProviderConfig{{Name: "p", BaseURL: "http://x", ResponseHeaderTimeout: -1}} {
		if _, err := p.provider(); err == nil || !strings.Contains(err.Error(), "response_header_timeout: must be positive") {
			t.Errorf("%+v: %v", p, err)
		}
	}
	if got, want := m.Providers[1].Timeouts, (catalog.Timeouts{Dial: 30 * time.Second, ResponseHeader: 20 * time.Minute, FirstByte: 5 * time.Minute}); got != want {
		t.Errorf("slow: %+v, want %+v", got, want)
	}

	for _, tt := range []struct{ block, want string }{
		{"dial_timeout", "wrong argument count"},
		{"response_header_timeout soon", `response_header_timeout: invalid duration "soon"`},
		{"first_byte_timeout 0s", `first_byte_timeout: invalid duration "0s"`},
		{"dial_timeout 5m", `provider "p": dial_timeout: at most 1m0s, got 5m0s`},
	} {
		caddyfile := "{\n tollgate {\n model m {\n pricing {\n prompt 0\n completion 0\n }\n provider p http://x {\n " + tt.block + "\n }\n }\n }\n}\n\n:8080 {\n\ttollgate\n}\n"
		_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %q", tt.block, err, tt.want)
		}
	}
	for opt, want := range map[string]string{"first_byte_timeout": "first_byte_timeout: expected a positive duration",
		"first_byte_timeout -1s": "first_byte_timeout: expected a positive duration"} {
		caddyfile := ":8080 {\n\ttollgate {\n\t\t" + opt + "\n\t}\n}\n"
		if _, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", opt, err)
		}
	}
}
