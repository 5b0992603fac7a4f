package bedrock

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func TestFromChat(t *testing.T) {
	body, err := fromChat([]byte(`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},`+
		`{"role":"tool","tool_call_id":"t1","content":"{\"ok\":true}"}],"max_tokens":9,"top_k":4,"stop":["X"],"seed":1,"response_format":{"type":"json_object"},`+
		`"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	b := gjson.ParseBytes(body)
	for path, want := range map[string]string{
		"system":                                  `[{"text":"S"}]`,
		"messages.#.role":                         `["user","assistant","user"]`,
		"messages.0.content.1.image":              `{"format":"png","source":{"bytes":"AAAA"}}`,
		"messages.1.content.0.toolUse":            `{"toolUseId":"t1","name":"f","input":{"x":1}}`,
		"messages.2.content.0.toolResult":         `{"toolUseId":"t1","content":[{"json":{"ok":true}}]}`,
		"inferenceConfig":                         `{"maxTokens":9,"stopSequences":["X"]}`,
		"additionalModelRequestFields":            `{"top_k":4}`,
		"toolConfig.toolChoice":                   `{"tool":{"name":"f"}}`,
		"toolConfig.tools.0.toolSpec.inputSchema": `{"json":{"type":"object"}}`,
	} {
		if got := b.Get(path).Raw; got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	if b.Get("model").Exists() || b.Get("seed").Exists() || b.Get("response_format").Exists() {
		t.Errorf("OpenAI fields sent: %s", body)
	}
	// Automatic caching: a cache point after the prompt; not an object: none.
	body, _ = fromChat([]byte(`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"a"}],"cache_control":{"type":"ephemeral"}}`), false)
	if got := gjson.GetBytes(body, "messages.0.content").Raw; got != `[{"text":"a"},{"cachePoint":{"type":"default"}}]` {
		t.Errorf("cache point: %s", body)
	}
	if body, _ = fromChat([]byte(`{"messages":[{"role":"user","content":"a"}],"cache_control":true}`), false); strings.Contains(string(body), "cachePoint") {
		t.Errorf("cache point for a non-object: %s", body)
	}
	checkFromChat(t, []byte(`{"messages":[{"role":"user","content":"a"}],"cache_control":{"type":"ephemeral"}}`))
	// An hour's TTL is the cache point's; five minutes is Bedrock's
	// default, sent as none.
	for ttl, want := range map[string]string{`"1h"`: `{"type":"default","ttl":"1h"}`, `"5m"`: `{"type":"default"}`, `7`: `{"type":"default"}`} {
		chat := []byte(`{"messages":[{"role":"user","content":"a"}],"cache_control":{"type":"ephemeral","ttl":` + ttl + `}}`)
		if body, _ = fromChat(chat, false); gjson.GetBytes(body, "messages.0.content.1.cachePoint").Raw != want {
			t.Errorf("ttl %s: %s", ttl, body)
		}
		checkFromChat(t, chat)
	}
	for in, msg := range map[string]string{
		`{"messages":[{"role":"user","content":"a"}],"n":3}`:                                                    "n:",
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`: "image_url.url",
		`{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"web_search"}]}`:                          "tools[0].type",
	} {
		if _, err := fromChat([]byte(in), false); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", in, err, msg)
		}
	}
}

