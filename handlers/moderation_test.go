package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
)

// moderationState is a routed request for a model with or without the
// moderation switch.
func moderationState(required bool) *requestState {
	return &requestState{route: &Route{Attempts: []Attempt{{Model: &catalog.Model{ID: "acme/m", Moderation: required}}}}}
}

func TestModerationPrice(t *testing.T) {
	for price, want := range map[string]int64{"": 0, "0": 0, "0.001": 1_000_000, "1e-9": 1, "2.5": 2_500_000_000} {
		got, err := (&ModerationConfig{Price: price}).PriceAmount()
		if err != nil || int64(got) != want {
			t.Errorf("price %q = %d, %v; want %d", price, got, err, want)
		}
	}
	for _, price := range []string{"-0.001", "abc", "0.0000000001", "1/3", "NaN"} {
		if _, err := (&ModerationConfig{Price: price}).PriceAmount(); err == nil || !strings.Contains(err.Error(), "moderation: price") {
			t.Errorf("price %q: %v", price, err)
		}
	}
}

func TestModerateWithoutProvider(t *testing.T) {
	tg := &Tollgate{logger: zap.NewNop()}
	r := httptest.NewRequest("POST", "/api/v1/chat/completions", nil)
	body := []byte(`{"model":"acme/m","messages":[{"role":"user","content":"hi"}]}`)
	if apiErr := tg.moderate(r, moderationState(false), body); apiErr != nil {
		t.Fatalf("nothing asked: %v", apiErr)
	}
	if apiErr := tg.moderate(r, moderationState(true), body); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("required without a provider: %v", apiErr)
	}
	plugin := []byte(`{"model":"acme/m","plugins":[{"id":"moderation"}],"messages":[{"role":"user","content":"hi"}]}`)
	if apiErr := tg.moderate(r, moderationState(false), plugin); apiErr == nil || apiErr.Status != http.StatusBadRequest {
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
	m, err := (&ModerationConfig{BaseURL: srv.URL + "/v1/", APIKey: "k", Model: "mod", Name: "Mod", Price: "0.000125"}).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := &Tollgate{logger: zap.NewNop(), moderation: m}
	r := httptest.NewRequest("POST", "/api/v1/chat/completions", nil)
	long := strings.Repeat("é", 150)
	body := []byte(`{"model":"acme/m","messages":[{"role":"system","content":"be nice"},{"role":"user","content":"` + long + `"}]}`)
	// moderate plans the call (priced for the hold); run makes it.
	call := func() (*requestState, *apierror.Error) {
		t.Helper()
		st := moderationState(true)
		if apiErr := tg.moderate(r, st, body); apiErr != nil || st.moderation == nil || st.moderationCost != 125_000 {
			t.Fatalf("plan: %v, call %v, price %d", apiErr, st.moderation, st.moderationCost)
		}
		return st, st.moderation.run(r, st, zap.NewNop())
	}
	st, apiErr := call()
	if apiErr == nil || apiErr.Status != http.StatusForbidden || st.moderationCost != 125_000 {
		t.Fatalf("flagged: %v, price %v", apiErr, st.moderationCost)
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
	if st, apiErr = call(); apiErr != nil || st.moderationCost != 125_000 {
		t.Fatalf("clean: %v, price %d", apiErr, st.moderationCost)
	}
	// Down: refused, or served under fail_open; the price dropped either way.
	answer = `{"results":[]}`
	if st, apiErr = call(); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable || st.moderationCost != 0 {
		t.Fatalf("malformed answer: %v, price %d", apiErr, st.moderationCost)
	}
	m.failOpen = true
	if st, apiErr = call(); apiErr != nil || st.moderationCost != 0 {
		t.Fatalf("fail open: %v, price %d", apiErr, st.moderationCost)
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
	m, err := (&ModerationConfig{BaseURL: srv.URL}).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/api/v1/chat/completions", nil)
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
			mc := &moderationCall{m: m, texts: []string{"hello"}, slug: "acme/m"}
			st := moderationState(true)
			apiErr := mc.run(r, st, zap.NewNop())
			switch {
			case failOpen && apiErr != nil:
				t.Errorf("%s fail_open: %v", a, apiErr)
			case !failOpen && (apiErr == nil || apiErr.Status != http.StatusServiceUnavailable):
				t.Errorf("%s: %v, want 503", a, apiErr)
			}
		}
	}
}
