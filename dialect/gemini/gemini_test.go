package gemini

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func TestFromChat(t *testing.T) {
	body, err := fromChat([]byte(`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"developer","content":[{"type":"text","text":"D"}]},`+
		`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},`+
		`{"role":"assistant","content":"ok","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},`+
		`{"role":"tool","tool_call_id":"c1","content":"{\"t\":2}"},{"role":"tool","tool_call_id":"c1","content":"plain"}],`+
		`"max_tokens":7,"temperature":0.2,"stop":"END","seed":3,"user":"u","logprobs":true,"reasoning_effort":"high",`+
		`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},`+
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	b := gjson.ParseBytes(body)
	for path, want := range map[string]string{
		"systemInstruction.parts.#.text":                      `["S","D"]`,
		"contents.#.role":                                     `["user","model","user"]`,
		"contents.0.parts.1.inlineData":                       `{"mimeType":"image/png","data":"AAAA"}`,
		"contents.1.parts.1.functionCall":                     `{"name":"f","args":{"a":1}}`,
		"contents.2.parts.0.functionResponse":                 `{"name":"f","response":{"t":2}}`,
		"contents.2.parts.1.functionResponse.response":        `{"content":"plain"}`,
		"generationConfig.maxOutputTokens":                    `7`,
		"generationConfig.stopSequences":                      `["END"]`,
		"generationConfig.thinkingConfig":                     `{"thinkingBudget":24576,"includeThoughts":true}`,
		"generationConfig.responseJsonSchema":                 `{"type":"object"}`,
		"toolConfig.functionCallingConfig":                    `{"mode":"ANY","allowedFunctionNames":["f"]}`,
		"tools.0.functionDeclarations.0.parametersJsonSchema": `{"type":"object"}`,
	} {
		if got := b.Get(path).Raw; got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	for _, gone := range []string{"model", "user", "logprobs", "seed"} {
		if b.Get(gone).Exists() {
			t.Errorf("%s sent: %s", gone, body)
		}
	}
	for in, msg := range map[string]string{
		`{"messages":[{"role":"user","content":"a"}],"n":2}`:                                                                     "n:",
		`{"messages":[{"role":"user","content":"a"}],"functions":[]}`:                                                            "functions:",
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`:                  "messages[0].content[0].image_url.url",
		`{"messages":[{"role":"tool","tool_call_id":"x","content":"a"}]}`:                                                        "messages[0].tool_call_id",
		`{"messages":[{"role":"wizard","content":"a"}]}`:                                                                         "messages[0].role",
		`{"messages":[{"role":"system","content":"a"}]}`:                                                                         "messages:",
		`{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"web_search"}]}`:                                           "tools[0].type",
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","function":{"name":"f","arguments":"[1]"}}]}]}`: "arguments",
	} {
		if _, err := fromChat([]byte(in), 0, false); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", in, err, msg)
		}
	}
}

func post(t *testing.T, d dialect.Dialect, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	w := d.ToChat(rec, "gemini-x", 1<<20)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(body))
	w.Finish()
	return rec
}

// Every public effort is a thinking budget; max is Gemini's largest.
func TestEffortBudgets(t *testing.T) {
	for effort, want := range map[string]string{
		"max": `{"thinkingBudget":32768,"includeThoughts":true}`, "xhigh": `{"thinkingBudget":32768,"includeThoughts":true}`,
		"high": `{"thinkingBudget":24576,"includeThoughts":true}`, "minimal": `{"thinkingBudget":512,"includeThoughts":true}`,
		"none": `{"thinkingBudget":0}`,
	} {
		body, err := fromChat([]byte(`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"`+effort+`"}`), 0, false)
		if got := gjson.GetBytes(body, "generationConfig.thinkingConfig").Raw; err != nil || got != want {
			t.Errorf("%s: %s, want %s (%v)", effort, got, want, err)
		}
	}
}