func TestToChat(t *testing.T) {
	d, _ := New(dialect.Options{Model: "m", Settings: map[string]string{"aws_region": "eu-west-1"}})
	rec := httptest.NewRecorder()
	w := d.ToChat(rec, "m", 1<<20)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write([]byte(`{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hmm","signature":"sig"}}},{"reasoningContent":{"redactedContent":"enc"}},{"text":"Hi"}]}},` +
		`"stopReason":"guardrail_intervened","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5,"cacheReadInputTokens":4,"cacheWriteInputTokens":1}}`))
	w.Finish()
	a := gjson.Parse(rec.Body.String())
	if a.Get("choices.0.message.content").Str != "Hi" || a.Get("choices.0.message.reasoning").Str != "hmm" ||
		a.Get("choices.0.finish_reason").Str != "content_filter" || a.Get("usage.prompt_tokens").Int() != 8 ||
		a.Get("usage.prompt_tokens_details").Raw != `{"cached_tokens":4,"cache_write_tokens":1}` ||
		a.Get("choices.0.message.reasoning_details").Raw != `[{"type":"reasoning.text","text":"hmm","signature":"sig","format":"anthropic-claude-v1","index":0},`+
			`{"type":"reasoning.encrypted","data":"enc","format":"anthropic-claude-v1","index":1}]` {
		t.Errorf("answer %s", rec.Body)
	}

	// A stream, its frames split across writes.
	var frames bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, e := range [][2]string{{"messageStart", `{"role":"assistant"}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hm"}}}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"sig"}}}`},
		{"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"reasoningContent":{"redactedContent":"enc"}}}`},
		{"contentBlockDelta", `{"contentBlockIndex":2,"delta":{"text":"He"}}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"llo"}}`}, {"messageStop", `{"stopReason":"max_tokens"}`},
		{"metadata", `{"usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5}}`}} {
		var h eventstream.Headers
		h.Set(":message-type", eventstream.StringValue("event"))
		h.Set(":event-type", eventstream.StringValue(e[0]))
		_ = enc.Encode(&frames, eventstream.Message{Headers: h, Payload: []byte(e[1])})
	}
	rec = httptest.NewRecorder()
	w = d.ToChat(rec, "m", 1<<20)
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.WriteHeader(http.StatusOK)
	all := frames.Bytes()
	for len(all) > 0 {
		n := min(7, len(all))
		_, _ = w.Write(all[:n])
		all = all[n:]
	}
	out := rec.Body.String()
	if rec.Header().Get("Content-Type") != "text/event-stream" || !strings.Contains(out, `"content":"He"`) || !strings.Contains(out, `"content":"llo"`) ||
		!strings.Contains(out, `"finish_reason":"length"`) || !strings.Contains(out, `"completion_tokens":2`) || !strings.HasSuffix(out, "data: [DONE]\n\n") ||
		!strings.Contains(out, `"delta":{"reasoning":"hm","reasoning_details":[{"type":"reasoning.text","text":"hm","format":"anthropic-claude-v1","index":0}]}`) ||
		!strings.Contains(out, `"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"sig","format":"anthropic-claude-v1","index":0}]}`) ||
		!strings.Contains(out, `"delta":{"reasoning_details":[{"type":"reasoning.encrypted","data":"enc","format":"anthropic-claude-v1","index":1}]}`) {
		t.Errorf("stream %s", out)
	}
}

func TestOptions(t *testing.T) {
	for settings, msg := range map[string]string{"": "aws_region: required", "mars-1": "aws_region: \"mars-1\" is not an AWS region"} {
		o := dialect.Options{Settings: map[string]string{}}
		if settings != "" {
			o.Settings["aws_region"] = settings
		}
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v", settings, err)
		}
	}
	if _, err := Credentials("only-an-id"); err == nil {
		t.Error("a key without its secret")
	}
	if c, err := Credentials("AKID:secret:token"); err != nil || c.SessionToken != "token" {
		t.Errorf("%+v %v", c, err)
	}
}

