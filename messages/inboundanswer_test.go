package messages

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// translate runs a chat answer (status, content type, body written in
// pieces) through ChatToMessages and returns what the client got.
func translate(t *testing.T, status int, contentType string, pieces ...string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	cw := NewChatToMessages(rec, "gen-1", "vendor/model", "prov")
	cw.Header().Set("Content-Type", contentType)
	cw.Header().Set("Content-Length", "123")
	cw.WriteHeader(status)
	for _, p := range pieces {
		if _, err := cw.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	cw.Finish(nil)
	return rec
}

type event struct {
	name string
	data gjson.Result
}

// events parses a Messages stream; every event must be named, and its
// name must be its data's type.
func events(t *testing.T, body string) []event {
	t.Helper()
	var out []event
	var name string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data := gjson.Parse(strings.TrimPrefix(line, "data: "))
			if name == "" || data.Get("type").Str != name {
				t.Fatalf("event %q with data %s", name, data.Raw)
			}
			out = append(out, event{name, data})
			name = ""
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	return out
}

func names(evs []event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.name)
	}
	return strings.Join(s, " ")
}

func chunks(chunks ...string) []string {
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = "data: " + c + "\n\n"
	}
	return out
}

func TestChatToMessagesJSON(t *testing.T) {
	tests := []struct {
		name, chat, want string
	}{
		{"text", `{"id":"chatcmpl-1","object":"chat.completion","model":"m-2024","choices":[{"index":0,"finish_reason":"stop",
			"message":{"role":"assistant","content":"Hello there"}}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,
			"prompt_tokens_details":{"cached_tokens":4}}}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov",
			"content":[{"type":"text","text":"Hello there","citations":null}],"stop_reason":"end_turn","stop_sequence":null,
			"usage":{"input_tokens":8,"output_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":4}}`},
		{"tool calls", `{"choices":[{"finish_reason":"tool_calls","message":{"role":"assistant","content":"Checking.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Köln\"}"}},
			{"id":"call_2","type":"function","function":{"name":"clock","arguments":""}},
			{"id":"call_3","type":"function","function":{"name":"bad","arguments":"[1"}}]}}]}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov","content":[
			{"type":"text","text":"Checking.","citations":null},
			{"type":"tool_use","id":"call_1","name":"weather","input":{"city":"Köln"}},
			{"type":"tool_use","id":"call_2","name":"clock","input":{}},
			{"type":"tool_use","id":"call_3","name":"bad","input":{"arguments":"[1"}}],
			"stop_reason":"tool_use","stop_sequence":null,"usage":null}`},
		{"length", `{"choices":[{"finish_reason":"length","message":{"content":"cut"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov",
			"content":[{"type":"text","text":"cut","citations":null}],"stop_reason":"max_tokens","stop_sequence":null,
			"usage":{"input_tokens":1,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`},
		{"stop sequence named", `{"choices":[{"finish_reason":"stop","stop_reason":"END","message":{"content":"done"}}]}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov",
			"content":[{"type":"text","text":"done","citations":null}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":null}`},
		{"a token id is no stop sequence", `{"choices":[{"finish_reason":"stop","stop_reason":128001,"message":{"content":"done"}}]}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov",
			"content":[{"type":"text","text":"done","citations":null}],"stop_reason":"end_turn","stop_sequence":null,"usage":null}`},
		{"reasoning", `{"choices":[{"finish_reason":"stop","message":{"content":"42","reasoning":"Think."}}]}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov",
			"content":[{"type":"thinking","thinking":"Think.","signature":""},{"type":"text","text":"42","citations":null}],
			"stop_reason":"end_turn","stop_sequence":null,"usage":null}`},
		{"filtered, empty", `{"choices":[{"finish_reason":"content_filter","message":{"content":null}}]}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov",
			"content":[],"stop_reason":"refusal","stop_sequence":null,"usage":null}`},
		{"citations", `{"choices":[{"finish_reason":"stop","message":{"content":"See Café now","annotations":[
			{"type":"url_citation","url_citation":{"url":"https://x.test","title":"X","start_index":4,"end_index":8}}]}}]}`,
			`{"id":"gen-1","type":"message","role":"assistant","model":"vendor/model","provider":"prov",
			"content":[{"type":"text","text":"See Café now","citations":[{"type":"web_search_result_location","url":"https://x.test",
			"title":"X","cited_text":"Café","encrypted_index":""}]}],"stop_reason":"end_turn","stop_sequence":null,"usage":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := translate(t, 200, "application/json", tt.chat[:10], tt.chat[10:])
			if rec.Code != 200 {
				t.Fatalf("status %d", rec.Code)
			}
			testgw.JSONEqual(t, rec.Body.Bytes(), tt.want)
		})
	}
}

func TestChatToMessagesPassesFailures(t *testing.T) {
	rec := translate(t, 429, "application/json", `{"error":{"message":"slow down"}}`)
	if rec.Code != 429 || rec.Body.String() != `{"error":{"message":"slow down"}}` {
		t.Fatalf("error status: %d %s", rec.Code, rec.Body)
	}
	rec = translate(t, 200, "application/json", `not json`)
	if rec.Code != 200 || rec.Body.String() != `not json` {
		t.Fatalf("invalid answer: %d %s", rec.Code, rec.Body)
	}
}

func TestChatToMessagesStreamText(t *testing.T) {
	rec := translate(t, 200, "text/event-stream", chunks(
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{"content":" world","annotations":[{"type":"url_citation","url_citation":{"url":"https://w.test","title":"W","start_index":6,"end_index":11}}]},"finish_reason":null}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`,
		`{"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`,
		`[DONE]`)...)
	if rec.Header().Get("Content-Length") != "" {
		t.Fatal("a translated stream keeps the provider's Content-Length")
	}
	evs := events(t, rec.Body.String())
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := names(evs); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	start := evs[0].data.Get("message")
	if start.Get("id").Str != "gen-1" || start.Get("model").Str != "vendor/model" || start.Get("role").Str != "assistant" ||
		start.Get("content").Raw != "[]" || start.Get("usage.input_tokens").Raw != "0" || start.Get("stop_reason").Raw != "null" {
		t.Fatalf("message_start %s", start.Raw)
	}
	if b := evs[2].data; b.Get("index").Int() != 0 || b.Get("content_block.type").Str != "text" || b.Get("content_block.text").Raw != `""` {
		t.Fatalf("content_block_start %s", b.Raw)
	}
	if d := evs[3].data.Get("delta"); d.Get("type").Str != "text_delta" || d.Get("text").Str != "Hello" {
		t.Fatalf("delta %s", d.Raw)
	}
	if c := evs[5].data.Get("delta"); c.Get("type").Str != "citations_delta" || c.Get("citation.type").Str != "web_search_result_location" ||
		c.Get("citation.cited_text").Str != "world" || c.Get("citation.url").Str != "https://w.test" {
		t.Fatalf("citation %s", c.Raw)
	}
	md := evs[7].data
	if md.Get("delta.stop_reason").Str != "max_tokens" || md.Get("delta.stop_sequence").Raw != "null" ||
		md.Get("usage.input_tokens").Int() != 9 || md.Get("usage.output_tokens").Int() != 2 {
		t.Fatalf("message_delta %s", md.Raw)
	}
}