func TestToChat(t *testing.T) {
	d, _ := New(dialect.Options{Model: "gemini-x"})
	rec := post(t, d, "application/json", `{"candidates":[{"content":{"role":"model","parts":[{"text":"thinking","thought":true},{"text":"Hi"},{"functionCall":{"name":"f","args":{"a":1}}}]},"finishReason":"STOP"}],`+
		`"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":4,"cachedContentTokenCount":6,"thoughtsTokenCount":3,"totalTokenCount":17},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`)
	a := gjson.Parse(rec.Body.String())
	for path, want := range map[string]string{
		"choices.0.message.content":                        `"Hi"`,
		"choices.0.message.reasoning":                      `"thinking"`,
		"choices.0.message.tool_calls.0.function":          `{"name":"f","arguments":"{\"a\":1}"}`,
		"choices.0.finish_reason":                          `"tool_calls"`,
		"usage.prompt_tokens":                              `10`,
		"usage.completion_tokens":                          `7`,
		"usage.prompt_tokens_details.cached_tokens":        `6`,
		"usage.completion_tokens_details.reasoning_tokens": `3`,
		"model": `"gemini-2.5-flash"`,
	} {
		if got := a.Get(path).Raw; got != want {
			t.Errorf("%s = %s, want %s (%s)", path, got, want, rec.Body)
		}
	}
	for body, want := range map[string]string{
		`{"candidates":[{"finishReason":"SAFETY","safetyRatings":[]}],"usageMetadata":{"promptTokenCount":3}}`: "content_filter",
		`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":3}}`:       "content_filter",
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"MAX_TOKENS"}]}`:                    "length",
	} {
		if got := gjson.Get(post(t, d, "application/json", body).Body.String(), "choices.0.finish_reason").Str; got != want {
			t.Errorf("%s: %s, want %s", body, got, want)
		}
	}
	// Not an answer: passed on for the meter to report.
	if got := post(t, d, "application/json", `{"foo":1}`).Body.String(); got != `{"foo":1}` {
		t.Errorf("non-answer %s", got)
	}

	stream := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"He\"}]}}],\"usageMetadata\":{\"promptTokenCount\":5},\"responseId\":\"r2\"}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"llo\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2,\"totalTokenCount\":7}}\r\n\r\n"
	out := post(t, d, "text/event-stream", stream).Body.String()
	var text, finish string
	var usage gjson.Result
	for ev := range strings.SplitSeq(out, "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		c := gjson.Parse(data)
		text += c.Get("choices.0.delta.content").Str
		if f := c.Get("choices.0.finish_reason").Str; f != "" {
			finish = f
		}
		if u := c.Get("usage"); u.Exists() {
			usage = u
		}
	}
	if text != "Hello" || finish != "stop" || usage.Get("completion_tokens").Int() != 2 || !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Errorf("stream %q", out)
	}
}

func TestURIAndKey(t *testing.T) {
	d, _ := New(dialect.Options{Model: "gemini-2.5-flash"})
	if got := d.URI(dialect.Chat, false, "/chat/completions", true); got != "/models/gemini-2.5-flash:streamGenerateContent?alt=sse" {
		t.Errorf("stream uri %s", got)
	}
	if got := d.URI(dialect.Responses, false, "/responses", false); got != "/models/gemini-2.5-flash:generateContent" {
		t.Errorf("uri %s", got)
	}
	h := http.Header{"Authorization": {"Bearer client"}, "X-Api-Key": {"x"}}
	d.SetHeaders(h)
	d.SetKey(h, "AIza-1")
	if len(h) != 1 || h.Get("X-Goog-Api-Key") != "AIza-1" {
		t.Errorf("headers %v", h)
	}
	if _, err := New(dialect.Options{Settings: map[string]string{"auth": "oauth"}}); err == nil || !strings.HasPrefix(err.Error(), "auth:") {
		t.Errorf("bad auth: %v", err)
	}
	code, msg := d.Failure(429, nil, []byte(`{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`))
	if code != "RESOURCE_EXHAUSTED" || msg != "quota" {
		t.Errorf("failure %v %q", code, msg)
	}
}

// Thought signatures round trip: an answer's thoughtSignature is a
// reasoning.encrypted entry of reasoning_details (with its call's id),
// whole and streamed; sent back with the assistant message, each goes on
// the part that carried it.
func TestThoughtSignatures(t *testing.T) {
	d, _ := New(dialect.Options{Model: "gemini-x"})
	rec := post(t, d, "application/json", `{"candidates":[{"content":{"role":"model","parts":[{"text":"plan","thought":true},`+
		`{"functionCall":{"name":"f","args":{}},"thoughtSignature":"c2lnLWY="},{"functionCall":{"name":"g","args":{}}}]},"finishReason":"STOP"}]}`)
	msg := gjson.Get(rec.Body.String(), "choices.0.message")
	if got := msg.Get("reasoning_details").Raw; got != `[{"type":"reasoning.text","text":"plan","format":"google-gemini-v1","index":0},`+
		`{"type":"reasoning.encrypted","data":"c2lnLWY=","id":"call_0","format":"google-gemini-v1","index":1}]` {
		t.Errorf("reasoning_details %s", got)
	}
	chat := `{"messages":[{"role":"user","content":"q"},` + msg.Raw + `,{"role":"tool","tool_call_id":"call_0","content":"a"},{"role":"tool","tool_call_id":"call_1","content":"b"}]}`
	body, err := fromChat([]byte(chat), 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(body, "contents.1").Raw; got != `{"role":"model","parts":[{"functionCall":{"name":"f","args":{}},"thoughtSignature":"c2lnLWY="},{"functionCall":{"name":"g","args":{}}}]}` {
		t.Errorf("model content %s", got)
	}
	// A text answer's signature goes back on its last text part.
	body, _ = fromChat([]byte(`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"hi","reasoning_details":[{"type":"reasoning.encrypted","data":"dA==","format":"google-gemini-v1","index":0}]},{"role":"user","content":"r"}]}`), 0, false)
	if got := gjson.GetBytes(body, "contents.1.parts").Raw; got != `[{"text":"hi","thoughtSignature":"dA=="}]` {
		t.Errorf("text part %s", got)
	}

	stream := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"pl\",\"thought\":true}]}}]}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"an\",\"thought\":true}]}}]}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}},\"thoughtSignature\":\"c2ln\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":2}}\r\n\r\n"
	out := post(t, d, "text/event-stream", stream).Body.String()
	var got []string
	for ev := range strings.SplitSeq(out, "\n\n") {
		data, _ := strings.CutPrefix(ev, "data: ")
		for _, det := range gjson.Get(data, "choices.0.delta.reasoning_details").Array() {
			got = append(got, det.Raw)
		}
	}
	if strings.Join(got, ",") != `{"type":"reasoning.text","text":"pl","format":"google-gemini-v1","index":0},{"type":"reasoning.text","text":"an","format":"google-gemini-v1","index":0},`+
		`{"type":"reasoning.encrypted","data":"c2ln","id":"call_0","format":"google-gemini-v1","index":1}` {
		t.Errorf("streamed details %v", got)
	}
}

// Gemini 3 takes a thinking level: every public effort maps to one it
// takes.
func TestEffortLevels(t *testing.T) {
	d, _ := New(dialect.Options{Model: "gemini-3-pro-preview"})
	for effort, want := range map[string]string{"max": "high", "xhigh": "high", "high": "high", "medium": "high", "low": "low", "minimal": "low", "none": "low"} {
		body, err := d.FromChat([]byte(`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"`+effort+`"}`), 0)
		if got := gjson.GetBytes(body, "generationConfig.thinkingConfig").Raw; err != nil || got != `{"thinkingLevel":"`+want+`","includeThoughts":true}` {
			t.Errorf("%s: %s (%v)", effort, got, err)
		}
	}
}
