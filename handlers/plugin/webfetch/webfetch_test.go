package webfetch

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/webfetch/fetch"
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

// siteFetch is the plugin with a site on loopback that serves one page,
// fetched by a client without the egress policy, at a price of 0.002.
func siteFetch(t *testing.T) (*WebFetch, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/article" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<html><head><title>Green tea</title></head><body><p>The collector is the default.</p></body></html>`))
	}))
	t.Cleanup(srv.Close)
	price, err := ParsePrice("0.002")
	if err != nil {
		t.Fatal(err)
	}
	return &WebFetch{price: price, brand: "service", fetcher: &fetch.Fetcher{Client: srv.Client()}}, srv.URL
}

// blockWord is a guardrail that blocks a page naming its word.
type blockWord struct{ word string }

func (g blockWord) FetchedFilter() (plugin.TextFilter, *apierror.Error) { return g, nil }

func (g blockWord) Filter(texts ...*string) *contentfilter.Hit {
	for _, t := range texts {
		if strings.Contains(*t, g.word) {
			return &contentfilter.Hit{Label: "word", GuardrailID: "g1", GuardrailName: "G", Action: contentfilter.Block}
		}
	}
	return nil
}

func (blockWord) FilterQuery(*string) *apierror.Error { return nil }

func (blockWord) Refusal(h *contentfilter.Hit) *apierror.Error {
	return &apierror.Error{Status: http.StatusForbidden, Message: "blocked by " + h.Label}
}

// The plugin's pages reach the model in a system message before routing;
// the run holds and charges the fetches (in credits under BYOK too) and
// cites the pages, and reports the fetches once charged.
func TestPrerouteFetchesNamedPages(t *testing.T) {
	p, site := siteFetch(t)
	body := `{"model":"m","messages":[{"role":"user","content":"summarize ` + site + `/article and ` + site + `/missing"}],"plugins":[{"id":"web-fetch","max_uses":1}]}`
	out, run, apiErr := p.Preroute(plugintest.PrerouteRequest(dialect.Chat, body))
	if apiErr != nil || run == nil {
		t.Fatalf("%v %v", run, apiErr)
	}
	msgs := gjson.GetBytes(out, "messages")
	if msgs.Get("#").Int() != 2 || msgs.Get("0.role").Str != "system" || !strings.Contains(msgs.Get("0.content").Str, "The collector is the default.") ||
		!strings.Contains(msgs.Get("0.content").Str, "max_uses (1) was reached") {
		t.Fatalf("messages: %s", msgs.Raw)
	}
	r := run.(*Run)
	route := plugintest.Route(dialect.Chat, string(out), 1000, billing.Pricing{})
	if hold, credits, err := r.HoldFor(route); err != nil || hold.String() != "0.002" || credits != hold {
		t.Fatalf("hold %v %v %v", hold, credits, err)
	}
	if d, _ := r.ToolUse(); d != "" {
		t.Fatalf("tool use before the charge: %q", d)
	}
	s := plugin.Settlement{Route: route, Usage: billing.Usage{PromptTokens: 10}}
	if err := r.Settle(&s); err != nil || s.Usage.Extra.String() != "0.002" || s.Credits != s.Usage.Extra || s.Corrected || s.Usage.PromptTokens != 10 {
		t.Fatalf("settle %+v %v", s, err)
	}
	if d, a := r.ToolUse(); d != `"web_fetch_requests":1` || a != "" {
		t.Fatalf("tool use %q %q", d, a)
	}
	if src := r.Sources(); len(src) != 2 || src[0].Title != "Green tea" || src[0].Snippet == "" || src[1].Snippet != "" {
		t.Fatalf("sources %+v", src)
	}
	if h := r.WrapAttempt(nil, route); h != nil {
		t.Fatalf("the plugin alone wraps the attempt: %T", h)
	}
}

