package testgw

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
)

// Response is one recorded answer of a handler.
type Response struct {
	Status int
	Header http.Header
	Body   string
	JSON   gjson.Result    // the body, when the answer is JSON
	Repl   *caddy.Replacer // the request's replacer
}

// NewRequest builds a request with a Caddy replacer in its context, as the
// Caddy server does. headers are name/value pairs.
func NewRequest(method, target, body string, headers ...string) (*http.Request, *caddy.Replacer) {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	repl := caddy.NewReplacer()
	return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl)), repl
}

// Serve runs h on r and returns the recorded answer, an *apierror.Error
// written as the tollgate directive's error route writes it. A JSON answer
// must be valid JSON.
func Serve(t testing.TB, h caddyhttp.Handler, r *http.Request, repl *caddy.Replacer) Response {
	t.Helper()
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r); err != nil {
		var apiErr *apierror.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("ServeHTTP: %v", err)
		}
		apierror.Write(w, apiErr)
	}
	body := w.Body.String()
	res := Response{Status: w.Code, Header: w.Header(), Body: body, Repl: repl}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if !gjson.Valid(body) {
			t.Fatalf("invalid JSON body: %q", body)
		}
		res.JSON = gjson.Parse(body)
	}
	return res
}

// Send serves a request to h and returns the recorded answer; key, when
// not empty, is sent as the bearer key. headers are name/value pairs.
func Send(t testing.TB, h caddyhttp.Handler, method, target, key, body string, headers ...string) Response {
	t.Helper()
	if key != "" {
		headers = append(headers, "Authorization", "Bearer "+key)
	}
	r, repl := NewRequest(method, target, body, headers...)
	return Serve(t, h, r, repl)
}

// Must checks the status and returns the response.
func (r Response) Must(t testing.TB, status int) Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	return r
}

// WantError checks that r is exactly the public API's JSON error body.
func (r Response) WantError(t testing.TB, status int, message string) {
	t.Helper()
	if r.Status != status {
		t.Errorf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	msg, _ := json.Marshal(message)
	want := `{"error":{"code":` + strconv.Itoa(status) + `,"message":` + string(msg) + "}}\n"
	if r.Body != want {
		t.Errorf("body = %s want %s", r.Body, want)
	}
}

// JSONEqual compares two JSON documents by value.
func JSONEqual(t testing.TB, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
