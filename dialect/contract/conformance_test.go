package contract_test

import (
	"strings"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/contract"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
	"github.com/tollgate-dev/caddy-tollgate/messages"

	_ "github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/bedrock"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/gemini"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/openai"
)

// inbound is one request of the corpus: its route and body; refusedBy
// maps a style to the client field the gateway's 400 names when that
// style's providers cannot take it ("" everywhere else: accepted); a
// style's "/native" entry is for its providers that take the client's API
// as it is.
type inbound struct {
	name      string
	kind      dialect.Kind
	body      string
	refusedBy map[string]string
	// normalized: the router's normalizer fits the body before any
	// provider sees it (tested with the normalizer): only the translations
	// of the body as sent are checked here.
	normalized bool
}

// Claude Code's requests on /messages, in the shapes it sends them: a
// system array with cache breakpoints, tools with input schemas, adaptive
// thinking and output effort, context management, metadata.user_id, a
// mid-conversation system message, tool uses and their results (text,
// image, error), thinking blocks, streaming.
const claudeTools = `[{"name":"Read","description":"Read a file","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}},
	{"name":"Grep","input_schema":{"type":"object","properties":{"pattern":{"type":"string"}}},"cache_control":{"type":"ephemeral"}},
	{"name":"mcp__github__create_issue","description":"Create an issue","input_schema":{"type":"object"}}]`

const claudeCode = `{"model":"m","max_tokens":32000,"stream":true,
	"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Env: linux"}],
	"tools":` + claudeTools + `,"tool_choice":{"type":"auto"},
	"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"},
	"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},
	"metadata":{"user_id":"user_abc_account_def_session_123"},
	"messages":[
		{"role":"user","content":[{"type":"text","text":"Look at a.txt","cache_control":{"type":"ephemeral"}}]},
		{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig-1"},{"type":"text","text":"Reading."},
			{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/a.txt"}},{"type":"tool_use","id":"toolu_2","name":"Grep","input":{"pattern":"x"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"1\tfile says hi"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},
			{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"no match"}]},
		{"role":"system","content":"Mid-conversation note."},
		{"role":"user","content":"Go on."}]}`

// Codex's requests on /responses: instructions, message, reasoning,
// function_call and function_call_output items, strict function tools,
// reasoning effort and summary, store false, encrypted reasoning
// included, a prompt cache key, verbosity, streaming.
const codex = `{"model":"m","stream":true,"store":false,"instructions":"You are Codex.",
	"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the test"}]},
		{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},
		{"type":"function_call","call_id":"call_1","name":"shell","arguments":"{\"command\":[\"ls\"]}"},
		{"type":"function_call_output","call_id":"call_1","output":"a.go b.go"},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Listed."}]}],
	"tools":[{"type":"function","name":"shell","description":"Runs a command","strict":false,
		"parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}},"required":["command"]}},
		{"type":"function","name":"apply_patch","parameters":{"type":"object","properties":{"input":{"type":"string"}}}}],
	"tool_choice":"auto","parallel_tool_calls":false,
	"reasoning":{"effort":"high","summary":"auto"},"include":["reasoning.encrypted_content"],
	"prompt_cache_key":"0199-session","text":{"verbosity":"medium"}}`

// Every chat completions field the public API defines.
const chatAll = `{"model":"m","messages":[
		{"role":"system","content":"Be brief."},{"role":"developer","content":"Use tools."},
		{"role":"user","content":[{"type":"text","text":"What is this?","cache_control":{"type":"ephemeral"}},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},
			{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"found"},
		{"role":"assistant","content":"It is x."},{"role":"user","content":"More."}],
	"stop":["\n\n","END"],"temperature":0.7,"top_p":0.9,"top_k":40,"seed":7,"presence_penalty":0.5,"frequency_penalty":-0.5,
	"n":1,"logprobs":true,"top_logprobs":3,"max_tokens":300,"user":"u-1","metadata":{"k":"v"},
	"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":{"type":"object"}}},
	"tools":[{"type":"function","function":{"name":"lookup","description":"Look up","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}],
	"tool_choice":{"type":"function","function":{"name":"lookup"}},"parallel_tool_calls":true,
	"reasoning_effort":"low","service_tier":"auto","verbosity":"low","prompt_cache_key":"k","safety_identifier":"s",
	"stream":true,"stream_options":{"include_usage":true}}`

