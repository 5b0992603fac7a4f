package normalize

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/moderation"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/webfetch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"

	// The built-in plugins a request below names.
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/contextcompression"
)

func normalizeBody(t *testing.T, kind dialect.Kind, body string) (string, *apierror.Error) {
	t.Helper()
	f, apiErr := reqbody.ParseObject([]byte(body))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	out, apiErr := Body(kind, []byte(body), f, plugin.Registered())
	if apiErr == nil && !gjson.ValidBytes(out) {
		t.Fatalf("not JSON: %s", out)
	}
	return string(out), apiErr
}

func TestNormalizeRequest(t *testing.T) {
	for _, tc := range []struct {
		kind     dialect.Kind
		in, want string
	}{
		// Nothing to change: the same bytes.
		{"chat", `{"model":"m", "messages":[]}`, `{"model":"m", "messages":[]}`},
		{"chat", `{"model":"m","usage":{"include":true},"transforms":["middle-out"],"messages":[],"provider":{"order":["a"]},"models":["x"],"route":"fallback","debug":{},"session_id":"s","trace":{},"top_k":3}`,
			`{"model":"m","messages":[]}`},
		{"chat", `{"model":"m","messages":[],"reasoning":{"effort":"low","max_tokens":100}}`, `{"model":"m","messages":[],"reasoning_effort":"low"}`},
		{"chat", `{"model":"m","messages":[],"reasoning":{"effort":"low"},"reasoning_effort":"high"}`, `{"model":"m","messages":[],"reasoning_effort":"high"}`},
		{"chat", `{"model":"m","messages":[],"reasoning":{"enabled":false}}`, `{"model":"m","messages":[],"reasoning_effort":"none"}`},
		{"chat", `{"model":"m","messages":[],"reasoning":{"effort":"max"}}`, `{"model":"m","messages":[],"reasoning_effort":"max"}`},
		{"chat", `{"model":"m","messages":[{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.text","text":"t","signature":"s"}]}]}`,
			`{"model":"m","messages":[{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.text","text":"t","signature":"s"}]}]}`},
		{"responses", `{"model":"m","input":"x","reasoning":{"effort":"max"}}`, `{"model":"m","input":"x","reasoning":{"effort":"max"}}`},
		{"chat", `{"model":"m","messages":[],"reasoning":{"max_tokens":100}}`, `{"model":"m","messages":[]}`},
		{"responses", `{"model":"m","input":"x","reasoning":{"effort":"high","exclude":true,"summary":"auto"},"presence_penalty":1}`,
			`{"model":"m","input":"x","reasoning":{"effort":"high","summary":"auto"}}`},
		{"chat", `{"model":"m","messages":[],"stream":true}`, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`},
		{"chat", `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":false}}`,
			`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}}`},
		{"chat", `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`, `{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`},
		{"responses", `{"model":"m","input":"x","stream":true}`, `{"model":"m","input":"x","stream":true}`},
		{"chat", `{"model":"m","messages":[],"plugins":[{"id":"moderation","enabled":false}]}`, `{"model":"m","messages":[]}`},
		// The moderation plugin is served by the moderation stage, and not sent on.
		{"chat", `{"model":"m","messages":[],"plugins":[{"id":"moderation"}]}`, `{"model":"m","messages":[]}`},
		{"chat", `{"model":"m","messages":[],"us\u0061ge":{"include":true}}`, `{"model":"m","messages":[]}`},
		// Every gateway field and every sampling field the dialect lacks.
		{"chat", `{"model":"m","stop_server_tools_when":{},"image_config":{},"cache_control":{},"prompt_cache_options":{},` +
			`"min_p":0.1,"top_a":0.1,"top_k":3,"repetition_penalty":1,"frequency_penalty":1,"presence_penalty":1,"modalities":["text"]}`,
			`{"model":"m","frequency_penalty":1,"presence_penalty":1,"modalities":["text"]}`},
		{"responses", `{"model":"m","min_p":0.1,"top_a":0.1,"top_k":3,"repetition_penalty":1,"frequency_penalty":1,"presence_penalty":1,"modalities":["text"],"temperature":1}`,
			`{"model":"m","temperature":1}`},
		{"other", `{"model":"m","min_p":0.1,"top_k":3,"models":["x"]}`, `{"model":"m","min_p":0.1,"top_k":3}`},
		// tool_choice and parallel_tool_calls without tools mean nothing,
		// and OpenAI refuses them: dropped; with tools, kept.
		{"chat", `{"model":"m","messages":[],"tool_choice":"auto","parallel_tool_calls":false}`, `{"model":"m","messages":[]}`},
		{"chat", `{"model":"m","messages":[],"tools":[],"tool_choice":"none"}`, `{"model":"m","messages":[],"tools":[]}`},
		{"chat", `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","parallel_tool_calls":false}`,
			`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto","parallel_tool_calls":false}`},
	} {
		got, apiErr := normalizeBody(t, tc.kind, tc.in)
		if apiErr != nil || got != tc.want {
			t.Errorf("%s %s:\n got %s %v\nwant %s", tc.kind, tc.in, got, apiErr, tc.want)
		}
	}
}

