package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/standin/enginestest"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// webSearchEnv is a gateway with the four gateway-side
// engines pointed at the engines' test double, and models of each provider
// family behind a recording proxy in front of the mock provider.
type webSearchEnv struct {
	c      *client
	rec    *recordingProxy
	search *enginestest.TestServer
	org    tenant
	key    string
}

func startWebSearch(t *testing.T) *webSearchEnv {
	t.Helper()
	return startWebSearchWith(t, nil)
}

// startWebSearchWith is startWebSearch with more catalog models, given
// the recording proxy's base URL.
func startWebSearchWith(t *testing.T, models func(via string) string, edits ...func(string) string) *webSearchEnv {
	t.Helper()
	ts := enginestest.StartTestServer()
	t.Cleanup(ts.Close)
	rec := newRecordingProxy(t, mockAddr, nil)
	via := "http://" + rec.addr() + "/v1"
	dead := "http://" + freeport.Addr(t) + "/v1"
	block := func(id, webPrice, upstream string) string {
		wp := ""
		if webPrice != "" {
			wp = "\t\t\t\tweb_search " + webPrice + "\n"
		}
		return fmt.Sprintf("\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n%s\t\t\t}\n"+
			"\t\t\tprovider p %s {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key k\n\t\t\t}\n\t\t}\n", id, wp, via, upstream)
	}
	engineBlock := func(name string) string {
		return fmt.Sprintf("\t\t\tengine %s {\n\t\t\t\tbase_url %s\n\t\t\t\tapi_key test-key\n\t\t\t}\n", name, ts.URL)
	}
	cfg := "\t\tweb_search {\n\t\t\tdefault_engine exa\n" + engineBlock("exa") + engineBlock("firecrawl") +
		engineBlock("parallel") + engineBlock("searxng") + "\t\t}\n" +
		block("ws/plain", "", "tollgate-mock") +
		block("ws/priced", "0.01", "tollgate-mock") +
		block("openai/gpt-ws", "", "gpt-ws") +
		block("anthropic/claude-ws", "", "claude-ws") +
		block("x-ai/grok-ws", "", "grok-ws") +
		fmt.Sprintf("\t\tmodel ws/plain:free {\n\t\t\tpricing {\n\t\t\t\tprompt 0\n\t\t\t\tcompletion 0\n\t\t\t}\n"+
			"\t\t\tprovider p %s {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key k\n\t\t\t}\n\t\t}\n", via) +
		fmt.Sprintf("\t\tmodel ws/fallback {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
			"\t\t\tprovider down %s {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key k\n\t\t\t}\n"+
			"\t\t\tprovider bad %s {\n\t\t\t\tmodel x-error-500\n\t\t\t\tapi_key k\n\t\t\t}\n"+
			"\t\t\tprovider good %s {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key k\n\t\t\t}\n\t\t}\n", dead, via, via)
	if models != nil {
		cfg += models(via)
	}
	startInProcessWith(t, chain(append([]func(string) string{
		func(c string) string {
			return replaceOnce(t, c, "\t\tmodel tollgate-mock:free {\n", cfg+"\t\tmodel tollgate-mock:free {\n")
		},
	}, edits...)...))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"websearch"}`)
	return &webSearchEnv{c: c, rec: rec, search: ts, org: org, key: key}
}

// post sends a body and returns the answer with the upstream bodies it
// caused and the search engine requests.
func (e *webSearchEnv) post(t *testing.T, path, body string) (response, [][]byte, []enginestest.RecordedRequest) {
	t.Helper()
	e.rec.take()
	e.search.Reset()
	r := e.c.mustPost(path, e.key, body, nil)
	return r, e.rec.take(), e.search.Requests()
}

func TestWebSearchFormsSameUpstream(t *testing.T) {
	e := startWebSearch(t)
	const msgs = `"messages":[{"role":"user","content":"latest tollgate news"}]`
	groups := []struct {
		name  string
		forms map[string]string // form -> body; "tool" is not deprecated
	}{
		{"defaults", map[string]string{
			"tool":   `{"model":"ws/plain",` + msgs + `,"tools":[{"type":"service:web_search"}]}`,
			"plugin": `{"model":"ws/plain",` + msgs + `,"plugins":[{"id":"web"}]}`,
			"online": `{"model":"ws/plain:online",` + msgs + `}`,
		}},
		{"parameters", map[string]string{
			"tool":   `{"model":"ws/plain",` + msgs + `,"tools":[{"type":"service:web_search","parameters":{"engine":"parallel","max_results":3,"allowed_domains":["example.org"],"excluded_domains":["blog.example.org"]}}]}`,
			"plugin": `{"model":"ws/plain",` + msgs + `,"plugins":[{"id":"web","engine":"parallel","max_results":3,"include_domains":["example.org"],"exclude_domains":["blog.example.org"]}]}`,
		}},
		{"free online", map[string]string{
			"tool":   `{"model":"ws/plain:free",` + msgs + `,"tools":[{"type":"service:web_search"}]}`,
			"online": `{"model":"ws/plain:free:online",` + msgs + `}`,
		}},
		{"x search", map[string]string{
			"tool":     `{"model":"x-ai/grok-ws",` + msgs + `,"tools":[{"type":"service:web_search","parameters":{"x_search":{"allowed_x_handles":["tollgate"],"from_date":"2026-01-01"}}}]}`,
			"plugin":   `{"model":"x-ai/grok-ws",` + msgs + `,"plugins":[{"id":"web","x_search":{"allowed_x_handles":["tollgate"],"from_date":"2026-01-01"}}]}`,
			"filter":   `{"model":"x-ai/grok-ws",` + msgs + `,"x_search_filter":{"allowed_x_handles":["tollgate"],"from_date":"2026-01-01"}}`,
			"x online": `{"model":"x-ai/grok-ws:online",` + msgs + `,"x_search_filter":{"allowed_x_handles":["tollgate"],"from_date":"2026-01-01"}}`,
		}},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			var want []byte
			for form, body := range g.forms {
				r, up, _ := e.post(t, "/chat/completions", body)
				r.expect(t, 200)
				if len(up) != 1 {
					t.Fatalf("%s: %d upstream calls", form, len(up))
				}
				// x_search_filter is legacy but not deprecated.
				if dep := r.Header.Get("Deprecation"); (form == "tool" || form == "filter") != (dep == "") {
					t.Fatalf("%s: Deprecation header %q", form, dep)
				}
				for _, bad := range []string{"service:web_search", `"plugins"`, ":online", "x_search_filter"} {
					if bytes.Contains(up[0], []byte(bad)) {
						t.Fatalf("%s: upstream body carries %s: %s", form, bad, up[0])
					}
				}
				if want == nil {
					want = up[0]
				} else if !bytes.Equal(up[0], want) {
					t.Fatalf("%s: upstream body differs:\n%s\nwant\n%s", form, up[0], want)
				}
			}
			if g.name == "x search" {
				sp := gjson.GetBytes(want, `search_parameters.sources.#(type=="x")`)
				if sp.Get("included_x_handles.0").Str != "tollgate" || gjson.GetBytes(want, "search_parameters.from_date").Str != "2026-01-01" {
					t.Fatalf("x search not translated: %s", want)
				}
			} else if !strings.Contains(gjson.GetBytes(want, "messages.0.content").Str, "A web search was run on") {
				t.Fatalf("no search results injected: %s", want)
			}
		})
	}
}

