package websearch

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/citations"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/plugintest"
	search "github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func normalized(t *testing.T, body string) ([]byte, *search.Spec) {
	t.Helper()
	out, spec, _, ferr := search.Normalize([]byte(body), "service")
	if ferr != nil || spec == nil {
		t.Fatalf("normalize %s: %v", body, ferr)
	}
	return removeServerTool(out), spec
}

func TestNativeTranslatePerFamily(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"q"}]`
	for _, tc := range []struct {
		name, family, kind, body string
		want                     map[string]string // gjson path -> raw JSON
		absent                   []string
		err                      string
	}{
		{name: "openai chat", family: "openai", kind: "chat",
			body:   `{"model":"openai/m",` + msgs + `,"tools":[{"type":"service:web_search","parameters":{"search_context_size":"high","user_location":{"type":"approximate","country":"CH"}}}]}`,
			want:   map[string]string{"web_search_options": `{"search_context_size":"high","user_location":{"type":"approximate","country":"CH"}}`},
			absent: []string{"tools"}},
		{name: "openai chat domains", family: "openai", kind: "chat",
			body: `{"model":"openai/m",` + msgs + `,"plugins":[{"id":"web","include_domains":["a.example"]}]}`, err: "allowed_domains"},
		{name: "openai excluded", family: "openai", kind: "responses",
			body: `{"model":"openai/m","input":"q","plugins":[{"id":"web","exclude_domains":["a.example"]}]}`, err: "excluded_domains"},
		{name: "openai responses", family: "openai", kind: "responses",
			body: `{"model":"openai/m","input":"q","tools":[{"type":"function","name":"f"},{"type":"service:web_search","parameters":{"allowed_domains":["*.example.org"]}}]}`,
			want: map[string]string{"tools": `[{"type":"function","name":"f"},{"type":"web_search","filters":{"allowed_domains":["*.example.org"]}}]`}},
		{name: "anthropic allowed", family: "anthropic", kind: "chat",
			body: `{"model":"anthropic/m",` + msgs + `,"tools":[{"type":"service:web_search","parameters":{"allowed_domains":["a.example"],"max_uses":3}}]}`,
			want: map[string]string{"tools": `[{"type":"web_search_20250305","name":"web_search","max_uses":3,"allowed_domains":["a.example"]}]`}},
		{name: "anthropic blocked", family: "anthropic", kind: "responses",
			body: `{"model":"anthropic/m","input":"q","plugins":[{"id":"web","exclude_domains":["b.example"]}]}`,
			want: map[string]string{"tools": `[{"type":"web_search_20250305","name":"web_search","max_uses":1,"blocked_domains":["b.example"]}]`}},
		{name: "anthropic both", family: "anthropic", kind: "chat",
			body: `{"model":"anthropic/m",` + msgs + `,"plugins":[{"id":"web","include_domains":["a.example"],"exclude_domains":["b.example"]}]}`, err: "excluded_domains"},
		{name: "x chat web only", family: "x", kind: "chat",
			body:   `{"model":"x-ai/grok",` + msgs + `,"plugins":[{"id":"web","max_results":7,"exclude_domains":["b.example"]}]}`,
			want:   map[string]string{"search_parameters": `{"mode":"on","return_citations":true,"max_search_results":7,"sources":[{"type":"web","excluded_websites":["b.example"]}]}`},
			absent: []string{"tools"}},
		{name: "x chat with x search", family: "x", kind: "chat",
			body: `{"model":"x-ai/grok",` + msgs + `,"x_search_filter":{"allowed_x_handles":["a"],"from_date":"2026-01-01","to_date":"2026-02-01","enable_video_understanding":true}}`,
			want: map[string]string{"search_parameters": `{"mode":"on","return_citations":true,"max_search_results":5,"sources":[{"type":"web"},{"type":"x","included_x_handles":["a"],"enable_video_understanding":true}],"from_date":"2026-01-01","to_date":"2026-02-01"}`}},
		{name: "x responses", family: "x", kind: "responses",
			body: `{"model":"x-ai/grok","input":"q","tools":[{"type":"service:web_search","parameters":{"allowed_domains":["a.example"],"x_search":{"excluded_x_handles":["s"],"enable_image_understanding":true}}}]}`,
			want: map[string]string{"tools": `[{"type":"web_search","filters":{"allowed_domains":["a.example"]}},{"type":"x_search","excluded_x_handles":["s"],"enable_image_understanding":true}]`}},
		{name: "x responses without x search", family: "x", kind: "responses",
			body: `{"model":"x-ai/grok","input":"q","tools":[{"type":"service:web_search"}]}`,
			want: map[string]string{"tools": `[{"type":"web_search"}]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, spec := normalized(t, tc.body)
			out, apiErr := nativeTranslate(body, dialect.Kind(tc.kind), tc.family, spec)
			if tc.err != "" {
				if apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, tc.err) {
					t.Fatalf("error %v, want 400 naming %s", apiErr, tc.err)
				}
				return
			}
			if apiErr != nil {
				t.Fatal(apiErr)
			}
			for path, raw := range tc.want {
				if got := gjson.GetBytes(out, path).Raw; got != raw {
					t.Errorf("%s = %s, want %s", path, got, raw)
				}
			}
			for _, path := range tc.absent {
				if gjson.GetBytes(out, path).Exists() {
					t.Errorf("%s present: %s", path, out)
				}
			}
			if bytes.Contains(out, []byte("service:web_search")) {
				t.Errorf("server tool left: %s", out)
			}
		})
	}
}

