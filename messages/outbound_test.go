package messages

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/standin/mockprovider"
)

func TestChatToAnthropicTranslatesTheRequest(t *testing.T) {
	chat := `{"model":"claude","messages":[` +
		`{"role":"system","content":"Be brief","cache_control":{"type":"ephemeral"}},` +
		`{"role":"developer","content":[{"type":"text","text":"Use tools"}]},` +
		`{"role":"user","content":[{"type":"text","text":"Look","cache_control":{"type":"ephemeral"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]},` +
		`{"role":"assistant","content":"Calling","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"result"},` +
		`{"role":"user","content":"and now?"}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"F","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}},"cache_control":{"type":"ephemeral"}},` +
		`{"type":"web_search_20250305","name":"web_search","max_uses":1}],` +
		`"tool_choice":"required","parallel_tool_calls":false,"stop":"END","temperature":1.5,"top_p":0.9,"user":"u1","seed":3,"stream":true,"stream_options":{"include_usage":true},"top_k":5}`
	out, err := ChatToAnthropic([]byte(chat), 321)
	if err != nil {
		t.Fatal(err)
	}
	a := gjson.ParseBytes(out)
	checks := map[string]string{
		"system.0.text": "Be brief", "system.0.cache_control.type": "ephemeral", "system.1.text": "Use tools",
		"messages.0.role": "user", "messages.0.content.0.cache_control.type": "ephemeral",
		"messages.0.content.1.source.type": "base64", "messages.0.content.1.source.media_type": "image/png",
		"messages.0.content.1.source.data": "iVBORw0KGgo=", "messages.0.content.2.source.url": "https://example.com/a.jpg",
		"messages.1.role": "assistant", "messages.1.content.0.text": "Calling", "messages.1.content.1.type": "tool_use",
		"messages.1.content.1.id": "call_1", "messages.1.content.1.input.a": "1",
		"messages.2.role": "user", "messages.2.content.0.type": "tool_result", "messages.2.content.0.tool_use_id": "call_1",
		"messages.2.content.0.content.0.text": "result", "messages.2.content.1.text": "and now?",
		"max_tokens": "321", "stop_sequences.0": "END", "temperature": "1", "top_p": "0.9", "stream": "true",
		"metadata.user_id": "u1", "tools.0.name": "f", "tools.0.input_schema.properties.a.type": "integer",
		"tools.0.cache_control.type": "ephemeral", "tools.1.type": "web_search_20250305",
		"tool_choice.type": "any", "tool_choice.disable_parallel_tool_use": "true", "top_k": "5",
	}
	for path, want := range checks {
		if got := a.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	for _, gone := range []string{"seed", "stream_options", "stop", "user", "tool_calls", "parallel_tool_calls"} {
		if a.Get(gone).Exists() {
			t.Errorf("%s sent: %s", gone, out)
		}
	}
	if n := a.Get("messages.#").Int(); n != 3 {
		t.Errorf("%d messages: %s", n, a.Get("messages").Raw)
	}
}

func TestChatToAnthropicKeepsTheClientsLimitAndNamesBadFields(t *testing.T) {
	out, err := ChatToAnthropic([]byte(`{"model":"m","max_completion_tokens":7,"messages":[{"role":"user","content":"hi"}]}`), 99)
	if err != nil || gjson.GetBytes(out, "max_tokens").Int() != 7 {
		t.Fatalf("%s %v", out, err)
	}
	out, err = ChatToAnthropic([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x.example/a.png"},`+
		`{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]}]}`), 10)
	if err != nil || gjson.GetBytes(out, "messages.0.content.0.source.url").Str != "https://x.example/a.png" ||
		gjson.GetBytes(out, "messages.0.content.1.type").Str != "document" || gjson.GetBytes(out, "messages.0.content.1.source.data").Str != "JVBERi0=" {
		t.Errorf("image string and PDF: %s %v", out, err)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f1"}}]}]}`, "messages[0].content[0].file.file_data"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,AA"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{`{"messages":[{"role":"user","content":"x"}],"n":2}`, "n"},
		{`{"messages":[{"role":"system","content":"x"}]}`, "messages"},
	} {
		_, err := ChatToAnthropic([]byte(tc.body), 10)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: %v, want field %s", tc.body, err, tc.field)
		}
	}
}