func TestWebSearchBadParameters400(t *testing.T) {
	e := startWebSearch(t)
	const msgs = `"messages":[{"role":"user","content":"q"}]`
	tool := func(model, params string) string {
		return `{"model":"` + model + `",` + msgs + `,"tools":[{"type":"service:web_search","parameters":` + params + `}]}`
	}
	for _, tc := range []struct{ body, field string }{
		{tool("ws/plain", `{"engine":"bing"}`), "engine"},
		{tool("ws/plain", `{"max_results":0}`), "max_results"},
		{tool("ws/plain", `{"max_results":26}`), "max_results"},
		{tool("ws/plain", `{"engine":"firecrawl","max_results":21}`), "max_results"},
		{tool("ws/plain", `{"allowed_domains":"example.com"}`), "allowed_domains"},
		{tool("ws/plain", `{"x_search":{}}`), "x_search"},
		{tool("x-ai/grok-ws", `{"x_search":{"allowed_x_handles":["a"],"excluded_x_handles":["b"]}}`), "x_handles"},
		{tool("x-ai/grok-ws", `{"x_search":{"from_date":"yesterday"}}`), "from_date"},
		{tool("x-ai/grok-ws", `{"x_search":{"from_date":"2026-02-01","to_date":"2026-01-01"}}`), "date"},
		{tool("ws/plain", `{"engine":"native"}`), "engine"},
		{`{"model":"ws/plain",` + msgs + `,"plugins":[{"id":"web","max_results":"5"}]}`, "max_results"},
		{`{"model":"ws/plain",` + msgs + `,"x_search_filter":{"to_date":"2026-13-01"}}`, "to_date"},
	} {
		r, up, searches := e.post(t, "/chat/completions", tc.body)
		r.expectError(t, 400, tc.field)
		if len(up) != 0 || len(searches) != 0 {
			t.Fatalf("%s: a refused request reached the provider or the engine", tc.body)
		}
	}
}