func TestSearchFamily(t *testing.T) {
	for model, want := range map[string]string{
		"openai/gpt-4o": "openai", "anthropic/claude": "anthropic", "x-ai/grok-4": "x",
		"meta/llama": "", "gpt-4o": "", "": "",
	} {
		if got := searchFamily(model); got != want {
			t.Errorf("searchFamily(%q) = %q, want %q", model, got, want)
		}
	}
}

func testWebSearch(t *testing.T, cfg *Config) *WebSearch {
	t.Helper()
	s, err := cfg.Build(caddy.NewReplacer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return &WebSearch{gw: &testgw.Gateway{BrandName: "service"}, settings: s}
}

func TestWebSearchPrepareEngineChoice(t *testing.T) {
	ws := testWebSearch(t, &Config{DefaultEngine: "exa", EnginesRaw: engineConfigs(map[string]*EngineConfig{
		"exa": {BaseURL: "http://127.0.0.1:1"}, "firecrawl": {MaxResults: 10},
	})})
	const msgs = `"messages":[{"role":"user","content":"what is new"}]`
	for _, tc := range []struct {
		body, engine, err string
	}{
		{`{"model":"meta/llama:online",` + msgs + `}`, "exa", ""},
		{`{"model":"openai/gpt:online",` + msgs + `}`, "native", ""},
		{`{"model":"openai/gpt",` + msgs + `,"plugins":[{"id":"web","engine":"exa"}]}`, "exa", ""},
		{`{"model":"meta/llama",` + msgs + `,"plugins":[{"id":"web","engine":"native"}]}`, "", "engine: native"},
		{`{"model":"meta/llama",` + msgs + `,"plugins":[{"id":"web","engine":"parallel"}]}`, "", "engine: \"parallel\" is not configured"},
		{`{"model":"meta/llama",` + msgs + `,"plugins":[{"id":"web","engine":"firecrawl","max_results":11}]}`, "", "plugins[0].max_results"},
		{`{"model":"x-ai/grok",` + msgs + `,"plugins":[{"id":"web","engine":"exa","x_search":{}}]}`, "", "x_search"},
		{`{"model":"meta/llama","messages":[{"role":"system","content":"s"}],"plugins":[{"id":"web"}]}`, "", "messages"},
		{`{"model":"meta/llama","messages":[{"role":"system","content":"s"}],"plugins":[{"id":"web","search_prompt":"find it"}]}`, "exa", ""},
	} {
		_, plan, _, apiErr := ws.prepare([]byte(tc.body), "chat")
		switch {
		case tc.err != "":
			if apiErr == nil || apiErr.Status != 400 || !strings.Contains(apiErr.Message, tc.err) {
				t.Errorf("%s: error %v, want %q", tc.body, apiErr, tc.err)
			}
		case apiErr != nil:
			t.Errorf("%s: %v", tc.body, apiErr)
		case plan.engine != tc.engine:
			t.Errorf("%s: engine %q, want %q", tc.body, plan.engine, tc.engine)
		}
	}
	// Without a default engine a model without native search cannot search.
	bare := testWebSearch(t, nil)
	if _, _, _, apiErr := bare.prepare([]byte(`{"model":"meta/llama:online",`+msgs+`}`), "chat"); apiErr == nil || !strings.HasPrefix(apiErr.Message, "engine:") {
		t.Fatalf("no engine: %v", apiErr)
	}
	// A body without any form is left alone, even when it is not JSON.
	for _, b := range []string{`{"model":"m",` + msgs + `}`, `not json`} {
		out, plan, _, apiErr := ws.prepare([]byte(b), "chat")
		if plan != nil || apiErr != nil || string(out) != b {
			t.Fatalf("%s: rewritten", b)
		}
	}
}

func TestConfigBuild(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		err string
	}{
		{Config{EnginesRaw: engineConfigs(map[string]*EngineConfig{"bing": {}})}, `engine "bing"`},
		{Config{EnginesRaw: engineConfigs(map[string]*EngineConfig{"searxng": {}})}, "base_url is required"},
		{Config{DefaultEngine: "exa"}, "default_engine"},
		{Config{EnginesRaw: engineConfigs(map[string]*EngineConfig{"exa": {PricePerResult: "-1"}})}, "price_per_result"},
		{Config{EnginesRaw: engineConfigs(map[string]*EngineConfig{"exa": {MaxResults: 26}})}, "max_results"},
		{Config{NativePrice: "x"}, "native_price"},
	} {
		if _, err := tc.cfg.Build(caddy.NewReplacer(), nil); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.err)
		}
	}
	s, err := (&Config{EnginesRaw: engineConfigs(map[string]*EngineConfig{"exa": {PricePerResult: "0.01", MaxResults: 8}})}).Build(caddy.NewReplacer(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.engines["exa"].price != testgw.Price("0.01") || s.nativePrice != testgw.Price("0.004") || s.limits.MaxResultsByEngine["exa"] != 8 || s.limits.MaxResultsByEngine["firecrawl"] != 20 {
		t.Fatalf("settings %+v", s)
	}
}

// planWriter is the citation writer of a request whose only citer is
// plan.
func planWriter(w http.ResponseWriter, plan *searchPlan) *citations.Writer {
	return citations.NewWriter(w, plan.kind, nil, []citations.Citer{plan})
}

// citeRun writes chunks through a citation writer over a recorder.
func citeRun(t *testing.T, plan *searchPlan, contentType string, status int, chunks ...string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	cw := planWriter(rec, plan)
	cw.Header().Set("Content-Type", contentType)
	cw.WriteHeader(status)
	for _, c := range chunks {
		if _, err := cw.Write([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	cw.Finish()
	return rec
}

// splitEvery cuts s into pieces of n bytes (splitting UTF-8 sequences too).
func splitEvery(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func TestCiteWriterChat(t *testing.T) {
	sources := []search.Source{{Title: "Ä", URL: "https://a.example/1", Snippet: "first"}, {Title: "B", URL: "https://b.example/2"}}
	plan := &searchPlan{spec: &search.Spec{MaxResults: 5}, engine: "exa", kind: "chat", sources: sources, charged: true, results: 2}
	text := "Zürich 🎉 see [Ä](https://a.example/1) and [B](https://b.example/2) or [1]."
	plain, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}}},
		"usage": map[string]any{"prompt_tokens": 1}})
	rec := citeRun(t, plan, "application/json", 200, string(plain))
	body := rec.Body.Bytes()
	anns := gjson.GetBytes(body, "choices.0.message.annotations").Array()
	if len(anns) != 3 || rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("annotated %s", body)
	}
	runes := []rune(text)
	for i, want := range []string{"[Ä](https://a.example/1)", "[B](https://b.example/2)", "[1]"} {
		a := anns[i].Get("url_citation")
		if got := string(runes[a.Get("start_index").Int():a.Get("end_index").Int()]); got != want {
			t.Errorf("span %d %q, want %q", i, got, want)
		}
	}
	if anns[0].Get("url_citation.content").Str != "first" || anns[2].Get("url_citation.url").Str != "https://a.example/1" {
		t.Errorf("annotations %s", gjson.GetBytes(body, "choices.0.message.annotations").Raw)
	}
	if gjson.GetBytes(body, "usage.server_tool_use_details.web_search_results").Int() != 2 {
		t.Errorf("usage %s", gjson.GetBytes(body, "usage").Raw)
	}

	// Streamed word by word, cut into 3-byte writes: the same annotations,
	// on the deltas.
	var stream strings.Builder
	for _, w := range strings.SplitAfter(text, " ") {
		ev, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": w}, "finish_reason": nil}}})
		stream.WriteString("data: " + string(ev) + "\n\n")
	}
	stream.WriteString(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	stream.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":1}}` + "\n\ndata: [DONE]\n\n")
	rec = citeRun(t, plan, "text/event-stream", 200, splitEvery(stream.String(), 3)...)
	var got []any
	for ev := range strings.SplitSeq(rec.Body.String(), "\n\n") {
		d := strings.TrimPrefix(ev, "data: ")
		for _, a := range gjson.Get(d, "choices.0.delta.annotations").Array() {
			got = append(got, a.Value())
		}
	}
	gotJSON, _ := json.Marshal(got)
	if !equalJSONDoc(string(gotJSON), gjson.GetBytes(body, "choices.0.message.annotations").Raw) {
		t.Fatalf("streamed %s\nplain %s", gotJSON, gjson.GetBytes(body, "choices.0.message.annotations").Raw)
	}
	if !strings.Contains(rec.Body.String(), `"server_tool_use_details":{"web_search_requests":1`) || !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
		t.Fatalf("stream tail %s", rec.Body.String())
	}
}