// mockUpstream serves the mock's Anthropic mode.
func mockUpstream(t *testing.T) *httptest.Server {
	m := &mockprovider.Handler{}
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error { return nil })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = m.ServeHTTP(w, r, next) }))
	t.Cleanup(srv.Close)
	return srv
}

// roundTrip translates chat, sends it to the mock and translates its
// answer back, as the gateway does.
func roundTrip(t *testing.T, srv *httptest.Server, chat string) (int, string) {
	t.Helper()
	body, err := ChatToAnthropic([]byte(chat), 100)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+Path, bytes.NewReader(body))
	req.Header.Set("X-Api-Key", "k")
	req.Header.Set("Anthropic-Version", Version)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rec := httptest.NewRecorder()
	aw := NewAnthropicToChat(rec, "claude")
	for k, v := range resp.Header {
		aw.Header()[k] = v
	}
	aw.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(aw, resp.Body); err != nil {
		t.Fatal(err)
	}
	aw.Finish()
	return rec.Code, rec.Body.String()
}

func TestAnthropicAnswerBecomesAChatCompletion(t *testing.T) {
	srv := mockUpstream(t)
	code, out := roundTrip(t, srv, `{"model":"claude","messages":[{"role":"system","content":[{"type":"text","text":"shared context words","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"hello"}]}`)
	c := gjson.Parse(out)
	if code != 200 || c.Get("object").Str != "chat.completion" || c.Get("choices.0.message.content").Str != "Mock answer from claude: hello" ||
		c.Get("choices.0.finish_reason").Str != "stop" || !strings.HasPrefix(c.Get("id").Str, "msg_") {
		t.Fatalf("%d %s", code, out)
	}
	// system 3 words + 4 written to the cache; user 1 word + 4.
	u := c.Get("usage")
	if u.Get("prompt_tokens").Int() != 12 || u.Get("prompt_tokens_details.cache_write_tokens").Int() != 7 ||
		u.Get("prompt_tokens_details.cached_tokens").Int() != 0 || u.Get("completion_tokens").Int() != 5 || u.Get("total_tokens").Int() != 17 {
		t.Errorf("usage %s", u.Raw)
	}
	_, out = roundTrip(t, srv, `{"model":"claude","messages":[{"role":"system","content":[{"type":"text","text":"shared context words","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"hello"}]}`)
	if u := gjson.Get(out, "usage"); u.Get("prompt_tokens").Int() != 12 || u.Get("prompt_tokens_details.cached_tokens").Int() != 7 {
		t.Errorf("second usage %s", u.Raw)
	}
	_, out = roundTrip(t, srv, `{"model":"claude","max_tokens":2,"messages":[{"role":"user","content":"hello"}]}`)
	if f := gjson.Get(out, "choices.0.finish_reason").Str; f != "length" {
		t.Errorf("finish %s: %s", f, out)
	}
}