func TestWebSearchEnginesThroughCaddy(t *testing.T) {
	e := startWebSearch(t)
	for _, name := range []string{"exa", "firecrawl", "parallel", "searxng"} {
		t.Run(name, func(t *testing.T) {
			body := `{"model":"ws/plain","messages":[{"role":"user","content":"rust borrow checker"}],"tools":[{"type":"service:web_search","parameters":` +
				`{"engine":"` + name + `","max_results":3,"allowed_domains":["example.org"],"excluded_domains":["blog.example.org"]}}]}`
			r, up, searches := e.post(t, "/chat/completions", body)
			r.expect(t, 200)
			if len(searches) != 1 {
				t.Fatalf("%d engine calls", len(searches))
			}
			got := searches[0]
			if got.Engine != name || got.Query != "rust borrow checker" {
				t.Fatalf("engine %q query %q", got.Engine, got.Query)
			}
			if name != "searxng" && got.MaxResults != 3 {
				t.Fatalf("max_results %d", got.MaxResults)
			}
			if !slices.Contains(got.IncludeDomains, "example.org") {
				t.Fatalf("include domains %v", got.IncludeDomains)
			}
			if name != "parallel" && !slices.Contains(got.ExcludeDomains, "blog.example.org") {
				t.Fatalf("exclude domains %v", got.ExcludeDomains)
			}
			sys := gjson.GetBytes(up[0], "messages.0.content").Str
			if !strings.Contains(sys, "[3] ") || strings.Contains(sys, "[4] ") || strings.Contains(sys, "blog.example.org") {
				t.Fatalf("injected results: %s", sys)
			}
			anns := r.JSON.Get("choices.0.message.annotations").Array()
			if len(anns) != 3 {
				t.Fatalf("annotations: %s", r.Body)
			}
			for _, a := range anns {
				if u := a.Get("url_citation.url").Str; !strings.Contains(u, "example.org/") || strings.Contains(u, "blog.example.org") {
					t.Fatalf("cited %s", u)
				}
			}
			if n := r.JSON.Get("usage.server_tool_use_details.web_search_results").Int(); n != 3 {
				t.Fatalf("web_search_results %d", n)
			}
		})
	}
}

// codePointSlice is text[start:end] in Unicode code points.
func codePointSlice(t *testing.T, text string, start, end int64) string {
	t.Helper()
	r := []rune(text)
	if start < 0 || end > int64(len(r)) || start > end {
		t.Fatalf("span [%d,%d) outside text of %d code points", start, end, len(r))
	}
	return string(r[start:end])
}

