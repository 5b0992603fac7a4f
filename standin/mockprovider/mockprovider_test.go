package mockprovider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// mockServer serves m, validated, on testgw's real listener.
func mockServer(t *testing.T, m *Handler) *httptest.Server {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return testgw.MockUpstream(t, m)
}

const mockChatBody = `{"model":"m1","messages":[
	{"role":"system","content":"You are terse."},
	{"role":"user","content":[{"type":"text","text":"Say hello"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"to the world"}]}
]%s}`

// Usage of mockChatBody: prompt (3+4)+(5+4), completion
// "Mock answer from m1: Say hello to the world".
const (
	mockChatText       = "Mock answer from m1: Say hello to the world"
	mockChatPrompt     = 16
	mockChatCompletion = 9
)

func mockChat(extra string) string {
	return strings.Replace(mockChatBody, "%s", extra, 1)
}

func TestMockChatCompletion(t *testing.T) {
	srv := mockServer(t, &Handler{})
	for _, path := range []string{"/v1/chat/completions", "/api/v1/chat/completions/"} {
		res := testgw.Post(t, srv, path, mockChat(""))
		if res.Status != http.StatusOK || res.Err != nil {
			t.Fatalf("%s: %d %v %s", path, res.Status, res.Err, res.Body)
		}
		j := gjson.Parse(res.Body)
		if !strings.HasPrefix(j.Get("id").Str, "chatcmpl-") || j.Get("object").Str != "chat.completion" ||
			j.Get("model").Str != "m1" || j.Get("created").Int() == 0 {
			t.Errorf("bad envelope: %s", res.Body)
		}
		if got := j.Get("choices.#").Int(); got != 1 {
			t.Fatalf("%d choices", got)
		}
		c := j.Get("choices.0")
		if c.Get("message.role").Str != "assistant" || c.Get("message.content").Str != mockChatText ||
			c.Get("finish_reason").Str != "stop" || c.Get("index").Int() != 0 {
			t.Errorf("bad choice: %s", c.Raw)
		}
		checkChatUsage(t, j.Get("usage"), mockChatPrompt, mockChatCompletion)
	}
}

func checkChatUsage(t *testing.T, u gjson.Result, prompt, completion int64) {
	t.Helper()
	if u.Get("prompt_tokens").Int() != prompt || u.Get("completion_tokens").Int() != completion ||
		u.Get("total_tokens").Int() != prompt+completion {
		t.Errorf("usage %s, want prompt %d completion %d", u.Raw, prompt, completion)
	}
}