func TestChatToMessagesStreamReasoning(t *testing.T) {
	rec := translate(t, 200, "text/event-stream", chunks(
		`{"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"Let me "},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning":"think."},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"42"},"finish_reason":"stop"}]}`,
		`[DONE]`)...)
	evs := events(t, rec.Body.String())
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := names(evs); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	if b := evs[2].data.Get("content_block"); b.Get("type").Str != "thinking" || b.Get("signature").Raw != `""` {
		t.Fatalf("thinking block %s", b.Raw)
	}
	if d := evs[4].data; d.Get("index").Int() != 0 || d.Get("delta.type").Str != "thinking_delta" || d.Get("delta.thinking").Str != "think." {
		t.Fatalf("thinking delta %s", d.Raw)
	}
	if evs[6].data.Get("index").Int() != 1 || evs[6].data.Get("content_block.type").Str != "text" {
		t.Fatalf("text block %s", evs[6].data.Raw)
	}
}

func TestChatToMessagesStreamTools(t *testing.T) {
	rec := translate(t, 200, "text/event-stream", chunks(
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check."},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Köln\"}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"clock","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":8}}`,
		`[DONE]`)...)
	evs := events(t, rec.Body.String())
	want := "message_start ping content_block_start content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := names(evs); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	tool := evs[5].data
	if tool.Get("index").Int() != 1 || tool.Get("content_block.type").Str != "tool_use" || tool.Get("content_block.id").Str != "call_1" ||
		tool.Get("content_block.name").Str != "weather" || tool.Get("content_block.input").Raw != "{}" {
		t.Fatalf("tool_use start %s", tool.Raw)
	}
	var args strings.Builder
	for _, e := range evs[6:8] {
		if d := e.data.Get("delta"); d.Get("type").Str == "input_json_delta" && e.data.Get("index").Int() == 1 {
			args.WriteString(d.Get("partial_json").Str)
		}
	}
	if args.String() != `{"city":"Köln"}` {
		t.Fatalf("arguments %q", args.String())
	}
	if evs[9].data.Get("index").Int() != 2 || evs[9].data.Get("content_block.name").Str != "clock" || evs[11].data.Get("index").Int() != 2 {
		t.Fatalf("second tool %s %s", evs[9].data.Raw, evs[11].data.Raw)
	}
	if md := evs[12].data; md.Get("delta.stop_reason").Str != "tool_use" || md.Get("usage.output_tokens").Int() != 8 {
		t.Fatalf("message_delta %s", md.Raw)
	}
}