// checkSpans checks that every annotation spans exactly a markdown link to
// its url.
func checkSpans(t *testing.T, text string, anns []gjson.Result, inner string) {
	t.Helper()
	if len(anns) < 2 {
		t.Fatalf("want several annotations, got %d in %q", len(anns), text)
	}
	for _, a := range anns {
		if inner != "" {
			a = a.Get(inner)
		}
		span := codePointSlice(t, text, a.Get("start_index").Int(), a.Get("end_index").Int())
		if !strings.HasPrefix(span, "[") || !strings.HasSuffix(span, "("+a.Get("url").Str+")") {
			t.Fatalf("span %q does not cite %s", span, a.Get("url").Str)
		}
	}
}

func TestWebSearchCitationsStreamedEqualPlain(t *testing.T) {
	e := startWebSearch(t)
	const q = "Größte Stadt der Schweiz? 日本語 🎉"
	t.Run("chat", func(t *testing.T) {
		body := `{"model":"ws/plain","messages":[{"role":"user","content":"` + q + `"}],"tools":[{"type":"service:web_search","parameters":{"max_results":3}}]}`
		r, _, _ := e.post(t, "/chat/completions", body)
		r.expect(t, 200)
		text := r.JSON.Get("choices.0.message.content").Str
		if utf8.RuneCountInString(text) == len(text) {
			t.Fatalf("answer is ASCII: %q", text)
		}
		plain := r.JSON.Get("choices.0.message.annotations")
		checkSpans(t, text, plain.Array(), "url_citation")

		evs := e.c.streamOf(t, "/chat/completions", e.key, strings.Replace(body, `"model"`, `"stream":true,"model"`, 1))
		var streamed []json.RawMessage
		var sb strings.Builder
		for _, ev := range evs {
			sb.WriteString(deltaText(ev))
			for _, a := range gjson.Get(ev.Data, "choices.0.delta.annotations").Array() {
				streamed = append(streamed, json.RawMessage(a.Raw))
			}
		}
		if sb.String() != text {
			t.Fatalf("streamed text %q, plain %q", sb.String(), text)
		}
		if got, _ := json.Marshal(streamed); !equalJSONText(string(got), plain.Raw) {
			t.Fatalf("streamed annotations %s\nplain %s", got, plain.Raw)
		}
		if s := parseStream(t, evs); s.usage.Get("server_tool_use_details.web_search_results").Int() != 3 {
			t.Fatalf("stream usage %s", s.usage.Raw)
		}
	})
	t.Run("responses", func(t *testing.T) {
		body := `{"model":"ws/plain","input":"` + q + `","plugins":[{"id":"web","max_results":3}]}`
		r, up, _ := e.post(t, "/responses", body)
		r.expect(t, 200)
		if gjson.GetBytes(up[0], "input.0.role").Str != "system" {
			t.Fatalf("responses input not injected: %s", up[0])
		}
		part := r.JSON.Get(`output.0.content.0`)
		plain := part.Get("annotations")
		checkSpans(t, part.Get("text").Str, plain.Array(), "")

		evs := e.c.streamOf(t, "/responses", e.key, strings.Replace(body, `"model"`, `"stream":true,"model"`, 1))
		var added []string
		lastSeq := int64(-1)
		finals := map[string]string{}
		for _, ev := range evs {
			if ev.Data == "[DONE]" {
				continue
			}
			d := gjson.Parse(ev.Data)
			seq := d.Get("sequence_number").Int()
			if seq <= lastSeq {
				t.Fatalf("sequence_number %d after %d", seq, lastSeq)
			}
			lastSeq = seq
			switch typ := d.Get("type").Str; typ {
			case "response.output_text.annotation.added":
				if d.Get("annotation_index").Int() != int64(len(added)) || d.Get("item_id").Str == "" || !d.Get("output_index").Exists() || !d.Get("content_index").Exists() {
					t.Fatalf("annotation event %s", ev.Data)
				}
				added = append(added, d.Get("annotation").Raw)
			case "response.output_text.done":
				finals[typ] = d.Get("annotations").Raw
			case "response.content_part.done":
				finals[typ] = d.Get("part.annotations").Raw
			case "response.output_item.done":
				finals[typ] = d.Get("item.content.0.annotations").Raw
			case "response.completed":
				finals[typ] = d.Get("response.output.0.content.0.annotations").Raw
				if d.Get("response.usage.server_tool_use_details.web_search_results").Int() != 3 {
					t.Fatalf("completed usage %s", d.Get("response.usage").Raw)
				}
			}
		}
		if got := "[" + strings.Join(added, ",") + "]"; !equalJSONText(got, plain.Raw) {
			t.Fatalf("annotation.added %s\nplain %s", got, plain.Raw)
		}
		if len(finals) != 4 {
			t.Fatalf("final events %v", finals)
		}
		for typ, v := range finals {
			if !equalJSONText(v, plain.Raw) {
				t.Fatalf("%s annotations %s\nplain %s", typ, v, plain.Raw)
			}
		}
	})
}