// readChatStream checks a complete chat stream and returns its text, finish
// reason and usage.
func readChatStream(t *testing.T, res testgw.UpstreamResult) (text, finish string, usage gjson.Result) {
	t.Helper()
	if res.Status != http.StatusOK || res.Err != nil {
		t.Fatalf("%d %v %s", res.Status, res.Err, res.Body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	events := testgw.ParseSSE(t, res.Body)
	if len(events) < 4 || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %+v", events)
	}
	events = events[:len(events)-1]
	var b strings.Builder
	for i, ev := range events {
		if ev.Name != "" {
			t.Errorf("chat events have no event: line, got %q", ev.Name)
		}
		j := gjson.Parse(ev.Data)
		if j.Get("object").Str != "chat.completion.chunk" || !strings.HasPrefix(j.Get("model").Str, "m1") {
			t.Errorf("bad chunk %s", ev.Data)
		}
		switch {
		case i == 0:
			if j.Get("choices.0.delta.role").Str != "assistant" {
				t.Errorf("first chunk has no role: %s", ev.Data)
			}
		case i == len(events)-1:
			if j.Get("choices.#").Int() != 0 {
				t.Errorf("usage chunk has choices: %s", ev.Data)
			}
			usage = j.Get("usage")
		case i == len(events)-2:
			finish = j.Get("choices.0.finish_reason").Str
		default:
			if j.Get("choices.0.finish_reason").Type != gjson.Null {
				t.Errorf("content chunk with finish_reason: %s", ev.Data)
			}
			b.WriteString(j.Get("choices.0.delta.content").Str)
		}
	}
	return b.String(), finish, usage
}

func TestMockChatStream(t *testing.T) {
	srv := mockServer(t, &Handler{ChunkDelay: caddy.Duration(time.Millisecond)})
	plain := gjson.Parse(testgw.Post(t, srv, "/v1/chat/completions", mockChat("")).Body).Get("usage")
	// Usage ends the stream whether or not the client asked for it.
	for _, extra := range []string{`,"stream":true`, `,"stream":true,"stream_options":{"include_usage":true}`} {
		text, finish, usage := readChatStream(t, testgw.Post(t, srv, "/v1/chat/completions", mockChat(extra)))
		if text != mockChatText || finish != "stop" {
			t.Errorf("text %q finish %q", text, finish)
		}
		if usage.Raw != plain.Raw {
			t.Errorf("stream usage %s, plain usage %s", usage.Raw, plain.Raw)
		}
	}
}

func TestMockChatMaxTokens(t *testing.T) {
	srv := mockServer(t, &Handler{})
	for _, extra := range []string{`,"max_tokens":3`, `,"max_completion_tokens":3,"max_tokens":50`} {
		j := gjson.Parse(testgw.Post(t, srv, "/v1/chat/completions", mockChat(extra)).Body)
		if got := j.Get("choices.0.message.content").Str; got != "Mock answer from" {
			t.Errorf("%s: content %q", extra, got)
		}
		if got := j.Get("choices.0.finish_reason").Str; got != "length" {
			t.Errorf("%s: finish_reason %q", extra, got)
		}
		checkChatUsage(t, j.Get("usage"), mockChatPrompt, 3)

		text, finish, usage := readChatStream(t, testgw.Post(t, srv, "/v1/chat/completions", mockChat(extra+`,"stream":true`)))
		if text != "Mock answer from" || finish != "length" {
			t.Errorf("%s stream: text %q finish %q", extra, text, finish)
		}
		checkChatUsage(t, usage, mockChatPrompt, 3)
	}
	// A limit above the answer's length changes nothing.
	j := gjson.Parse(testgw.Post(t, srv, "/v1/chat/completions", mockChat(`,"max_tokens":9`)).Body)
	if j.Get("choices.0.finish_reason").Str != "stop" || j.Get("choices.0.message.content").Str != mockChatText {
		t.Errorf("max_tokens at the answer's length: %s", j.Raw)
	}
}

func TestMockChatEchoCap(t *testing.T) {
	srv := mockServer(t, &Handler{})
	long := strings.Repeat("w ", 1000)
	res := testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+long+`"}]}`)
	j := gjson.Parse(res.Body)
	checkChatUsage(t, j.Get("usage"), 1004, 4+mockEchoWords)

	// No user text still gets an answer (OpenAI refuses no message at
	// all; an empty one counts its message overhead).
	j = gjson.Parse(testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":""}]}`).Body)
	if j.Get("choices.0.message.content").Str != "Mock answer from m: "+mockNoUserText {
		t.Errorf("empty prompt: %s", j.Raw)
	}
	checkChatUsage(t, j.Get("usage"), 4, 7)
}

// Usage of testgw.ResponsesBody: instructions (2+4), messages (3+4) (2+4) (3+4)
// (5+4).
const (
	mockRespPrompt     = 35
	mockRespCompletion = 9
)

func mockResponses(extra string) string {
	return strings.Replace(testgw.ResponsesBody, "%s", extra, 1)
}

func checkResponse(t *testing.T, j gjson.Result, status, text string, input, output int64) {
	t.Helper()
	if !strings.HasPrefix(j.Get("id").Str, "resp_") || j.Get("object").Str != "response" ||
		j.Get("model").Str != "m1" || j.Get("created_at").Int() == 0 || j.Get("status").Str != status {
		t.Errorf("bad envelope: %s", j.Raw)
	}
	for field, want := range map[string]string{
		"error": "null", "metadata": "{}", "parallel_tool_calls": "true", "tool_choice": `"auto"`,
		"tools": "[]", "temperature": "null", "top_p": "null", "instructions": `"Be brief."`,
	} {
		if got := j.Get(field).Raw; got != want {
			t.Errorf("%s = %s, want %s", field, got, want)
		}
	}
	if j.Get("output.#").Int() != 1 {
		t.Fatalf("output: %s", j.Get("output").Raw)
	}
	item := j.Get("output.0")
	if item.Get("type").Str != "message" || !strings.HasPrefix(item.Get("id").Str, "msg_") ||
		item.Get("role").Str != "assistant" || item.Get("status").Str != status ||
		item.Get("content.0.type").Str != "output_text" || item.Get("content.0.text").Str != text ||
		item.Get("content.0.annotations").Raw != "[]" {
		t.Errorf("bad output item: %s", item.Raw)
	}
	u := j.Get("usage")
	if u.Get("input_tokens").Int() != input || u.Get("output_tokens").Int() != output ||
		u.Get("total_tokens").Int() != input+output {
		t.Errorf("usage %s, want input %d output %d", u.Raw, input, output)
	}
}

func TestMockResponses(t *testing.T) {
	srv := mockServer(t, &Handler{})
	res := testgw.Post(t, srv, "/v1/responses", mockResponses(""))
	if res.Status != http.StatusOK || res.Err != nil {
		t.Fatalf("%d %v %s", res.Status, res.Err, res.Body)
	}
	j := gjson.Parse(res.Body)
	checkResponse(t, j, "completed", mockChatText, mockRespPrompt, mockRespCompletion)
	if j.Get("incomplete_details").Type != gjson.Null || j.Get("max_output_tokens").Type != gjson.Null {
		t.Errorf("uncapped response: %s", res.Body)
	}

	// A plain string input is one user message.
	res = testgw.Post(t, srv, "/api/v1/responses", `{"model":"m1","input":"hi there"}`)
	u := gjson.Get(res.Body, "usage")
	if gjson.Get(res.Body, "output.0.content.0.text").Str != "Mock answer from m1: hi there" ||
		u.Get("input_tokens").Int() != 6 || u.Get("output_tokens").Int() != 6 {
		t.Errorf("string input: %s", res.Body)
	}
}

// readResponsesStream checks a complete Responses stream and returns the
// text of its deltas and its final event.
func readResponsesStream(t *testing.T, res testgw.UpstreamResult) (string, gjson.Result) {
	t.Helper()
	if res.Status != http.StatusOK || res.Err != nil {
		t.Fatalf("%d %v %s", res.Status, res.Err, res.Body)
	}
	events := testgw.ParseSSE(t, res.Body)
	if len(events) < 2 || events[len(events)-1].Data != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %+v", events)
	}
	events = events[:len(events)-1]
	var types []string
	var b strings.Builder
	var itemID string
	for i, ev := range events {
		j := gjson.Parse(ev.Data)
		typ := j.Get("type").Str
		if typ != ev.Name {
			t.Errorf("event: %q carries type %q", ev.Name, typ)
		}
		if got := j.Get("sequence_number"); got.Type != gjson.Number || got.Int() != int64(i) {
			t.Errorf("event %d has sequence_number %s", i, got.Raw)
		}
		switch typ {
		case "response.output_item.added":
			itemID = j.Get("item.id").Str
		case "response.output_text.delta":
			if j.Get("item_id").Str != itemID || j.Get("output_index").Raw != "0" || j.Get("content_index").Raw != "0" {
				t.Errorf("bad delta: %s", ev.Data)
			}
			b.WriteString(j.Get("delta").Str)
		}
		if len(types) == 0 || types[len(types)-1] != typ {
			types = append(types, typ)
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.done response.content_part.done response.output_item.done"
	if got := strings.Join(types[:len(types)-1], " "); got != want {
		t.Errorf("events:\n%s\nwant\n%s", got, want)
	}
	final := gjson.Parse(events[len(events)-1].Data)
	if final.Get("response.output.0.id").Str != itemID {
		t.Errorf("final item id differs from the streamed one: %s", final.Raw)
	}
	return b.String(), final
}

func TestMockResponsesStream(t *testing.T) {
	srv := mockServer(t, &Handler{})
	plain := gjson.Parse(testgw.Post(t, srv, "/v1/responses", mockResponses("")).Body)
	text, final := readResponsesStream(t, testgw.Post(t, srv, "/v1/responses", mockResponses(`,"stream":true`)))
	if text != mockChatText || final.Get("type").Str != "response.completed" {
		t.Errorf("text %q, final %s", text, final.Raw)
	}
	checkResponse(t, final.Get("response"), "completed", mockChatText, mockRespPrompt, mockRespCompletion)
	if final.Get("response.usage").Raw != plain.Get("usage").Raw {
		t.Errorf("stream usage %s, plain usage %s", final.Get("response.usage").Raw, plain.Get("usage").Raw)
	}
}

func TestMockResponsesMaxOutputTokens(t *testing.T) {
	srv := mockServer(t, &Handler{})
	// An answer longer than 16 words, the least max_output_tokens OpenAI's
	// API takes.
	const more = " and then count one two three four five six seven eight nine ten"
	body := func(extra string) string {
		return strings.Replace(mockResponses(extra), "Say hello to the world", "Say hello to the world"+more, 1)
	}
	const cut = "Mock answer from m1: Say hello to the world and then count one two three four"
	check := func(j gjson.Result) {
		t.Helper()
		checkResponse(t, j, "incomplete", cut, mockRespPrompt+int64(len(strings.Fields(more))), 16)
		if j.Get("incomplete_details.reason").Str != "max_output_tokens" || j.Get("max_output_tokens").Int() != 16 {
			t.Errorf("capped response: %s", j.Raw)
		}
	}
	check(gjson.Parse(testgw.Post(t, srv, "/v1/responses", body(`,"max_output_tokens":16`)).Body))

	text, final := readResponsesStream(t, testgw.Post(t, srv, "/v1/responses", body(`,"max_output_tokens":16,"stream":true`)))
	if text != cut || final.Get("type").Str != "response.incomplete" {
		t.Errorf("text %q, final %s", text, final.Raw)
	}
	check(final.Get("response"))
}

func TestMockInjectedErrors(t *testing.T) {
	srv := mockServer(t, &Handler{})
	for _, tc := range []struct {
		model  string
		status int
		typ    string
	}{
		{"x-error-400", http.StatusBadRequest, "invalid_request_error"},
		{"x-error-429", http.StatusTooManyRequests, "rate_limit_error"},
		{"x-error-500", http.StatusInternalServerError, "server_error"},
		{"error-502", http.StatusBadGateway, "server_error"},
	} {
		for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
			for _, stream := range []string{"false", "true"} {
				res := testgw.Post(t, srv, path, `{"model":"`+tc.model+`","stream":`+stream+`,"messages":[{"role":"user","content":"hi"}],"input":"hi"}`)
				if res.Status != tc.status || gjson.Get(res.Body, "error.type").Str != tc.typ ||
					gjson.Get(res.Body, "error.message").Str == "" {
					t.Errorf("%s %s stream=%s: %d %s", tc.model, path, stream, res.Status, res.Body)
				}
				if tc.status == http.StatusTooManyRequests {
					if res.Header.Get("Retry-After") != "1" || gjson.Get(res.Body, "error.code").Str != "rate_limit_exceeded" {
						t.Errorf("429: %v %s", res.Header, res.Body)
					}
				}
			}
		}
	}

	res := testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m-error-garbage","messages":[{"role":"user","content":"hi"}]}`)
	if res.Status != http.StatusOK || res.Err != nil || gjson.Valid(res.Body) {
		t.Errorf("garbage: %d %v %q", res.Status, res.Err, res.Body)
	}
}

func TestMockStreamBreak(t *testing.T) {
	srv := mockServer(t, &Handler{})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		// Streamed: a few chunks, then the connection is cut.
		res := testgw.Post(t, srv, path, `{"model":"m-stream-break","stream":true,"input":"one two three four five",
			"messages":[{"role":"user","content":"one two three four five"}]}`)
		if res.Status != http.StatusOK || !errors.Is(res.Err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: status %d, read error %v, want unexpected EOF", path, res.Status, res.Err)
		}
		var deltas int
		for _, ev := range testgw.ParseSSE(t, res.Body) {
			j := gjson.Parse(ev.Data)
			if ev.Data == "[DONE]" || j.Get("usage.total_tokens").Exists() || j.Get("response.usage.total_tokens").Exists() {
				t.Errorf("%s: a cut stream must not finish: %s", path, ev.Data)
			}
			if j.Get("choices.0.delta.content").Str != "" || j.Get("type").Str == "response.output_text.delta" {
				deltas++
			}
		}
		if deltas != mockBreakAfter {
			t.Errorf("%s: %d text chunks before the break, want %d", path, deltas, mockBreakAfter)
		}

		// Plain: half a JSON body.
		res = testgw.Post(t, srv, path, `{"model":"m-stream-break","input":"hi","messages":[{"role":"user","content":"hi"}]}`)
		if !errors.Is(res.Err, io.ErrUnexpectedEOF) || gjson.Valid(res.Body) {
			t.Errorf("%s plain: read error %v, body %q", path, res.Err, res.Body)
		}
	}
}