// Several events in one write pass through intact, whether the writer
// rewrote them or not (the meter writes a broken stream's error event and
// [DONE] at once; providers batch events too).
func TestCiteWriterSeveralEventsInOneWrite(t *testing.T) {
	for _, kind := range []string{"chat", "responses"} {
		plan := &searchPlan{spec: &search.Spec{MaxResults: 5}, engine: "exa", kind: dialect.Kind(kind)}
		const errEv = `data: {"id":"gen-1","object":"chat.completion.chunk","error":{"code":502,"message":"Provider stream ended unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}` + "\n\n"
		partial := `data: {"choices":[{"index":0,"delta":{"content":"cut`
		for _, writes := range [][]string{{errEv + "data: [DONE]\n\n"}, {errEv + errEv + "data: [DONE]\n\n" + partial}} {
			rec := citeRun(t, plan, "text/event-stream", 200, writes...)
			if want := strings.Join(writes, ""); rec.Body.String() != want {
				t.Fatalf("%s: stream\n%q\nwant\n%q", kind, rec.Body.String(), want)
			}
		}
	}
}

func TestCiteWriterPassesErrorsThrough(t *testing.T) {
	plan := &searchPlan{spec: &search.Spec{MaxResults: 5}, engine: "exa", kind: "chat"}
	const e = `{"error":{"code":402,"message":"[x](https://a.example)"}}`
	rec := citeRun(t, plan, "application/json", 402, e)
	if rec.Code != 402 || rec.Body.String() != e {
		t.Fatalf("error rewritten: %d %s", rec.Code, rec.Body)
	}
}

