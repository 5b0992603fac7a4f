package messages

import (
	"bytes"
	"encoding/json"

	"github.com/tidwall/gjson"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestMessagesToChat(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"string content and sampling", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Hi"}],
			"temperature":0.5,"top_p":0.9,"top_k":40,"stop_sequences":["END"],"metadata":{"user_id":"u-1"},
			"thinking":{"type":"enabled","budget_tokens":2048},"service_tier":"auto","provider":{"sort":"price"}}`,
			`{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"Hi"}],"temperature":0.5,"top_p":0.9,
			"stop":["END"],"user":"u-1","reasoning_effort":"xhigh"}`},
		{"user wins over metadata.user_id", `{"model":"m","max_tokens":5,"user":"end-1","metadata":{"user_id":"u-1"},"messages":[]}`,
			`{"model":"m","max_tokens":5,"user":"end-1","messages":[]}`},
		{"stream asks for usage", `{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"system string", `{"model":"m","max_tokens":5,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`},
		{"system blocks with cache_control", `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"You are Claude Code."},
			{"type":"text","text":"Use tools.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"You are Claude Code.\n\nUse tools."},{"role":"user","content":"Hi"}]}`},
		{"user blocks: text, images, document", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
			{"type":"text","text":"Look:","cache_control":{"type":"ephemeral"}},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},
			{"type":"image","source":{"type":"url","url":"https://x.test/a.png"}},
			{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"},"title":"a.pdf"},
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"plain doc"}}]}]}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
			{"type":"text","text":"Look:"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},
			{"type":"image_url","image_url":{"url":"https://x.test/a.png"}},
			{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBE"}},
			{"type":"text","text":"plain doc"}]}]}`},
		{"one text block is a string", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`},
		{"tool use both ways", `{"model":"m","max_tokens":5,"messages":[
			{"role":"user","content":"Weather in Paris and Rome?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Checking."},
				{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}},
				{"type":"tool_use","id":"toolu_2","name":"weather","input":{"city":"Rome"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"},
				{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"no data"},
					{"type":"image","source":{"type":"base64","media_type":"image/png","data":"BBBB"}}]},
				{"type":"text","text":"And tomorrow?"}]}],
			"tools":[{"name":"weather","description":"Weather by city","input_schema":{"type":"object","properties":{"city":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}],
			"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			`{"model":"m","max_tokens":5,"messages":[
			{"role":"user","content":"Weather in Paris and Rome?"},
			{"role":"assistant","content":"Checking.","reasoning_details":[{"type":"reasoning.text","text":"hm","signature":"s","format":"anthropic-claude-v1"}],"tool_calls":[
				{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
				{"id":"toolu_2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Rome\"}"}}]},
			{"role":"tool","tool_call_id":"toolu_1","content":"18C"},
			{"role":"tool","tool_call_id":"toolu_2","content":"Error: no data"},
			{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,BBBB"}},{"type":"text","text":"And tomorrow?"}]}],
			"tools":[{"type":"function","function":{"name":"weather","description":"Weather by city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
			"tool_choice":"required","parallel_tool_calls":false}`},
		{"assistant tool call alone has null content", `{"model":"m","max_tokens":5,"messages":[
			{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t"}]}]}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"t","content":""}]}`},
		{"Claude Code: system messages anywhere, adaptive thinking and effort, dropped Anthropic-only fields", `{"model":"m","max_tokens":4096,
			"system":[{"type":"text","text":"x-billing"},{"type":"text","text":"You are an agent.","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"<reminder>"},{"type":"text","text":"Say \"hi\"","cache_control":{"type":"ephemeral"}}]},
				{"role":"system","content":[{"type":"text","text":"# Environment\nlinux","cache_control":{"type":"ephemeral"}}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"sig"},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/a"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"     1\tline"},{"type":"text","text":"<reminder 2>"}]},
				{"role":"system","content":"Later note"}],
			"tools":[{"name":"Read","description":"Reads","input_schema":{"type":"object"},"strict":true},
				{"name":"Deferred","description":"never","input_schema":{"type":"object"},"defer_loading":true}],
			"metadata":{"user_id":"{\"device_id\":\"d\"}"},"thinking":{"type":"adaptive","display":"omitted"},
			"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},"output_config":{"effort":"max"},
			"speed":"fast","cache_control":{"type":"ephemeral"},"stream":true}`,
			`{"model":"m","max_tokens":4096,"user":"{\"device_id\":\"d\"}","messages":[
				{"role":"system","content":"x-billing\n\nYou are an agent."},
				{"role":"user","content":[{"type":"text","text":"<reminder>"},{"type":"text","text":"Say \"hi\""}]},
				{"role":"system","content":"# Environment\nlinux"},
				{"role":"assistant","content":null,"reasoning_details":[{"type":"reasoning.text","text":"","signature":"sig","format":"anthropic-claude-v1"}],
					"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"/a\"}"}}]},
				{"role":"tool","tool_call_id":"toolu_1","content":"     1\tline"},
				{"role":"user","content":"<reminder 2>"},
				{"role":"system","content":"Later note"}],
			"reasoning_effort":"xhigh",
			"tools":[{"type":"function","function":{"name":"Read","description":"Reads","strict":true,"parameters":{"type":"object"}}},
				{"type":"function","function":{"name":"Deferred","description":"never","parameters":{"type":"object"}}}],
			"stream":true,"stream_options":{"include_usage":true}}`},
		{"thinking enabled: the budget's share of max_tokens", `{"model":"m","max_tokens":10000,"messages":[{"role":"user","content":"Hi"}],
			"thinking":{"type":"enabled","budget_tokens":5000}}`,
			`{"model":"m","max_tokens":10000,"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"medium"}`},
		{"thinking disabled sends no effort", `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}],
			"thinking":{"type":"disabled"},"output_config":{"effort":"low"}}`,
			`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`},
		{"effort alone, structured output", `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}],
			"output_config":{"effort":"low","format":{"type":"json_schema","schema":{"type":"object"}}}}`,
			`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"low",
			"response_format":{"type":"json_schema","json_schema":{"name":"output","strict":true,"schema":{"type":"object"}}}}`},
		{"tool_choice tool", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}}`,
			`{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
		{"tool_choice auto and none", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"}}`,
			`{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none"}`},
		{"tool_choice auto", `{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`,
			`{"model":"m","max_tokens":5,"messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"}`},
		// Without tools a tool_choice means nothing, and OpenAI refuses it.
		{"tool_choice without tools", `{"model":"m","max_tokens":5,"messages":[],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
			`{"model":"m","max_tokens":5,"messages":[]}`},
		{"earlier server tool records are left out", `{"model":"m","max_tokens":5,"messages":[
			{"role":"assistant","content":[{"type":"server_tool_use","id":"s","name":"web_search","input":{}},{"type":"web_search_tool_result","tool_use_id":"s","content":[]},{"type":"text","text":"Found."}]}]}`,
			`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":"Found."}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MessagesToChat([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			testgw.JSONEqual(t, got, tt.want)
		})
	}
}

func TestMessagesToChatErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[]`, "body: must be a JSON object"},
		{`{"messages":{}}`, "messages: an array of messages"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].role: expected user, assistant or system"},
		{`{"messages":[{"role":"system","content":[{"type":"image"}]}]}`, "messages[0].content[0].type: expected text"},
		{`{"messages":[],"container":"c"}`, "container: unknown field; only Anthropic-style providers take it, and this model's provider is not one"},
		{`{"messages":[],"output_config":{"effort":"huge"}}`, "output_config.effort: expected low, medium, high, xhigh or max"},
		{`{"messages":[],"output_config":{"task_budget":1}}`, "output_config.task_budget: unknown field; only Anthropic-style providers take it, and this model's provider is not one"},
		{`{"messages":[],"thinking":{"type":"sometimes"}}`, "thinking.type: expected enabled, adaptive or disabled"},
		{`{"messages":[],"thinking":{"type":"enabled"}}`, "thinking.budget_tokens: a positive integer"},
		{`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yes"},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]}`,
			"messages[2].content[0].tool_use_id: toolu_9 answers no tool_use of the previous (assistant) message"},
		{`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`,
			"messages[1].content: no tool_result for tool_use b of messages[0]"},
		{`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":"next"}]}`,
			"messages[0]: tool_use a has no tool_result in the next message"},
		{`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`,
			"messages[0]: tool_use a has no tool_result in a next user message"},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content[0].text: a string"},
		{`{"messages":[{"role":"user","content":5}]}`, "messages[0].content: a string or an array of content blocks"},
		{`{"messages":[{"role":"user","content":[{"type":"video"}]}]}`, `messages[0].content[0].type: "video" is not supported by this model's provider`},
		{`{"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type: required"},
		{`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, "messages[0].content[0].source.type: expected base64 or url"},
		{`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"x"}}]}]}`, "messages[0].content[0].source: a base64 source needs media_type and data"},
		{`{"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages[0].content[0].tool_use_id: required"},
		{`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"video"}]}]}]}`, "messages[0].content[0].tool_use_id: t answers no tool_use of the previous (assistant) message"},
		{`{"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f"}]}]}`, "messages[0].content[0]: a tool_use block needs id and name"},
		{`{"messages":[{"role":"assistant","content":[{"type":"image","source":{}}]}]}`, `messages[0].content[0].type: "image" is not supported in an assistant message by this model's provider`},
		{`{"messages":[],"system":[{"type":"image"}]}`, "system[0].type: expected text"},
		{`{"messages":[],"system":5}`, "system: a string or an array of text blocks"},
		{`{"messages":[],"tools":[{"type":"bash_20250124","name":"bash"}]}`, `tools[0].type: "bash_20250124" is not supported by this model's provider; define it as a client tool with input_schema`},
		{`{"messages":[],"tools":[{"name":"f"}]}`, "tools[0].input_schema: required (a JSON schema object)"},
		{`{"messages":[],"tools":[{"input_schema":{}}]}`, "tools[0].name: required"},
		{`{"messages":[],"tool_choice":{"type":"tool"}}`, "tool_choice.name: required for type tool"},
		{`{"messages":[],"tool_choice":{"type":"sometimes"}}`, "tool_choice.type: expected auto, any, tool or none"},
		{`{"messages":[],"tool_choice":"auto"}`, "tool_choice: an object with a type"},
		{`{"messages":[],"stop_sequences":"END"}`, "stop_sequences: an array of strings"},
		{`{"messages":[],"stop_sequences":[1]}`, "stop_sequences[0]: a string"},
	}
	for _, tt := range tests {
		_, err := MessagesToChat([]byte(tt.in))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: error %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestMessagesToChatClaudeCode translates a request Claude Code sent:
// its system message mid-conversation becomes a chat system message in
// place, and nothing Anthropic-only reaches the chat body.
func TestMessagesToChatClaudeCode(t *testing.T) {
	got, err := MessagesToChat(claudeCodeRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(got) {
		t.Fatalf("not JSON: %.200s", got)
	}
	for _, absent := range []string{"cache_control", "context_management", "output_config", "thinking", "defer_loading", "metadata"} {
		if bytes.Contains(got, []byte(`"`+absent+`"`)) {
			t.Errorf("chat body has %s", absent)
		}
	}
	roles := gjson.GetBytes(got, "messages.#.role").String()
	if roles != `["system","user","system"]` {
		t.Errorf("roles %s", roles)
	}
	if e := gjson.GetBytes(got, "reasoning_effort").Str; e != "high" {
		t.Errorf("reasoning_effort %q", e)
	}
	if n := len(gjson.GetBytes(got, "tools").Array()); n != 12 {
		t.Errorf("%d tools", n)
	}
}

// An assistant's signed and redacted thinking is its reasoning_details,
// in order, in Anthropic's format; unsigned thinking has no chat form.
func TestMessagesThinkingToReasoningDetails(t *testing.T) {
	body := `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[` +
		`{"type":"thinking","thinking":"a \"b\"","signature":"s1"},{"type":"redacted_thinking","data":"ENC"},{"type":"thinking","thinking":"unsigned"},` +
		`{"type":"text","text":"ok"}]},{"role":"user","content":"more"}]}`
	out, err := MessagesToChat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"reasoning.text","text":"a \"b\"","signature":"s1","format":"anthropic-claude-v1"},{"type":"reasoning.encrypted","data":"ENC","format":"anthropic-claude-v1"}]`
	if got := gjson.GetBytes(out, "messages.1.reasoning_details").Raw; got != want {
		t.Errorf("reasoning_details %s, want %s", got, want)
	}
	// Without signed thinking, no reasoning_details.
	out, _ = MessagesToChat([]byte(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"thinking","thinking":"x","signature":""},{"type":"text","text":"ok"}]}]}`))
	if gjson.GetBytes(out, "messages.1.reasoning_details").Exists() {
		t.Errorf("unsigned thinking: %s", out)
	}
}