func TestMockLatency(t *testing.T) {
	srv := mockServer(t, &Handler{Latency: caddy.Duration(80 * time.Millisecond)})
	body := mockChat("")
	for _, tc := range []struct {
		header string
		min    time.Duration
	}{
		{"", 80 * time.Millisecond},
		{"150ms", 150 * time.Millisecond},
	} {
		start := time.Now()
		res := testgw.Post(t, srv, "/v1/chat/completions", body, mockLatencyHeader, tc.header)
		if d := time.Since(start); res.Status != http.StatusOK || d < tc.min {
			t.Errorf("X-Mock-Latency %q: status %d after %v, want at least %v", tc.header, res.Status, d, tc.min)
		}
	}
	// Zero overrides the configured latency.
	start := time.Now()
	testgw.Post(t, srv, "/v1/chat/completions", body, mockLatencyHeader, "0s")
	if d := time.Since(start); d >= 80*time.Millisecond {
		t.Errorf("X-Mock-Latency 0s took %v", d)
	}
	for _, bad := range []string{"soon", "-1s"} {
		if res := testgw.Post(t, srv, "/v1/chat/completions", body, mockLatencyHeader, bad); res.Status != http.StatusBadRequest {
			t.Errorf("X-Mock-Latency %q: %d %s", bad, res.Status, res.Body)
		}
	}
}