func equalJSONText(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func TestWebSearchNativeFamilies(t *testing.T) {
	e := startWebSearch(t)
	const msgs = `"messages":[{"role":"user","content":"weather in Zürich"}]`
	t.Run("openai chat", func(t *testing.T) {
		r, up, searches := e.post(t, "/chat/completions", `{"model":"openai/gpt-ws",`+msgs+`,"tools":[{"type":"service:web_search","parameters":{"search_context_size":"low"}}]}`)
		r.expect(t, 200)
		if len(searches) != 0 || gjson.GetBytes(up[0], "web_search_options.search_context_size").Str != "low" || gjson.GetBytes(up[0], "tools").Exists() {
			t.Fatalf("upstream %s", up[0])
		}
		checkSpans(t, r.JSON.Get("choices.0.message.content").Str, r.JSON.Get("choices.0.message.annotations").Array(), "url_citation")
		// The provider's own annotations pass through a stream too.
		streamed := streamedChatAnnotations(t, e, `{"stream":true,"model":"openai/gpt-ws",`+msgs+`,"tools":[{"type":"service:web_search","parameters":{"search_context_size":"low"}}]}`)
		if !equalJSONText(streamed, r.JSON.Get("choices.0.message.annotations").Raw) {
			t.Fatalf("streamed %s, plain %s", streamed, r.JSON.Get("choices.0.message.annotations").Raw)
		}
	})
	t.Run("openai responses", func(t *testing.T) {
		r, up, _ := e.post(t, "/responses", `{"model":"openai/gpt-ws","input":"weather in Zürich","tools":[{"type":"service:web_search","parameters":{"allowed_domains":["meteo.example"]}}]}`)
		r.expect(t, 200)
		tool := gjson.GetBytes(up[0], "tools.0")
		if tool.Get("type").Str != "web_search" || tool.Get("filters.allowed_domains.0").Str != "meteo.example" {
			t.Fatalf("upstream %s", up[0])
		}
		part := r.JSON.Get("output.0.content.0")
		checkSpans(t, part.Get("text").Str, part.Get("annotations").Array(), "")
	})
	t.Run("anthropic", func(t *testing.T) {
		r, up, _ := e.post(t, "/chat/completions", `{"model":"anthropic/claude-ws",`+msgs+`,"plugins":[{"id":"web","exclude_domains":["spam.example"]}]}`)
		r.expect(t, 200)
		tool := gjson.GetBytes(up[0], "tools.0")
		if tool.Get("type").Str != "web_search_20250305" || tool.Get("name").Str != "web_search" || tool.Get("max_uses").Int() != 1 ||
			tool.Get("blocked_domains.0").Str != "spam.example" {
			t.Fatalf("upstream %s", up[0])
		}
		checkSpans(t, r.JSON.Get("choices.0.message.content").Str, r.JSON.Get("choices.0.message.annotations").Array(), "url_citation")
	})
	t.Run("x chat without x_search", func(t *testing.T) {
		r, up, _ := e.post(t, "/chat/completions", `{"model":"x-ai/grok-ws",`+msgs+`,"tools":[{"type":"service:web_search","parameters":{"max_results":4}}]}`)
		r.expect(t, 200)
		sp := gjson.GetBytes(up[0], "search_parameters")
		if sp.Get("max_search_results").Int() != 4 || sp.Get("sources.#").Int() != 1 || sp.Get("sources.0.type").Str != "web" {
			t.Fatalf("upstream %s", up[0])
		}
		anns := r.JSON.Get("choices.0.message.annotations").Array()
		checkSpans(t, r.JSON.Get("choices.0.message.content").Str, anns, "url_citation")
		for i, u := range r.JSON.Get("citations").Array() {
			if anns[i].Get("url_citation.url").Str != u.Str {
				t.Fatalf("citation %d %s not annotated: %s", i, u.Str, r.Body)
			}
		}
		streamed := streamedChatAnnotations(t, e, `{"stream":true,"model":"x-ai/grok-ws",`+msgs+`,"tools":[{"type":"service:web_search","parameters":{"max_results":4}}]}`)
		if !equalJSONText(streamed, r.JSON.Get("choices.0.message.annotations").Raw) {
			t.Fatalf("streamed %s, plain %s", streamed, r.JSON.Get("choices.0.message.annotations").Raw)
		}
	})
	t.Run("x responses with x_search", func(t *testing.T) {
		r, up, _ := e.post(t, "/responses", `{"model":"x-ai/grok-ws","input":"news","tools":[{"type":"service:web_search","parameters":{"x_search":{"excluded_x_handles":["spam"],"enable_image_understanding":true}}}]}`)
		r.expect(t, 200)
		if gjson.GetBytes(up[0], "tools.0.type").Str != "web_search" || gjson.GetBytes(up[0], "tools.1.type").Str != "x_search" ||
			gjson.GetBytes(up[0], "tools.1.excluded_x_handles.0").Str != "spam" || !gjson.GetBytes(up[0], "tools.1.enable_image_understanding").Bool() {
			t.Fatalf("upstream %s", up[0])
		}
		u := r.JSON.Get("usage.server_tool_use_details")
		if u.Get("x_search_posts").Int() != 3 || u.Get("x_search_profiles").Int() != 1 {
			t.Fatalf("usage %s", r.JSON.Get("usage").Raw)
		}
	})
}

// streamedChatAnnotations streams a chat request and returns the
// annotations of its deltas as one JSON array.
func streamedChatAnnotations(t *testing.T, e *webSearchEnv, body string) string {
	t.Helper()
	evs := e.c.streamOf(t, "/chat/completions", e.key, body)
	all := []json.RawMessage{}
	for _, ev := range evs {
		for _, a := range gjson.Get(ev.Data, "choices.0.delta.annotations").Array() {
			all = append(all, json.RawMessage(a.Raw))
		}
	}
	b, _ := json.Marshal(all)
	return string(b)
}

func TestWebSearchCharges(t *testing.T) {
	e := startWebSearch(t)
	const msgs = `"messages":[{"role":"user","content":"price check"}]`
	for _, tc := range []struct {
		name, body string
		search     money.Amount // the search part of the cost
	}{
		// The model's web_search price: 3 results at 0.01.
		{"model price", `{"model":"ws/priced",` + msgs + `,"tools":[{"type":"service:web_search","parameters":{"max_results":3}}]}`, 30_000_000},
		// The engine's default price: 4 results at 0.004.
		{"engine price", `{"model":"ws/plain",` + msgs + `,"tools":[{"type":"service:web_search","parameters":{"engine":"searxng","max_results":4}}]}`, 16_000_000},
		// Native X: 5 results at 0.004, plus 3 posts at 0.005 and 1 profile at 0.01.
		{"x search", `{"model":"x-ai/grok-ws",` + msgs + `,"x_search_filter":{}}`, 20_000_000 + 15_000_000 + 10_000_000},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tc.name, stream), func(t *testing.T) {
				before := e.c.snapshot(e.key, e.org.MgmtKey)
				body := tc.body
				var usage gjson.Result
				if stream {
					body = strings.Replace(body, `"model"`, `"stream":true,"model"`, 1)
					evs := e.c.streamOf(t, "/chat/completions", e.key, body)
					usage = parseStream(t, evs).usage
				} else {
					r, _, _ := e.post(t, "/chat/completions", body)
					usage = r.expect(t, 200).JSON.Get("usage")
				}
				want := tokenCost(usage.Get("prompt_tokens").Int(), usage.Get("completion_tokens").Int()) + tc.search
				if got := creditAmount(t, usage.Get("cost")); got != want {
					t.Fatalf("usage.cost %s, want %s (usage %s)", got, want, usage.Raw)
				}
				expectCharged(t, before, e.c.snapshot(e.key, e.org.MgmtKey), want, tc.name)
			})
		}
	}
}

