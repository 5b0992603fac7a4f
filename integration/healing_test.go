package integration

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// healChat is a chat request whose answer the strict mock scripts as
// answer (its mock-answer marker), asking for JSON with format and the
// response-healing plugin (plugin: the entry, or "" for none).
func healChat(answer, format, plugin, extra string) string {
	msg, _ := json.Marshal("mock-answer: " + answer)
	b := `{"model":"tollgate-mock","messages":[{"role":"user","content":` + string(msg) + `}]`
	if format != "" {
		b += `,"response_format":` + format
	}
	if plugin != "" {
		b += `,"plugins":[` + plugin + `]`
	}
	return b + extra + `}`
}

// healResponses is healChat for the Responses route (text.format).
func healResponses(answer, format, plugin, extra string) string {
	in, _ := json.Marshal("mock-answer: " + answer)
	b := `{"model":"tollgate-mock","input":` + string(in)
	if format != "" {
		b += `,"text":{"format":` + format + `}`
	}
	if plugin != "" {
		b += `,"plugins":[` + plugin + `]`
	}
	return b + extra + `}`
}

const (
	healPlugin  = `{"id":"response-healing"}`
	jsonObject  = `{"type":"json_object"}`
	personShape = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`
)

// responsesText is the text of a Responses object's output message.
func responsesText(r response) string {
	return r.JSON.Get(`output.#(type=="message").content.#(type=="output_text").text`).Str
}

