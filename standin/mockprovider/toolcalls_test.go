package mockprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

const scriptTools = `"tools":[{"type":"function","function":{"name":"Read","parameters":{"type":"object"}}},
	{"type":"function","function":{"name":"Grep","parameters":{"type":"object"}}}]`

func TestScriptedToolCalls(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	body := `{"model":"m1","messages":[{"role":"user","content":[{"type":"text","text":"<reminder>"},
		{"type":"text","text":"Look.\nmock-tool-call: Read {\"file_path\":\"/tmp/a.txt\"}\nmock-tool-call: Grep {\"pattern\":\"x\"}\nmock-tool-call: Bash {}"}]},
		{"role":"system","content":"env"}],` + scriptTools + `}`
	res := testgw.Post(t, srv, "/v1/chat/completions", body)
	j := gjson.Parse(res.Body)
	calls := j.Get("choices.0.message.tool_calls").Array()
	if res.Status != http.StatusOK || j.Get("choices.0.finish_reason").Str != "tool_calls" || len(calls) != 2 ||
		calls[0].Get("function.name").Str != "Read" || calls[0].Get("function.arguments").Str != `{"file_path":"/tmp/a.txt"}` ||
		calls[1].Get("function.name").Str != "Grep" || !strings.HasPrefix(calls[0].Get("id").Str, "call_") ||
		j.Get("choices.0.message.content").Type != gjson.Null {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	if n := j.Get("usage.completion_tokens").Int(); n != 4 {
		t.Errorf("completion_tokens %d, want 4 (a word per name and per argument object)", n)
	}

	// Streamed: per call a delta that opens it, then its arguments.
	stream := strings.Replace(body, `"model":"m1",`, `"model":"m1","stream":true,"stream_options":{"include_usage":true},`, 1)
	events := testgw.ParseSSE(t, testgw.Post(t, srv, "/v1/chat/completions", stream).Body)
	args := map[int64]string{}
	names := map[int64]string{}
	finish := ""
	for _, ev := range events {
		for _, c := range gjson.Get(ev.Data, "choices.0.delta.tool_calls").Array() {
			i := c.Get("index").Int()
			names[i] += c.Get("function.name").Str
			args[i] += c.Get("function.arguments").Str
		}
		if f := gjson.Get(ev.Data, "choices.0.finish_reason").Str; f != "" {
			finish = f
		}
	}
	if finish != "tool_calls" || names[0] != "Read" || names[1] != "Grep" || args[0] != `{"file_path":"/tmp/a.txt"}` || args[1] != `{"pattern":"x"}` {
		t.Errorf("finish %q names %v args %v", finish, names, args)
	}

	// A request that ends with tool results is answered from them; the
	// marker of the earlier turn asks for nothing.
	body = `{"model":"m1","messages":[{"role":"user","content":"mock-tool-call: Read {}"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"Read","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"1\tthe file says hi"}],` + scriptTools + `}`
	res = testgw.Post(t, srv, "/v1/chat/completions", body)
	if c := gjson.Get(res.Body, "choices.0.message.content").Str; c != "Mock answer from m1: tool result 1 the file says hi" {
		t.Errorf("%d %s", res.Status, res.Body)
	}
}

// A strict mock refuses what OpenAI's chat schema does not define below
// the top level, and the headers of Anthropic's API.
func TestStrictRefusesAnthropicShapes(t *testing.T) {
	srv := mockServer(t, &Handler{Strict: true})
	for _, tc := range []struct{ body, header, want string }{
		{`{"model":"m1","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`, "",
			"Additional properties are not allowed ('cache_control' was unexpected) - 'messages.0.content.0'"},
		{`{"model":"m1","messages":[{"role":"user","content":"hi","cache_control":{}}]}`, "",
			"'cache_control' was unexpected) - 'messages.0'"},
		{`{"model":"m1","messages":[{"role":"user","content":[{"type":"thinking","thinking":"x"}]}]}`, "",
			"Invalid value: 'thinking'"},
		{`{"model":"m1","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}},"defer_loading":true}]}`, "",
			"'defer_loading' was unexpected) - 'tools.0'"},
		{`{"model":"m1","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","input_schema":{}}}]}`, "",
			"'input_schema' was unexpected) - 'tools.0.function'"},
		{`{"model":"m1","messages":[{"role":"user","content":"hi"}]}`, "Anthropic-Beta",
			"Unexpected header for this API: Anthropic-Beta"},
	} {
		var h []string
		if tc.header != "" {
			h = []string{tc.header, "claude-code-20250219"}
		}
		res := testgw.Post(t, srv, "/v1/chat/completions", tc.body, h...)
		if res.Status != http.StatusBadRequest || !strings.Contains(gjson.Get(res.Body, "error.message").Str, tc.want) {
			t.Errorf("%s: %d %s", tc.body, res.Status, res.Body)
		}
	}
}
