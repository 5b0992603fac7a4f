package mockprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestStrictRefusesUnknownParameters(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	for _, tc := range []struct {
		path, body, message, param string
	}{
		{"/v1/chat/completions", mockChat(`,"usage":{"include":true}`), "Unrecognized request argument supplied: usage", ""},
		{"/v1/chat/completions", mockChat(`,"transforms":[]`), "Unrecognized request argument supplied: transforms", ""},
		{"/v1/chat/completions", mockChat(`,"reasoning":{"effort":"low"}`), "Unrecognized request argument supplied: reasoning", ""},
		{"/v1/chat/completions", mockChat(`,"stream_options":{"include_usage":true}`), "only allowed when 'stream' is enabled", "stream_options"},
		{"/v1/responses", `{"model":"m1","input":"hi","max_tokens":5}`, "Unknown parameter: 'max_tokens'.", "max_tokens"},
		{"/v1/responses", `{"model":"m1","input":"hi","provider":{}}`, "Unknown parameter: 'provider'.", "provider"},
	} {
		res := testgw.Post(t, srv, tc.path, tc.body)
		e := gjson.Get(res.Body, "error")
		if res.Status != http.StatusBadRequest || e.Get("type").Str != "invalid_request_error" ||
			!strings.Contains(e.Get("message").Str, tc.message) {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, res.Status, res.Body)
		}
		if p := e.Get("param"); (tc.param == "" && p.Type != gjson.Null) || (tc.param != "" && p.Str != tc.param) {
			t.Errorf("param %s, want %q", p.Raw, tc.param)
		}
	}
}

func TestStrictAcceptsOpenAIParameters(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	chat := mockChat(`,"temperature":0.5,"max_completion_tokens":50,"reasoning_effort":"low","user":"u","seed":1,"response_format":{"type":"text"}`)
	res := testgw.Post(t, srv, "/v1/chat/completions", chat)
	if res.Status != http.StatusOK {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	j := gjson.Parse(res.Body)
	if !strings.HasPrefix(j.Get("id").Str, "chatcmpl-") || j.Get("model").Str != "m1"+strictDated {
		t.Errorf("id %q model %q", j.Get("id").Str, j.Get("model").Str)
	}
	res = testgw.Post(t, srv, "/v1/responses", `{"model":"m1","input":"hi","reasoning":{"effort":"low"},"store":false,"max_output_tokens":20}`)
	if res.Status != http.StatusOK {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	j = gjson.Parse(res.Body)
	if !strings.HasPrefix(j.Get("id").Str, "resp_") || j.Get("model").Str != "m1"+strictDated {
		t.Errorf("id %q model %q", j.Get("id").Str, j.Get("model").Str)
	}
}

// A strict stream reports usage only when stream_options asks for it.
func TestStrictStreamUsageOnlyWhenAsked(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	events := testgw.ParseSSE(t, testgw.Post(t, srv, "/v1/chat/completions", mockChat(`,"stream":true`)).Body)
	for _, ev := range events {
		if gjson.Get(ev.Data, "usage").Exists() {
			t.Errorf("usage without include_usage: %s", ev.Data)
		}
	}
	if events[len(events)-1].Data != "[DONE]" {
		t.Errorf("no [DONE]: %+v", events)
	}
	_, _, usage := readChatStream(t, testgw.Post(t, srv, "/v1/chat/completions",
		mockChat(`,"stream":true,"stream_options":{"include_usage":true}`)))
	if usage.Get("prompt_tokens").Int() != mockChatPrompt {
		t.Errorf("usage %s", usage.Raw)
	}
}

// A model configured as non-reasoning refuses reasoning_effort as
// OpenAI's gpt-4o does; other models take it.
func TestStrictNonReasoningModels(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true, NonReasoningModels: []string{"gpt-4o"}})
	for _, tc := range []struct {
		model, extra string
		status       int
	}{
		{"gpt-4o-mini", `,"reasoning_effort":"high"`, http.StatusBadRequest},
		{"gpt-4o", `,"reasoning_effort":"low"`, http.StatusBadRequest},
		{"gpt-4o", "", http.StatusOK},
		{"o3", `,"reasoning_effort":"high"`, http.StatusOK},
	} {
		body := strings.Replace(mockChat(tc.extra), `"model":"m1"`, `"model":"`+tc.model+`"`, 1)
		res := testgw.Post(t, srv, "/v1/chat/completions", body)
		if res.Status != tc.status {
			t.Errorf("%s %s: %d %s", tc.model, tc.extra, res.Status, res.Body)
			continue
		}
		if e := gjson.Get(res.Body, "error"); tc.status == http.StatusBadRequest &&
			(e.Get("param").Str != "reasoning_effort" || e.Get("code").Str != "unsupported_parameter" ||
				e.Get("message").Str != "Unsupported parameter: 'reasoning_effort' is not supported with this model.") {
			t.Errorf("refusal %s", res.Body)
		}
	}
}

// A text-only model refuses file parts, as OpenAI's do; a model whose name
// holds "files" reads them.
func TestStrictFileParts(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":[{"type":"text","text":"read"},` +
			`{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]}]}`
	}
	res := testgw.Post(t, srv, "/v1/chat/completions", body("m1"))
	if res.Status != http.StatusBadRequest || !strings.Contains(gjson.Get(res.Body, "error.message").Str, "file is only supported for models that accept file input") {
		t.Fatalf("text-only model: %d %s", res.Status, res.Body)
	}
	if res = testgw.Post(t, srv, "/v1/chat/completions", body("m1-files")); res.Status != http.StatusOK {
		t.Fatalf("file model: %d %s", res.Status, res.Body)
	}
}
