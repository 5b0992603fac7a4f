package integration

// Web search on the Responses route, for providers that speak Responses
// (the request passed through) and providers that speak only Chat
// Completions (the request and the answer translated): native searches in
// each family's chat form, url_citation annotations exact in code points,
// the same streamed and plain, gap-free sequence numbers, and the search
// charged exactly in usage and in the account's balance.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// startWebSearchResponses is startWebSearch plus models whose only
// provider speaks Chat Completions (`api chat`), one per search family.
func startWebSearchResponses(t *testing.T, edits ...func(string) string) *webSearchEnv {
	t.Helper()
	return startWebSearchWith(t, func(via string) string {
		m := func(id, upstream string) string {
			return fmt.Sprintf("\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
				"\t\t\tprovider p %s {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key k\n\t\t\t\tapi chat\n\t\t\t}\n\t\t}\n", id, via, upstream)
		}
		return m("ws/chat", "tollgate-mock") + m("ws/cite-chat", "tollgate-mock-cite") +
			fmt.Sprintf("\t\tmodel ws/cite {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
				"\t\t\tprovider p %s {\n\t\t\t\tmodel tollgate-mock-cite\n\t\t\t\tapi_key k\n\t\t\t}\n\t\t}\n", via) + m("openai/gpt-chat", "gpt-ws") + m("anthropic/claude-chat", "claude-ws") + m("x-ai/grok-chat", "grok-ws")
	}, edits...)
}

// messagePart is the output_text part of a Responses object's message item.
func messagePart(t *testing.T, what string, resp gjson.Result) gjson.Result {
	t.Helper()
	for _, item := range resp.Get("output").Array() {
		if item.Get("type").Str == "message" {
			return item.Get("content.0")
		}
	}
	t.Fatalf("%s: no message item in %s", what, resp.Raw)
	return gjson.Result{}
}

// checkExactSpans checks that every flat url_citation spans, in code
// points, exactly the markdown link [title](url) it cites, and that there
// are n of them.
func checkExactSpans(t *testing.T, what, text string, anns gjson.Result, n int) {
	t.Helper()
	if utf8.RuneCountInString(text) == len(text) {
		t.Fatalf("%s: answer is ASCII: %q", what, text)
	}
	if len(anns.Array()) != n {
		t.Fatalf("%s: %d annotations, want %d: %s in %q", what, len(anns.Array()), n, anns.Raw, text)
	}
	for _, a := range anns.Array() {
		span := codePointSlice(t, text, a.Get("start_index").Int(), a.Get("end_index").Int())
		if want := "[" + a.Get("title").Str + "](" + a.Get("url").Str + ")"; a.Get("type").Str != "url_citation" || span != want {
			t.Fatalf("%s: annotation %s spans %q, want %q", what, a.Raw, span, want)
		}
	}
}