func TestAnthropicToolCallsBecomeChatToolCalls(t *testing.T) {
	srv := mockUpstream(t)
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]`
	_, out := roundTrip(t, srv, `{"model":"claude",`+tools+`,"messages":[{"role":"user","content":"please lookup x"}]}`)
	call := gjson.Get(out, "choices.0.message.tool_calls.0")
	if gjson.Get(out, "choices.0.finish_reason").Str != "tool_calls" || call.Get("function.name").Str != "lookup" ||
		gjson.Get(call.Get("function.arguments").Str, "query").Str != "please lookup x" || gjson.Get(out, "choices.0.message.content").Exists() {
		t.Fatalf("%s", out)
	}
	// The call and its result go back: the strict mock checks the pairing.
	next := `{"model":"claude",` + tools + `,"messages":[{"role":"user","content":"please lookup x"},` +
		`{"role":"assistant","content":null,"tool_calls":[` + call.Raw + `]},{"role":"tool","tool_call_id":"` + call.Get("id").Str + `","content":"found"}]}`
	code, out := roundTrip(t, srv, next)
	if code != 200 || gjson.Get(out, "choices.0.message.content").Str != "Mock answer from claude: tool result found" {
		t.Errorf("%d %s", code, out)
	}
}

func TestAnthropicStreamBecomesChatChunks(t *testing.T) {
	srv := mockUpstream(t)
	code, out := roundTrip(t, srv, `{"model":"claude","stream":true,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"news"}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	var text strings.Builder
	var anns []gjson.Result
	var finish string
	var usage gjson.Result
	done := false
	for _, ev := range strings.Split(out, "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		c := gjson.Parse(data)
		if !gjson.Valid(data) || c.Get("object").Str != "chat.completion.chunk" {
			t.Errorf("chunk %s", data)
		}
		text.WriteString(c.Get("choices.0.delta.content").Str)
		anns = append(anns, c.Get("choices.0.delta.annotations").Array()...)
		if f := c.Get("choices.0.finish_reason").Str; f != "" {
			finish = f
		}
		if u := c.Get("usage"); u.Exists() {
			usage = u
		}
	}
	if !done || finish != "stop" || usage.Get("server_tool_use.web_search_requests").Int() != 1 || usage.Get("completion_tokens").Int() == 0 {
		t.Fatalf("done %v finish %q usage %s", done, finish, usage.Raw)
	}
	if len(anns) != 2 {
		t.Fatalf("annotations %v in %s", anns, out)
	}
	runes := []rune(text.String())
	for _, a := range anns {
		u := a.Get("url_citation")
		span := string(runes[u.Get("start_index").Int():u.Get("end_index").Int()])
		if strings.TrimSpace(span) != u.Get("content").Str || a.Get("type").Str != "url_citation" || u.Get("url").Str == "" {
			t.Errorf("annotation %s spans %q", a.Raw, span)
		}
	}
	// The plain answer has the same text and annotations.
	_, plain := roundTrip(t, srv, `{"model":"claude","tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"news"}]}`)
	if gjson.Get(plain, "choices.0.message.content").Str != text.String() ||
		gjson.Get(plain, "choices.0.message.annotations.#").Int() != 2 ||
		gjson.Get(plain, "choices.0.message.annotations.1.url_citation.start_index").Int() != anns[1].Get("url_citation.start_index").Int() {
		t.Errorf("plain %s", plain)
	}
}

func TestAnthropicErrorsPassUnchanged(t *testing.T) {
	code, out := roundTrip(t, mockUpstream(t), `{"model":"claude-error-429","messages":[{"role":"user","content":"x"}]}`)
	if code != 429 || gjson.Get(out, "error.type").Str != "rate_limit_error" {
		t.Errorf("%d %s", code, out)
	}
}

func TestWithMaxTokensOnlyWhenMissing(t *testing.T) {
	out, err := WithMaxTokens([]byte(`{"model":"m","messages":[]}`), 0)
	if err != nil || gjson.GetBytes(out, "max_tokens").Int() != DefaultMaxTokens {
		t.Fatalf("%s %v", out, err)
	}
	in := []byte(`{"model":"m","max_tokens":5}`)
	if out, _ := WithMaxTokens(in, 99); string(out) != string(in) {
		t.Errorf("changed %s", out)
	}
}

