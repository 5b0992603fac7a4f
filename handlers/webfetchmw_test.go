package handlers

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
)

// A request without the plugin or the tool pays one byte search: no
// allocation, the body returned as it came.
func TestFetchPlanWithoutWebFetch(t *testing.T) {
	fs := newFetchStage(nil, 0)
	st := &requestState{State: pipeline.State{API: chatRoute}}
	r := httptest.NewRequest("POST", "/api/v1/chat/completions", nil)
	body := []byte(benchChatBody)
	allocs := testing.AllocsPerRun(100, func() {
		out, apiErr := fs.plan(r, st, body)
		if apiErr != nil || &out[0] != &body[0] || st.fetch != nil {
			t.Fatal("the body changed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request without web fetch", allocs)
	}
}

// BenchmarkFetchPlanWithoutWebFetch is the web-fetch step on a request
// that does not ask for it.
func BenchmarkFetchPlanWithoutWebFetch(b *testing.B) {
	fs := newFetchStage(nil, 0)
	st := &requestState{State: pipeline.State{API: chatRoute}}
	r := httptest.NewRequest("POST", "/api/v1/chat/completions", nil)
	body := []byte(benchChatBody)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = fs.plan(r, st, body)
	}
}

func TestPlanFetchTool(t *testing.T) {
	out, tool, apiErr := planFetchTool([]byte(`{"messages":[],"tools":[{"type":"function","function":{"name":"f"}},{"type":"service:web_fetch","parameters":{"max_uses":3,"blocked_domains":["x.com"]}}]}`), "chat", "service")
	if apiErr != nil || tool.index != 1 || tool.opts.MaxUses != 3 || tool.opts.Blocked[0] != "x.com" ||
		gjson.GetBytes(out, "tools.1.function.name").Str != "web_fetch" || gjson.GetBytes(out, "tools.0.function.name").Str != "f" {
		t.Fatalf("%s %+v %v", out, tool, apiErr)
	}
	out, tool, apiErr = planFetchTool([]byte(`{"input":"hi","tools":[{"type":"service:web_fetch"}]}`), "responses", "service")
	if apiErr != nil || tool.opts.MaxUses != 10 || gjson.GetBytes(out, "tools.0.name").Str != "web_fetch" || gjson.GetBytes(out, "tools.0.type").Str != "function" {
		t.Fatalf("responses: %s %v", out, apiErr)
	}
	if _, _, apiErr = planFetchTool([]byte(`{"tools":[{"type":"service:web_fetch","parameters":{"max_content_tokens":0}}]}`), "chat", "service"); apiErr == nil ||
		!strings.HasPrefix(apiErr.Message, "tools[0].parameters.max_content_tokens: expected an integer from 1 to 100000") {
		t.Fatalf("bad parameter: %v", apiErr)
	}
	if _, _, apiErr = planFetchTool([]byte(`{"tools":[{"type":"service:web_fetch","cache_control":{}}]}`), "chat", "service"); apiErr == nil ||
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

func TestWebFetchPriceOption(t *testing.T) {
	var tg Tollgate
	if known, err := tg.SetOption("web_fetch_price", []string{"0.002"}); !known || err != nil || tg.WebFetchPrice != "0.002" {
		t.Fatalf("%v %v %q", known, err, tg.WebFetchPrice)
	}
	if p, err := tg.webFetchPrice(); err != nil || p.String() != "0.002" {
		t.Fatalf("%v %v", p, err)
	}
	for _, args := range [][]string{{"-1"}, {"cheap"}, {}, {"1", "2"}} {
		var tg Tollgate
		if _, err := tg.SetOption("web_fetch_price", args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
	bad := Tollgate{WebFetchPrice: "x"}
	if err := bad.Validate(); err == nil || !strings.HasPrefix(err.Error(), "web_fetch_price:") {
		t.Errorf("Validate: %v", err)
	}
	if p, err := new(Tollgate).webFetchPrice(); err != nil || p.String() != DefaultWebFetchPrice {
		t.Errorf("default %v %v", p, err)
	}
}