// responsesStream streams a Responses request and returns its header and
// events (without [DONE]), after checking that every event's
// sequence_number is the previous one plus one, from 0, and that the
// stream ends with data: [DONE].
func responsesStream(t *testing.T, e *webSearchEnv, body string) (http.Header, []gjson.Result) {
	t.Helper()
	res := openResponsesStream(t, e.c, e.key, body)
	defer res.Body.Close()
	evs, err := readStream(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []gjson.Result
	seq := responsesSequence{t: t}
	for _, ev := range evs {
		if d, ok := seq.next(ev); ok {
			out = append(out, d)
		}
	}
	seq.end()
	return res.Header, out
}

// webSearchResponsesCases are web search requests on /responses against
// both kinds of provider, with the search part of their cost.
var webSearchResponsesCases = []struct {
	name, model, search string
	translated          bool
	deprecated          bool
	results             int64 // usage.server_tool_use_details.web_search_results
	annotations         int
	cost                money.Amount // the search's part of the cost
}{
	// A gateway-side engine (the engines' test double): 3 results at 0.004.
	{"exa translated", "ws/chat", `"plugins":[{"id":"web","engine":"exa","max_results":3}]`, true, true, 3, 3, 12_000_000},
	{"exa pass-through", "ws/plain", `"tools":[{"type":"service:web_search","parameters":{"engine":"exa","max_results":3}}]`, false, false, 3, 3, 12_000_000},
	// A provider that annotates its own answer (the mock's citing model)
	// under a gateway engine: the gateway's annotations replace its own,
	// streamed as plain, none twice (3 results and the model's 2 links).
	{"exa translated, provider cites", "ws/cite-chat", `"plugins":[{"id":"web","engine":"exa","max_results":3}]`, true, true, 3, 5, 12_000_000},
	{"exa pass-through, provider cites", "ws/cite", `"plugins":[{"id":"web","engine":"exa","max_results":3}]`, false, true, 3, 5, 12_000_000},
	// Native searches are billed as max_results (5) results at 0.004.
	{"openai translated", "openai/gpt-chat", `"tools":[{"type":"service:web_search"}]`, true, false, 5, 2, 20_000_000},
	{"openai pass-through", "openai/gpt-ws", `"tools":[{"type":"service:web_search"}]`, false, false, 5, 2, 20_000_000},
	{"anthropic translated", "anthropic/claude-chat", `"plugins":[{"id":"web","exclude_domains":["spam.example"]}]`, true, true, 5, 2, 20_000_000},
	{"anthropic pass-through", "anthropic/claude-ws", `"plugins":[{"id":"web","exclude_domains":["spam.example"]}]`, false, true, 5, 2, 20_000_000},
	// X search adds 3 posts at 0.005 and 1 profile at 0.01 (the mock's counts).
	{"x translated", "x-ai/grok-chat", `"tools":[{"type":"service:web_search","parameters":{"x_search":{"allowed_x_handles":["tollgate"]}}}]`, true, false, 5, 2, 20_000_000 + 15_000_000 + 10_000_000},
	{"x pass-through", "x-ai/grok-ws", `"tools":[{"type":"service:web_search","parameters":{"x_search":{"allowed_x_handles":["tollgate"]}}}]`, false, false, 5, 2, 20_000_000 + 15_000_000 + 10_000_000},
}

// TestWebSearchResponsesStreamedEqualPlain: for each search family, on a
// provider that speaks Responses and on one translated from chat, the plain
// and the streamed answer of one request carry the same text and the same
// annotations (exact spans on non-ASCII text), every stream's sequence
// numbers are gap-free, and both runs charge the search exactly, in
// usage.cost and in the account's balance.
func TestWebSearchResponsesStreamedEqualPlain(t *testing.T) {
	e := startWebSearchResponses(t)
	const q = "Größte Stadt der Schweiz? 日本語 🎉"
	for _, tc := range webSearchResponsesCases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"` + tc.model + `","input":"` + q + `",` + tc.search + `}`
			checkUsage := func(what string, u gjson.Result) money.Amount {
				t.Helper()
				want := tokenCost(u.Get("input_tokens").Int(), u.Get("output_tokens").Int()) + tc.cost
				if got := creditAmount(t, u.Get("cost")); got != want {
					t.Fatalf("%s: usage.cost %s, want %s (usage %s)", what, got, want, u.Raw)
				}
				d := u.Get("server_tool_use_details")
				if d.Get("web_search_requests").Int() != 1 || d.Get("web_search_results").Int() != tc.results {
					t.Fatalf("%s: usage %s", what, u.Raw)
				}
				return want
			}

			before := e.c.snapshot(e.key, e.org.MgmtKey)
			r, up, _ := e.post(t, "/responses", body)
			r.expect(t, 200)
			if len(up) != 1 || gjson.GetBytes(up[0], "messages").Exists() != tc.translated {
				t.Fatalf("upstream calls %q", up)
			}
			if (r.Header.Get("Deprecation") != "") != tc.deprecated {
				t.Fatalf("Deprecation header %q", r.Header.Get("Deprecation"))
			}
			part := messagePart(t, "plain", r.JSON)
			text, plain := part.Get("text").Str, part.Get("annotations")
			checkExactSpans(t, "plain", text, plain, tc.annotations)
			cost := checkUsage("plain", r.JSON.Get("usage"))
			expectCharged(t, before, e.c.snapshot(e.key, e.org.MgmtKey), cost, "plain")

			before = e.c.snapshot(e.key, e.org.MgmtKey)
			hdr, evs := responsesStream(t, e, strings.Replace(body, `"model"`, `"stream":true,"model"`, 1))
			if (hdr.Get("Deprecation") != "") != tc.deprecated {
				t.Fatalf("stream: Deprecation header %q", hdr.Get("Deprecation"))
			}
			var sb strings.Builder
			var added []string
			finals := map[string]string{}
			var completed gjson.Result
			for _, d := range evs {
				switch typ := d.Get("type").Str; typ {
				case "response.output_text.delta":
					sb.WriteString(d.Get("delta").Str)
				case "response.output_text.annotation.added":
					if d.Get("annotation_index").Int() != int64(len(added)) || d.Get("item_id").Str == "" {
						t.Fatalf("annotation event %s", d.Raw)
					}
					added = append(added, d.Get("annotation").Raw)
				case "response.output_text.done":
					// The public event has no annotations; the gateway's own
					// citations add them, a provider's may not.
					if a := d.Get("annotations"); a.Exists() {
						finals[typ] = a.Raw
					}
					if d.Get("text").Str != text {
						t.Fatalf("output_text.done text %q, plain %q", d.Get("text").Str, text)
					}
				case "response.content_part.done":
					finals[typ] = d.Get("part.annotations").Raw
				case "response.output_item.done":
					if d.Get("item.type").Str == "message" {
						finals[typ] = d.Get("item.content.0.annotations").Raw
					}
				case "response.completed":
					completed = d.Get("response")
					finals[typ] = messagePart(t, "completed", completed).Get("annotations").Raw
				}
			}
			if sb.String() != text {
				t.Fatalf("streamed text %q, plain %q", sb.String(), text)
			}
			if got := "[" + strings.Join(added, ",") + "]"; !equalJSONText(got, plain.Raw) {
				t.Fatalf("annotation.added %s\nplain %s", got, plain.Raw)
			}
			if len(finals) < 3 {
				t.Fatalf("final events %v", finals)
			}
			for typ, v := range finals {
				if !equalJSONText(v, plain.Raw) {
					t.Fatalf("%s annotations %s\nplain %s", typ, v, plain.Raw)
				}
			}
			cost = checkUsage("stream", completed.Get("usage"))
			expectCharged(t, before, e.c.snapshot(e.key, e.org.MgmtKey), cost, "stream")
		})
	}
}

// TestWebSearchResponsesNativeChatForm: a native search on /responses for
// a provider that speaks only Chat Completions reaches it in the family's
// chat form, not as a Responses tool.
func TestWebSearchResponsesNativeChatForm(t *testing.T) {
	e := startWebSearchResponses(t)
	fn := `{"type":"function","name":"weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}`
	upstream := func(t *testing.T, body string) gjson.Result {
		t.Helper()
		r, up, searches := e.post(t, "/responses", body)
		r.expect(t, 200)
		if len(up) != 1 || len(searches) != 0 || !gjson.GetBytes(up[0], "messages").Exists() {
			t.Fatalf("upstream %q, %d searches", up, len(searches))
		}
		u := gjson.ParseBytes(up[0])
		for _, tool := range u.Get("tools").Array() {
			if typ := tool.Get("type").Str; typ == "web_search" || typ == "x_search" {
				t.Fatalf("a Responses search tool reached the chat provider: %s", up[0])
			}
		}
		return u
	}
	t.Run("openai", func(t *testing.T) {
		u := upstream(t, `{"model":"openai/gpt-chat","input":"weather in Zürich","tools":[`+fn+`,{"type":"service:web_search","parameters":{"search_context_size":"low"}}]}`)
		if u.Get("web_search_options.search_context_size").Str != "low" || u.Get("tools.#").Int() != 1 ||
			u.Get("tools.0.function.name").Str != "weather" {
			t.Fatalf("upstream %s", u.Raw)
		}
		// OpenAI's chat search has no domain filter; no provider of the
		// model speaks Responses: 400 naming the field.
		r := e.c.mustPost("/responses", e.key, `{"model":"openai/gpt-chat","input":"x","tools":[{"type":"service:web_search","parameters":{"allowed_domains":["meteo.example"]}}]}`, nil)
		r.expect(t, 400)
		if msg := r.JSON.Get("error.message").Str; !strings.HasPrefix(msg, "allowed_domains:") {
			t.Fatalf("400 message %q", msg)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		u := upstream(t, `{"model":"anthropic/claude-chat","input":"weather in Zürich","plugins":[{"id":"web","include_domains":["meteo.example"]}]}`)
		tool := u.Get("tools.0")
		if u.Get("tools.#").Int() != 1 || tool.Get("type").Str != "web_search_20250305" || tool.Get("name").Str != "web_search" ||
			tool.Get("max_uses").Int() != 1 || tool.Get("allowed_domains.0").Str != "meteo.example" {
			t.Fatalf("upstream %s", u.Raw)
		}
	})
	t.Run("x without x_search", func(t *testing.T) {
		u := upstream(t, `{"model":"x-ai/grok-chat","input":"news","tools":[{"type":"service:web_search","parameters":{"max_results":4,"excluded_domains":["spam.example"]}}]}`)
		sp := u.Get("search_parameters")
		if u.Get("tools").Exists() || sp.Get("max_search_results").Int() != 4 || sp.Get("sources.#").Int() != 1 ||
			sp.Get("sources.0.type").Str != "web" || sp.Get("sources.0.excluded_websites.0").Str != "spam.example" {
			t.Fatalf("upstream %s", u.Raw)
		}
	})
	t.Run("x with x_search", func(t *testing.T) {
		u := upstream(t, `{"model":"x-ai/grok-chat","input":"news","x_search_filter":{"allowed_x_handles":["tollgate"],"from_date":"2026-01-01"}}`)
		sp := u.Get("search_parameters")
		x := sp.Get(`sources.#(type=="x")`)
		if u.Get("tools").Exists() || sp.Get("sources.#").Int() != 2 || x.Get("included_x_handles.0").Str != "tollgate" ||
			sp.Get("from_date").Str != "2026-01-01" {
			t.Fatalf("upstream %s", u.Raw)
		}
	})
}

// TestWebSearchResponsesSDK runs integration/sdk/websearch_responses.mjs:
// the public openai SDK (responses.create, plain and streamed, and
// responses.stream) and @openrouter/sdk (responses.send, plain and
// streamed) parse Responses answers with web search citations, for a
// gateway-side engine (the web plugin and the openrouter:web_search server
// tool; the gateway's brand is "openrouter" here, as the SDK's tool type
// is fixed) and for native searches of each family, on providers that
// speak Responses and on chat-only providers behind the translation.
func TestWebSearchResponsesSDK(t *testing.T) {
	node := requireNode(t)
	e := startWebSearchResponses(t, func(c string) string {
		return replaceOnce(t, c, "\t\tbrand service\n", "\t\tbrand openrouter\n")
	})
	runSDKScript(t, node, "websearch_responses.mjs",
		"TOLLGATE_API_KEY="+e.key,
		"TOLLGATE_ENGINE_MODELS=ws/chat,ws/plain",
		"TOLLGATE_NATIVE_MODELS=openai/gpt-chat,openai/gpt-ws,anthropic/claude-chat,anthropic/claude-ws,x-ai/grok-chat,x-ai/grok-ws",
	)
}

// TestWebSearchChatProviderAnnotationsReplaced: on chat completions too, a
// provider's own annotations under a gateway engine give way to the
// gateway's, streamed as plain, none twice.
func TestWebSearchChatProviderAnnotationsReplaced(t *testing.T) {
	e := startWebSearchResponses(t)
	body := `{"model":"ws/cite","messages":[{"role":"user","content":"Größte Stadt? 🎉"}],"plugins":[{"id":"web","engine":"exa","max_results":3}]}`
	r, _, _ := e.post(t, "/chat/completions", body)
	r.expect(t, 200)
	plain := r.JSON.Get("choices.0.message.annotations")
	if n := len(plain.Array()); n != 5 {
		t.Fatalf("%d annotations: %s", n, plain.Raw)
	}
	checkSpans(t, r.JSON.Get("choices.0.message.content").Str, plain.Array(), "url_citation")
	streamed := streamedChatAnnotations(t, e, strings.Replace(body, `"model"`, `"stream":true,"model"`, 1))
	if !equalJSONText(streamed, plain.Raw) {
		t.Fatalf("streamed %s\nplain %s", streamed, plain.Raw)
	}
}

// TestWebSearchResponsesFallbackAcrossAPIs: a model whose providers speak
// different APIs gets each attempt's form of the native search, and the
// answer is annotated as the provider that answered needs; a search chat
// cannot express leaves the request to the provider that speaks
// Responses.
func TestWebSearchResponsesFallbackAcrossAPIs(t *testing.T) {
	e := startWebSearchWith(t, func(via string) string {
		dead := "http://" + freeport.Addr(t) + "/v1"
		m := func(id string, providers ...[3]string) string {
			var b strings.Builder
			fmt.Fprintf(&b, "\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n", id)
			for _, p := range providers { // name, base URL, api
				fmt.Fprintf(&b, "\t\t\tprovider %s %s {\n\t\t\t\tmodel grok-ws\n\t\t\t\tapi_key k\n\t\t\t\tapi %s\n\t\t\t}\n", p[0], p[1], p[2])
			}
			return b.String() + "\t\t}\n"
		}
		return m("x-ai/grok-to-responses", [3]string{"down", dead, "chat"}, [3]string{"up", via, "responses"}) +
			m("x-ai/grok-to-chat", [3]string{"down", dead, "responses"}, [3]string{"up", via, "chat"}) +
			m("openai/gpt-mixed", [3]string{"chatty", via, "chat"}, [3]string{"native", via, "responses"})
	})
	tool := `"tools":[{"type":"service:web_search","parameters":{"x_search":{}}}]`
	for _, tc := range []struct{ model, form string }{
		{"x-ai/grok-to-responses", "input"},
		{"x-ai/grok-to-chat", "messages"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			body := `{"model":"` + tc.model + `","input":"Zürich 🎉",` + tool + `}`
			r, up, _ := e.post(t, "/responses", body)
			r.expect(t, 200)
			if len(up) != 1 || !gjson.GetBytes(up[0], tc.form).Exists() {
				t.Fatalf("upstream %q", up)
			}
			if tc.form == "messages" && (!gjson.GetBytes(up[0], `search_parameters.sources.#(type=="x")`).Exists() || gjson.GetBytes(up[0], "tools").Exists()) {
				t.Fatalf("chat upstream %s", up[0])
			}
			if tc.form == "input" && !gjson.GetBytes(up[0], `tools.#(type=="x_search")`).Exists() {
				t.Fatalf("responses upstream %s", up[0])
			}
			part := messagePart(t, "plain", r.JSON)
			checkExactSpans(t, "plain", part.Get("text").Str, part.Get("annotations"), 2)
			if u := r.JSON.Get("usage.server_tool_use_details"); u.Get("x_search_posts").Int() != 3 || u.Get("x_search_profiles").Int() != 1 {
				t.Fatalf("usage %s", r.JSON.Get("usage").Raw)
			}
			_, evs := responsesStream(t, e, strings.Replace(body, `"model"`, `"stream":true,"model"`, 1))
			var added []string
			for _, d := range evs {
				if d.Get("type").Str == "response.output_text.annotation.added" {
					added = append(added, d.Get("annotation").Raw)
				}
			}
			if got := "[" + strings.Join(added, ",") + "]"; !equalJSONText(got, part.Get("annotations").Raw) {
				t.Fatalf("streamed %s\nplain %s", got, part.Get("annotations").Raw)
			}
		})
	}
	t.Run("no chat form", func(t *testing.T) {
		r, up, _ := e.post(t, "/responses", `{"model":"openai/gpt-mixed","input":"weather","tools":[{"type":"service:web_search","parameters":{"allowed_domains":["meteo.example"]}}]}`)
		r.expect(t, 200)
		if len(up) != 1 || gjson.GetBytes(up[0], "messages").Exists() || gjson.GetBytes(up[0], `tools.0.filters.allowed_domains.0`).Str != "meteo.example" {
			t.Fatalf("upstream %q", up)
		}
	})
}