// A fetched page the caller's guardrails block refuses the request with
// the guardrail's answer, before anything is held; the plugin on the
// Messages route is a 400.
func TestPrerouteRefusals(t *testing.T) {
	p, site := siteFetch(t)
	body := `{"model":"m","messages":[{"role":"user","content":"read ` + site + `/article"}],"plugins":[{"id":"web-fetch"}]}`
	req := plugintest.PrerouteRequest(dialect.Chat, body)
	req.Filters = blockWord{"collector"}
	if _, run, apiErr := p.Preroute(req); run != nil || apiErr == nil || apiErr.Status != http.StatusForbidden || apiErr.Message != "blocked by word" {
		t.Fatalf("blocked page: %v %v", run, apiErr)
	}
	req = plugintest.PrerouteRequest(dialect.Messages, body)
	if _, _, apiErr := p.Preroute(req); apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, "plugins[0].id: the web-fetch plugin applies to /chat/completions and /responses") {
		t.Fatalf("messages: %v", apiErr)
	}
	req = plugintest.PrerouteRequest(dialect.Chat, `{"model":"m","messages":[],"plugins":[{"id":"web-fetch","max_uses":0}]}`)
	if _, _, apiErr := p.Preroute(req); apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, "plugins[0].max_uses: ") {
		t.Fatalf("bad option: %v", apiErr)
	}
}

// The server tool's loop: the model's web_fetch call is answered with the
// page and the model called again, within the attempt; the client gets
// the last answer, and the earlier round's tokens and the fetch are
// charged with it.
func TestServerToolLoop(t *testing.T) {
	p, site := siteFetch(t)
	body := `{"model":"m","messages":[{"role":"user","content":"read the article"}],"tools":[{"type":"service:web_fetch","parameters":{"max_uses":2}}]}`
	out, run, apiErr := p.Preroute(plugintest.PrerouteRequest(dialect.Chat, body))
	if apiErr != nil || run == nil || gjson.GetBytes(out, "tools.0.function.name").Str != "web_fetch" {
		t.Fatalf("%s %v %v", out, run, apiErr)
	}
	r := run.(*Run)
	route := plugintest.Route(dialect.Chat, string(out), 1000, billing.Pricing{Prompt: 1000, Completion: 1000})
	if apiErr := r.FilterAttempts(route); apiErr != nil || len(route.Attempts) != 1 {
		t.Fatalf("attempts: %v %d", apiErr, len(route.Attempts))
	}
	if hold, credits, err := r.HoldFor(route); err != nil || credits.String() != "0.004" || hold <= credits {
		t.Fatalf("hold %v %v %v", hold, credits, err)
	}
	var rounds []string
	provider := caddyhttp.HandlerFunc(func(w http.ResponseWriter, req *http.Request) error {
		b, _ := io.ReadAll(req.Body)
		rounds = append(rounds, string(b))
		w.Header().Set("Content-Type", "application/json")
		if len(rounds) == 1 {
			_, _ = w.Write([]byte(`{"id":"a","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"web_fetch","arguments":"{\"url\":\"` + site + `/article\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":5}}`))
			return nil
		}
		_, _ = w.Write([]byte(`{"id":"b","choices":[{"index":0,"message":{"role":"assistant","content":"It is the default."},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":6}}`))
		return nil
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(out)))
	if err := r.WrapAttempt(provider, route).ServeHTTP(rec, req); err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 2 || !strings.Contains(gjson.Get(rounds[1], "messages.2.content").Str, "The collector is the default.") ||
		gjson.Get(rounds[1], "messages.2.tool_call_id").Str != "c1" {
		t.Fatalf("rounds: %q", rounds)
	}
	if rec.Code != 200 || gjson.Get(rec.Body.String(), "choices.0.message.content").Str != "It is the default." {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	s := plugin.Settlement{Route: route, Usage: billing.Usage{PromptTokens: 40, CompletionTokens: 6}}
	if err := r.Settle(&s); err != nil || s.Usage.PromptTokens != 60 || s.Usage.CompletionTokens != 11 || !s.Corrected ||
		s.Usage.Extra.String() != "0.002" || s.Credits != s.Usage.Extra {
		t.Fatalf("settle %+v %v", s, err)
	}
	if src := r.Sources(); len(src) != 1 || src[0].URL != site+"/article" {
		t.Fatalf("sources %+v", src)
	}
	doc := r.AdjustResponsesUsage([]byte(`{"usage":{"input_tokens":40,"output_tokens":6,"total_tokens":46}}`), "usage")
	if string(doc) != `{"usage":{"input_tokens":60,"output_tokens":11,"total_tokens":71}}` {
		t.Fatalf("responses usage %s", doc)
	}
}