func corpus() []inbound {
	many := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(f(i))
		}
		return b.String()
	}
	stops := func(n int) string { return many(n, func(i int) string { return `"S` + string(rune('a'+i)) + `"` }) }
	msgTool := func(name string) string {
		return `{"name":"` + name + `","input_schema":{"type":"object"}}`
	}
	longName := strings.Repeat("n", 100)
	openAIName := map[string]string{"openai": "tools", "azure": "tools", "gemini": "tools", "bedrock": "tools"}
	return []inbound{
		{name: "claude code", kind: dialect.Messages, body: claudeCode},
		{name: "messages minimal", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages every field", kind: dialect.Messages, body: `{"model":"m","max_tokens":4000,"temperature":0.3,"top_p":0.8,"top_k":5,
			"stop_sequences":["END"],"system":"sys","metadata":{"user_id":"u"},"service_tier":"auto",
			"tools":[` + msgTool("f") + `],"tool_choice":{"type":"tool","name":"f"},
			"thinking":{"type":"enabled","budget_tokens":2000},
			"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}]},
				{"role":"assistant","content":"ok"},{"role":"user","content":"again"}]}`},
		{name: "messages json output", kind: dialect.Messages, body: `{"model":"m","max_tokens":100,"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages 4 stop sequences", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"stop_sequences":[` + stops(4) + `],"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages 5 stop sequences", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"stop_sequences":[` + stops(5) + `],"messages":[{"role":"user","content":"hi"}]}`,
			refusedBy: map[string]string{"openai": "stop_sequences", "azure": "stop_sequences"}},
		{name: "messages 6 stop sequences", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"stop_sequences":[` + stops(6) + `],"messages":[{"role":"user","content":"hi"}]}`,
			refusedBy: map[string]string{"openai": "stop_sequences", "azure": "stop_sequences", "gemini": "stop_sequences"}},
		{name: "messages empty stop sequence", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"stop_sequences":[""],"messages":[{"role":"user","content":"hi"}]}`,
			refusedBy: map[string]string{"bedrock": "stop_sequences"}},
		{name: "messages 129 tools", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"tools":[` +
			many(129, func(i int) string {
				return msgTool("t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26)))
			}) +
			`],"messages":[{"role":"user","content":"hi"}]}`,
			refusedBy: map[string]string{"openai": "tools", "azure": "tools"}},
		{name: "messages long tool name", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"tools":[` + msgTool(longName) + `],"messages":[{"role":"user","content":"hi"}]}`,
			refusedBy: openAIName},
		{name: "messages tool name starting with a digit", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"tools":[` + msgTool("2fa") + `],"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages no stop sequences", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"stop_sequences":[],"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages tool result without content", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"tools":[` + msgTool("f") + `],"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1"}]},{"role":"user","content":"and?"}]}`},
		{name: "messages small max_tokens with reasoning", kind: dialect.Messages, body: `{"model":"m","max_tokens":1100,"output_config":{"effort":"high"},"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages server tool", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":2}],"messages":[{"role":"user","content":"hi"}]}`},
		{name: "messages starting with the assistant", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":"Hello!"},{"role":"user","content":"hi"}]}`,
			refusedBy: map[string]string{"bedrock": "messages"}},
		{name: "codex", kind: dialect.Responses, body: codex},
		{name: "responses minimal", kind: dialect.Responses, body: `{"model":"m","input":"hi"}`},
		{name: "responses every field", kind: dialect.Responses, body: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"},
			{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}],"instructions":"be brief","max_output_tokens":100,
			"temperature":1.5,"top_p":0.5,"seed":3,"user":"u","presence_penalty":1,"frequency_penalty":1,"service_tier":"auto","safety_identifier":"s",
			"text":{"format":{"type":"json_schema","name":"out","schema":{"type":"object"},"strict":true}},"truncation":"auto","metadata":{"a":"b"}}`},
		{name: "responses small max_output_tokens", kind: dialect.Responses, body: `{"model":"m","input":"hi","max_output_tokens":10}`,
			refusedBy: map[string]string{"openai/native": "max_output_tokens"}},
		{name: "chat every field", kind: dialect.Chat, body: chatAll},
		{name: "chat reasoning with a small max_tokens", kind: dialect.Chat, body: `{"model":"m","max_tokens":1024,"reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat reasoning", kind: dialect.Chat, body: `{"model":"m","max_tokens":1100,"reasoning_effort":"max","messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat minimal", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat hot temperature", kind: dialect.Chat, body: `{"model":"m","temperature":1.8,"stop":"END","messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat tool choice required", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"user","content":"hi"}],
			"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"}`},
		{name: "chat tool choice none", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"user","content":"hi"}],
			"tools":[{"type":"function","function":{"name":"f","description":""}}],"tool_choice":"none"}`},
		{name: "chat assistant tool call without text", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":""}],"tools":[{"type":"function","function":{"name":"f"}}]}`},
		{name: "chat conversation starting with the assistant", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"hi"}]}`,
			refusedBy: map[string]string{"bedrock": "messages"}},
		{name: "chat only a system message", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"system","content":"You are terse."}]}`},
		{name: "chat tool history, tool choice none", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"done"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`},
		{name: "responses parallel tool calls without tools", kind: dialect.Responses, body: `{"model":"m","input":"hi","parallel_tool_calls":false,"tool_choice":"auto"}`},
		{name: "messages no parallel tool use without tools", kind: dialect.Messages, body: `{"model":"m","max_tokens":10,"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"hi"}]}`},
		{name: "chat tool choice without tools", kind: dialect.Chat, body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"auto","parallel_tool_calls":false}`,
			normalized: true},
		{name: "embeddings", kind: dialect.Other, body: `{"model":"m","input":["a","b"],"encoding_format":"float","dimensions":256}`},
	}
}

// styles are the provider styles, with the options their blocks need.
var styles = map[string]dialect.Options{
	"openai":    {Name: "o", API: dialect.APIResponses},
	"azure":     {Name: "az", API: dialect.APIResponses, Settings: map[string]string{"deployment": "d", "api_version": "2024-10-21"}},
	"anthropic": {Name: "a"},
	"gemini":    {Name: "g", Model: "gemini-2.5-flash"},
	"bedrock":   {Name: "b", Model: "anthropic.claude-sonnet-4", Settings: map[string]string{"aws_region": "us-east-1"}},
}

// TestConformance runs the gateway's translations over the corpus for
// every provider style (OpenAI-style with both of its APIs) and checks
// each body it would send against the style's contract: every request is
// either refused by the gateway's own check, naming the client's field,
// or sent in a body the provider's API accepts.
func TestConformance(t *testing.T) {
	for style, opts := range styles {
		for _, api := range []string{dialect.APIResponses, dialect.APIChat} {
			if api == dialect.APIChat && style != "openai" && style != "azure" {
				continue
			}
			opts.API = api
			d, err := dialect.New(style, opts)
			if err != nil {
				t.Fatalf("%s: %v", style, err)
			}
			for _, in := range corpus() {
				t.Run(style+"/"+api+"/"+in.name, func(t *testing.T) { conform(t, d, in) })
			}
		}
	}
}

func conform(t *testing.T, d dialect.Dialect, in inbound) {
	style := d.Name()
	body := []byte(in.body)
	if !d.Serves(in.kind) {
		return
	}
	native := d.Native(in.kind)
	if in.normalized && (native || d.Native(dialect.Chat)) {
		return
	}
	var refusal *contract.Refusal
	want := in.refusedBy[style]
	chat := body
	switch {
	case native:
		if w, ok := in.refusedBy[style+"/native"]; ok {
			want = w
		}
		if in.kind == dialect.Responses {
			refusal = contract.CheckResponses(body)
		}
	default:
		var err error
		switch in.kind {
		case dialect.Messages:
			chat, err = messages.MessagesToChat(body)
		case dialect.Responses:
			chat, err = translate.ResponsesToChat(body)
		}
		if err != nil {
			namesField(t, err) // the route's 400, before any provider
			return
		}
		refusal = contract.CheckChat(d.Name(), in.kind, chat)
	}
	if want != "" || refusal != nil {
		if refusal == nil || refusal.Field != want {
			t.Fatalf("refusal %+v, want one naming %q", refusal, want)
		}
		return
	}
	var out []byte
	var err error
	switch {
	case native:
		out, err = d.Adapt(in.kind, body, 4096)
	case d.Native(dialect.Chat):
		out, err = d.Adapt(dialect.Chat, chat, 4096)
	default:
		out, err = d.FromChat(chat, 4096)
	}
	if err != nil {
		namesField(t, err)
		return
	}
	uri := d.URI(in.kind, native, "/embeddings", false)
	if in.kind != dialect.Other {
		uri = d.URI(in.kind, native, in.kind.Path(), false)
	}
	api := contract.APIOf(uri)
	if api == "" {
		t.Fatalf("no contract for %s", uri)
	}
	if api == contract.GeminiGenerate || api == contract.BedrockConverse {
		// Their model is in the URL.
		out, _ = sjson.DeleteBytes(out, "model")
	}
	if err := contract.Validate(api, out); err != nil {
		t.Fatalf("%v\nsent %s", err, out)
	}
}

// namesField fails unless err is a translation's refusal naming the
// client's field ("field: reason"), which the route answers with a 400
// before choosing a provider.
func namesField(t *testing.T, err error) {
	t.Helper()
	field, reason, ok := strings.Cut(err.Error(), ": ")
	if !ok || field == "" || strings.Contains(field, " ") || reason == "" {
		t.Fatalf("the translation failed without naming a field: %v", err)
	}
}