func TestWebSearchAdmissionAndFailures(t *testing.T) {
	e := startWebSearch(t)
	const msgs = `"messages":[{"role":"user","content":"hold me"}],"max_tokens":20`
	t.Run("refused request does not search", func(t *testing.T) {
		// The limit covers the tokens but not 5 results at 0.004.
		key, _ := e.c.newKey(e.org.MgmtKey, `{"name":"small","limit":0.005}`)
		plain := `{"model":"ws/plain",` + msgs + `}`
		e.c.mustPost("/chat/completions", key, plain, nil).expect(t, 200)
		e.search.Reset()
		e.rec.take()
		r := e.c.mustPost("/chat/completions", key, `{"model":"ws/plain:online",`+msgs+`}`, nil)
		expect402(t, r, "service_key_limit", "", false)
		if n := len(e.search.Requests()); n != 0 {
			t.Fatalf("a refused request ran %d searches", n)
		}
		if n := len(e.rec.take()); n != 0 {
			t.Fatalf("a refused request reached the provider %d times", n)
		}
	})
	t.Run("fallback searches once", func(t *testing.T) {
		before := e.c.snapshot(e.key, e.org.MgmtKey)
		r, up, searches := e.post(t, "/chat/completions", `{"model":"ws/fallback",`+msgs+`,"plugins":[{"id":"web","max_results":2}]}`)
		r.expect(t, 200)
		if len(searches) != 1 || len(up) != 2 {
			t.Fatalf("%d searches, %d upstream calls", len(searches), len(up))
		}
		if a, b := gjson.GetBytes(up[0], "messages").Raw, gjson.GetBytes(up[1], "messages").Raw; a != b || !strings.Contains(a, "[2] ") {
			t.Fatalf("attempts got different messages:\n%s\n%s", a, b)
		}
		u := r.JSON.Get("usage")
		want := tokenCost(u.Get("prompt_tokens").Int(), u.Get("completion_tokens").Int()) + 8_000_000
		expectCharged(t, before, e.c.snapshot(e.key, e.org.MgmtKey), want, "fallback")
	})
	t.Run("engine failure is a 502 and charges nothing", func(t *testing.T) {
		e.search.Reset()
		e.search.ForceStatus("exa", http.StatusInternalServerError)
		defer e.search.ForceStatus("exa", 0)
		before := e.c.snapshot(e.key, e.org.MgmtKey)
		e.rec.take()
		r := e.c.mustPost("/chat/completions", e.key, `{"model":"ws/plain:online",`+msgs+`}`, nil)
		r.expectError(t, 502, "exa")
		if n := len(e.rec.take()); n != 0 {
			t.Fatalf("provider called %d times", n)
		}
		expectCharged(t, before, e.c.snapshot(e.key, e.org.MgmtKey), 0, "failed search")
	})
}