func TestNormalizeRequestRefuses(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{`{"plugins":[{"id":"fusion"}]}`, `plugins[0].id: this gateway does not offer the "fusion" plugin`},
		{`{"plugins":[{"id":"web-fetch"},{"id":"x"}]}`, `plugins[1].id: unknown plugin "x"`},
		{`{"plugins":[{"id":"web-fetch","max_uses":"3"}]}`, `plugins[0].max_uses: expected an integer from 1 to 25`},
		{`{"plugins":[{"id":"auto-router"}]}`, `plugins[0].id: this gateway does not offer the "auto-router" plugin`},
		{`{"plugins":[{"id":"response-healing","enabled":false},{"id":"nope"}]}`, `plugins[1].id: unknown plugin "nope"`},
		{`{"plugins":[{}]}`, `plugins[0].id: required string`},
		{`{"plugins":{}}`, `plugins: expected an array`},
		{`{"reasoning":"high"}`, `reasoning: expected an object`},
		{`{"reasoning":{"effort":"maximal"}}`, `reasoning.effort: expected one of max, xhigh`},
		{`{"reasoning":{"effort":5}}`, `reasoning.effort: expected one of`},
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.text","signature":1}]}]}`,
			`messages[1].reasoning_details[0].signature: expected a string`},
		{`{"messages":[{"role":"assistant","content":"a","reasoning_details":"x"}]}`, `messages[0].reasoning_details: expected an array`},
	} {
		_, apiErr := normalizeBody(t, "chat", tc.in)
		if apiErr == nil || apiErr.Status != 400 || !strings.Contains(apiErr.Message, tc.msg) {
			t.Errorf("%s: %v, want 400 %q", tc.in, apiErr, tc.msg)
		}
	}
}

// A body without gateway fields is passed on without a copy.
func BenchmarkNormalizeRequest(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello there"}],"max_tokens":100,"temperature":0.2}`)
	f, _ := reqbody.ParseObject(body)
	b.ReportAllocs()
	for b.Loop() {
		if _, apiErr := Body("chat", body, f, plugin.Registered()); apiErr != nil {
			b.Fatal(apiErr)
		}
	}
}

func TestAnthropicDialectKeepsTopK(t *testing.T) {
	f, apiErr := reqbody.ParseObject([]byte(`{"model":"m","top_k":5,"min_p":0.1,"messages":[]}`))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	extra := AnthropicExtra(f)
	if extra != `"top_k":5` {
		t.Fatalf("extra %q", extra)
	}
	if got := string(anthropic.WithExtra([]byte(`{"a":1}`), extra)); got != `{"a":1,"top_k":5}` {
		t.Errorf("WithExtra: %s", got)
	}
	if got := string(anthropic.WithExtra([]byte(`{}`), extra)); got != `{"top_k":5}` {
		t.Errorf("WithExtra of {}: %s", got)
	}
	if got := string(anthropic.WithExtra([]byte(`{"thinking":{}}`), extra)); got != `{"thinking":{}}` {
		t.Errorf("WithExtra with thinking: %s", got)
	}
}

