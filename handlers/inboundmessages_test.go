package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// Anthropic's SDKs and Claude Code send an API key as X-Api-Key: the
// Messages route takes it, and no route forwards it upstream.
func TestAuthAnthropicAPIKey(t *testing.T) {
	f := newAuthFixture(t)
	body := `{"model":"m","max_tokens":5,"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}`

	res := f.c.do(t, "POST", "/api/v1/messages", "", body, "X-Api-Key", f.regular)
	res.Must(t, http.StatusTeapot)
	got := f.c.got
	if got == nil || got.identity == nil || got.identity.Hash != f.regHash {
		t.Fatalf("upstream request %+v", got)
	}
	if k := got.header.Get("X-Api-Key"); k != "" {
		t.Errorf("the client's X-Api-Key reached the upstream: %q", k)
	}
	if auth := got.header.Get("Authorization"); auth != "Bearer "+testgw.UpstreamKey {
		t.Errorf("upstream Authorization = %q", auth)
	}
	// The provider gets the chat translation, system prompt first.
	if b := gjson.ParseBytes(got.body); b.Get("messages.0.role").Str != "system" || b.Get("messages.1.content").Str != "hi" ||
		b.Get("max_tokens").Int() != 5 || b.Get("system").Exists() {
		t.Errorf("upstream body %s", got.body)
	}

	// Bearer works as well (Claude Code's ANTHROPIC_AUTH_TOKEN).
	f.c.do(t, "POST", "/api/v1/messages", f.regular, body).Must(t, http.StatusTeapot)

	// Other routes take bearer keys only, and drop an X-Api-Key too.
	chat := `{"model":"m","messages":[]}`
	res = f.c.do(t, "POST", "/api/v1/chat/completions", "", chat, "X-Api-Key", f.regular)
	if res.Status != http.StatusUnauthorized {
		t.Errorf("chat with X-Api-Key only: status %d", res.Status)
	}
	f.c.do(t, "POST", "/api/v1/chat/completions", f.regular, chat, "X-Api-Key", "sk-other").Must(t, http.StatusTeapot)
	if k := f.c.got.header.Get("X-Api-Key"); k != "" {
		t.Errorf("X-Api-Key reached the upstream of a chat request: %q", k)
	}
}

// A Messages prompt is bounded by its body: tool calls, tool results and
// thinking are text in it; each image (in a tool result too) adds
// media_part_tokens; a document is bounded only by the context window.
func TestBoundPromptMessages(t *testing.T) {
	tests := []struct {
		body      string
		media     int64
		unbounded bool
	}{
		{`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"t","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"x"},{"type":"image","source":{}}]},{"type":"image","source":{}}]}]}`, 2, false},
		{`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64"}}]}]}`, 0, true},
	}
	for _, tt := range tests {
		f, apiErr := reqbody.ParseObject([]byte(tt.body))
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		b := prompt.NewBound(f, len(tt.body), 1000)
		if want := int64(len(tt.body)) + prompt.PromptOverheadTokens + tt.media*1000; b.Tokens != want || b.Unbounded != tt.unbounded {
			t.Errorf("%s: bound %+v, want %d tokens, unbounded %v", tt.body, b, want, tt.unbounded)
		}
	}
}

func TestWithMessagesFallbacks(t *testing.T) {
	tests := []struct {
		fallbacks, models string
		want              string
	}{
		{``, ``, "a"},
		{`null`, ``, "a"},
		{`[{"model":"b"},{"model":"a"},{"model":"c"}]`, ``, "a b c"},
		{`[{"model":"b"}]`, `["x"]`, "fallbacks: cannot be combined with models"},
		{`{"model":"b"}`, ``, `fallbacks: expected an array of {"model": id} objects`},
		{`[{"model":"b"},{"model":"c"},{"model":"d"},{"model":"e"}]`, ``, "fallbacks: expected at most 3 entries"},
		{`[{"model":"b"},{"name":"c"}]`, ``, "fallbacks[1].model: required string"},
		{`["b"]`, ``, "fallbacks[0].model: required string"},
	}
	for _, tt := range tests {
		ids, apiErr := routing.WithMessagesFallbacks([]string{"a"}, gjson.Parse(tt.fallbacks), gjson.Parse(tt.models))
		got := strings.Join(ids, " ")
		if apiErr != nil {
			got = apiErr.Message
		}
		if got != tt.want {
			t.Errorf("fallbacks %s models %s: %q, want %q", tt.fallbacks, tt.models, got, tt.want)
		}
	}
}