func TestThinkingBecomesReasoning(t *testing.T) {
	rec := httptest.NewRecorder()
	aw := NewAnthropicToChat(rec, "claude")
	aw.Header().Set("Content-Type", "application/json")
	aw.WriteHeader(200)
	_, _ = aw.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"thinking","thinking":"Let me think.","signature":"sig"},{"type":"redacted_thinking","data":"enc"},{"type":"text","text":"Answer."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":4}}`))
	aw.Finish()
	if m := gjson.Get(rec.Body.String(), "choices.0.message"); m.Get("reasoning").Str != "Let me think." || m.Get("content").Str != "Answer." ||
		m.Get("reasoning_details").Raw != `[{"type":"reasoning.text","text":"Let me think.","signature":"sig","format":"anthropic-claude-v1","index":0},`+
			`{"type":"reasoning.encrypted","data":"enc","format":"anthropic-claude-v1","index":1}]` {
		t.Errorf("%s", rec.Body)
	}
	rec = httptest.NewRecorder()
	aw = NewAnthropicToChat(rec, "claude")
	aw.Header().Set("Content-Type", "text/event-stream")
	aw.WriteHeader(200)
	_, _ = aw.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude\",\"usage\":{\"input_tokens\":3}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Hmm.\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"enc\"}}\n\n"))
	for _, want := range []string{
		`"delta":{"reasoning":"Hmm.","reasoning_details":[{"type":"reasoning.text","text":"Hmm.","format":"anthropic-claude-v1","index":0}]}`,
		`"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"s","format":"anthropic-claude-v1","index":0}]}`,
		`"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"enc","format":"anthropic-claude-v1","index":1}]}`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("no %s in %s", want, rec.Body)
		}
	}
}

func TestReasoningEffortEnablesThinking(t *testing.T) {
	out, err := ChatToAnthropic([]byte(`{"model":"m","max_tokens":4000,"reasoning_effort":"high","temperature":0.3,"top_p":0.5,"top_k":3,"messages":[{"role":"user","content":"x"}]}`), 0)
	a := gjson.ParseBytes(out)
	if err != nil || a.Get("thinking.type").Str != "enabled" || a.Get("thinking.budget_tokens").Int() != 3200 ||
		a.Get("temperature").Exists() || a.Get("top_p").Exists() || a.Get("top_k").Exists() || a.Get("reasoning_effort").Exists() {
		t.Errorf("%s %v", out, err)
	}
	// Every effort's budget: its share of max_tokens, below max_tokens.
	for effort, budget := range map[string]int64{"max": 9800, "xhigh": 9500, "high": 8000, "medium": 5000, "low": 2000, "minimal": 1024} {
		out, err := ChatToAnthropic([]byte(`{"max_tokens":10000,"reasoning_effort":"`+effort+`","messages":[{"role":"user","content":"x"}]}`), 0)
		if got := gjson.GetBytes(out, "thinking.budget_tokens").Int(); err != nil || got != budget {
			t.Errorf("%s: budget %d, want %d (%v)", effort, got, budget, err)
		}
	}
	for _, body := range []string{
		`{"max_tokens":1000,"reasoning_effort":"high","messages":[{"role":"user","content":"x"}]}`,
		`{"max_tokens":4000,"reasoning_effort":"none","messages":[{"role":"user","content":"x"}]}`,
		`{"max_tokens":4000,"reasoning_effort":"high","tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`,
	} {
		if out, _ := ChatToAnthropic([]byte(body), 0); gjson.GetBytes(out, "thinking").Exists() {
			t.Errorf("thinking for %s: %s", body, out)
		}
	}
	// Through the strict mock: the reasoning comes back.
	_, res := roundTrip(t, mockUpstream(t), `{"model":"claude","max_tokens":2000,"reasoning_effort":"medium","temperature":0.2,"messages":[{"role":"user","content":"x"}]}`)
	if m := gjson.Get(res, "choices.0.message"); m.Get("reasoning").Str == "" || m.Get("content").Str != "Mock answer from claude: x" {
		t.Errorf("%s", res)
	}
}

