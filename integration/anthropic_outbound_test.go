package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Anthropic-style providers (style anthropic) through a real Caddy: the
// catalog's anthropic/claude-mock is served by the mock's Anthropic mode
// (as strict as Anthropic's API) behind a proxy that records what reaches
// it.

// anthropicCall is one request the Anthropic-style upstream received.
type anthropicCall struct {
	path   string
	header http.Header
	body   gjson.Result
}

// anthropicTap records the requests to the mock provider.
type anthropicTap struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []anthropicCall
}

func newAnthropicTap(t *testing.T) *anthropicTap {
	t.Helper()
	u, _ := url.Parse("http://" + mockAddr)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	tap := &anthropicTap{}
	tap.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		tap.mu.Lock()
		tap.calls = append(tap.calls, anthropicCall{path: r.URL.Path, header: r.Header.Clone(), body: gjson.ParseBytes(b)})
		tap.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(tap.srv.Close)
	return tap
}

// take returns the calls since the last take.
func (tp *anthropicTap) take() []anthropicCall {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	out := tp.calls
	tp.calls = nil
	return out
}

// claudePricing is the test catalog's Anthropic-style model's prices.
var claudePricing = billing.Pricing{
	Prompt: mustParsePrice("0.000003"), Completion: mustParsePrice("0.000015"),
	InputCacheRead: mustParsePrice("0.0000003"), InputCacheWrite: mustParsePrice("0.00000375"),
	CacheReadSet: true, CacheWriteSet: true, WebSearch: mustParsePrice("0.01"),
}

func mustParsePrice(s string) billing.Price {
	p, err := billing.ParsePrice(s)
	if err != nil {
		panic(err)
	}
	return p
}