// The response-healing plugin through Caddy against the strict mock, which
// answers with the broken JSON a test scripts: the answer's text comes
// back repaired with X-Response-Healing naming the repairs and the schema
// verdict; text no rule repairs comes back as it came; streams pass
// unhealed; the charge is the answer's usage, healing being free; bad
// plugin objects are 400s naming the field.
func TestResponseHealing(t *testing.T) {
	// heal/chat: a chat-only provider, whose answers to Responses requests
	// the gateway translates.
	startInProcessWith(t, withModels(t, apiModel("heal/chat", [4]string{"chatty", "http://" + mockAddr + "/v1", "tollgate-mock", "chat"})))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"healing"}`)
	broken := "Here you go:\n```json\n{name: 'Ada', \"age\": 36,}\n```"

	t.Run("chat json_object", func(t *testing.T) {
		r := c.mustPost("/chat/completions", key, healChat(broken, jsonObject, healPlugin, ""), nil).expect(t, 200)
		if got := r.JSON.Get("choices.0.message.content").Str; got != `{"name":"Ada","age":36}` {
			t.Fatalf("content %q", got)
		}
		if h := r.Header.Get("X-Response-Healing"); h != "repaired=code_fence,prose,trailing_comma,unquoted_key,single_quote" {
			t.Fatalf("X-Response-Healing %q", h)
		}
		// Charged from usage, as without the plugin: the mock's words.
		u := r.JSON.Get("usage")
		in, _ := money.ParseAmount("0.000001")
		out, _ := money.ParseAmount("0.000002")
		p, _ := money.MulAmount(in, u.Get("prompt_tokens").Int())
		q, _ := money.MulAmount(out, u.Get("completion_tokens").Int())
		want, _ := money.AddAmounts(p, q)
		if got, _ := money.ParseAmount(u.Get("cost").Raw); got != want || u.Get("completion_tokens").Int() != int64(len(strings.Fields(broken))) {
			t.Fatalf("usage %s: cost %v, want %v", u.Raw, got, want)
		}
		// Without the plugin the same answer comes back as the model wrote it.
		r = c.mustPost("/chat/completions", key, healChat(broken, jsonObject, "", ""), nil).expect(t, 200)
		if got := r.JSON.Get("choices.0.message.content").Str; got != broken || r.Header.Get("X-Response-Healing") != "" {
			t.Fatalf("without the plugin: %q, %q", got, r.Header.Get("X-Response-Healing"))
		}
		// Disabled: the same.
		r = c.mustPost("/chat/completions", key, healChat(broken, jsonObject, `{"id":"response-healing","enabled":false}`, ""), nil).expect(t, 200)
		if got := r.JSON.Get("choices.0.message.content").Str; got != broken {
			t.Fatalf("disabled: %q", got)
		}
	})

	t.Run("chat json_schema", func(t *testing.T) {
		format := `{"type":"json_schema","json_schema":{"name":"person","strict":true,"schema":` + personShape + `}}`
		r := c.mustPost("/chat/completions", key, healChat(broken, format, healPlugin, ""), nil).expect(t, 200)
		if r.JSON.Get("choices.0.message.content").Str != `{"name":"Ada","age":36}` ||
			!strings.HasSuffix(r.Header.Get("X-Response-Healing"), "; schema=valid") {
			t.Fatalf("valid: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
		r = c.mustPost("/chat/completions", key, healChat(`{"name": "Ada", "age": "old",}`, format, healPlugin, ""), nil).expect(t, 200)
		if h := r.Header.Get("X-Response-Healing"); h != "repaired=trailing_comma; schema=invalid; schema_path=/age" ||
			r.JSON.Get("choices.0.message.content").Str != `{"name":"Ada","age":"old"}` {
			t.Fatalf("invalid: %s %q", r.Body, h)
		}
		// Already valid JSON: byte for byte as written.
		valid := "{\n  \"name\": \"Ada\",\n  \"age\": 36\n}"
		r = c.mustPost("/chat/completions", key, healChat(valid, format, healPlugin, ""), nil).expect(t, 200)
		if r.JSON.Get("choices.0.message.content").Str != valid || r.Header.Get("X-Response-Healing") != "repaired=none; schema=valid" {
			t.Fatalf("valid JSON: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
	})

	t.Run("cut off by max_tokens", func(t *testing.T) {
		// Four words: {"items": ["a", "b", — the rest is cut.
		r := c.mustPost("/chat/completions", key, healChat(`{"items": ["a", "b", "c", "d"]}`, jsonObject, healPlugin, `,"max_tokens":3`), nil).expect(t, 200)
		if r.JSON.Get("choices.0.message.content").Str != `{"items":["a","b"]}` || r.JSON.Get("choices.0.finish_reason").Str != "length" ||
			r.Header.Get("X-Response-Healing") != "repaired=truncated" {
			t.Fatalf("cut off: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
	})

	t.Run("unrepairable passes as it came", func(t *testing.T) {
		const refusal = "I cannot produce JSON for that."
		r := c.mustPost("/chat/completions", key, healChat(refusal, jsonObject, healPlugin, ""), nil).expect(t, 200)
		if r.JSON.Get("choices.0.message.content").Str != refusal || r.Header.Get("X-Response-Healing") != "unrepairable" {
			t.Fatalf("unrepairable: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
		r = c.mustPost("/responses", key, healResponses(refusal, jsonObject, healPlugin, ""), nil).expect(t, 200)
		if responsesText(r) != refusal || r.Header.Get("X-Response-Healing") != "unrepairable" {
			t.Fatalf("unrepairable (Responses): %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
	})

	t.Run("text answers are not touched", func(t *testing.T) {
		r := c.mustPost("/chat/completions", key, healChat(broken, "", healPlugin, ""), nil).expect(t, 200)
		if r.JSON.Get("choices.0.message.content").Str != broken || r.Header.Get("X-Response-Healing") != "" {
			t.Fatalf("text: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
	})

	t.Run("responses", func(t *testing.T) {
		r := c.mustPost("/responses", key, healResponses(broken, jsonObject, healPlugin, ""), nil).expect(t, 200)
		if responsesText(r) != `{"name":"Ada","age":36}` || !strings.HasPrefix(r.Header.Get("X-Response-Healing"), "repaired=code_fence") {
			t.Fatalf("json_object: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
		if !gjson.Valid(string(r.Body)) || r.JSON.Get("usage.cost").Raw == "" {
			t.Fatalf("the answer lost its usage: %s", r.Body)
		}
		format := `{"type":"json_schema","name":"person","strict":true,"schema":` + personShape + `}`
		r = c.mustPost("/responses", key, healResponses(broken, format, healPlugin, ""), nil).expect(t, 200)
		if responsesText(r) != `{"name":"Ada","age":36}` || !strings.HasSuffix(r.Header.Get("X-Response-Healing"), "; schema=valid") {
			t.Fatalf("json_schema valid: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
		r = c.mustPost("/responses", key, healResponses(`{"name": "Ada"}`, format, healPlugin, ""), nil).expect(t, 200)
		if h := r.Header.Get("X-Response-Healing"); h != "repaired=none; schema=invalid; schema_path=/" {
			t.Fatalf("json_schema invalid: %s %q", r.Body, h)
		}
	})

	t.Run("responses translated from a chat-only provider", func(t *testing.T) {
		body := strings.Replace(healResponses(broken, jsonObject, healPlugin, ""), `"tollgate-mock"`, `"heal/chat"`, 1)
		r := c.mustPost("/responses", key, body, nil).expect(t, 200)
		if responsesText(r) != `{"name":"Ada","age":36}` || r.JSON.Get("object").Str != "response" ||
			r.Header.Get("X-Response-Healing") != "repaired=code_fence,prose,trailing_comma,unquoted_key,single_quote" {
			t.Fatalf("translated: %s %q", r.Body, r.Header.Get("X-Response-Healing"))
		}
	})

	t.Run("streams pass unhealed", func(t *testing.T) {
		r := c.mustPost("/chat/completions", key, healChat(broken, jsonObject, healPlugin, `,"stream":true`), nil).expect(t, 200)
		if h := r.Header.Get("X-Response-Healing"); h != "skipped=stream" {
			t.Fatalf("stream header %q", h)
		}
		var text strings.Builder
		evs, err := readStream(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Data != "[DONE]" {
				text.WriteString(gjson.Get(ev.Data, "choices.0.delta.content").Str)
			}
		}
		if text.String() != broken {
			t.Fatalf("streamed text %q", text.String())
		}
		r = c.mustPost("/responses", key, healResponses(broken, jsonObject, healPlugin, `,"stream":true`), nil).expect(t, 200)
		if r.Header.Get("X-Response-Healing") != "skipped=stream" || !strings.Contains(string(r.Body), "response.completed") {
			t.Fatalf("Responses stream: %q %s", r.Header.Get("X-Response-Healing"), r.Body)
		}
	})

	t.Run("bad plugin objects", func(t *testing.T) {
		c.mustPost("/chat/completions", key, healChat(broken, jsonObject, `{"id":"response-healing","mode":"strict"}`, ""), nil).
			expectError(t, 400, "plugins[0].mode: unknown field of the response-healing plugin")
		c.mustPost("/chat/completions", key, healChat(broken, jsonObject, `{"id":"response-healing","enabled":"yes"}`, ""), nil).
			expectError(t, 400, "plugins[0].enabled: expected a boolean")
		c.mustPost("/messages", key, `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"hi"}],"plugins":[{"id":"response-healing"}]}`, nil).
			expectError(t, 400, "plugins[0].id: the response-healing plugin applies to /chat/completions and /responses")
	})
}

// Healing and web search together: the citation writer annotates the
// healed text, and the search is charged as usual.
func TestResponseHealingWithWebSearch(t *testing.T) {
	e := startWebSearch(t)
	body := strings.Replace(healChat("```json\n{topic: 'caddy',}\n```", jsonObject, `{"id":"web"},`+healPlugin, ""),
		`"tollgate-mock"`, `"ws/plain"`, 1)
	r := e.c.mustPost("/chat/completions", e.key, body, nil).expect(t, 200)
	if r.JSON.Get("choices.0.message.content").Str != `{"topic":"caddy"}` ||
		r.Header.Get("X-Response-Healing") != "repaired=code_fence,trailing_comma,unquoted_key,single_quote" {
		t.Fatalf("%s %q", r.Body, r.Header.Get("X-Response-Healing"))
	}
	if !r.JSON.Get("choices.0.message.annotations").IsArray() || !r.JSON.Get("usage.server_tool_use_details").Exists() {
		t.Fatalf("no citations or search usage: %s", r.Body)
	}
}