// TestWebSearchConcurrentCharges sends concurrent search requests on a key
// whose limit fits only a few holds: the key never overspends, every answer
// that got through is charged exactly its usage.cost, and only admitted
// requests searched.
func TestWebSearchConcurrentCharges(t *testing.T) {
	e := startWebSearch(t)
	key, _ := e.c.newKey(e.org.MgmtKey, `{"name":"concurrent","limit":0.1}`)
	before := e.c.snapshot(key, e.org.MgmtKey)
	e.search.Reset()
	const n = 24
	type result struct {
		r   response
		err error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			body := fmt.Sprintf(`{"model":"ws/plain:online","max_tokens":20,"messages":[{"role":"user","content":"query %d"}]}`, i)
			r, err := e.c.post("/chat/completions", key, body, nil)
			results <- result{r, err}
		}()
	}
	var charged money.Amount
	ok := 0
	for range n {
		res := <-results
		if res.err != nil {
			t.Fatal(res.err)
		}
		switch res.r.Status {
		case 200:
			ok++
			charged += creditAmount(t, res.r.JSON.Get("usage.cost"))
		case 402:
		default:
			t.Fatalf("status %d: %s", res.r.Status, res.r.Body)
		}
	}
	after := e.c.snapshot(key, e.org.MgmtKey)
	if ok == 0 || ok == n {
		t.Fatalf("%d of %d admitted; the limit should admit some", ok, n)
	}
	if after.usage > *after.limit {
		t.Fatalf("key usage %s exceeds its limit %s", after.usage, *after.limit)
	}
	expectCharged(t, before, after, charged, "concurrent search requests")
	if got := len(e.search.Requests()); got != ok {
		t.Fatalf("%d searches for %d admitted requests", got, ok)
	}
}

