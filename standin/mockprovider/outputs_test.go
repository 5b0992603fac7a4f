package mockprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// The shapes refuse what a provider refuses: output the request did not
// ask for.
func TestShapesAreStrict(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m-out-tools","messages":[{"role":"user","content":"x"}]}`},
		{"/v1/chat/completions", `{"model":"m-out-function_call","messages":[{"role":"user","content":"x"}]}`},
		{"/v1/chat/completions", `{"model":"m-out-audio","modalities":["text","audio"],"messages":[{"role":"user","content":"x"}]}`},
		{"/v1/chat/completions", `{"model":"m-out-image","messages":[{"role":"user","content":"x"}]}`},
		{"/v1/responses", `{"model":"m-out-tools","input":"x"}`},
		{"/v1/responses", `{"model":"m-out-audio","input":"x"}`},
	} {
		if res := testgw.Post(t, srv, tc.path, tc.body); res.Status != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, res.Status, res.Body)
		}
	}
}

func TestShapedChatAnswers(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	tools := `,"tools":[{"type":"function","function":{"name":"mock_tool","parameters":{"type":"object"}}}]`
	res := testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m-out-tools","messages":[{"role":"user","content":"hi there"}]`+tools+`}`)
	j := gjson.Parse(res.Body)
	call := j.Get("choices.0.message.tool_calls.0.function")
	if res.Status != 200 || call.Get("name").Str != mockToolName || !gjson.Valid(call.Get("arguments").Str) ||
		gjson.Get(call.Get("arguments").Str, "q").Str != "Mock answer from m-out-tools: hi there" ||
		j.Get("choices.0.finish_reason").Str != "tool_calls" || j.Get("usage.completion_tokens").Int() == 0 {
		t.Fatalf("tool call answer: %s", res.Body)
	}

	// A stream of reasoning deltas with usage when asked.
	res = testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m-out-reasoning","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	var reasoning strings.Builder
	var usage gjson.Result
	for _, ev := range testgw.ParseSSE(t, res.Body) {
		if ev.Data == "[DONE]" {
			continue
		}
		d := gjson.Parse(ev.Data)
		reasoning.WriteString(d.Get("choices.0.delta.reasoning").Str)
		if d.Get("choices.0.delta.content").Str != "" {
			t.Errorf("text in a reasoning stream: %s", ev.Data)
		}
		if u := d.Get("usage"); u.IsObject() {
			usage = u
		}
	}
	if reasoning.String() != "Mock answer from m-out-reasoning: hi" || usage.Get("completion_tokens").Int() != 5 {
		t.Fatalf("reasoning %q usage %s", reasoning.String(), usage.Raw)
	}

	// Wrong usage reports, and empty answers.
	for model, want := range map[string]string{
		"m-usage-over":       `{"prompt_tokens":1000000,"completion_tokens":1000000}`,
		"m-usage-negative":   `{"prompt_tokens":-3,"completion_tokens":-7}`,
		"m-usage-nonnumeric": `{"prompt_tokens":"lots","completion_tokens":"many"}`,
	} {
		res := testgw.Post(t, srv, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
		u := gjson.Get(res.Body, "usage")
		if u.Get("prompt_tokens").Raw != gjson.Get(want, "prompt_tokens").Raw || u.Get("completion_tokens").Raw != gjson.Get(want, "completion_tokens").Raw {
			t.Errorf("%s: usage %s", model, u.Raw)
		}
	}
	res = testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m-empty","messages":[{"role":"user","content":"hi"}]}`)
	if j := gjson.Parse(res.Body); res.Status != 200 || j.Get("choices.#").Int() != 0 || j.Get("usage").Exists() {
		t.Errorf("empty: %s", res.Body)
	}
	res = testgw.Post(t, srv, "/v1/responses", `{"model":"m-empty","input":"hi"}`)
	if j := gjson.Parse(res.Body); res.Status != 200 || j.Get("output.#").Int() != 0 || j.Get("usage").Type != gjson.Null {
		t.Errorf("empty Responses: %s", res.Body)
	}
	if res = testgw.Post(t, srv, "/v1/chat/completions", `{"model":"m-empty-object","messages":[{"role":"user","content":"hi"}]}`); strings.TrimSpace(res.Body) != "{}" {
		t.Errorf("empty-object: %s", res.Body)
	}
}

// A cut stream ends after three output chunks, without usage or [DONE].
func TestShapedStreamBreak(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	res := testgw.Post(t, srv, "/v1/responses", `{"model":"m-out-refusal-stream-break","stream":true,"input":"a b c d e"}`)
	var refusal strings.Builder
	for _, ev := range testgw.ParseSSE(t, res.Body) {
		d := gjson.Parse(ev.Data)
		if d.Get("type").Str == "response.refusal.delta" {
			refusal.WriteString(d.Get("delta").Str)
		}
		if strings.HasPrefix(d.Get("type").Str, "response.completed") || ev.Data == "[DONE]" {
			t.Fatalf("a cut stream completed: %s", ev.Data)
		}
	}
	if refusal.String() != "Mock answer from" {
		t.Fatalf("refusal %q", refusal.String())
	}
}
