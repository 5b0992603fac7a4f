package handlers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
)

// An unrouted request whose proxy fails before answering gets the spec's
// JSON error; an answer the upstream gave passes untouched.
func TestMeterPassThroughErrorsAreJSON(t *testing.T) {
	m := &Meter{}
	for _, tc := range []struct {
		name   string
		next   caddyhttp.HandlerFunc
		status int
		body   string
	}{
		{"no upstream", func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(http.StatusBadGateway, errors.New("dial tcp: missing address"))
		}, 502, `{"error":{"code":502,"message":"Bad Gateway"}}`},
		{"timeout", func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(http.StatusGatewayTimeout, errors.New("timeout"))
		}, 504, `{"error":{"code":504,"message":"Gateway Timeout"}}`},
		{"plain error", func(http.ResponseWriter, *http.Request) error { return errors.New("boom") },
			502, `{"error":{"code":502,"message":"Bad Gateway"}}`},
		{"upstream answered", func(w http.ResponseWriter, _ *http.Request) error {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("upstream's own"))
			return nil
		}, 404, "upstream's own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			err := m.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/generation?id=gen-1", nil), tc.next)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			if tc.status >= 500 {
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" || gjson.Get(rec.Body.String(), "@this|@ugly").Raw != tc.body {
					t.Fatalf("%q %s", ct, rec.Body)
				}
			} else if rec.Body.String() != tc.body {
				t.Fatalf("body %s", rec.Body)
			}
		})
	}
}