// TestWebSearchSDK runs integration/sdk/websearch.mjs: the public
// @openrouter/sdk parses chat completions with web search, plain and
// streamed, and sees the search in usage.
func TestWebSearchSDK(t *testing.T) {
	node := requireNode(t)
	e := startWebSearch(t)
	runSDKScript(t, node, "websearch.mjs", "TOLLGATE_API_KEY="+e.key)
}

// TestWebSearchBYOKPaysSearchInCredits: with the account's own provider
// key, the tokens land in byok_usage but a gateway-side search is the
// platform's cost, paid in credits; an account without credits cannot
// search that way.
func TestWebSearchBYOKPaysSearchInCredits(t *testing.T) {
	e := startWebSearch(t)
	e.c.api("POST", "/byok", e.org.MgmtKey, `{"provider":"p","key":"sk-own-key-0123456789"}`).expect(t, 201)
	byokUsage := func(key string) money.Amount {
		return creditAmount(t, e.c.api("GET", "/key", key, nil).expect(t, 200).JSON.Get("data.byok_usage"))
	}
	before, byokBefore := e.c.snapshot(e.key, e.org.MgmtKey), byokUsage(e.key)
	r, _, _ := e.post(t, "/chat/completions", `{"model":"ws/plain","messages":[{"role":"user","content":"own key"}],"plugins":[{"id":"web","engine":"searxng","max_results":4}]}`)
	r.expect(t, 200)
	u := r.JSON.Get("usage")
	tokens := tokenCost(u.Get("prompt_tokens").Int(), u.Get("completion_tokens").Int())
	const search = 16_000_000 // 4 results at 0.004
	if got := creditAmount(t, u.Get("cost")); got != tokens+search {
		t.Fatalf("usage.cost %s, want %s", got, tokens+search)
	}
	expectCharged(t, before, e.c.snapshot(e.key, e.org.MgmtKey), search, "BYOK search")
	if got := byokUsage(e.key) - byokBefore; got != tokens {
		t.Fatalf("byok_usage rose by %s, want the tokens' %s", got, tokens)
	}

	broke := e.c.newTenant("organization", "")
	key, _ := e.c.newKey(broke.MgmtKey, `{"name":"broke"}`)
	e.c.api("POST", "/byok", broke.MgmtKey, `{"provider":"p","key":"sk-own-key-9876543210"}`).expect(t, 201)
	e.c.mustPost("/chat/completions", key, `{"model":"ws/plain","messages":[{"role":"user","content":"own key"}]}`, nil).expect(t, 200)
	e.search.Reset()
	r = e.c.mustPost("/chat/completions", key, `{"model":"ws/plain:online","messages":[{"role":"user","content":"own key"}]}`, nil)
	expect402(t, r, "service_credits", "", false)
	if n := len(e.search.Requests()); n != 0 {
		t.Fatalf("a refused request ran %d searches", n)
	}
}
