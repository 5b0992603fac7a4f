package mockprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

var anthropicHeaders = []string{"X-Api-Key", "sk-ant-test", "Anthropic-Version", "2023-06-01"}

func anthropicPost(t *testing.T, m *Handler, body string) testgw.UpstreamResult {
	t.Helper()
	return testgw.Post(t, mockServer(t, m), "/v1/messages", body, anthropicHeaders...)
}

func TestAnthropicRefusesWhatAnthropicRefuses(t *testing.T) {
	srv := mockServer(t, &Handler{})
	const ok = `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	if res := testgw.Post(t, srv, "/v1/messages", ok); res.Status != http.StatusUnauthorized ||
		gjson.Get(res.Body, "error.type").Str != "authentication_error" || gjson.Get(res.Body, "type").Str != "error" {
		t.Errorf("without x-api-key: %d %s", res.Status, res.Body)
	}
	if res := testgw.Post(t, srv, "/v1/messages", ok, "X-Api-Key", "k"); res.Status != http.StatusBadRequest ||
		!strings.Contains(res.Body, "anthropic-version") {
		t.Errorf("without anthropic-version: %d %s", res.Status, res.Body)
	}
	for _, tc := range []struct{ body, message string }{
		{`{"model":"claude","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required"},
		{`{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stream_options":{}}`, "stream_options: Extra inputs are not permitted"},
		{`{"model":"claude","max_tokens":10,"messages":[{"role":"developer","content":"hi"}]}`, "messages.0.role"},
		{`{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages.0.content.0: Input tag 'image_url'"},
		{`{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "text content blocks must be non-empty"},
		{`{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AA"}}]}]}`, "media_type"},
		{`{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`, "unexpected `tool_use_id`"},
		{`{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":"b"}]}`, "without `tool_result`"},
		{`{"model":"claude","max_tokens":10,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`, "input_schema: Field required"},
		{`{"model":"claude","max_tokens":10,"temperature":1.5,"messages":[{"role":"user","content":"hi"}]}`, "temperature"},
	} {
		res := testgw.Post(t, srv, "/v1/messages", tc.body, anthropicHeaders...)
		if res.Status != http.StatusBadRequest || gjson.Get(res.Body, "error.type").Str != "invalid_request_error" ||
			!strings.Contains(gjson.Get(res.Body, "error.message").Str, tc.message) {
			t.Errorf("%s: %d %s, want %q", tc.body, res.Status, res.Body, tc.message)
		}
	}
}