func TestMockSlowRespectsCancellation(t *testing.T) {
	m := &Handler{}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m-slow","messages":[{"role":"user","content":"hi"}]}`))
	w := httptest.NewRecorder()
	start := time.Now()
	if err := m.ServeHTTP(w, r, nil); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a cancelled slow request took %v", d)
	}
	if w.Body.Len() != 0 {
		t.Errorf("a cancelled request got an answer: %q", w.Body.String())
	}

	// Without cancellation, slow delays the answer.
	srv := mockServer(t, m)
	client := srv.Client()
	client.Timeout = 300 * time.Millisecond
	resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m-slow","messages":[{"role":"user","content":"hi"}]}`))
	if err == nil {
		resp.Body.Close()
		t.Errorf("slow model answered within 300ms: %d", resp.StatusCode)
	}
}

func TestMockChunkDelay(t *testing.T) {
	srv := mockServer(t, &Handler{ChunkDelay: caddy.Duration(20 * time.Millisecond)})
	start := time.Now()
	readChatStream(t, testgw.Post(t, srv, "/v1/chat/completions", mockChat(`,"stream":true`)))
	if d, want := time.Since(start), time.Duration(mockChatCompletion-1)*20*time.Millisecond; d < want {
		t.Errorf("stream took %v, want at least %v", d, want)
	}
}