func TestChatToMessagesStreamEnds(t *testing.T) {
	t.Run("no usage: the meter fills it", func(t *testing.T) {
		rec := translate(t, 200, "text/event-stream", chunks(
			`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`, `[DONE]`)...)
		evs := events(t, rec.Body.String())
		if md := evs[len(evs)-2].data; md.Get("type").Str != "message_delta" || md.Get("usage").Type != gjson.Null || md.Get("delta.stop_reason").Str != "end_turn" {
			t.Fatalf("message_delta %s", md.Raw)
		}
	})
	t.Run("stop sequence", func(t *testing.T) {
		rec := translate(t, 200, "text/event-stream", chunks(
			`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop","stop_reason":"\n\nHuman:"}]}`, `[DONE]`)...)
		evs := events(t, rec.Body.String())
		if md := evs[len(evs)-2].data; md.Get("delta.stop_reason").Str != "stop_sequence" || md.Get("delta.stop_sequence").Str != "\n\nHuman:" {
			t.Fatalf("message_delta %s", md.Raw)
		}
	})
	t.Run("finish without [DONE] is completed", func(t *testing.T) {
		rec := translate(t, 200, "text/event-stream", chunks(
			`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]}`)...)
		if got := names(events(t, rec.Body.String())); !strings.HasSuffix(got, "content_block_stop message_delta message_stop") {
			t.Fatalf("events %s", got)
		}
	})
	t.Run("cut stream is left open", func(t *testing.T) {
		rec := translate(t, 200, "text/event-stream", chunks(
			`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`)...)
		if got := names(events(t, rec.Body.String())); got != "message_start ping content_block_start content_block_delta" {
			t.Fatalf("events %s", got)
		}
	})
	t.Run("error chunk", func(t *testing.T) {
		rec := translate(t, 200, "text/event-stream", chunks(
			`{"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`,
			`{"error":{"code":502,"message":"upstream crashed"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`,
			`[DONE]`)...)
		evs := events(t, rec.Body.String())
		last := evs[len(evs)-1].data
		if got := names(evs); got != "message_start ping content_block_start content_block_delta error" ||
			last.Get("error.type").Str != "api_error" || last.Get("error.message").Str != "upstream crashed" || last.Get("error.code").Int() != http.StatusBadGateway {
			t.Fatalf("events %s; %s", got, last.Raw)
		}
	})
	t.Run("empty stream", func(t *testing.T) {
		rec := translate(t, 200, "text/event-stream", chunks(`[DONE]`)...)
		if got := names(events(t, rec.Body.String())); got != "message_start ping message_delta message_stop" {
			t.Fatalf("events %s", got)
		}
	})
}

func TestErrorType(t *testing.T) {
	for status, want := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
		403: "permission_error", 404: "not_found_error", 408: "timeout_error", 413: "invalid_request_error", 429: "rate_limit_error",
		500: "api_error", 502: "api_error", 503: "overloaded_error", 529: "overloaded_error"} {
		if got := ErrorType(status); got != want {
			t.Errorf("%d: %s, want %s", status, got, want)
		}
	}
}

// Anthropic-format reasoning_details (Bedrock's Claude through chat)
// are thinking blocks with their signatures and redacted_thinking
// blocks, whole and streamed, so that the client can send them back.
func TestChatToMessagesReasoningDetails(t *testing.T) {
	rec := translate(t, 200, "application/json", `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"42","reasoning":"think",`+
		`"reasoning_details":[{"type":"reasoning.text","text":"think","signature":"sig","format":"anthropic-claude-v1"},`+
		`{"type":"reasoning.encrypted","data":"ENC","format":"anthropic-claude-v1"}]},"finish_reason":"stop"}]}`)
	c := gjson.Get(rec.Body.String(), "content")
	if c.Get("0").Raw != `{"signature":"sig","thinking":"think","type":"thinking"}` || c.Get("1").Raw != `{"data":"ENC","type":"redacted_thinking"}` ||
		c.Get("2.text").Str != "42" {
		t.Fatalf("content %s", c.Raw)
	}
	rec = translate(t, 200, "text/event-stream", chunks(
		`{"choices":[{"index":0,"delta":{"role":"assistant","reasoning":"think","reasoning_details":[{"type":"reasoning.text","text":"think","format":"anthropic-claude-v1","index":0}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"sig","format":"anthropic-claude-v1","index":0}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"content":"42"},"finish_reason":"stop"}]}`,
		`[DONE]`)...)
	evs := events(t, rec.Body.String())
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := names(evs); got != want {
		t.Fatalf("events %s\nwant %s", got, want)
	}
	if d := evs[4].data; d.Get("index").Int() != 0 || d.Get("delta.type").Str != "signature_delta" || d.Get("delta.signature").Str != "sig" {
		t.Fatalf("signature delta %s", d.Raw)
	}
}
