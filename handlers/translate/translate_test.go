package translate

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/standin/mockprovider"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestResponsesToChat(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"string input", `{"model":"m","input":"Hi","max_output_tokens":50,"temperature":0.5,"top_p":1,"store":true}`,
			`{"model":"m","messages":[{"role":"user","content":"Hi"}],"max_tokens":50,"temperature":0.5,"top_p":1}`},
		{"stream asks for usage", `{"model":"m","input":"Hi","stream":true}`,
			`{"model":"m","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"instructions and message items", `{"model":"m","instructions":"Be brief.","input":[
			{"role":"developer","content":"Plain words."},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"Où est "},{"type":"input_text","text":"le café?"}]},
			{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"See [Café](https://x.test).",
				"annotations":[{"type":"url_citation","url":"https://x.test","title":"Café","start_index":4,"end_index":26}]}]},
			{"type":"message","role":"user","content":[{"type":"input_text","text":"And this?"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]}
		]}`,
			`{"model":"m","messages":[
				{"role":"system","content":"Be brief."},
				{"role":"system","content":"Plain words."},
				{"role":"user","content":[{"type":"text","text":"Où est "},{"type":"text","text":"le café?"}]},
				{"role":"assistant","content":"See [Café](https://x.test)."},
				{"role":"user","content":[{"type":"text","text":"And this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]}
			]}`},
		{"function tools and calls", `{"model":"m","input":[
			{"role":"user","content":"Weather in Paris and Rome?"},
			{"type":"function_call","call_id":"call_1","name":"weather","arguments":"{\"city\":\"Paris\"}"},
			{"type":"function_call","call_id":"call_2","name":"weather","arguments":"{\"city\":\"Rome\"}"},
			{"type":"function_call_output","call_id":"call_1","output":"18C"},
			{"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"21C"}]},
			{"type":"reasoning","id":"rs_1","summary":[]}
		],
		"tools":[{"type":"function","name":"weather","description":"Weather","parameters":{"type":"object"},"strict":true},{"type":"service:web_search","parameters":{"max_results":3}}],
		"tool_choice":{"type":"function","name":"weather"},"parallel_tool_calls":false}`,
			`{"model":"m","messages":[
				{"role":"user","content":"Weather in Paris and Rome?"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
					{"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"18C"},
				{"role":"tool","tool_call_id":"call_2","content":"21C"}
			],
			"parallel_tool_calls":false,
			"tools":[{"type":"function","function":{"name":"weather","description":"Weather","parameters":{"type":"object"},"strict":true}},{"type":"service:web_search","parameters":{"max_results":3}}],
			"tool_choice":{"type":"function","function":{"name":"weather"}}}`},
		{"json schema format", `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"r","schema":{"type":"object"},"strict":true}},"reasoning":{"effort":"low"},"tool_choice":"required","parallel_tool_calls":false}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"low",
			  "response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object"},"strict":true}}}`},
		{"json object and text formats", `{"model":"m","input":"x","text":{"format":{"type":"json_object"}}}`,
			`{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResponsesToChat([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			testgw.JSONEqual(t, got, tt.want)
		})
	}
}

