// Package enginetest is the conformance suite of the search engine seam:
// an engine module's test calls Run with its module and its vendor's
// answer to a search, and Run checks the module and the engine it builds,
// against an httptest server that plays the vendor, for what package
// engines promises of every engine.
package enginetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
)

// Case is one engine under test.
type Case struct {
	// Module is the engine's module (its settings are the suite's).
	Module engines.Module
	// Answer is the vendor's answer to a search: three results, the
	// first and third at https://a.example/..., the second at
	// https://b.example/....
	Answer string
}

// APIKey is the key the suite configures; no error may contain it.
const APIKey = "sk-enginetest-secret"

// Run checks c's module and engine.
func Run(t *testing.T, c Case) {
	t.Helper()
	info := c.Module.CaddyModule()
	name := info.ID.Name()
	t.Run("module", func(t *testing.T) {
		if info.ID.Namespace() != engines.Namespace {
			t.Fatalf("module %s is outside namespace %s", info.ID, engines.Namespace)
		}
		if _, err := caddy.GetModule(string(info.ID)); err != nil {
			t.Fatalf("module %s is not registered: %v", info.ID, err)
		}
		if _, ok := info.New().(engines.Module); !ok {
			t.Fatalf("New gives %T, not an engines.Module", info.New())
		}
		// Its Caddyfile block, as web_search's engine block holds it.
		mod := info.New()
		unm, ok := mod.(caddyfile.Unmarshaler)
		if !ok {
			t.Fatalf("%T reads no Caddyfile", mod)
		}
		d := caddyfile.NewTestDispenser(name + " {\n base_url https://search.example/api\n api_key {env.KEY}\n max_results 7\n timeout 3s\n price_per_result 0.01\n}")
		if err := unm.UnmarshalCaddyfile(d); err != nil {
			t.Fatalf("UnmarshalCaddyfile: %v", err)
		}
		s := mod.(engines.Module).Options()
		if s.BaseURL != "https://search.example/api" || s.APIKey != "{env.KEY}" || s.MaxResults != 7 || time.Duration(s.Timeout) != 3*time.Second || s.PricePerResult != "0.01" {
			t.Errorf("settings %+v", s)
		}
		// Its JSON, as the engines map carries it, loads the same.
		raw := caddyconfig.JSON(mod, nil)
		if m, err := engines.Load(name, raw); err != nil || *m.Options() != *s {
			t.Errorf("engines.Load(%s): %+v, %v", raw, m, err)
		}
		if err := unm.UnmarshalCaddyfile(caddyfile.NewTestDispenser(name + " {\n no_such_option 1\n}")); err == nil {
			t.Error("an unknown option was taken")
		}
		if _, err := engines.Load(name, []byte(`{"base_url":"https://x","max_results":26}`)); err == nil {
			t.Error("max_results 26 was taken")
		}
	})

	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		// Read whole, so that the server sees the client leave.
		_, _ = io.Copy(io.Discard, r.Body)
		if !sentKey(r) {
			http.Error(w, `{"error":"no key"}`, http.StatusUnauthorized)
			return
		}
		switch {
		case strings.Contains(r.URL.RawQuery+r.Header.Get("X-Enginetest"), "fail"):
			http.Error(w, `{"error":"upstream broke, key `+APIKey+`"}`, http.StatusInternalServerError)
		case r.Header.Get("X-Enginetest") == "hang":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(c.Answer))
		}
	}))
	t.Cleanup(srv.Close)
	engine := func(t *testing.T, mode string, timeout time.Duration) engines.Engine {
		t.Helper()
		client := srv.Client()
		if mode != "" {
			client = &http.Client{Transport: setHeader{srv.Client().Transport, mode}}
		}
		e, err := c.Module.New(engines.Config{BaseURL: srv.URL, APIKey: APIKey, Timeout: timeout, HTTPClient: client})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return e
	}

	t.Run("search", func(t *testing.T) {
		e := engine(t, "", 0)
		if e.Name() != name {
			t.Errorf("Name %q, module %s", e.Name(), info.ID)
		}
		all, err := e.Search(context.Background(), engines.Query{Text: "golang"})
		if err != nil || len(all) != 3 {
			t.Fatalf("search: %d results, %v", len(all), err)
		}
		for _, r := range all {
			if r.URL == "" || r.Title == "" {
				t.Errorf("result without URL or title: %+v", r)
			}
		}
		if got, err := e.Search(context.Background(), engines.Query{Text: "golang", MaxResults: 2}); err != nil || len(got) != 2 {
			t.Errorf("max 2: %d results, %v", len(got), err)
		}
		// Filters hold whatever the vendor answers.
		if got, err := e.Search(context.Background(), engines.Query{Text: "golang", ExcludeDomains: []string{"b.example"}}); err != nil || len(got) != 2 || inDomain(got, "b.example") {
			t.Errorf("excluding b.example: %+v, %v", got, err)
		}
		if got, err := e.Search(context.Background(), engines.Query{Text: "golang", IncludeDomains: []string{"b.example"}}); err != nil || len(got) != 1 || inDomain(got, "a.example") {
			t.Errorf("only b.example: %+v, %v", got, err)
		}
		if _, err := e.Search(context.Background(), engines.Query{}); err == nil {
			t.Error("a search without text was sent")
		}
	})
	t.Run("errors", func(t *testing.T) {
		_, err := engine(t, "fail", 0).Search(context.Background(), engines.Query{Text: "golang"})
		var ee *engines.Error
		if !errors.As(err, &ee) || ee.Engine != name || ee.StatusCode != http.StatusInternalServerError || ee.Timeout() {
			t.Fatalf("a 500: %#v", err)
		}
		if strings.Contains(err.Error(), APIKey) {
			t.Errorf("the error shows the key: %v", err)
		}
		began := time.Now()
		_, err = engine(t, "hang", 100*time.Millisecond).Search(context.Background(), engines.Query{Text: "golang"})
		if !errors.As(err, &ee) || !ee.Timeout() || time.Since(began) > 3*time.Second {
			t.Fatalf("a vendor that hangs: %v after %s", err, time.Since(began))
		}
	})
	if hits.Load() == 0 {
		t.Error("the engine never called the vendor")
	}
}

// sentKey reports whether r carries APIKey, in any header.
func sentKey(r *http.Request) bool {
	for _, vs := range r.Header {
		for _, v := range vs {
			if strings.Contains(v, APIKey) {
				return true
			}
		}
	}
	_, pass, ok := r.BasicAuth()
	return ok && pass == APIKey
}

func inDomain(rs []engines.Result, domain string) bool {
	for _, r := range rs {
		if strings.Contains(r.URL, "://"+domain+"/") {
			return true
		}
	}
	return false
}

// setHeader marks a test's requests for the server: X-Enginetest.
type setHeader struct {
	rt   http.RoundTripper
	mode string
}

func (s setHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Enginetest", s.mode)
	return s.rt.RoundTrip(r)
}