func TestCiteWriterResponsesStream(t *testing.T) {
	plan := &searchPlan{spec: &search.Spec{MaxResults: 5}, engine: "exa", kind: "responses", charged: true, results: 1}
	text := "é [one](https://a.example/1) ü [two](https://b.example/2)"
	var s strings.Builder
	seq := 0
	ev := func(typ string, fields string) {
		s.WriteString("event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":" + strconv.Itoa(seq) + fields + "}\n\n")
		seq++
	}
	loc := `,"item_id":"msg_1","output_index":0,"content_index":0`
	ev("response.created", `,"response":{}`)
	for _, w := range strings.SplitAfter(text, " ") {
		d, _ := json.Marshal(w)
		ev("response.output_text.delta", loc+`,"delta":`+string(d))
	}
	// The provider's own annotation: replaced by the gateway's.
	ev("response.output_text.annotation.added", loc+`,"annotation_index":0,"annotation":{"type":"url_citation","url":"https://p.example","title":"p","start_index":0,"end_index":1}`)
	tj, _ := json.Marshal(text)
	ev("response.output_text.done", loc+`,"text":`+string(tj))
	ev("response.content_part.done", loc+`,"part":{"type":"output_text","text":`+string(tj)+`,"annotations":[]}`)
	ev("response.output_item.done", `,"output_index":0,"item":{"type":"message","content":[{"type":"output_text","text":`+string(tj)+`,"annotations":[]}]}`)
	ev("response.completed", `,"response":{"output":[{"type":"message","content":[{"type":"output_text","text":`+string(tj)+`,"annotations":[]}]}],"usage":{"input_tokens":1}}`)
	s.WriteString("data: [DONE]\n\n")
	rec := citeRun(t, plan, "text/event-stream", 200, splitEvery(s.String(), 7)...)

	want := `[{"type":"url_citation","url":"https://a.example/1","title":"one","start_index":2,"end_index":28},` +
		`{"type":"url_citation","url":"https://b.example/2","title":"two","start_index":31,"end_index":57}]`
	last := int64(-1)
	var added []string
	finals := 0
	for raw := range strings.SplitSeq(strings.TrimSuffix(rec.Body.String(), "\n\n"), "\n\n") {
		_, d, _ := strings.Cut(raw, "data: ")
		if d == "[DONE]" {
			continue
		}
		j := gjson.Parse(d)
		if n := j.Get("sequence_number").Int(); n != last+1 {
			t.Fatalf("sequence_number %d after %d", n, last)
		}
		last++
		for _, p := range []string{"annotations", "part.annotations", "item.content.0.annotations", "response.output.0.content.0.annotations"} {
			if v := j.Get(p); v.Exists() {
				finals++
				if !equalJSONDoc(v.Raw, want) {
					t.Fatalf("%s: %s", j.Get("type").Str, v.Raw)
				}
			}
		}
		if j.Get("type").Str == "response.output_text.annotation.added" {
			if j.Get("annotation_index").Int() != int64(len(added)) || j.Get("item_id").Str != "msg_1" {
				t.Fatalf("event %s", d)
			}
			added = append(added, j.Get("annotation").Raw)
		}
		if j.Get("type").Str == "response.completed" && j.Get("response.usage.server_tool_use_details.web_search_results").Int() != 1 {
			t.Fatalf("usage %s", d)
		}
	}
	if finals != 4 || !equalJSONDoc("["+strings.Join(added, ",")+"]", want) {
		t.Fatalf("finals %d, added %v", finals, added)
	}
}