// Automatic caching: a top-level cache_control object reaches an
// Anthropic-style provider (thinking or not) and stays on a native
// Messages request; OpenAI-style providers never see it.
func TestTopLevelCacheControl(t *testing.T) {
	body := []byte(`{"model":"m","cache_control":{"type":"ephemeral","ttl":"1h"},"top_k":2,"messages":[]}`)
	f, apiErr := reqbody.ParseObject(body)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	extra := AnthropicExtra(f)
	if extra != `"top_k":2,"cache_control":{"type":"ephemeral","ttl":"1h"}` {
		t.Fatalf("extra %q", extra)
	}
	if got := string(anthropic.WithExtra([]byte(`{"thinking":{}}`), extra)); got != `{"thinking":{},"cache_control":{"type":"ephemeral","ttl":"1h"}}` {
		t.Errorf("WithExtra with thinking: %s", got)
	}
	for kind, kept := range map[dialect.Kind]bool{dialect.Chat: false, dialect.Responses: false, dialect.Messages: true} {
		out, apiErr := Body(kind, body, f, plugin.Registered())
		if apiErr != nil || gjson.GetBytes(out, "cache_control").Exists() != kept {
			t.Errorf("%s: %s %v", kind, out, apiErr)
		}
	}
	if f, _ := reqbody.ParseObject([]byte(`{"cache_control":"x"}`)); AnthropicExtra(f) != "" {
		t.Error("a cache_control of another type passed")
	}
}

// strict is a plugin module that takes no member but id and enabled.
type strict struct{}

func (*strict) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "tollgate.plugins.response_healing", New: func() caddy.Module { return new(strict) }}
}
func (*strict) Name() string { return "response-healing" }
func (*strict) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, "response-healing", entry, nil)
}
func (*strict) Plan(*plugin.Request) (plugin.Run, *apierror.Error) { return nil, nil }

// The plugin modules check their own entries; a plugin of the public API
// that no module takes is one the gateway does not offer, and any other
// name is unknown.
func TestCheckPluginsAsksTheModules(t *testing.T) {
	with := plugin.Set{new(strict), new(moderation.Moderation), new(webfetch.WebFetch)}
	for _, tc := range []struct {
		set  plugin.Set
		body string
		want string
	}{
		{with, `[{"id":"response-healing"}]`, ""},
		{with, `[{"id":"response-healing","enabled":false,"x":1}]`, ""},
		{with, `[{"id":"moderation"},{"id":"response-healing","x":1}]`, "plugins[1].x: unknown field of the response-healing plugin"},
		{nil, `[{"id":"response-healing"}]`, `plugins[0].id: this gateway does not offer the "response-healing" plugin`},
		{with, `[{"id":"fusion"}]`, `plugins[0].id: this gateway does not offer the "fusion" plugin`},
		{with, `[{"id":"no-such"}]`, `plugins[0].id: unknown plugin "no-such"`},
		{with, `[{"id":"web-fetch","enabled":"yes"}]`, "plugins[0].enabled: expected a boolean"},
		{with, `{"id":"web"}`, "plugins: expected an array of plugin objects"},
	} {
		apiErr := CheckPlugins(gjson.Parse(tc.body), tc.set)
		if (apiErr == nil) != (tc.want == "") || (apiErr != nil && (apiErr.Message != tc.want || apiErr.Status != 400)) {
			t.Errorf("CheckPlugins(%s) = %v, want %q", tc.body, apiErr, tc.want)
		}
	}
}