// withAnthropicModels adds anthropic/claude-mock (Anthropic-style,
// through tap) and anthropic/claude-fallback (an Anthropic-style provider
// that fails, then the OpenAI-style mock).
func withAnthropicModels(t *testing.T, tap *anthropicTap) func(string) string {
	pricing := "\t\t\tpricing {\n\t\t\t\tprompt 0.000003\n\t\t\t\tcompletion 0.000015\n\t\t\t\tinput_cache_read 0.0000003\n" +
		"\t\t\t\tinput_cache_write 0.00000375\n\t\t\t\tweb_search 0.01\n\t\t\t}\n"
	base := tap.srv.URL
	block := fmt.Sprintf("\t\tmodel anthropic/claude-mock {\n\t\t\tcontext_length 8192\n\t\t\tmax_completion_tokens 1000\n%s"+
		"\t\t\tprovider anthropic %s {\n\t\t\t\tmodel claude-mock\n\t\t\t\tapi_key sk-ant-operator\n\t\t\t\tstyle anthropic\n\t\t\t}\n\t\t}\n"+
		"\t\tmodel anthropic/claude-fallback {\n\t\t\tcontext_length 8192\n%s"+
		"\t\t\tprovider anthropic %s {\n\t\t\t\tmodel claude-error-500\n\t\t\t\tapi_key sk-ant-operator\n\t\t\t\tstyle anthropic\n\t\t\t}\n"+
		"\t\t\tprovider mock %s/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t}\n\t\t}\n"+
		"\t\tmodel anthropic/claude-break {\n\t\t\tcontext_length 8192\n%s"+
		"\t\t\tprovider anthropic %s {\n\t\t\t\tmodel claude-stream-break\n\t\t\t\tapi_key sk-ant-operator\n\t\t\t\tstyle anthropic\n\t\t\t}\n\t\t}\n",
		pricing, base, pricing, base, base, pricing, base) +
		fmt.Sprintf("\t\tmodel acme/claude-bare {\n\t\t\tcontext_length 8192\n%s"+
			"\t\t\tprovider anthropic %s {\n\t\t\t\tmodel claude-bare\n\t\t\t\tapi_key sk-ant-operator\n\t\t\t\tstyle anthropic\n\t\t\t}\n\t\t}\n",
			pricing, base)
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// expectClaudeCost checks that the answer's usage.cost is exactly its
// tokens at the model's prices (chat or Responses usage), plus searches.
func expectClaudeCost(t *testing.T, usage gjson.Result, searches int64) money.Amount {
	t.Helper()
	u := billing.Usage{SearchResults: searches}
	if usage.Get("input_tokens").Exists() {
		u.PromptTokens, u.CompletionTokens = usage.Get("input_tokens").Int(), usage.Get("output_tokens").Int()
		u.CacheReadTokens = usage.Get("input_tokens_details.cached_tokens").Int()
		u.CacheWriteTokens = usage.Get("input_tokens_details.cache_write_tokens").Int()
	} else {
		u.PromptTokens, u.CompletionTokens = usage.Get("prompt_tokens").Int(), usage.Get("completion_tokens").Int()
		u.CacheReadTokens = usage.Get("prompt_tokens_details.cached_tokens").Int()
		u.CacheWriteTokens = usage.Get("prompt_tokens_details.cache_write_tokens").Int()
	}
	want, err := billing.Cost(claudePricing, u)
	if err != nil {
		t.Fatal(err)
	}
	if got := creditAmount(t, usage.Get("cost")); got != want || u.PromptTokens == 0 || u.CompletionTokens == 0 {
		t.Errorf("usage.cost %s, want %s for %+v (%s)", got, want, u, usage.Raw)
	}
	return want
}

// expectAnthropicCall checks that one request reached the provider as
// Anthropic's API wants it, with key, and returns it.
func expectAnthropicCall(t *testing.T, calls []anthropicCall, key string) anthropicCall {
	t.Helper()
	if len(calls) != 1 {
		t.Fatalf("%d upstream calls, want 1", len(calls))
	}
	c := calls[0]
	if c.path != "/v1/messages" || c.header.Get("X-Api-Key") != key || c.header.Get("Anthropic-Version") != "2023-06-01" ||
		c.header.Get("Authorization") != "" {
		t.Errorf("upstream call %s x-api-key %q anthropic-version %q authorization %q", c.path,
			c.header.Get("X-Api-Key"), c.header.Get("Anthropic-Version"), c.header.Get("Authorization"))
	}
	return c
}

func TestAnthropicStyleProvider(t *testing.T) {
	tap := newAnthropicTap(t)
	startInProcessWith(t, withAnthropicModels(t, tap))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"claude"}`)

	t.Run("chat", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock","messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"hello claude"}],"seed":7,"top_k":3}`, nil).expect(t, 200)
		call := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if call.body.Get("system.0.text").Str != "Be brief" || call.body.Get("max_tokens").Int() != 1000 ||
			call.body.Get("model").Str != "claude-mock" || call.body.Get("seed").Exists() || call.body.Get("top_k").Int() != 3 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		a := r.JSON
		if a.Get("choices.0.message.content").Str != "Mock answer from claude-mock: hello claude" || a.Get("choices.0.finish_reason").Str != "stop" ||
			!strings.HasPrefix(a.Get("id").Str, "gen-") || a.Get("model").Str != "anthropic/claude-mock" || a.Get("provider").Str != "anthropic" {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, a.Get("usage"), 0)

		evs := c.streamOf(t, "/chat/completions", key, `{"model":"anthropic/claude-mock","stream":true,"messages":[{"role":"user","content":"hello claude"}]}`)
		expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		s := parseStream(t, evs)
		if !s.done || s.text != "Mock answer from claude-mock: hello claude" {
			t.Errorf("stream text %q done %v", s.text, s.done)
		}
		expectClaudeCost(t, s.usage, 0)
	})

	t.Run("responses", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/responses", key, `{"model":"anthropic/claude-mock","instructions":"Be brief","input":"hello responses","max_output_tokens":50}`, nil).expect(t, 200)
		call := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if call.body.Get("system.0.text").Str != "Be brief" || call.body.Get("max_tokens").Int() != 50 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		if r.JSON.Get("object").Str != "response" || r.JSON.Get("status").Str != "completed" ||
			r.JSON.Get("output.0.content.0.text").Str != "Mock answer from claude-mock: hello responses" {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, r.JSON.Get("usage"), 0)

		evs := c.streamOf(t, "/responses", key, `{"model":"anthropic/claude-mock","input":"hello responses","stream":true}`)
		tap.take()
		s := parseStream(t, evs)
		if s.finalEvent != "response.completed" || s.text != "Mock answer from claude-mock: hello responses" {
			t.Errorf("stream %q ended by %s", s.text, s.finalEvent)
		}
		expectClaudeCost(t, s.usage, 0)
	})

	t.Run("tool calls", func(t *testing.T) {
		tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]`
		r := c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock",`+tools+`,"messages":[{"role":"user","content":"get_weather in Paris"}]}`, nil).expect(t, 200)
		call := r.JSON.Get("choices.0.message.tool_calls.0")
		if r.JSON.Get("choices.0.finish_reason").Str != "tool_calls" || call.Get("function.name").Str != "get_weather" ||
			gjson.Get(call.Get("function.arguments").Str, "query").Str != "get_weather in Paris" {
			t.Fatalf("answer %s", r.Body)
		}
		tap.take()
		// The strict upstream refuses a tool result without its call.
		next := `{"model":"anthropic/claude-mock",` + tools + `,"messages":[{"role":"user","content":"get_weather in Paris"},` +
			`{"role":"assistant","content":null,"tool_calls":[` + call.Raw + `]},{"role":"tool","tool_call_id":"` + call.Get("id").Str + `","content":"sunny, 21C"}]}`
		r = c.mustPost("/chat/completions", key, next, nil).expect(t, 200)
		up := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if up.body.Get("messages.1.content.0.type").Str != "tool_use" || up.body.Get("messages.2.content.0.type").Str != "tool_result" {
			t.Errorf("upstream messages %s", up.body.Get("messages").Raw)
		}
		if got := r.JSON.Get("choices.0.message.content").Str; got != "Mock answer from claude-mock: tool result sunny, 21C" {
			t.Errorf("answer %q", got)
		}
		// Streamed, the call arrives as tool_calls deltas.
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"anthropic/claude-mock","stream":true,`+tools+`,"messages":[{"role":"user","content":"get_weather in Paris"}]}`)
		var args, name, finish string
		for _, ev := range evs {
			d := gjson.Parse(ev.Data)
			args += d.Get("choices.0.delta.tool_calls.0.function.arguments").Str
			name += d.Get("choices.0.delta.tool_calls.0.function.name").Str
			if f := d.Get("choices.0.finish_reason").Str; f != "" {
				finish = f
			}
		}
		if name != "get_weather" || gjson.Get(args, "query").Str != "get_weather in Paris" || finish != "tool_calls" {
			t.Errorf("streamed call %s(%s), finish %s", name, args, finish)
		}
		// Responses: a function_call item.
		rtools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]`
		r = c.mustPost("/responses", key, `{"model":"anthropic/claude-mock",`+rtools+`,"input":"get_weather in Rome"}`, nil).expect(t, 200)
		if item := r.JSON.Get(`output.#(type=="function_call")`); item.Get("name").Str != "get_weather" {
			t.Errorf("responses answer %s", r.Body)
		}
	})

	t.Run("images", func(t *testing.T) {
		tap.take()
		body := `{"model":"anthropic/claude-mock","messages":[{"role":"user","content":[{"type":"text","text":"what is this"},` +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]}`
		c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
		up := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		parts := up.body.Get("messages.0.content")
		if parts.Get("1.source.type").Str != "base64" || parts.Get("1.source.media_type").Str != "image/png" ||
			parts.Get("2.source.type").Str != "url" || parts.Get("2.source.url").Str != "https://example.com/cat.jpg" {
			t.Errorf("upstream parts %s", parts.Raw)
		}
		c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, nil).
			expectError(t, 400, "messages[0].content[0].image_url.url: expected an http(s) URL or a base64 data URL")
	})

	t.Run("stop reasons", func(t *testing.T) {
		r := c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock","max_tokens":2,"messages":[{"role":"user","content":"hello"}]}`, nil).expect(t, 200)
		if r.JSON.Get("choices.0.finish_reason").Str != "length" || r.JSON.Get("choices.0.message.content").Str != "Mock answer" {
			t.Errorf("max_tokens: %s", r.Body)
		}
		tap.take()
		r = c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock","stop":["claude"],"messages":[{"role":"user","content":"hello"}]}`, nil).expect(t, 200)
		if up := tap.take(); len(up) != 1 || up[0].body.Get("stop_sequences.0").Str != "claude" {
			t.Errorf("upstream stop_sequences: %v", up)
		}
		if r.JSON.Get("choices.0.finish_reason").Str != "stop" || r.JSON.Get("choices.0.message.content").Str != "Mock answer from " {
			t.Errorf("stop: %s", r.Body)
		}
		r = c.mustPost("/responses", key, `{"model":"anthropic/claude-mock","max_output_tokens":2,"input":"hello"}`, nil).expect(t, 200)
		if r.JSON.Get("status").Str != "incomplete" || r.JSON.Get("incomplete_details.reason").Str != "max_output_tokens" {
			t.Errorf("responses max_output_tokens: %s", r.Body)
		}
	})

	t.Run("prompt caching", func(t *testing.T) {
		// A prefix of this test run's own (the mock's cache lives as
		// long as the config).
		system := `{"role":"system","content":[{"type":"text","text":"The shared context of the caching test, five six seven eight nine ten","cache_control":{"type":"ephemeral"}}]}`
		body := `{"model":"anthropic/claude-mock","messages":[` + system + `,{"role":"user","content":"first question"}]}`
		tap.take()
		first := c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
		up := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if up.body.Get("system.0.cache_control.type").Str != "ephemeral" {
			t.Errorf("cache_control not passed: %s", up.body.Get("system").Raw)
		}
		u := first.JSON.Get("usage")
		// 13 words + 4: written on first sight, read after.
		if u.Get("prompt_tokens_details.cache_write_tokens").Int() != 17 || u.Get("prompt_tokens_details.cached_tokens").Int() != 0 ||
			u.Get("prompt_tokens").Int() != 17+6 {
			t.Errorf("first usage %s", u.Raw)
		}
		firstCost := expectClaudeCost(t, u, 0)
		second := c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
		u = second.JSON.Get("usage")
		if u.Get("prompt_tokens_details.cached_tokens").Int() != 17 || u.Get("prompt_tokens_details.cache_write_tokens").Int() != 0 {
			t.Errorf("second usage %s", u.Raw)
		}
		secondCost := expectClaudeCost(t, u, 0)
		if secondCost >= firstCost {
			t.Errorf("a cache read (%s) costs no less than a cache write (%s)", secondCost, firstCost)
		}
		// The generation record keeps the cache reads.
		g := c.api("GET", "/generation?id="+second.JSON.Get("id").Str, key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("native_tokens_cached").Int() != 17 || creditAmount(t, g.Get("total_cost")) != secondCost {
			t.Errorf("generation %s", g.Raw)
		}
		// Streamed and through Responses, the same figures.
		s := parseStream(t, c.streamOf(t, "/chat/completions", key, strings.Replace(body, `"messages"`, `"stream":true,"messages"`, 1)))
		if s.usage.Get("prompt_tokens_details.cached_tokens").Int() != 17 {
			t.Errorf("streamed usage %s", s.usage.Raw)
		}
		expectClaudeCost(t, s.usage, 0)
		rbody := `{"model":"anthropic/claude-mock","input":[{"role":"system","content":[{"type":"input_text","text":"Responses context to cache here","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"q"}]}`
		r := c.mustPost("/responses", key, rbody, nil).expect(t, 200)
		// 5 words + 4 written, then read.
		if d := r.JSON.Get("usage.input_tokens_details"); d.Get("cache_write_tokens").Int() != 9 {
			t.Errorf("responses usage %s", r.JSON.Get("usage").Raw)
		}
		expectClaudeCost(t, r.JSON.Get("usage"), 0)
		r = c.mustPost("/responses", key, rbody, nil).expect(t, 200)
		if d := r.JSON.Get("usage.input_tokens_details"); d.Get("cached_tokens").Int() != 9 {
			t.Errorf("responses usage %s", r.JSON.Get("usage").Raw)
		}
		expectClaudeCost(t, r.JSON.Get("usage"), 0)
	})

	t.Run("messages passed natively", func(t *testing.T) {
		// A Messages request to an Anthropic-style provider goes as it is
		// (but for the model id and the gateway's own fields), keeping
		// cache_control, and its cache reads and writes are charged at
		// their prices.
		body := `{"model":"anthropic/claude-mock","max_tokens":40,"models":["anthropic/claude-mock"],` +
			`"system":[{"type":"text","text":"Native messages context worth caching across calls","cache_control":{"type":"ephemeral"}}],` +
			`"messages":[{"role":"user","content":"hello natively"}]}`
		tap.take()
		first := c.mustPost("/messages", key, body, nil).expect(t, 200)
		call := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if call.body.Get("model").Str != "claude-mock" || call.body.Get("models").Exists() ||
			call.body.Get("system.0.cache_control.type").Str != "ephemeral" || call.body.Get("max_tokens").Int() != 40 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		if first.JSON.Get("type").Str != "message" || first.JSON.Get("content.0.text").Str != "Mock answer from claude-mock: hello natively" {
			t.Errorf("answer %s", first.Body)
		}
		expectMessagesCost(t, first.JSON.Get("usage"))
		msgID := first.JSON.Get("id").Str
		if !strings.HasPrefix(msgID, "msg_") {
			t.Errorf("native answer id %q, want Anthropic's msg_ id", msgID)
		}
		g := c.api("GET", "/generation?id="+msgID, key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("id").Str != first.Header.Get("X-Generation-Id") || creditAmount(t, g.Get("total_cost")) != creditAmount(t, first.JSON.Get("usage.cost")) {
			t.Errorf("generation by the answer's id %s", g.Raw)
		}
		if first.JSON.Get("usage.cache_creation_input_tokens").Int() == 0 {
			t.Errorf("first call wrote no cache: %s", first.JSON.Get("usage").Raw)
		}
		second := c.mustPost("/messages", key, body, nil).expect(t, 200)
		if second.JSON.Get("usage.cache_read_input_tokens").Int() == 0 {
			t.Errorf("second call read no cache: %s", second.JSON.Get("usage").Raw)
		}
		expectMessagesCost(t, second.JSON.Get("usage"))
		tap.take()

		evs := c.streamOf(t, "/messages", key, strings.Replace(body, `"max_tokens":40`, `"max_tokens":40,"stream":true`, 1))
		expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		// The prompt's figures come in message_start, the output's and the
		// charge in message_delta.
		var text strings.Builder
		var start, delta gjson.Result
		for _, ev := range evs {
			d := gjson.Parse(ev.Data)
			switch d.Get("type").Str {
			case "message_start":
				start = d.Get("message.usage")
			case "content_block_delta":
				text.WriteString(d.Get("delta.text").Str)
			case "message_delta":
				delta = d.Get("usage")
			}
		}
		if text.String() != "Mock answer from claude-mock: hello natively" || start.Get("cache_read_input_tokens").Int() == 0 {
			t.Errorf("stream text %q usage %s", text.String(), start.Raw)
		}
		combined, _ := sjson.SetRaw(start.Raw, "output_tokens", delta.Get("output_tokens").Raw)
		combined, _ = sjson.SetRaw(combined, "cost", delta.Get("cost").Raw)
		expectMessagesCost(t, gjson.Parse(combined))
	})

	t.Run("native web search", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock","messages":[{"role":"user","content":"caddy news"}],"tools":[{"type":"service:web_search"}]}`, nil).expect(t, 200)
		up := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if up.body.Get(`tools.#(type=="web_search_20250305").name`).Str != "web_search" {
			t.Errorf("upstream tools %s", up.body.Get("tools").Raw)
		}
		msg := r.JSON.Get("choices.0.message")
		anns := msg.Get("annotations").Array()
		if len(anns) != 2 {
			t.Fatalf("annotations in %s", r.Body)
		}
		text := []rune(msg.Get("content").Str)
		for _, a := range anns {
			u := a.Get("url_citation")
			span := string(text[u.Get("start_index").Int():u.Get("end_index").Int()])
			if a.Get("type").Str != "url_citation" || !strings.HasPrefix(u.Get("url").Str, "https://") || strings.TrimSpace(span) != u.Get("content").Str {
				t.Errorf("annotation %s spans %q", a.Raw, span)
			}
		}
		// One search run, at the model's web_search price.
		expectClaudeCost(t, r.JSON.Get("usage"), 1)
		if d := r.JSON.Get("usage.server_tool_use_details"); d.Get("web_search_requests").Int() != 1 {
			t.Errorf("server_tool_use_details %s", d.Raw)
		}

		// Responses, streamed: annotation events and the final list.
		evs := c.streamOf(t, "/responses", key, `{"model":"anthropic/claude-mock","input":"caddy news","stream":true,"tools":[{"type":"service:web_search"}]}`)
		added := 0
		var final gjson.Result
		for _, ev := range evs {
			d := gjson.Parse(ev.Data)
			switch d.Get("type").Str {
			case "response.output_text.annotation.added":
				added++
			case "response.completed":
				final = d.Get("response")
			}
		}
		if added != 2 || final.Get("output.#(type==\"message\").content.0.annotations.#").Int() != 2 {
			t.Errorf("%d annotation events; final %s", added, final.Raw)
		}
		expectClaudeCost(t, final.Get("usage"), 1)
	})

	t.Run("native web search without an anthropic/ id", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"acme/claude-bare","messages":[{"role":"user","content":"caddy news"}],"plugins":[{"id":"web"}]}`, nil).expect(t, 200)
		up := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if !up.body.Get(`tools.#(type=="web_search_20250305")`).Exists() || r.JSON.Get("choices.0.message.annotations.#").Int() != 2 {
			t.Errorf("upstream tools %s; answer %s", up.body.Get("tools").Raw, r.Body)
		}
	})

	t.Run("reasoning", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"acme/claude-bare","max_tokens":2000,"top_k":4,"temperature":0.2,"reasoning":{"effort":"medium"},"messages":[{"role":"user","content":"think"}]}`, nil).expect(t, 200)
		up := expectAnthropicCall(t, tap.take(), "sk-ant-operator")
		if up.body.Get("thinking.budget_tokens").Int() != 1024 || up.body.Get("top_k").Exists() || up.body.Get("temperature").Exists() {
			t.Errorf("upstream body %s", up.body.Raw)
		}
		if r.JSON.Get("choices.0.message.reasoning").Str == "" || r.JSON.Get("choices.0.message.content").Str != "Mock answer from claude-bare: think" {
			t.Errorf("answer %s", r.Body)
		}
		// The thinking block comes with its signature, to be sent back.
		if d := r.JSON.Get("choices.0.message.reasoning_details.0"); d.Get("type").Str != "reasoning.text" || d.Get("signature").Str != "mock-signature" ||
			d.Get("text").Str != r.JSON.Get("choices.0.message.reasoning").Str || d.Get("format").Str != "anthropic-claude-v1" {
			t.Errorf("reasoning_details %s", r.JSON.Get("choices.0.message.reasoning_details").Raw)
		}
		expectClaudeCost(t, r.JSON.Get("usage"), 0)
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"acme/claude-bare","max_tokens":2000,"stream":true,"reasoning":{"effort":"medium"},"messages":[{"role":"user","content":"think"}]}`)
		tap.take()
		var text, sig strings.Builder
		for _, ev := range evs {
			for _, d := range gjson.Get(ev.Data, "choices.0.delta.reasoning_details").Array() {
				text.WriteString(d.Get("text").Str)
				sig.WriteString(d.Get("signature").Str)
			}
		}
		if text.String() == "" || sig.String() != "mock-signature" {
			t.Errorf("streamed reasoning_details: text %q signature %q", text.String(), sig.String())
		}

		// max, the highest effort, is the largest budget below max_tokens
		// here, and xhigh, OpenAI's highest, at an OpenAI-style provider.
		c.mustPost("/chat/completions", key, `{"model":"acme/claude-bare","max_tokens":2000,"reasoning":{"effort":"max"},"messages":[{"role":"user","content":"think"}]}`, nil).expect(t, 200)
		if up := expectAnthropicCall(t, tap.take(), "sk-ant-operator"); up.body.Get("thinking.budget_tokens").Int() != 1960 {
			t.Errorf("upstream body %s", up.body.Raw)
		}
		c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-fallback","max_tokens":2000,"reasoning":{"effort":"max"},"messages":[{"role":"user","content":"think"}]}`, nil).expect(t, 200)
		if calls := tap.take(); len(calls) != 2 || calls[0].body.Get("thinking.budget_tokens").Int() != 1960 || calls[1].body.Get("reasoning_effort").Str != "xhigh" {
			t.Errorf("upstream calls %v", calls)
		}
		c.mustPost("/chat/completions", key, `{"model":"acme/claude-bare","reasoning":{"effort":"maximal"},"messages":[{"role":"user","content":"think"}]}`, nil).
			expectError(t, 400, "reasoning.effort: expected one of max, xhigh, high, medium, low, minimal, none")
		// reasoning_details of a wrong shape, at an Anthropic-style or an OpenAI-style provider.
		for _, model := range []string{"acme/claude-bare", "tollgate-mock"} {
			c.mustPost("/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.text","signature":7}]},{"role":"user","content":"y"}]}`, nil).
				expectError(t, 400, "messages[1].reasoning_details[0].signature: expected a string")
		}

		// A conversation that moves on to an OpenAI-style model with the
		// thinking answer in its history: the strict mock, as OpenAI,
		// refuses members a message does not define, so they are left out.
		first := c.mustPost("/chat/completions", key, `{"model":"acme/claude-bare","max_tokens":2000,"reasoning":{"effort":"medium"},"messages":[{"role":"user","content":"think"}]}`, nil).expect(t, 200)
		tap.take()
		prev := first.JSON.Get("choices.0.message")
		if !prev.Get("reasoning").Exists() || !prev.Get("reasoning_details").Exists() {
			t.Fatalf("answer %s", first.Body)
		}
		for _, stream := range []bool{false, true} {
			body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"think"},` + prev.Raw + `,{"role":"user","content":"again"}]}`
			if !stream {
				r := c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
				if r.JSON.Get("choices.0.message.content").Str != "Mock answer from tollgate-mock: again" {
					t.Errorf("answer %s", r.Body)
				}
				continue
			}
			body, _ = sjson.Set(body, "stream", true)
			if s := parseStream(t, c.streamOf(t, "/chat/completions", key, body)); !s.done || s.text != "Mock answer from tollgate-mock: again" {
				t.Errorf("streamed answer %q", s.text)
			}
		}
		tap.take()
	})

	t.Run("fallback to an OpenAI-style provider", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-fallback","messages":[{"role":"user","content":"hello"}]}`, nil).expect(t, 200)
		calls := tap.take()
		if len(calls) != 2 {
			t.Fatalf("%d upstream calls, want 2", len(calls))
		}
		up := expectAnthropicCall(t, calls[:1], "sk-ant-operator")
		if up.body.Get("model").Str != "claude-error-500" {
			t.Errorf("first attempt %s", up.body.Raw)
		}
		// The OpenAI-style attempt carries no Anthropic header.
		second := calls[1]
		if second.path != "/v1/chat/completions" || second.header.Get("Authorization") != "Bearer mock" ||
			second.header.Get("X-Api-Key") != "" || second.header.Get("Anthropic-Version") != "" || second.body.Get("max_tokens").Exists() {
			t.Errorf("second attempt %s %v %s", second.path, second.header, second.body.Raw)
		}
		if r.JSON.Get("provider").Str != "mock" || r.JSON.Get("choices.0.message.content").Str != "Mock answer from tollgate-mock: hello" {
			t.Errorf("answer %s", r.Body)
		}
		// The strict OpenAI-style mock refuses any Anthropic leftovers.
		s := parseStream(t, c.streamOf(t, "/chat/completions", key, `{"model":"anthropic/claude-fallback","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
		if !s.done || s.text != "Mock answer from tollgate-mock: hello" {
			t.Errorf("streamed fallback %q", s.text)
		}
		tap.take()
	})

	t.Run("BYOK key as x-api-key", func(t *testing.T) {
		const secret = "sk-ant-own-key-1234567890"
		c.api("POST", "/byok", org.MgmtKey, `{"provider":"anthropic","key":"`+secret+`"}`).expect(t, 201)
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock","messages":[{"role":"user","content":"my own key"}]}`, nil).expect(t, 200)
		expectAnthropicCall(t, tap.take(), secret)
		if !r.JSON.Get("usage.is_byok").Bool() {
			t.Errorf("usage %s", r.JSON.Get("usage").Raw)
		}
	})

	t.Run("broken stream", func(t *testing.T) {
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"anthropic/claude-break","stream":true,"messages":[{"role":"user","content":"hello there friend"}]}`)
		tap.take()
		s := parseStream(t, evs)
		last := gjson.Parse(evs[len(evs)-2].Data)
		if !s.done || s.text != "Mock answer from" || last.Get("choices.0.finish_reason").Str != "error" || !last.Get("error.message").Exists() {
			t.Errorf("broken stream %q ends with %s", s.text, last.Raw)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-mock","n":2,"messages":[{"role":"user","content":"x"}]}`, nil).
			expectError(t, 400, "n: Anthropic-style providers give one choice; n must be 1")
		c.mustPost("/completions", key, `{"model":"anthropic/claude-mock","prompt":"x"}`, nil).
			expectError(t, 400, "model: its providers speak Anthropic's Messages API, which does not serve this route")
	})
}