func TestMockBadRequests(t *testing.T) {
	srv := mockServer(t, &Handler{})
	for _, path := range []string{"/v1/chat/completions", "/v1/responses"} {
		for _, body := range []string{`{"model":`, ``, `[1,2]`, `{"messages":[]}`, `{"model":""}`, `{"model":5}`} {
			res := testgw.Post(t, srv, path, body)
			if res.Status != http.StatusBadRequest || gjson.Get(res.Body, "error.code").Int() != http.StatusBadRequest ||
				gjson.Get(res.Body, "error.message").Str == "" {
				t.Errorf("%s %q: %d %s", path, body, res.Status, res.Body)
			}
		}
		res := testgw.Do(t, srv, http.MethodGet, path, "")
		if res.Status != http.StatusMethodNotAllowed || res.Header.Get("Allow") != http.MethodPost {
			t.Errorf("GET %s: %d %v", path, res.Status, res.Header)
		}
	}
	if res := testgw.Post(t, srv, "/v1/models", `{}`); res.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST models: %d", res.Status)
	}
}

func TestMockModelsAndNext(t *testing.T) {
	srv := mockServer(t, &Handler{})
	res := testgw.Do(t, srv, http.MethodGet, "/v1/models", "")
	j := gjson.Parse(res.Body)
	if res.Status != http.StatusOK || j.Get("object").Str != "list" || j.Get("data.#").Int() != int64(len(mockModels)) ||
		j.Get("data.0.id").Str != "tollgate-mock" || j.Get("data.0.object").Str != "model" ||
		j.Get("data.0.owned_by").Str != "tollgate-mock" || j.Get("data.0.created").Int() == 0 {
		t.Errorf("models: %d %s", res.Status, res.Body)
	}
	for _, path := range []string{"/", "/v1/embeddings", "/v1/responses/resp_1"} {
		if res := testgw.Post(t, srv, path, `{"model":"m"}`); res.Status != http.StatusTeapot {
			t.Errorf("%s: %d, want the next handler", path, res.Status)
		}
	}
}