// An assistant message's reasoning_details go back as thinking blocks,
// signatures unchanged, before its text and tool_use blocks.
func TestReasoningDetailsBecomeThinking(t *testing.T) {
	out, err := ChatToAnthropic([]byte(`{"max_tokens":4000,"reasoning_effort":"low","messages":[{"role":"user","content":"x"},`+
		`{"role":"assistant","content":"calling","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}],"reasoning_details":[`+
		`{"type":"reasoning.text","text":"Let me ","format":"anthropic-claude-v1","index":0},{"type":"reasoning.text","text":"think.","index":0},`+
		`{"type":"reasoning.text","signature":"sig==","index":0},{"type":"reasoning.encrypted","data":"enc","index":1},`+
		`{"type":"reasoning.summary","summary":"s"},{"type":"reasoning.text","text":"unsigned"},`+
		`{"type":"reasoning.encrypted","data":"gpt","format":"openai-responses-v1"}]},`+
		`{"role":"tool","tool_call_id":"c1","content":"r"}]}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"thinking","thinking":"Let me think.","signature":"sig=="},{"type":"redacted_thinking","data":"enc"},` +
		`{"type":"text","text":"calling"},{"type":"tool_use","id":"c1","name":"f","input":{}}]`
	if got := gjson.GetBytes(out, "messages.1.content").Raw; got != want {
		t.Errorf("assistant content %s, want %s", got, want)
	}
	for body, msg := range map[string]string{
		`"reasoning_details":{}`:                                                         "messages[1].reasoning_details: expected an array",
		`"reasoning_details":[1]`:                                                        "messages[1].reasoning_details[0]: expected an object",
		`"reasoning_details":[{"type":"reasoning.thought"}]`:                             "messages[1].reasoning_details[0].type: expected reasoning.text",
		`"reasoning_details":[{"type":"reasoning.text","signature":5}]`:                  "messages[1].reasoning_details[0].signature: expected a string",
		`"reasoning_details":[{"type":"reasoning.text"},{"type":"reasoning.encrypted"}]`: "messages[1].reasoning_details[1].data: required string",
		`"reasoning_details":[{"type":"reasoning.text","text":"t","index":-1}]`:          "messages[1].reasoning_details[0].index: expected a non-negative integer",
		`"reasoning_details":[{"type":"reasoning.summary","summary":["s"]}]`:             "messages[1].reasoning_details[0].summary",
	} {
		_, err := ChatToAnthropic([]byte(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"a",`+body+`}]}`), 0)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %s", body, err, msg)
		}
	}
}

// The chat usage carries the cache writes whole; the 1h part is told the
// meter apart, from a whole answer and from a stream.
func TestAnthropicToChatReportsHourCacheWrites(t *testing.T) {
	usage := `{"input_tokens":3,"cache_creation_input_tokens":12,"cache_creation":{"ephemeral_5m_input_tokens":4,"ephemeral_1h_input_tokens":8},"cache_read_input_tokens":0,"output_tokens":2}`
	rec := httptest.NewRecorder()
	aw := NewAnthropicToChat(rec, "claude")
	aw.Header().Set("Content-Type", "application/json")
	aw.WriteHeader(200)
	_, _ = aw.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":` + usage + `}`))
	aw.Finish()
	if hour, unknown := aw.CacheWrites1h(); hour != 8 || unknown || gjson.Get(rec.Body.String(), "usage.prompt_tokens_details.cache_write_tokens").Int() != 12 {
		t.Errorf("1h = %d %v; answer %s", hour, unknown, rec.Body)
	}
	rec = httptest.NewRecorder()
	aw = NewAnthropicToChat(rec, "claude")
	aw.Header().Set("Content-Type", "text/event-stream")
	aw.WriteHeader(200)
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[],"usage":` + usage + `}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
		`{"type":"message_stop"}`,
	} {
		_, _ = aw.Write([]byte("data: " + ev + "\n\n"))
	}
	aw.Finish()
	if hour, unknown := aw.CacheWrites1h(); hour != 8 || unknown {
		t.Errorf("stream: 1h = %d %v; answer %s", hour, unknown, rec.Body)
	}
}
