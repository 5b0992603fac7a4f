package webfetch

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
)

func TestConformance(t *testing.T) {
	plugintest.Run(t, plugintest.Case{
		Plugin:    new(WebFetch),
		Kind:      dialect.Chat,
		Preroutes: `{"model":"m","messages":[{"role":"user","content":"read https://example.com"}],"tools":[{"type":"service:web_fetch"}]}`,
	})
}

// BenchmarkPrerouteWithoutWebFetch is the plugin's step before routing
// on a request that does not ask for it.
func BenchmarkPrerouteWithoutWebFetch(b *testing.B) {
	p := new(WebFetch)
	req := plugintest.PrerouteRequest(dialect.Chat, `{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":16}`)
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = p.Preroute(req)
	}
}

func TestPriceOf(t *testing.T) {
	if p, err := ParsePrice(""); err != nil || p.String() != DefaultPrice {
		t.Errorf("default %v %v", p, err)
	}
	if p, err := ParsePrice("0.002"); err != nil || p.String() != "0.002" {
		t.Errorf("0.002: %v %v", p, err)
	}
	for _, s := range []string{"-1", "cheap"} {
		if _, err := ParsePrice(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestPlanFetchTool(t *testing.T) {
	out, tool, apiErr := planTool([]byte(`{"messages":[],"tools":[{"type":"function","function":{"name":"f"}},{"type":"service:web_fetch","parameters":{"max_uses":3,"blocked_domains":["x.com"]}}]}`), dialect.Chat, "service")
	if apiErr != nil || tool.index != 1 || tool.opts.MaxUses != 3 || tool.opts.Blocked[0] != "x.com" ||
		gjson.GetBytes(out, "tools.1.function.name").Str != "web_fetch" || gjson.GetBytes(out, "tools.0.function.name").Str != "f" {
		t.Fatalf("%s %+v %v", out, tool, apiErr)
	}
	out, tool, apiErr = planTool([]byte(`{"input":"hi","tools":[{"type":"service:web_fetch"}]}`), dialect.Responses, "service")
	if apiErr != nil || tool.opts.MaxUses != 10 || gjson.GetBytes(out, "tools.0.name").Str != "web_fetch" || gjson.GetBytes(out, "tools.0.type").Str != "function" {
		t.Fatalf("responses: %s %v", out, apiErr)
	}
	if _, _, apiErr = planTool([]byte(`{"tools":[{"type":"service:web_fetch","parameters":{"max_content_tokens":0}}]}`), dialect.Chat, "service"); apiErr == nil ||
		!strings.HasPrefix(apiErr.Message, "tools[0].parameters.max_content_tokens: expected an integer from 1 to 100000") {
		t.Fatalf("bad parameter: %v", apiErr)
	}
	if _, _, apiErr = planTool([]byte(`{"tools":[{"type":"service:web_fetch","cache_control":{}}]}`), dialect.Chat, "service"); apiErr == nil ||
		!strings.HasPrefix(apiErr.Message, "tools[0].cache_control: unknown field") {
		t.Fatalf("unknown member: %v", apiErr)
	}
}

func TestNextRoundBody(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"web_fetch"}}],"tool_choice":{"type":"function","function":{"name":"web_fetch"}}}`)
	msg := gjson.Parse(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"web_fetch","arguments":"{\"url\":\"https://a.com\"}"}}]}`)
	calls := msg.Get("tool_calls").Array()
	out, err := nextRoundBody(body, msg, calls, []string{"page"}, true)
	if err != nil || gjson.GetBytes(out, "messages.#").Int() != 3 || gjson.GetBytes(out, "messages.2.tool_call_id").Str != "c1" || gjson.GetBytes(out, "messages.2.content").Str != "page" ||
		!gjson.GetBytes(out, "tools").Exists() {
		t.Fatalf("%s %v", out, err)
	}
	// Spent: the tool and a tool_choice naming it are withdrawn.
	out, err = nextRoundBody(body, msg, calls, []string{"page"}, false)
	if err != nil || gjson.GetBytes(out, "tools").Exists() || gjson.GetBytes(out, "tool_choice").Exists() {
		t.Fatalf("withdrawn: %s %v", out, err)
	}
}

func TestChatAnswerAsStream(t *testing.T) {
	answer := []byte(`{"id":"gen-1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi [A](https://a.com)","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)
	got := string(chatAnswerAsStream(answer))
	want := `data: {"object":"chat.completion.chunk","id":"gen-1","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi [A](https://a.com)","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"},"index":0}]},"finish_reason":null}]}

data: {"object":"chat.completion.chunk","id":"gen-1","created":7,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"object":"chat.completion.chunk","id":"gen-1","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}

data: [DONE]

`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
