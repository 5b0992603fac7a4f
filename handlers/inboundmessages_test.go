package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/internal/testkit/testgw"
	"github.com/tollgate-dev/caddy-tollgate/sse"
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

// The meter reads a Messages stream as it passes: text and tool input
// delivered, message_start's prompt, message_delta's usage (the prompt
// with the cached tokens), which waits for the charge with message_stop.
func TestMeterWriterMessagesStream(t *testing.T) {
	mw, log := streamWriter(t, "messages")
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	start := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":7,"cache_read_input_tokens":3,"output_tokens":1}}}`)
	text := ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi there"}}`)
	args := ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"hm"}}`)
	stop := ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
	delta := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4}}`)
	end := ev("message_stop", `{"type":"message_stop"}`)
	for _, e := range []string{start, text, args, stop, delta, end} {
		mustWrite(t, mw, e)
	}
	if log.body() != start+text+args+stop {
		t.Fatalf("client got %q before the charge", log.body())
	}
	if !mw.usage.ok || mw.usage.prompt != 10 || mw.usage.completion != 4 || mw.delivered != len("Hi there{}hm") ||
		!mw.sawDone || mw.finish != "max_tokens" || mw.upstreamID != "msg_1" {
		t.Fatalf("usage %+v delivered %d sawDone %v finish %q id %q", mw.usage, mw.delivered, mw.sawDone, mw.finish, mw.upstreamID)
	}
	if err := mw.sendTail(testAmount("0.000018")); err != nil {
		t.Fatal(err)
	}
	wantDelta := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":4,"cost":0.000018}}`)
	if got := strings.TrimPrefix(log.body(), start+text+args+stop); got != wantDelta+end {
		t.Fatalf("tail %q\nwant %q", got, wantDelta+end)
	}

	// A message_delta with input_tokens counts it and its cached tokens.
	mw, _ = streamWriter(t, "messages")
	mustWrite(t, mw, start+ev("message_delta", `{"type":"message_delta","delta":{},"usage":{"input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":2}}`))
	if mw.usage.prompt != 25 || mw.usage.completion != 2 {
		t.Fatalf("usage %+v", mw.usage)
	}

	// Without usage, the charge's usage goes into message_delta.
	mw, log = streamWriter(t, "messages")
	mustWrite(t, mw, ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":null}`)+end)
	b := newUsageBill(18_000, billing.Pricing{Prompt: 1_000_000, Completion: 2_000_000}, billing.Usage{PromptTokens: 10, CompletionTokens: 4}, false)
	mw.bill = &b
	if mw.usage.ok {
		t.Fatal("usage null read as reported")
	}
	if err := mw.sendTail(testAmount("0.000018")); err != nil {
		t.Fatal(err)
	}
	u := gjson.GetBytes(sse.Data([]byte(strings.SplitAfter(log.body(), "\n\n")[0])), "usage")
	if u.Get("input_tokens").Int() != 10 || u.Get("output_tokens").Int() != 4 || u.Get("cost").Raw != "0.000018" {
		t.Fatalf("billed usage %s in %q", u.Raw, log.body())
	}
}

func TestMeterWriterMessagesJSON(t *testing.T) {
	body := `{"id":"gen-1","type":"message","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn",` +
		`"usage":{"input_tokens":8,"output_tokens":3,"cache_creation_input_tokens":1,"cache_read_input_tokens":4}}`
	log := newWriteLog()
	mw := newMeterWriter(log, "messages")
	mw.Header().Set("Content-Type", "application/json")
	mw.WriteHeader(http.StatusOK)
	mustWrite(t, mw, body)
	if !mw.usableJSON() || !mw.usage.ok || mw.usage.prompt != 13 || mw.usage.completion != 3 || mw.finish != "end_turn" {
		t.Fatalf("usage %+v finish %q", mw.usage, mw.finish)
	}
	if err := mw.sendJSON(testAmount("0.000019"), "gen-1"); err != nil {
		t.Fatal(err)
	}
	if got := gjson.Get(log.body(), "usage.cost").Raw; got != "0.000019" {
		t.Fatalf("answer %s", log.body())
	}
}

func TestAnthropicSearchTools(t *testing.T) {
	in := `{"model":"m","tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"web_search","max_uses":3,` +
		`"allowed_domains":["a.test"],"blocked_domains":null,"user_location":{"type":"approximate"}},` +
		`{"type":"web_search_20260209","name":"web_search","blocked_domains":["b.test"]}]}`
	out, apiErr := anthropicSearchTools([]byte(in), "service")
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	want := `{"model":"m","tools":[{"name":"f","input_schema":{}},{"type":"service:web_search","parameters":{"allowed_domains":["a.test"]}},` +
		`{"type":"service:web_search","parameters":{"excluded_domains":["b.test"]}}]}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	plain := `{"model":"m","tools":[{"name":"web_search_helper","input_schema":{}}]}`
	if out, _ := anthropicSearchTools([]byte(plain), "service"); string(out) != plain {
		t.Fatalf("a client tool was rewritten: %s", out)
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

func TestLastMessagesUserText(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"first question"},{"role":"assistant","content":"x"},
		{"role":"user","content":[{"type":"text","text":" Caddy news "}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`
	if got := lastMessagesUserText([]byte(body)); got != "Caddy news" {
		t.Fatalf("query %q", got)
	}
	if got := lastMessagesUserText([]byte(`{"messages":[{"role":"assistant","content":"x"}]}`)); got != "" {
		t.Fatalf("query %q", got)
	}
}