// cacheDetails splits the cache writes by TTL for the meter; an entry of
// a form not read is noted.
func TestToChatReportsHourCacheWrites(t *testing.T) {
	d, _ := New(dialect.Options{Model: "m", Settings: map[string]string{"aws_region": "eu-west-1"}})
	for _, c := range []struct {
		details string
		hour    int64
		unknown bool
	}{
		{`[{"inputTokens":8,"ttl":"1h"},{"inputTokens":4,"ttl":"5m"}]`, 8, false},
		{`[{"inputTokens":4,"ttl":"5m"}]`, 0, false},
		{`[{"inputTokens":4,"ttl":"24h"}]`, 0, true},
		{`{}`, 0, true},
	} {
		rec := httptest.NewRecorder()
		w := d.ToChat(rec, "m", 1<<20)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn",` +
			`"usage":{"inputTokens":3,"outputTokens":2,"totalTokens":17,"cacheWriteInputTokens":12,"cacheDetails":` + c.details + `}}`))
		w.Finish()
		hour, unknown := w.(dialect.CacheTTLReporter).CacheWrites1h()
		if hour != c.hour || unknown != c.unknown || gjson.Get(rec.Body.String(), "usage.prompt_tokens_details.cache_write_tokens").Int() != 12 {
			t.Errorf("%s: 1h = %d %v; answer %s", c.details, hour, unknown, rec.Body)
		}
	}
}

// An assistant message's reasoning_details go back as reasoningContent
// blocks, first in its content and unchanged; a reasoning effort is a
// Claude model's extended thinking, which takes no temperature or top_k.
func TestReasoningRoundTrip(t *testing.T) {
	chat := `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"let me look","reasoning":"r",` +
		`"reasoning_details":[{"type":"reasoning.text","text":"r","signature":"sig-1","format":"anthropic-claude-v1","index":0},{"type":"reasoning.encrypted","data":"ZGF0YQ==","format":"anthropic-claude-v1","index":1}],` +
		`"tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"ok"}],` +
		`"tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":4000,"reasoning_effort":"medium","temperature":0.3,"top_k":4}`
	body, err := fromChat([]byte(chat), true)
	if err != nil {
		t.Fatal(err)
	}
	b := gjson.ParseBytes(body)
	for path, want := range map[string]string{
		"messages.1.content.0":                   `{"reasoningContent":{"reasoningText":{"text":"r","signature":"sig-1"}}}`,
		"messages.1.content.1":                   `{"reasoningContent":{"redactedContent":"ZGF0YQ=="}}`,
		"messages.1.content.2.text":              `"let me look"`,
		"messages.1.content.3.toolUse.toolUseId": `"t1"`,
		"additionalModelRequestFields":           `{"thinking":{"type":"enabled","budget_tokens":2000}}`,
		"inferenceConfig":                        `{"maxTokens":4000}`,
	} {
		if got := b.Get(path).Raw; got != want {
			t.Errorf("%s = %s, want %s", path, got, want)
		}
	}
	// Another model on Bedrock has no extended thinking: its top_k and
	// temperature stay.
	body, _ = fromChat([]byte(chat), false)
	if b := gjson.ParseBytes(body); b.Get("additionalModelRequestFields").Raw != `{"top_k":4}` || b.Get("inferenceConfig.temperature").Float() != 0.3 {
		t.Errorf("no thinking: %s", body)
	}
	if _, err := fromChat([]byte(`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_details":[{"type":"other"}]}]}`), true); err == nil ||
		err.Error() != "messages[1].reasoning_details[0].type: expected reasoning.text, reasoning.encrypted, reasoning.summary or reasoning.server_tool_call" {
		t.Errorf("wrong shape: %v", err)
	}
}

// An Anthropic model takes a reasoning effort (a Messages request's
// thinking reaches it); the others do not.
func TestParametersOfThinkingModels(t *testing.T) {
	for model, want := range map[string]bool{"anthropic.claude-sonnet-4-20250514-v1:0": true, "meta.llama3-70b-instruct-v1:0": false} {
		d, err := New(dialect.Options{Model: model, Settings: map[string]string{"aws_region": "us-east-1"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(d.Parameters(), "reasoning"); got != want {
			t.Errorf("%s: reasoning %v, want %v", model, got, want)
		}
	}
	if slices.Contains(Parameters, "reasoning") {
		t.Error("Parameters changed")
	}
}
