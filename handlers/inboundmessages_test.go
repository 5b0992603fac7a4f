package handlers

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"
)

// Anthropic's SDKs and Claude Code send an API key as X-Api-Key: the
// Messages route takes it, and no route forwards it upstream.
func TestAuthAnthropicAPIKey(t *testing.T) {
	f := newAuthFixture(t)
	body := `{"model":"m","max_tokens":5,"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}`

	res := f.c.do(t, "POST", "/api/v1/messages", "", body, "X-Api-Key", f.regular)
	res.must(t, http.StatusTeapot)
	got := f.c.got
	if got == nil || got.identity == nil || got.identity.Hash != f.regHash {
		t.Fatalf("upstream request %+v", got)
	}
	if k := got.header.Get("X-Api-Key"); k != "" {
		t.Errorf("the client's X-Api-Key reached the upstream: %q", k)
	}
	if auth := got.header.Get("Authorization"); auth != "Bearer "+testUpstreamKey {
		t.Errorf("upstream Authorization = %q", auth)
	}
	// The provider gets the chat translation, system prompt first.
	if b := gjson.ParseBytes(got.body); b.Get("messages.0.role").Str != "system" || b.Get("messages.1.content").Str != "hi" ||
		b.Get("max_tokens").Int() != 5 || b.Get("system").Exists() {
		t.Errorf("upstream body %s", got.body)
	}

	// Bearer works as well (Claude Code's ANTHROPIC_AUTH_TOKEN).
	f.c.do(t, "POST", "/api/v1/messages", f.regular, body).must(t, http.StatusTeapot)

	// Other routes take bearer keys only, and drop an X-Api-Key too.
	chat := `{"model":"m","messages":[]}`
	res = f.c.do(t, "POST", "/api/v1/chat/completions", "", chat, "X-Api-Key", f.regular)
	if res.status != http.StatusUnauthorized {
		t.Errorf("chat with X-Api-Key only: status %d", res.status)
	}
	f.c.do(t, "POST", "/api/v1/chat/completions", f.regular, chat, "X-Api-Key", "sk-other").must(t, http.StatusTeapot)
	if k := f.c.got.header.Get("X-Api-Key"); k != "" {
		t.Errorf("X-Api-Key reached the upstream of a chat request: %q", k)
	}
}