func TestMockValidateRejectsNegativeDelays(t *testing.T) {
	for _, m := range []*Handler{{Latency: -1}, {ChunkDelay: -1}} {
		if err := m.Validate(); err == nil {
			t.Errorf("%+v: no error", *m)
		}
	}
}

// TestMockPromptTokensBytes: the adversarial count is a token per byte of
// text and name, 4 a message, 3 for the answer, the gateway's
// DefaultMediaPartTokens an image (so that its prompt bound holds), the same
// plain and streamed, chat and Responses.
func TestMockPromptTokensBytes(t *testing.T) {
	srv := mockServer(t, &Handler{PromptTokens: "bytes"})
	for _, tc := range []struct {
		path, body string
		want       int64
	}{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"a a a"},{"role":"user","name":"bob","content":"漢字🎉"}]}`,
			5 + 4 + 3 + 10 + 4 + 3},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"12345"},{"type":"image_url","image_url":{"url":"https://x/i.png"}}]}]}`,
			5 + prompt.DefaultMediaPartTokens + 4 + 3},
		{"/v1/responses", `{"model":"m","instructions":"be","input":"x y"}`, 2 + 4 + 3 + 4 + 3},
		{"/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"ab"}]}]}`, 2 + 4 + 3},
	} {
		for _, stream := range []string{"false", "true"} {
			body := strings.Replace(tc.body, `{"model":"m"`, `{"model":"m","stream":`+stream, 1)
			res := testgw.Post(t, srv, tc.path, body)
			var usage gjson.Result
			if stream == "false" {
				usage = gjson.Get(res.Body, "usage")
			} else {
				for _, ev := range testgw.ParseSSE(t, res.Body) {
					if u := gjson.Get(ev.Data, "usage"); u.IsObject() {
						usage = u
					}
					if u := gjson.Get(ev.Data, "response.usage"); u.IsObject() {
						usage = u
					}
				}
			}
			got := usage.Get("prompt_tokens").Int() + usage.Get("input_tokens").Int()
			if got != tc.want {
				t.Errorf("%s stream=%s: prompt tokens %d, want %d (%s)", body, stream, got, tc.want, usage.Raw)
			}
		}
	}
	if err := (&Handler{PromptTokens: "runes"}).Validate(); err == nil {
		t.Error("prompt_tokens runes accepted")
	}
}