func TestAnthropicAnswersWithBlocksAndUsage(t *testing.T) {
	res := anthropicPost(t, &Handler{}, `{"model":"claude","max_tokens":100,"system":"Be brief","messages":[{"role":"user","content":"hello there"}]}`)
	m := gjson.Parse(res.Body)
	if res.Status != 200 || !strings.HasPrefix(m.Get("id").Str, "msg_") || m.Get("type").Str != "message" ||
		m.Get("content.0.text").Str != "Mock answer from claude: hello there" || m.Get("stop_reason").Str != "end_turn" {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	// system 2 words + 4, user 2 words + 4; output 6 words.
	if u := m.Get("usage"); u.Get("input_tokens").Int() != 12 || u.Get("output_tokens").Int() != 6 ||
		u.Get("cache_read_input_tokens").Int() != 0 || u.Get("cache_creation_input_tokens").Int() != 0 {
		t.Errorf("usage %s", u.Raw)
	}
	res = anthropicPost(t, &Handler{}, `{"model":"claude","max_tokens":2,"messages":[{"role":"user","content":"hello there"}]}`)
	if m := gjson.Parse(res.Body); m.Get("stop_reason").Str != "max_tokens" || m.Get("content.0.text").Str != "Mock answer" {
		t.Errorf("max_tokens: %s", res.Body)
	}
	res = anthropicPost(t, &Handler{}, `{"model":"claude","max_tokens":50,"stop_sequences":["claude"],"messages":[{"role":"user","content":"x"}]}`)
	if m := gjson.Parse(res.Body); m.Get("stop_reason").Str != "stop_sequence" || m.Get("stop_sequence").Str != "claude" ||
		m.Get("content.0.text").Str != "Mock answer from " {
		t.Errorf("stop_sequence: %s", res.Body)
	}
}

func TestAnthropicCachesPrefixes(t *testing.T) {
	srv := mockServer(t, &Handler{})
	body := `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"a long shared context here","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"question one"}]}`
	first := gjson.Get(testgw.Post(t, srv, "/v1/messages", body, anthropicHeaders...).Body, "usage")
	second := gjson.Get(testgw.Post(t, srv, "/v1/messages", body, anthropicHeaders...).Body, "usage")
	// The prefix: the system block, 5 words + 4.
	if first.Get("cache_creation_input_tokens").Int() != 9 || first.Get("cache_read_input_tokens").Int() != 0 || first.Get("input_tokens").Int() != 6 {
		t.Errorf("first: %s", first.Raw)
	}
	if second.Get("cache_read_input_tokens").Int() != 9 || second.Get("cache_creation_input_tokens").Int() != 0 || second.Get("input_tokens").Int() != 6 {
		t.Errorf("second: %s", second.Raw)
	}
}

// Cache writes are split by TTL; a top-level cache_control caches the
// whole prompt; a cache_control Anthropic refuses is refused.
func TestAnthropicSplitsCacheWritesByTTL(t *testing.T) {
	srv := mockServer(t, &Handler{})
	// 5 words + 4 cached for an hour, then 2 words + 4 for 5 minutes.
	body := `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"a long shared context here","cache_control":{"type":"ephemeral","ttl":"1h"}},` +
		`{"type":"text","text":"more context","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"question one"}]}`
	u := gjson.Get(testgw.Post(t, srv, "/v1/messages", body, anthropicHeaders...).Body, "usage")
	if u.Get("cache_creation_input_tokens").Int() != 15 || u.Get("cache_creation").Raw != `{"ephemeral_5m_input_tokens":6,"ephemeral_1h_input_tokens":9}` {
		t.Errorf("split: %s", u.Raw)
	}
	if u = gjson.Get(testgw.Post(t, srv, "/v1/messages", body, anthropicHeaders...).Body, "usage"); u.Get("cache_read_input_tokens").Int() != 15 || u.Get("cache_creation").Exists() {
		t.Errorf("read: %s", u.Raw)
	}
	auto := `{"model":"claude","max_tokens":100,"cache_control":{"type":"ephemeral","ttl":"1h"},"messages":[{"role":"user","content":"automatic caching here"}]}`
	if u = gjson.Get(testgw.Post(t, srv, "/v1/messages", auto, anthropicHeaders...).Body, "usage"); u.Get("input_tokens").Int() != 0 ||
		u.Get("cache_creation.ephemeral_1h_input_tokens").Int() != u.Get("cache_creation_input_tokens").Int() {
		t.Errorf("automatic: %s", u.Raw)
	}
	for _, cc := range []string{`{"type":"persistent"}`, `{"type":"ephemeral","ttl":"2h"}`, `true`} {
		res := testgw.Post(t, srv, "/v1/messages", `{"model":"claude","max_tokens":100,"cache_control":`+cc+`,"messages":[{"role":"user","content":"x"}]}`, anthropicHeaders...)
		if res.Status != 400 || !strings.Contains(res.Body, "cache_control") {
			t.Errorf("%s: %d %s", cc, res.Status, res.Body)
		}
	}
	late := `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"x"}]}`
	if res := testgw.Post(t, srv, "/v1/messages", late, anthropicHeaders...); res.Status != 400 {
		t.Errorf("1h after 5m: %d %s", res.Status, res.Body)
	}
}

func TestAnthropicToolUseRoundTrip(t *testing.T) {
	tools := `"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}]`
	res := anthropicPost(t, &Handler{}, `{"model":"claude","max_tokens":100,`+tools+`,"messages":[{"role":"user","content":"call get_weather for Paris"}]}`)
	m := gjson.Parse(res.Body)
	call := m.Get("content.0")
	if m.Get("stop_reason").Str != "tool_use" || call.Get("type").Str != "tool_use" || call.Get("name").Str != "get_weather" ||
		call.Get("input.query").Str != "call get_weather for Paris" || !strings.HasPrefix(call.Get("id").Str, "toolu_") {
		t.Fatalf("%s", res.Body)
	}
	next := `{"model":"claude","max_tokens":100,` + tools + `,"messages":[{"role":"user","content":"call get_weather for Paris"},` +
		`{"role":"assistant","content":[` + call.Raw + `]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + call.Get("id").Str + `","content":"sunny"}]}]}`
	res = anthropicPost(t, &Handler{}, next)
	if m := gjson.Parse(res.Body); m.Get("stop_reason").Str != "end_turn" || m.Get("content.0.text").Str != "Mock answer from claude: tool result sunny" {
		t.Errorf("%d %s", res.Status, res.Body)
	}
}

func TestAnthropicStreamsEvents(t *testing.T) {
	res := anthropicPost(t, &Handler{}, `{"model":"claude","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hello there"}]}`)
	var types, text []string
	for _, ev := range testgw.ParseSSE(t, res.Body) {
		d := gjson.Parse(ev.Data)
		if ev.Name != d.Get("type").Str {
			t.Errorf("event %q carries %q", ev.Name, d.Get("type").Str)
		}
		if len(types) == 0 || types[len(types)-1] != ev.Name {
			types = append(types, ev.Name)
		}
		if d.Get("delta.type").Str == "text_delta" {
			text = append(text, d.Get("delta.text").Str)
		}
		if ev.Name == "message_delta" && (d.Get("usage.output_tokens").Int() != 6 || d.Get("delta.stop_reason").Str != "end_turn") {
			t.Errorf("message_delta %s", ev.Data)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	if got := strings.Join(text, ""); got != "Mock answer from claude: hello there" {
		t.Errorf("text %q", got)
	}
}

func TestAnthropicNativeWebSearch(t *testing.T) {
	res := anthropicPost(t, &Handler{}, `{"model":"claude","max_tokens":100,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":1}],"messages":[{"role":"user","content":"caddy news"}]}`)
	m := gjson.Parse(res.Body)
	if m.Get("content.0.type").Str != "server_tool_use" || m.Get("content.1.type").Str != "web_search_tool_result" ||
		m.Get("content.1.tool_use_id").Str != m.Get("content.0.id").Str || m.Get("content.1.content.#").Int() != 2 {
		t.Fatalf("%s", res.Body)
	}
	c := m.Get("content.3.citations.0")
	if c.Get("type").Str != "web_search_result_location" || c.Get("url").Str != mockSources[0].url || c.Get("cited_text").Str != mockSources[0].content {
		t.Errorf("citation %s", c.Raw)
	}
	if m.Get("usage.server_tool_use.web_search_requests").Int() != 1 {
		t.Errorf("usage %s", m.Get("usage").Raw)
	}
}

func TestAnthropicThinking(t *testing.T) {
	srv := mockServer(t, &Handler{})
	msgs := `"messages":[{"role":"user","content":"think"}]`
	for _, tc := range []struct{ body, message string }{
		{`{"model":"c","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":500},` + msgs + `}`, "greater than or equal to 1024"},
		{`{"model":"c","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":2000},` + msgs + `}`, "must be greater than `thinking.budget_tokens`"},
		{`{"model":"c","max_tokens":2000,"temperature":0.5,"thinking":{"type":"enabled","budget_tokens":1024},` + msgs + `}`, "temperature"},
	} {
		if res := testgw.Post(t, srv, "/v1/messages", tc.body, anthropicHeaders...); res.Status != 400 || !strings.Contains(res.Body, tc.message) {
			t.Errorf("%s: %d %s", tc.body, res.Status, res.Body)
		}
	}
	res := testgw.Post(t, srv, "/v1/messages", `{"model":"c","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},`+msgs+`}`, anthropicHeaders...)
	if m := gjson.Parse(res.Body); m.Get("content.0.type").Str != "thinking" || m.Get("content.0.thinking").Str != mockThought || m.Get("content.1.type").Str != "text" {
		t.Errorf("%d %s", res.Status, res.Body)
	}
}

// Betas: an unknown one is refused; context_management needs its own;
// with it, Claude Code's request shape (a system message mid-conversation
// among them) is taken, and a scripted tool call is answered with
// tool_use.
func TestAnthropicBetas(t *testing.T) {
	srv := mockServer(t, &Handler{})
	post := func(body, betas string) testgw.UpstreamResult {
		h := anthropicHeaders
		if betas != "" {
			h = append(append([]string{}, h...), "Anthropic-Beta", betas)
		}
		return testgw.Post(t, srv, "/v1/messages", body, h...)
	}
	cc := `{"model":"claude","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Look.\nmock-tool-call: Read {\"file_path\":\"/a\"}","cache_control":{"type":"ephemeral"}}]},
		{"role":"system","content":[{"type":"text","text":"env"}]}],"tools":[{"name":"Read","input_schema":{"type":"object"}}],
		"thinking":{"type":"adaptive","display":"omitted"},"output_config":{"effort":"high"},
		"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}}`
	for _, tc := range []struct{ betas, want string }{
		{"claude-code-20250219,made-up-2099-01-01", "Unexpected value(s) `made-up-2099-01-01` for the `anthropic-beta` header"},
		{"claude-code-20250219", "context_management: Extra inputs are not permitted"},
	} {
		if res := post(cc, tc.betas); res.Status != http.StatusBadRequest || !strings.Contains(res.Body, tc.want) {
			t.Errorf("betas %s: %d %s", tc.betas, res.Status, res.Body)
		}
	}
	res := post(cc, "claude-code-20250219, mid-conversation-system-2026-04-07,context-management-2025-06-27")
	j := gjson.Parse(res.Body)
	call := j.Get(`content.#(type=="tool_use")`)
	if res.Status != http.StatusOK || j.Get("stop_reason").Str != "tool_use" || j.Get("content.0.type").Str != "thinking" ||
		call.Get("name").Str != "Read" || call.Get("input.file_path").Str != "/a" {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
}

// With NoSystemMessages the mock refuses system messages inside messages
// and the mid-conversation-system beta, as an Anthropic-style API
// without that beta does; the same prompt folded into system passes.
func TestAnthropicNoSystemMessages(t *testing.T) {
	srv := mockServer(t, &Handler{NoSystemMessages: true})
	post := func(body string, extra ...string) testgw.UpstreamResult {
		return testgw.Post(t, srv, "/v1/messages", body, append(append([]string{}, anthropicHeaders...), extra...)...)
	}
	mid := `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"Hi"},{"role":"system","content":"Be brief."},{"role":"user","content":"again"}]}`
	if res := post(mid); res.Status != http.StatusBadRequest || !strings.Contains(res.Body, "messages.1.role: Input should be 'user' or 'assistant'") {
		t.Errorf("system message: %d %s", res.Status, res.Body)
	}
	folded := `{"model":"claude","max_tokens":50,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":"Hi"},{"role":"user","content":"again"}]}`
	if res := post(folded, "Anthropic-Beta", "mid-conversation-system-2026-04-07"); res.Status != http.StatusBadRequest || !strings.Contains(res.Body, "mid-conversation-system-2026-04-07") {
		t.Errorf("beta: %d %s", res.Status, res.Body)
	}
	if res := post(folded, "Anthropic-Beta", "claude-code-20250219"); res.Status != http.StatusOK {
		t.Errorf("folded: %d %s", res.Status, res.Body)
	}
}

// With thinking on, a tool loop's final assistant message must start
// with the thinking block the mock gave, signature unchanged, as
// Anthropic requires; without thinking, the same turn passes.
func TestAnthropicThinkingToolLoop(t *testing.T) {
	tools := `"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}]`
	thinking := `"thinking":{"type":"enabled","budget_tokens":1024},`
	res := anthropicPost(t, &Handler{}, `{"model":"claude","max_tokens":2000,`+thinking+tools+`,"messages":[{"role":"user","content":"call get_weather for Paris"}]}`)
	m := gjson.Parse(res.Body)
	think, call := m.Get("content.0"), m.Get(`content.#(type=="tool_use")`)
	if think.Get("type").Str != "thinking" || think.Get("signature").Str != mockSignature || call.Get("name").Str != "get_weather" {
		t.Fatalf("%s", res.Body)
	}
	turn := func(th, assistant string) string {
		return `{"model":"claude","max_tokens":2000,` + th + tools + `,"messages":[{"role":"user","content":"call get_weather for Paris"},` +
			`{"role":"assistant","content":[` + assistant + `]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + call.Get("id").Str + `","content":"sunny"}]}]}`
	}
	for _, tc := range []struct{ body, want string }{
		{turn(thinking, call.Raw), "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
		{turn(thinking, `{"type":"text","text":"calling"},`+call.Raw), "but found `text`"},
		{turn(thinking, `{"type":"thinking","thinking":"t"},`+call.Raw), "messages.1.content.0.thinking.signature: Field required"},
		{turn(thinking, `{"type":"thinking","thinking":"t","signature":"forged"},`+call.Raw), "messages.1.content.0: Invalid `signature` in `thinking` block"},
	} {
		if res := anthropicPost(t, &Handler{}, tc.body); res.Status != http.StatusBadRequest || !strings.Contains(res.Body, tc.want) {
			t.Errorf("%s: %d %s", tc.body, res.Status, res.Body)
		}
	}
	for _, body := range []string{
		turn(thinking, think.Raw+","+call.Raw),
		turn(thinking, `{"type":"redacted_thinking","data":"enc"},`+call.Raw),
		turn("", call.Raw),
	} {
		if res := anthropicPost(t, &Handler{}, body); res.Status != http.StatusOK || !strings.Contains(res.Body, "tool result sunny") {
			t.Errorf("%s: %d %s", body, res.Status, res.Body)
		}
	}
}