// TestAnthropicStyleSDK runs the openai SDK (chat completions plain and
// streamed, a tool call round trip, responses.create and .stream) against
// a model served by an Anthropic-style provider.
func TestAnthropicStyleSDK(t *testing.T) {
	node := requireNode(t)
	tap := newAnthropicTap(t)
	startInProcessWith(t, withAnthropicModels(t, tap))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"claude-sdk"}`)
	runSDKScript(t, node, "anthropic_style.mjs", "TOLLGATE_API_KEY="+key, "TOLLGATE_MODEL=anthropic/claude-mock", "TOLLGATE_THINKING_MODEL=acme/claude-bare")
	for _, call := range tap.take() {
		if call.path != "/v1/messages" || call.header.Get("X-Api-Key") != "sk-ant-operator" {
			t.Errorf("upstream call %s with x-api-key %q", call.path, call.header.Get("X-Api-Key"))
		}
	}
}

// expectMessagesCost checks that a Messages usage's cost is exactly its
// tokens at anthropic/claude-mock's prices: Anthropic's input_tokens
// leaves the cache's reads and writes out.
func expectMessagesCost(t *testing.T, usage gjson.Result) {
	t.Helper()
	read, write := usage.Get("cache_read_input_tokens").Int(), usage.Get("cache_creation_input_tokens").Int()
	u := billing.Usage{PromptTokens: usage.Get("input_tokens").Int() + read + write, CompletionTokens: usage.Get("output_tokens").Int(),
		CacheReadTokens: read, CacheWriteTokens: write}
	want, err := billing.Cost(claudePricing, u)
	if err != nil {
		t.Fatal(err)
	}
	if got := creditAmount(t, usage.Get("cost")); got != want || u.CompletionTokens == 0 {
		t.Errorf("usage.cost %s, want %s for %+v (%s)", got, want, u, usage.Raw)
	}
}