func TestResponsesToChatErrors(t *testing.T) {
	tests := []struct{ in, field string }{
		{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id:"},
		{`{"model":"m","input":[{"type":"item_reference","id":"x"}]}`, `input[0].type: "item_reference"`},
		{`{"model":"m","input":["x"]}`, "input[0]:"},
		{`{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role:"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, `input[0].content[0].type: "input_audio"`},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "input[0].content[0].image_url:"},
		{`{"model":"m","input":[{"type":"function_call","name":"f"}]}`, "input[0]: a function_call needs call_id"},
		{`{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id:"},
		{`{"model":"m","input":"x","tools":[{"type":"function"}]}`, "tools[0].name:"},
		{`{"model":"m","input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type:"},
		{`{"model":"m","input":"x","text":{"format":{"type":"json_schema"}}}`, "text.format.name:"},
		{`{"model":"m","input":[{"role":"system","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content: only user messages"},
	}
	for _, tt := range tests {
		_, err := ResponsesToChat([]byte(tt.in))
		if err == nil || !strings.HasPrefix(err.Error(), tt.field) {
			t.Errorf("%s: error %v, want one starting %q", tt.in, err, tt.field)
		}
	}
}

// translateAnswer runs a chat answer through ChatToResponses into a recorder, one
// Write per element of parts.
func translateAnswer(t *testing.T, contentType string, status int, parts ...string) (*httptest.ResponseRecorder, *ChatToResponses) {
	t.Helper()
	rec := httptest.NewRecorder()
	cw := NewChatToResponses(rec, NewEcho([]byte(`{"instructions":"Be brief.","max_output_tokens":100,"metadata":{"k":"v"}}`)), "gen-1", "m-up")
	cw.Header().Set("Content-Type", contentType)
	cw.Header().Set("Content-Length", "999")
	cw.WriteHeader(status)
	for _, p := range parts {
		if _, err := cw.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	cw.Finish(nil)
	return rec, cw
}

func TestChatToResponsesJSON(t *testing.T) {
	chat := `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"m-up-2024",
		"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Voilà [Café](https://x.test) ✓",
			"annotations":[{"type":"url_citation","url_citation":{"url":"https://x.test","title":"Café","content":"Le café","start_index":6,"end_index":28}}],
			"tool_calls":[{"id":"call_9","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Nice\"}"}}]}}],
		"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}`
	rec, _ := translateAnswer(t, "application/json", http.StatusOK, chat[:40], chat[40:])
	if rec.Header().Get("Content-Length") != "" {
		t.Errorf("Content-Length %q kept for a converted body", rec.Header().Get("Content-Length"))
	}
	j := gjson.Parse(rec.Body.String())
	if j.Get("id").Str != "gen-1" || j.Get("object").Str != "response" || j.Get("created_at").Int() != 1700000000 ||
		j.Get("model").Str != "m-up-2024" || j.Get("status").Str != "completed" || j.Get("instructions").Str != "Be brief." ||
		j.Get("max_output_tokens").Int() != 100 || j.Get("metadata.k").Str != "v" || j.Get("tools").Raw != "[]" {
		t.Errorf("envelope: %s", j.Raw)
	}
	msg := j.Get("output.0")
	if msg.Get("type").Str != "message" || msg.Get("role").Str != "assistant" || msg.Get("status").Str != "completed" ||
		!strings.HasPrefix(msg.Get("id").Str, "msg_") || msg.Get("content.0.type").Str != "output_text" ||
		msg.Get("content.0.text").Str != "Voilà [Café](https://x.test) ✓" {
		t.Errorf("message item: %s", msg.Raw)
	}
	testgw.JSONEqual(t, []byte(msg.Get("content.0.annotations").Raw),
		`[{"type":"url_citation","url":"https://x.test","title":"Café","content":"Le café","start_index":6,"end_index":28}]`)
	testgw.JSONEqual(t, []byte(j.Get("output.1").Raw),
		`{"type":"function_call","id":"fc_9","call_id":"call_9","name":"weather","arguments":"{\"city\":\"Nice\"}","status":"completed"}`)
	testgw.JSONEqual(t, []byte(j.Get("usage").Raw),
		`{"input_tokens":12,"input_tokens_details":{"cached_tokens":4},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":19}`)

	// Cut by max tokens: incomplete.
	rec, _ = translateAnswer(t, "application/json", http.StatusOK,
		`{"choices":[{"finish_reason":"length","message":{"role":"assistant","content":"Half"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`)
	j = gjson.Parse(rec.Body.String())
	if j.Get("status").Str != "incomplete" || j.Get("incomplete_details.reason").Str != "max_output_tokens" ||
		j.Get("output.0.status").Str != "incomplete" || j.Get("usage.total_tokens").Int() != 2 || j.Get("completed_at").Type != gjson.Null {
		t.Errorf("length: %s", j.Raw)
	}
}

func TestChatToResponsesPassesFailuresThrough(t *testing.T) {
	for _, tt := range []struct {
		ct     string
		status int
		body   string
	}{
		{"application/json", http.StatusTooManyRequests, `{"error":{"message":"slow down"}}`},
		{"application/json", http.StatusOK, `<html>not json`},
		{"application/json", http.StatusOK, `{"id":"x","object":"list"}`},
		{"application/json", http.StatusOK, `{"choices":[{"message":{"content":"cut`},
	} {
		rec, _ := translateAnswer(t, tt.ct, tt.status, tt.body)
		if rec.Code != tt.status || rec.Body.String() != tt.body {
			t.Errorf("%d %q became %d %q", tt.status, tt.body, rec.Code, rec.Body.String())
		}
	}
}

// chatStream is a chat completion stream: multi-byte text, an annotation,
// a tool call, a finish chunk, a usage chunk and [DONE].
var chatStream = []string{
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{"content":"Grüße "},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{"content":"aus [Köln](https://k.test) 🎉"},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{"annotations":[{"type":"url_citation","url_citation":{"url":"https://k.test","title":"Köln","start_index":10,"end_index":32}}]},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_5","type":"function","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"id":"c1","object":"chat.completion.chunk","created":1700000001,"model":"m-up","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`,
	`[DONE]`,
}

// chatEvents makes stream events of data payloads.
func chatEvents(data ...string) []string {
	out := make([]string, len(data))
	for i, d := range data {
		out[i] = "data: " + d + "\n\n"
	}
	return out
}

// checkTranslatedStream checks a converted stream and returns its event
// types and final event.
func checkTranslatedStream(t *testing.T, body string) ([]string, gjson.Result) {
	t.Helper()
	events := testgw.ParseSSE(t, body)
	if len(events) == 0 || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %s", body)
	}
	events = events[:len(events)-1]
	var types []string
	for i, ev := range events {
		j := gjson.Parse(ev.Data)
		if j.Get("type").Str != ev.Name {
			t.Errorf("event: %q carries type %q", ev.Name, j.Get("type").Str)
		}
		if j.Get("sequence_number").Raw != itoa(i) {
			t.Errorf("event %d has sequence_number %s", i, j.Get("sequence_number").Raw)
		}
		types = append(types, ev.Name)
	}
	return types, gjson.Parse(events[len(events)-1].Data)
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestChatToResponsesStream(t *testing.T) {
	// Event by event: each chunk's events are written before the next chunk
	// arrives.
	rec := httptest.NewRecorder()
	cw := NewChatToResponses(rec, NewEcho(nil), "gen-2", "m-up")
	cw.Header().Set("Content-Type", "text/event-stream")
	cw.WriteHeader(http.StatusOK)
	for i, ev := range chatEvents(chatStream...) {
		if _, err := cw.Write([]byte(ev)); err != nil {
			t.Fatal(err)
		}
		if err := cw.FlushError(); err != nil {
			t.Fatal(err)
		}
		if i == 1 && !strings.Contains(rec.Body.String(), `"delta":"Grüße "`) {
			t.Fatalf("first delta not forwarded at once: %s", rec.Body.String())
		}
	}
	cw.Finish(nil)
	if !rec.Flushed {
		t.Error("stream never flushed")
	}
	types, final := checkTranslatedStream(t, rec.Body.String())
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.annotation.added",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed"}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("events\n%v\nwant\n%v", types, want)
	}
	r := final.Get("response")
	text := "Grüße aus [Köln](https://k.test) 🎉"
	if r.Get("id").Str != "gen-2" || r.Get("status").Str != "completed" || r.Get("created_at").Int() != 1700000001 ||
		r.Get("output.0.content.0.text").Str != text || r.Get("output.1.arguments").Str != `{"a":1}` ||
		r.Get("output.1.call_id").Str != "call_5" || r.Get("usage.input_tokens").Int() != 9 ||
		r.Get("usage.output_tokens").Int() != 5 || r.Get("usage.total_tokens").Int() != 14 {
		t.Errorf("final: %s", r.Raw)
	}
	ann := r.Get("output.0.content.0.annotations.0")
	testgw.JSONEqual(t, []byte(ann.Raw), `{"type":"url_citation","url":"https://k.test","title":"Köln","start_index":10,"end_index":32}`)
	// The indices are the upstream's (code points here): the span is the link.
	runes := []rune(text)
	if got := string(runes[ann.Get("start_index").Int():ann.Get("end_index").Int()]); got != "[Köln](https://k.test)" {
		t.Errorf("cited span %q", got)
	}

	// Byte by byte, cutting through multi-byte characters: the same text.
	whole := strings.Join(chatEvents(chatStream...), "")
	parts := make([]string, 0, len(whole))
	for i := range len(whole) {
		parts = append(parts, whole[i:i+1])
	}
	rec2, _ := translateAnswer(t, "text/event-stream", http.StatusOK, parts...)
	types2, final2 := checkTranslatedStream(t, rec2.Body.String())
	if !reflect.DeepEqual(types2, want) || final2.Get("response.output.0.content.0.text").Str != text ||
		!utf8.ValidString(rec2.Body.String()) {
		t.Errorf("byte-wise stream: %v %s", types2, final2.Raw)
	}
}

func TestChatToResponsesStreamEnds(t *testing.T) {
	// Cut by max tokens.
	rec, _ := translateAnswer(t, "text/event-stream", http.StatusOK, chatEvents(
		`{"created":1,"model":"m","choices":[{"delta":{"content":"a"}}]}`,
		`{"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
		`[DONE]`)...)
	_, final := checkTranslatedStream(t, rec.Body.String())
	if final.Get("type").Str != "response.incomplete" || final.Get("response.incomplete_details.reason").Str != "max_output_tokens" {
		t.Errorf("length: %s", final.Raw)
	}

	// An error chunk: an error event, then response.failed; nothing after.
	rec, _ = translateAnswer(t, "text/event-stream", http.StatusOK, chatEvents(
		`{"created":1,"model":"m","choices":[{"delta":{"content":"a"}}]}`,
		`{"error":{"code":502,"message":"upstream fell over"},"choices":[{"delta":{"content":""},"finish_reason":"error"}]}`,
		`{"choices":[{"delta":{"content":"late"}}]}`,
		`[DONE]`)...)
	types, final := checkTranslatedStream(t, rec.Body.String())
	if n := len(types); n < 2 || types[n-2] != "error" || types[n-1] != "response.failed" ||
		final.Get("response.status").Str != "failed" || final.Get("response.error.message").Str != "upstream fell over" ||
		strings.Contains(rec.Body.String(), "late") {
		t.Errorf("error chunk: %v %s", types, rec.Body.String())
	}
	events := testgw.ParseSSE(t, rec.Body.String())
	if e := gjson.Parse(events[len(events)-3].Data); e.Get("code").Raw != `"502"` || e.Get("message").Str != "upstream fell over" {
		t.Errorf("error event: %s", e.Raw)
	}

	// Finished without [DONE]: completed once the proxy returned cleanly.
	rec, _ = translateAnswer(t, "text/event-stream", http.StatusOK, chatEvents(
		`{"created":1,"model":"m","choices":[{"delta":{"content":"a"}}]}`,
		`{"choices":[{"delta":{},"finish_reason":"stop"}]}`)...)
	if _, final = checkTranslatedStream(t, rec.Body.String()); final.Get("type").Str != "response.completed" {
		t.Errorf("no [DONE]: %s", rec.Body.String())
	}

	// [DONE] alone: an empty, completed response.
	rec, _ = translateAnswer(t, "text/event-stream", http.StatusOK, chatEvents(`[DONE]`)...)
	if types, final = checkTranslatedStream(t, rec.Body.String()); strings.Join(types, " ") != "response.created response.in_progress response.completed" ||
		final.Get("response.output").Raw != "[]" || final.Get("response.id").Str != "gen-1" {
		t.Errorf("empty stream: %v %s", types, final.Raw)
	}

	// Cut mid-answer: left open, for the meter's response.failed.
	rec = httptest.NewRecorder()
	cw := NewChatToResponses(rec, nil, "g", "m")
	cw.Header().Set("Content-Type", "text/event-stream")
	for _, ev := range chatEvents(`{"created":1,"model":"m","choices":[{"delta":{"content":"a"}}]}`) {
		_, _ = cw.Write([]byte(ev))
	}
	cw.Finish(http.ErrAbortHandler)
	if strings.Contains(rec.Body.String(), "response.completed") || strings.Contains(rec.Body.String(), "[DONE]") {
		t.Errorf("a cut stream was completed: %s", rec.Body.String())
	}
}

// TestChatTranslationMatchesNative sends the same Responses request to the
// mock's Responses API and, translated, to its Chat Completions API: the
// answers agree on text, annotations (the citing model) and usage, plain
// and streamed.
func TestChatTranslationMatchesNative(t *testing.T) {
	srv := testgw.MockUpstream(t, new(mockprovider.Handler))
	body := strings.Replace(testgw.ResponsesBody, `"model":"m1"`, `"model":"m1-cite"`, 1)
	for _, stream := range []bool{false, true} {
		req := strings.Replace(body, "%s", map[bool]string{false: "", true: `,"stream":true`}[stream], 1)
		native := testgw.Post(t, srv, "/v1/responses", req)
		chatBody, err := ResponsesToChat([]byte(req))
		if err != nil {
			t.Fatal(err)
		}
		chat := testgw.Post(t, srv, "/v1/chat/completions", string(chatBody))
		if native.Status != 200 || chat.Status != 200 || native.Err != nil || chat.Err != nil {
			t.Fatalf("%d %v %s / %d %v %s", native.Status, native.Err, native.Body, chat.Status, chat.Err, chat.Body)
		}
		rec, _ := translateAnswer(t, chat.Header.Get("Content-Type"), chat.Status, chat.Body)
		got, want := gjson.Parse(rec.Body.String()), gjson.Parse(native.Body)
		if stream {
			var nt, tt []string
			nt, want = checkTranslatedStream(t, native.Body)
			tt, got = checkTranslatedStream(t, rec.Body.String())
			if !reflect.DeepEqual(nt, tt) {
				t.Errorf("event types differ:\nnative     %v\ntranslated %v", nt, tt)
			}
			got, want = got.Get("response"), want.Get("response")
		}
		for _, path := range []string{"status", "output.0.type", "output.0.role", "output.0.status",
			"output.0.content.0.text", "output.0.content.0.annotations", "usage", "instructions"} {
			if g, w := got.Get(path), want.Get(path); g.Raw != w.Raw && !jsonSame(g.Raw, w.Raw) {
				t.Errorf("stream=%v %s: translated %s, native %s", stream, path, g.Raw, w.Raw)
			}
		}
		if n := got.Get("output.0.content.0.annotations.#").Int(); n != 2 {
			t.Errorf("stream=%v: %d annotations", stream, n)
		}
	}
}

func jsonSame(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

// FuzzResponsesToChat: any body translates or fails with an error, and a
// translation is a JSON object with messages.
func FuzzResponsesToChat(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"Hi","stream":true,"max_output_tokens":5}`,
		testgw.ResponsesBody,
		`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"text":"x"}]}]}`,
		`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"},{"type":"input_file","file_id":"f"}]}],"tools":[{"type":"function","name":"f"},{"type":"x"}],"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"n"}}}`,
		`[]`, `{"input":7}`, `{"input":[null,{"role":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ResponsesToChat(body)
		if err != nil {
			return
		}
		if j := gjson.ParseBytes(out); !j.IsObject() || !j.Get("messages").Exists() {
			t.Fatalf("translation %s of %s", out, body)
		}
	})
}

// FuzzChatToResponsesStream: any chat stream, cut anywhere, converts
// without panicking, and every event it writes is numbered in order.
func FuzzChatToResponsesStream(f *testing.F) {
	f.Add(strings.Join(chatEvents(chatStream...), ""), 7)
	f.Add("data: {\"error\":{\"message\":\"x\"}}\n\ndata: [DONE]\n\n", 3)
	f.Add("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1},{\"index\":2,\"function\":{\"arguments\":\"{\"}}]}}]}\n\n", 1)
	f.Fuzz(func(t *testing.T, stream string, cut int) {
		rec := httptest.NewRecorder()
		cw := NewChatToResponses(rec, nil, "g", "m")
		cw.Header().Set("Content-Type", "text/event-stream")
		if cut < 0 || cut > len(stream) {
			cut = len(stream) / 2
		}
		_, _ = cw.Write([]byte(stream[:cut]))
		_, _ = cw.Write([]byte(stream[cut:]))
		cw.Finish(nil)
		seq := int64(0)
		for ev := range strings.SplitSeq(rec.Body.String(), "\n\n") {
			i := strings.Index(ev, "data: ")
			if i < 0 {
				continue
			}
			data := ev[i+len("data: "):]
			if data == "[DONE]" {
				continue
			}
			if got := gjson.Get(data, "sequence_number").Int(); got != seq {
				t.Fatalf("sequence_number %d, want %d in %s", got, seq, rec.Body.String())
			}
			seq++
		}
	})
}

// The X vendor's item counts survive the translation of its chat usage,
// so that X search is charged on a translated request too.
func TestChatToResponsesKeepsXSearchUsage(t *testing.T) {
	cw := NewChatToResponses(nil, nil, "gen-1", "grok")
	out, ok := cw.ConvertJSON([]byte(`{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":2,"x_search_usage":{"posts_fetched":3,"profiles_fetched":1}}}`))
	if !ok || gjson.GetBytes(out, "usage.x_search_usage.posts_fetched").Int() != 3 || gjson.GetBytes(out, "usage.x_search_usage.profiles_fetched").Int() != 1 {
		t.Fatalf("%s", out)
	}
	out, _ = cw.ConvertJSON([]byte(`{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`))
	if gjson.GetBytes(out, "usage.x_search_usage").Exists() {
		t.Fatalf("%s", out)
	}
}

func TestResponsesToChatKeepsCacheControl(t *testing.T) {
	out, err := ResponsesToChat([]byte(`{"model":"m","input":[{"role":"system","content":[{"type":"input_text","text":"ctx","cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"user","content":[{"type":"input_text","text":"q"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	sys := gjson.GetBytes(out, "messages.0")
	if sys.Get("role").Str != "system" || sys.Get("content.0.cache_control.type").Str != "ephemeral" || sys.Get("content.0.text").Str != "ctx" {
		t.Errorf("system %s", sys.Raw)
	}
	if user := gjson.GetBytes(out, "messages.1.content"); user.Str != "q" {
		t.Errorf("user %s", user.Raw)
	}
}