func equalJSONDoc(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func TestWebSearchFamilyFromCatalog(t *testing.T) {
	ws := testWebSearch(t, &Config{DefaultEngine: "exa", EnginesRaw: engineConfigs(map[string]*EngineConfig{"exa": {}})})
	claude := testgw.UpstreamProvider("/v1")
	claude.SearchFamily = "anthropic"
	plainOpenAI := testgw.UpstreamProvider("/v1")
	plainOpenAI.SearchFamily = "none"
	ws.gw = &testgw.Gateway{BrandName: "service", ModelCatalog: catalog.New([]*catalog.Model{
		testgw.PricedModel("acme/claude-proxy", testgw.Pricing, claude),
		testgw.PricedModel("openai/self-hosted", testgw.Pricing, plainOpenAI),
	})}
	const msgs = `"messages":[{"role":"user","content":"q"}]`
	out, plan, _, apiErr := ws.prepare([]byte(`{"model":"acme/claude-proxy:online",`+msgs+`}`), "chat")
	if apiErr != nil || plan.engine != "native" || plan.family != "anthropic" || gjson.GetBytes(out, "tools.0.type").Str != "web_search_20250305" {
		t.Fatalf("search_family anthropic: %v %+v %s", apiErr, plan, out)
	}
	_, plan, _, apiErr = ws.prepare([]byte(`{"model":"openai/self-hosted:online",`+msgs+`}`), "chat")
	if apiErr != nil || plan.engine != "exa" || plan.family != "" {
		t.Fatalf("search_family none: %v %+v", apiErr, plan)
	}
}

// BenchmarkPrerouteWithoutSearch is the plugin's cost on a request
// without web search: a byte scan, no JSON rewrite.
func BenchmarkPrerouteWithoutSearch(b *testing.B) {
	ws := &WebSearch{gw: &testgw.Gateway{BrandName: "service"}}
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("hello world ", 100) + `"}],"max_tokens":100}`
	req := plugintest.PrerouteRequest(dialect.Chat, body)
	b.ReportAllocs()
	for b.Loop() {
		if _, run, apiErr := ws.Preroute(req); run != nil || apiErr != nil {
			b.Fatal(run, apiErr)
		}
	}
}

// engineConfigs is the engines' JSON config, each engine's settings
// under its name.
func engineConfigs(m map[string]*EngineConfig) caddy.ModuleMap {
	out := caddy.ModuleMap{}
	for name, s := range m {
		out[name], _ = json.Marshal(s)
	}
	return out
}
