package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestTollgateValidate(t *testing.T) {
	minute := caddy.Duration(time.Minute)
	tests := []struct {
		name string
		tg   Tollgate
		want string // "" valid; else the error's start
	}{
		{"defaults", Tollgate{}, ""},
		{"set", Tollgate{PerIP: &RateCeiling{Requests: 600, Window: minute, Burst: 50}, MaxBodyBytes: 1}, ""},
		{"per_ip requests", Tollgate{PerIP: &RateCeiling{Requests: 0, Window: minute}}, "per_ip: requests"},
		{"per_key window", Tollgate{PerKey: &RateCeiling{Requests: 5}}, "per_key: window"},
		{"per_key burst", Tollgate{PerKey: &RateCeiling{Requests: 5, Window: minute, Burst: -1}}, "per_key: burst"},
		{"max_body_bytes", Tollgate{MaxBodyBytes: -1}, "max_body_bytes:"},
		{"media_part_tokens", Tollgate{MediaPartTokens: -5}, "media_part_tokens:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tg.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestAbuseBucketsSurviveReload: a new config with the same ceiling takes
// over the old one's buckets (a reload neither refills nor forgets them);
// another ceiling starts afresh.
func TestAbuseBucketsSurviveReload(t *testing.T) {
	gw := testgw.New(t)
	ceiling := &RateCeiling{Requests: 1, Window: caddy.Duration(time.Hour)}
	old := newTestTollgate(t, gw)
	old.PerKey = ceiling
	if err := old.setup(gw, old.logger); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	if ok, _ := old.auth.byKey.Allow("key", at); !ok {
		t.Fatal("first request refused")
	}
	reloaded := &Tollgate{PerKey: &RateCeiling{Requests: 1, Window: caddy.Duration(time.Hour)}}
	if err := reloaded.setup(gw, old.logger); err != nil {
		t.Fatal(err)
	}
	defer reloaded.Cleanup()
	_ = old.Cleanup() // the old config is stopped after the new one started
	if ok, _ := reloaded.auth.byKey.Allow("key", at); ok {
		t.Fatal("the reload refilled the key's bucket")
	}
	other := &Tollgate{PerKey: &RateCeiling{Requests: 2, Window: caddy.Duration(time.Hour)}}
	if err := other.setup(gw, old.logger); err != nil {
		t.Fatal(err)
	}
	defer other.Cleanup()
	if ok, _ := other.auth.byKey.Allow("key", at); !ok {
		t.Fatal("another ceiling shares the old buckets")
	}
}

// TestErrorWriter: the error route writes a gateway error's JSON body and
// headers, and passes other errors on.
func TestErrorWriter(t *testing.T) {
	apiErr := metering.RateLimitError(&gateway.RateLimited{Limit: 3, Reset: time.Now().Add(30 * time.Second), Scope: "abuse_per_key"}, time.Now())
	r := httptest.NewRequest("GET", "/api/v1/key", nil)
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.ErrorCtxKey, caddyhttp.Error(apiErr.Status, apiErr)))
	w := httptest.NewRecorder()
	passed := false
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { passed = true; return nil })
	if err := (ErrorWriter{}).ServeHTTP(w, r, next); err != nil || passed {
		t.Fatalf("err %v, passed on %v", err, passed)
	}
	res := testgw.Response{Status: w.Code, Header: w.Header(), Body: w.Body.String()}
	if res.Status != 429 || res.Header.Get("Retry-After") != "30" || !strings.Contains(res.Body, `"message":"Rate limit exceeded"`) {
		t.Fatalf("answer %d %v %s", res.Status, res.Header, res.Body)
	}

	other := httptest.NewRequest("GET", "/boom", nil)
	other = other.WithContext(context.WithValue(other.Context(), caddyhttp.ErrorCtxKey, caddyhttp.Error(418, errors.New("teapot"))))
	w = httptest.NewRecorder()
	if err := (ErrorWriter{}).ServeHTTP(w, other, next); err != nil || !passed || w.Body.Len() != 0 {
		t.Fatalf("other error: err %v, passed on %v, body %q", err, passed, w.Body)
	}
}

// TestTollgateReturnsErrorsToCaddy: the handler answers nothing itself for
// a gateway error; it returns it, marked for the error route's matcher.
func TestTollgateReturnsErrorsToCaddy(t *testing.T) {
	tg := newTestTollgate(t, testgw.New(t))
	r, _ := testgw.NewRequest("GET", "/api/v1/nope", "")
	vars := map[string]any{}
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, vars))
	w := httptest.NewRecorder()
	err := tg.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
		t.Fatal("next reached")
		return nil
	}))
	var he caddyhttp.HandlerError
	var apiErr *apierror.Error
	if !errors.As(err, &he) || he.StatusCode != 404 || !errors.As(err, &apiErr) || w.Body.Len() != 0 {
		t.Fatalf("err %v, body %q", err, w.Body)
	}
	if ok, _ := ErrorRouteMatcher().MatchWithError(r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))); !ok {
		t.Fatal("the error route's matcher does not match the request")
	}
}
