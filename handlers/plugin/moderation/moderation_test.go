package moderation

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
)

// routed is a chat request of body for a model with or without the
// moderation switch.
func routed(required bool, body []byte) *plugin.Request {
	req := plugintest.Request(dialect.Chat, string(body))
	req.Models = plugintest.Models{{ID: "acme/m", Moderation: required}}
	req.API = contentfilter.Chat
	return req
}

// plan is p's run for the request, a moderation call or none.
func plan(p *Moderation, required bool, body []byte) (*call, *apierror.Error) {
	run, apiErr := p.Plan(routed(required, body))
	c, _ := run.(*call)
	return c, apiErr
}

// refusal is Admit's error, nil when it lets the request on.
func refusal(r *plugin.Refusal) *apierror.Error {
	if r == nil {
		return nil
	}
	return r.Err
}

func TestConformance(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"results":[{"flagged":false}]}`))
	}))
	defer srv.Close()
	s, err := (&Config{BaseURL: srv.URL, Price: "0.001"}).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	plugintest.Run(t, plugintest.Case{
		Plugin:  &Moderation{service: s},
		Kind:    dialect.Chat,
		Asks:    `{"model":"m","plugins":[{"id":"moderation"}],"messages":[{"role":"user","content":"hi"}]}`,
		Applies: routed(true, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)),
	})
}

func TestModerationPrice(t *testing.T) {
	for price, want := range map[string]int64{"": 0, "0": 0, "0.001": 1_000_000, "1e-9": 1, "2.5": 2_500_000_000} {
		got, err := (&Config{Price: price}).PriceAmount()
		if err != nil || int64(got) != want {
			t.Errorf("price %q = %d, %v; want %d", price, got, err, want)
		}
	}
	for _, price := range []string{"-0.001", "abc", "0.0000000001", "1/3", "NaN"} {
		if _, err := (&Config{Price: price}).PriceAmount(); err == nil || !strings.Contains(err.Error(), "moderation: price") {
			t.Errorf("price %q: %v", price, err)
		}
	}
}

func TestModerateWithoutProvider(t *testing.T) {
	p := new(Moderation)
	body := []byte(`{"model":"acme/m","messages":[{"role":"user","content":"hi"}]}`)
	if c, apiErr := plan(p, false, body); apiErr != nil || c != nil {
		t.Fatalf("nothing asked: %v %v", c, apiErr)
	}
	if _, apiErr := plan(p, true, body); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("required without a provider: %v", apiErr)
	}
	asks := []byte(`{"model":"acme/m","plugins":[{"id":"moderation"}],"messages":[{"role":"user","content":"hi"}]}`)
	if _, apiErr := plan(p, false, asks); apiErr == nil || apiErr.Status != http.StatusBadRequest {
		t.Fatalf("plugin without a provider: %v", apiErr)
	}
}

// The provider's answer decides; the texts it gets are the request's,
// and a malformed answer counts as down.
func TestModerateProvider(t *testing.T) {
	var got string
	answer := `{"results":[{"flagged":false,"categories":{}},{"flagged":true,"categories":{"hate":true,"violence":false,"harassment":true}}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 1024)
		n, _ := r.Body.Read(b)
		got = string(b[:n]) + " " + r.Header.Get("Authorization")
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	m, err := (&Config{BaseURL: srv.URL + "/v1/", APIKey: "k", Model: "mod", Name: "Mod", Price: "0.000125"}).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &Moderation{service: m}
	long := strings.Repeat("é", 150)
	body := []byte(`{"model":"acme/m","messages":[{"role":"system","content":"be nice"},{"role":"user","content":"` + long + `"}]}`)
	// Plan plans the call (priced for the hold); Admit makes it.
	admit := func() (*call, *apierror.Error) {
		t.Helper()
		c, apiErr := plan(p, true, body)
		if apiErr != nil || c == nil || c.Hold() != 125_000 || c.Charge() != 125_000 {
			t.Fatalf("plan: %v, call %v", apiErr, c)
		}
		return c, refusal(c.Admit(context.Background()))
	}
	c, apiErr := admit()
	if apiErr == nil || apiErr.Status != http.StatusForbidden || c.Charge() != 125_000 {
		t.Fatalf("flagged: %v, price %v", apiErr, c.Charge())
	}
	md := apiErr.Metadata
	if strings.Join(md["reasons"].([]string), ",") != "harassment,hate" || md["provider_name"] != "Mod" || md["model_slug"] != "acme/m" ||
		md["flagged_input"] != strings.Repeat("é", 100)+"..." {
		t.Errorf("metadata %v", md)
	}
	if got != `{"input":["be nice","`+long+`"],"model":"mod"} Bearer k` {
		t.Errorf("provider got %s", got)
	}
	// A clean verdict keeps the price on the request, exactly.
	answer = `{"results":[{"flagged":false,"categories":{}},{"flagged":false,"categories":{}}]}`
	if c, apiErr = admit(); apiErr != nil || c.Charge() != 125_000 {
		t.Fatalf("clean: %v, price %d", apiErr, c.Charge())
	}
	// Down: refused, or served under fail_open; the price dropped either way.
	answer = `{"results":[]}`
	if c, apiErr = admit(); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable || c.Charge() != 0 {
		t.Fatalf("malformed answer: %v, price %d", apiErr, c.Charge())
	}
	m.failOpen = true
	if c, apiErr = admit(); apiErr != nil || c.Charge() != 0 {
		t.Fatalf("fail open: %v, price %d", apiErr, c.Charge())
	}
}

// A 200 whose results lack a boolean flagged (absent, null, a string, a
// number, a result that is not an object) is no verdict: 503, or served
// unmoderated under fail_open, never taken as clean.
func TestModerationMalformedFlagged(t *testing.T) {
	var answer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	m, err := (&Config{BaseURL: srv.URL}).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{
		`{"results":[{"categories":{}}]}`,
		`{"results":[{"flagged":null}]}`,
		`{"results":[{"flagged":"false"}]}`,
		`{"results":[{"flagged":0}]}`,
		`{"results":["clean"]}`,
		`{"results":[{"flagged":{}}]}`,
	} {
		answer = a
		for _, failOpen := range []bool{false, true} {
			m.failOpen = failOpen
			mc := &call{s: m, texts: []string{"hello"}, slug: "acme/m", logger: zap.NewNop()}
			apiErr := refusal(mc.Admit(context.Background()))
			switch {
			case failOpen && apiErr != nil:
				t.Errorf("%s fail_open: %v", a, apiErr)
			case !failOpen && (apiErr == nil || apiErr.Status != http.StatusServiceUnavailable):
				t.Errorf("%s: %v, want 503", a, apiErr)
			}
		}
	}
}
