package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
)

// moderationState is a routed request for a model with or without the
// moderation switch.
func moderationState(required bool) *requestState {
	return &requestState{route: &Route{Attempts: []Attempt{{Model: &catalog.Model{ID: "acme/m", Moderation: required}}}}}
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
	m, err := (&ModerationConfig{BaseURL: srv.URL + "/v1/", APIKey: "k", Model: "mod", Name: "Mod"}).Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := &Tollgate{logger: zap.NewNop(), moderation: m}
	r := httptest.NewRequest("POST", "/api/v1/chat/completions", nil)
	long := strings.Repeat("é", 150)
	body := []byte(`{"model":"acme/m","messages":[{"role":"system","content":"be nice"},{"role":"user","content":"` + long + `"}]}`)
	apiErr := tg.moderate(r, moderationState(true), body)
	if apiErr == nil || apiErr.Status != http.StatusForbidden {
		t.Fatalf("flagged: %v", apiErr)
	}
	md := apiErr.Metadata
	if strings.Join(md["reasons"].([]string), ",") != "harassment,hate" || md["provider_name"] != "Mod" || md["model_slug"] != "acme/m" ||
		md["flagged_input"] != strings.Repeat("é", 100)+"..." {
		t.Errorf("metadata %v", md)
	}
	if got != `{"input":["be nice","`+long+`"],"model":"mod"} Bearer k` {
		t.Errorf("provider got %s", got)
	}
	answer = `{"results":[]}`
	if apiErr := tg.moderate(r, moderationState(true), body); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("malformed answer: %v", apiErr)
	}
	m.failOpen = true
	if apiErr := tg.moderate(r, moderationState(true), body); apiErr != nil {
		t.Fatalf("fail open: %v", apiErr)
	}
}
