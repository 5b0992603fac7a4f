package handlers

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// A Messages request's thinking reaches, as reasoning_effort, only the
// attempts whose provider takes reasoning; an Anthropic-style provider
// with system_messages fold gets the in-conversation system messages in
// system and not the mid-conversation-system beta.
func TestRouteMessagesPerAttempt(t *testing.T) {
	plain := testgw.Provider("plain", "http", "a.test", "a.test:80", "/v1", "gpt-4o", "k1") // the OpenAI dialect's defaults
	reasons := testgw.Provider("reasons", "http", "b.test", "b.test:80", "/v1", "o3", "k2")
	reasons.SupportedParameters = []string{"max_tokens", "reasoning"}
	claude := testgw.Provider("claude", "http", "c.test", "c.test:80", "", "claude", "k3")
	claude.Style = "anthropic"
	folds := testgw.Provider("folds", "http", "d.test", "d.test:80", "", "claude", "k4")
	folds.Style, folds.SystemMessages = "anthropic", "fold"
	m := testgw.Model("m", 0, plain, reasons, claude, folds)
	var attempts []upstream.Attempt
	for _, p := range m.Providers {
		attempts = append(attempts, upstream.Attempt{Model: m, Provider: p, Key: "k"})
	}
	body := `{"model":"m","max_tokens":9,"system":"Top.","messages":[{"role":"user","content":"Hi"},{"role":"system","content":"Mid."}],` +
		`"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}}`
	rt := &upstream.Route{Kind: "messages", Attempts: attempts, Body: []byte(body), URI: "/messages",
		Betas: "claude-code-20250219,mid-conversation-system-2026-04-07"}
	if err := rt.TranslateFor(); err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodPost, "/api/v1/messages", nil)
	for i, want := range []struct{ body, betas string }{
		{`{"model":"gpt-4o","max_tokens":9,"messages":[{"role":"system","content":"Top."},{"role":"user","content":"Hi"},{"role":"system","content":"Mid."}]}`, ""},
		{`{"model":"o3","max_tokens":9,"messages":[{"role":"system","content":"Top."},{"role":"user","content":"Hi"},{"role":"system","content":"Mid."}],"reasoning_effort":"low"}`, ""},
		{body[:len(`{"model":"`)] + `claude` + body[len(`{"model":"m`):], "claude-code-20250219,mid-conversation-system-2026-04-07"},
		{`{"model":"claude","max_tokens":9,"system":[{"type":"text","text":"Top."},{"type":"text","text":"Mid."}],"messages":[{"role":"user","content":"Hi"}],` +
			`"thinking":{"type":"adaptive"},"output_config":{"effort":"low"}}`, "claude-code-20250219"},
	} {
		if err := rt.Apply(r, i); err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r.Body)
		testgw.JSONEqual(t, got, want.body)
		if b := r.Header.Get("Anthropic-Beta"); b != want.betas {
			t.Errorf("attempt %d: anthropic-beta %q, want %q", i, b, want.betas)
		}
	}
	// Without a provider that takes reasoning, the translation leaves the
	// effort out: no copy per attempt.
	rt = &upstream.Route{Kind: "messages", Attempts: attempts[:1], Body: []byte(body), URI: "/messages"}
	if err := rt.TranslateFor(); err != nil || rt.ImpliedEffort || bytes.Contains(rt.ChatBody, []byte("reasoning_effort")) {
		t.Errorf("no reasoning provider: %v %v %s", err, rt.ImpliedEffort, rt.ChatBody)
	}
}
