package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/pdftext/pdftest"
)

// webFetchPrice is the harness's web_fetch_price in the web-fetch tests.
const webFetchPrice = "0.01"

// pageSite is a customer's web site on loopback (which the harness's
// customer_egress allows): an HTML article, a PDF, a 404 and a redirect
// to 127.0.0.2, which the policy refuses. hits counts the requests.
type pageSite struct {
	*httptest.Server
	hits atomic.Int64
}

func newPageSite(t *testing.T) *pageSite {
	t.Helper()
	s := &pageSite{}
	pdf := pdftest.Build("Revenue grew 12% in Q3.")
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		switch r.URL.Path {
		case "/article":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(`<!doctype html><html><head><title>Green Tea</title></head><body><nav>Home</nav>` +
				`<main><h1>Go 1.26</h1><p>The green tea collector is the default.</p></main></body></html>`))
		case "/q3.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Write(pdf)
		case "/slow":
			<-r.Context().Done() // until the gateway gives up
		case "/elsewhere":
			http.Redirect(w, r, "http://127.0.0.2"+portOnly(r.Host)+"/article", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// fetchChat is a chat request whose user message names urls, with the
// plugins ("" for none) and extra members.
func fetchChat(text, plugins, extra string) string {
	q, _ := json.Marshal(text)
	b := `{"model":"tollgate-mock","messages":[{"role":"user","content":` + string(q) + `}]`
	if plugins != "" {
		b += `,"plugins":` + plugins
	}
	return b + extra + `}`
}

// fetchCost is the charge of an answer's usage at tollgate-mock's prices
// plus fetches at webFetchPrice.
func fetchCost(t *testing.T, usage gjson.Result, fetches int64) money.Amount {
	t.Helper()
	in, _ := money.ParseAmount("0.000001")
	out, _ := money.ParseAmount("0.000002")
	price, _ := money.ParseAmount(webFetchPrice)
	p, _ := money.MulAmount(in, usage.Get("prompt_tokens").Int())
	q, _ := money.MulAmount(out, usage.Get("completion_tokens").Int())
	f, _ := money.MulAmount(price, fetches)
	sum, _ := money.AddAmounts(p, q)
	sum, _ = money.AddAmounts(sum, f)
	return sum
}

// The web-fetch plugin through Caddy against the strict mock: the pages
// the user's message names are fetched (HTML as markdown, a PDF as its
// text) and reach the provider in a system message; the mock's links to
// them come back as url_citation annotations, plain and streamed, on
// chat completions and Responses; each fetch the site answered is
// charged web_fetch_price once, a fetch the egress policy refused is the
// page's error text for the model and free; malformed entries are 400s
// naming the field, and nothing is fetched for them.
func TestWebFetchPlugin(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, chain(tap.through, withTollgateOptions(t, "web_fetch_price "+webFetchPrice)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"fetch"}`)
	site := newPageSite(t)
	plugin := `[{"id":"web-fetch","max_content_tokens":1000}]`

	t.Run("chat", func(t *testing.T) {
		tap.take()
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, fetchChat("Compare "+site.URL+"/article and "+site.URL+"/q3.pdf.", plugin, ""), nil).expect(t, 200)
		sys := tap.last(t).Get("messages.0")
		if sys.Get("role").Str != "system" || !strings.Contains(sys.Get("content").Str, "[1] Green Tea\nURL: "+site.URL+"/article\nContent:\n# Go 1.26\n\nThe green tea collector is the default.") ||
			!strings.Contains(sys.Get("content").Str, "URL: "+site.URL+"/q3.pdf\nContent:\nRevenue grew 12% in Q3.") || strings.Contains(sys.Get("content").Str, "Home") {
			t.Fatalf("upstream system message: %s", sys.Raw)
		}
		anns := r.JSON.Get("choices.0.message.annotations").Array()
		if len(anns) != 2 || anns[0].Get("url_citation.url").Str != site.URL+"/article" || anns[0].Get("url_citation.title").Str != "Green Tea" ||
			!strings.Contains(anns[0].Get("url_citation.content").Str, "green tea collector") {
			t.Fatalf("annotations: %s", r.JSON.Get("choices.0.message").Raw)
		}
		u := r.JSON.Get("usage")
		if u.Get("server_tool_use_details.web_fetch_requests").Int() != 2 {
			t.Fatalf("usage: %s", u.Raw)
		}
		want := fetchCost(t, u, 2)
		if got := creditAmount(t, u.Get("cost")); got != want {
			t.Fatalf("cost %v, want %v (%s)", got, want, u.Raw)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "two fetches")
	})

	t.Run("streamed", func(t *testing.T) {
		tap.take()
		evs := c.streamOf(t, "/chat/completions", key, fetchChat("Read "+site.URL+"/article please", plugin, `,"stream":true`))
		s := parseStream(t, evs)
		var anns []gjson.Result
		for _, ev := range evs {
			anns = append(anns, gjson.Get(ev.Data, "choices.0.delta.annotations").Array()...)
		}
		if !s.done || len(anns) != 1 || anns[0].Get("url_citation.url").Str != site.URL+"/article" ||
			s.usage.Get("server_tool_use_details.web_fetch_requests").Int() != 1 || creditAmount(t, s.usage.Get("cost")) != fetchCost(t, s.usage, 1) {
			t.Fatalf("stream: %+v %v", s, anns)
		}
		tap.take()
	})

	t.Run("responses", func(t *testing.T) {
		tap.take()
		body := `{"model":"tollgate-mock","input":"Read ` + site.URL + `/q3.pdf","plugins":` + plugin + `}`
		r := c.mustPost("/responses", key, body, nil).expect(t, 200)
		if !strings.Contains(tap.last(t).Get("input.0.content.0.text").Str, "Revenue grew 12% in Q3.") {
			t.Fatal("the PDF's text did not reach the provider")
		}
		var anns []gjson.Result
		for _, it := range r.JSON.Get("output").Array() {
			anns = append(anns, it.Get("content.0.annotations").Array()...)
		}
		u := r.JSON.Get("usage")
		if len(anns) != 1 || anns[0].Get("type").Str != "url_citation" || anns[0].Get("url").Str != site.URL+"/q3.pdf" ||
			u.Get("server_tool_use_details.web_fetch_requests").Int() != 1 {
			t.Fatalf("answer: %s", r.Body)
		}
	})

	t.Run("failed and refused fetches are the model's to read", func(t *testing.T) {
		tap.take()
		hits := site.hits.Load()
		r := c.mustPost("/chat/completions", key, fetchChat("See "+site.URL+"/missing and "+site.URL+"/elsewhere", plugin, ""), nil).expect(t, 200)
		sys := tap.last(t).Get("messages.0.content").Str
		if !strings.Contains(sys, "URL: "+site.URL+"/missing\nError: the URL answered 404 Not Found") ||
			!strings.Contains(sys, "URL: "+site.URL+"/elsewhere\nError: could not be fetched: refused by the gateway's customer_egress policy: 127.0.0.2 is not a public address") {
			t.Fatalf("system message: %s", sys)
		}
		// The 404 is an answer: charged; the redirect's refused hop never
		// connected: free, though its first hop reached the site.
		u := r.JSON.Get("usage")
		if got := site.hits.Load() - hits; got != 2 || u.Get("server_tool_use_details.web_fetch_requests").Int() != 1 || creditAmount(t, u.Get("cost")) != fetchCost(t, u, 1) {
			t.Fatalf("site hits %d, usage %s", got, u.Raw)
		}
		// The guard itself: without an allow list entry, loopback is refused.
		r = c.mustPost("/chat/completions", key, fetchChat("See http://127.0.0.2"+portOnly(strings.TrimPrefix(site.URL, "http://"))+"/article", plugin, ""), nil).expect(t, 200)
		if !strings.Contains(tap.last(t).Get("messages.0.content").Str, "refused by the gateway's customer_egress policy") ||
			r.JSON.Get("usage.server_tool_use_details.web_fetch_requests").Int() != 0 || creditAmount(t, r.JSON.Get("usage.cost")) != fetchCost(t, r.JSON.Get("usage"), 0) {
			t.Fatalf("refused: %s", r.Body)
		}
		// Domain lists are checked before any connection.
		hits = site.hits.Load()
		c.mustPost("/chat/completions", key, fetchChat("See "+site.URL+"/article", `[{"id":"web-fetch","blocked_domains":["127.0.0.1"]}]`, ""), nil).expect(t, 200)
		if !strings.Contains(tap.last(t).Get("messages.0.content").Str, "Error: not fetched: the domain is in blocked_domains") || site.hits.Load() != hits {
			t.Fatal("a blocked domain was fetched")
		}
	})

	t.Run("BYOK pays the fetches in credits", func(t *testing.T) {
		tap.take()
		own := c.newTenant("organization", "10")
		okey, ohash := c.newKey(own.MgmtKey, `{"name":"byok-fetch"}`)
		c.api("POST", "/byok", own.MgmtKey, `{"provider":"mock","key":"sk-own-mock-provider-key-123456"}`).expect(t, 201)
		r := c.mustPost("/chat/completions", okey, fetchChat("Read "+site.URL+"/article", plugin, ""), nil).expect(t, 200)
		tap.take()
		u := r.JSON.Get("usage")
		price, _ := money.ParseAmount(webFetchPrice)
		cost := creditAmount(t, u.Get("cost"))
		if !u.Get("is_byok").Bool() || cost != fetchCost(t, u, 1) {
			t.Fatalf("usage: %s", u.Raw)
		}
		k := c.api("GET", "/keys/"+ohash, own.MgmtKey, nil).expect(t, 200).JSON.Get("data")
		tokens, _ := money.AddAmounts(cost, -price)
		if got := creditAmount(t, k.Get("usage")); got != price {
			t.Errorf("usage %v, want the fetch's %v", got, price)
		}
		if got := creditAmount(t, k.Get("byok_usage")); got != tokens {
			t.Errorf("byok_usage %v, want the tokens' %v", got, tokens)
		}
	})

	t.Run("max_uses", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, fetchChat(site.URL+"/article "+site.URL+"/q3.pdf", `[{"id":"web-fetch","max_uses":1}]`, ""), nil).expect(t, 200)
		if !strings.Contains(tap.last(t).Get("messages.0.content").Str, "Error: not fetched: the request's max_uses (1) was reached") ||
			r.JSON.Get("usage.server_tool_use_details.web_fetch_requests").Int() != 1 {
			t.Fatalf("answer: %s", r.Body)
		}
	})

	t.Run("refusals name the field", func(t *testing.T) {
		tap.take()
		hits := site.hits.Load()
		text := "See " + site.URL + "/article"
		for name, tc := range map[string]struct{ path, body, msg string }{
			"max_uses":       {"/chat/completions", fetchChat(text, `[{"id":"web-fetch","max_uses":0}]`, ""), "plugins[0].max_uses: expected an integer from 1 to 25"},
			"domains":        {"/chat/completions", fetchChat(text, `[{"id":"web-fetch","allowed_domains":["https://x.com/"]}]`, ""), "plugins[0].allowed_domains[0]: expected a domain name"},
			"unknown":        {"/chat/completions", fetchChat(text, `[{"id":"web-fetch","depth":2}]`, ""), "plugins[0].depth: unknown field of the web-fetch plugin"},
			"enabled":        {"/responses", `{"model":"tollgate-mock","input":"hi","plugins":[{"id":"web-fetch","enabled":"yes"}]}`, "plugins[0].enabled: expected a boolean"},
			"messages route": {"/messages", `{"model":"tollgate-mock","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"plugins":[{"id":"web-fetch"}]}`, "plugins[0].id: the web-fetch plugin applies to /chat/completions and /responses"},
		} {
			r := c.mustPost(tc.path, key, tc.body, nil)
			if r.Status != 400 || !strings.Contains(r.JSON.Get("error.message").Str, tc.msg) {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		if site.hits.Load() != hits || len(tap.take()) != 0 {
			t.Fatal("a refused request fetched or reached the provider")
		}
	})
}

// mockUsageOf posts body to the mock provider directly and returns the
// usage it answers with: what each round of the loop cost.
func mockUsageOf(t *testing.T, body string) gjson.Result {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+mockAddr+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer mock")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, res.Body); err != nil || res.StatusCode != 200 {
		t.Fatalf("mock: %d %v %s", res.StatusCode, err, b.String())
	}
	return gjson.Get(b.String(), "usage")
}

// roundsCost is the token cost of the upstream rounds at tollgate-mock's
// prices, each asked of the mock again, and their summed usage.
func roundsCost(t *testing.T, bodies []string) (money.Amount, int64, int64) {
	t.Helper()
	in, _ := money.ParseAmount("0.000001")
	out, _ := money.ParseAmount("0.000002")
	var sum money.Amount
	var prompt, completion int64
	for _, b := range bodies {
		u := mockUsageOf(t, b)
		p, _ := money.MulAmount(in, u.Get("prompt_tokens").Int())
		q, _ := money.MulAmount(out, u.Get("completion_tokens").Int())
		sum, _ = money.AddAmounts(sum, p)
		sum, _ = money.AddAmounts(sum, q)
		prompt += u.Get("prompt_tokens").Int()
		completion += u.Get("completion_tokens").Int()
	}
	return sum, prompt, completion
}

// plusFetches adds n fetches at webFetchPrice to a cost.
func plusFetches(a money.Amount, n int64) money.Amount {
	price, _ := money.ParseAmount(webFetchPrice)
	f, _ := money.MulAmount(price, n)
	s, _ := money.AddAmounts(a, f)
	return s
}

// toolChat is a chat request offering the web_fetch server tool (with
// params, "" for none) whose user message asks the mock to call it for
// each of urls.
func toolChat(model, params string, urls ...string) string {
	text := "Read these."
	for _, u := range urls {
		text += "\nmock-tool-call: web_fetch {\"url\":\"" + u + "\"}"
	}
	q, _ := json.Marshal(text)
	tool := `{"type":"service:web_fetch"}`
	if params != "" {
		tool = `{"type":"service:web_fetch","parameters":` + params + `}`
	}
	return `{"model":"` + model + `","messages":[{"role":"user","content":` + string(q) + `}],"tools":[` + tool + `]}`
}

// The web_fetch server tool through Caddy against the strict mock, which
// calls the function the gateway offers in its place: the gateway fetches
// the page and calls the model again with it; the client gets the last
// answer only, its link to the page a url_citation, and is charged every
// round's tokens (each priced as the mock prices it alone) plus the
// fetches the sites answered, exactly once. Refused and failed fetches
// are the tool's error text for the model; max_uses withdraws the tool;
// a client that leaves mid-loop is charged the rounds done.
func TestWebFetchServerTool(t *testing.T) {
	tap := newBodyTap(t)
	// flaky fails every round that carries tool results, recording it
	// with the tap.
	var laterRound atomic.Bool
	flaky := startTap(t, mockAddr, func(_ string, b []byte) {
		laterRound.Store(strings.Contains(string(b), `"role":"tool"`))
		tap.mu.Lock()
		tap.bodies = append(tap.bodies, string(b))
		tap.mu.Unlock()
	}, func(res *http.Response) error {
		if laterRound.Load() {
			res.Body.Close()
			res.StatusCode, res.Status = 500, "500 Internal Server Error"
			res.Body = io.NopCloser(strings.NewReader(`{"error":{"message":"boom","code":500}}`))
			res.ContentLength = -1
			res.Header.Del("Content-Length")
			res.Header.Set("Content-Type", "application/json")
		}
		return nil
	})
	startInProcessWith(t, chain(tap.through, withTollgateOptions(t, "web_fetch_price "+webFetchPrice),
		withModels(t, apiModel("fetch/chat", [4]string{"mockchat", "http://" + tap.addr + "/v1", "tollgate-mock", "chat"}),
			apiModel("fetch/flaky", [4]string{"mockflaky", flaky.URL + "/v1", "tollgate-mock", "chat"}))))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"fetch-tool"}`)
	site := newPageSite(t)

	t.Run("chat", func(t *testing.T) {
		tap.take()
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, toolChat("tollgate-mock", `{"max_uses":2,"max_content_tokens":500}`, site.URL+"/article"), nil).expect(t, 200)
		rounds := tap.take()
		if len(rounds) != 2 {
			t.Fatalf("%d upstream rounds, want 2", len(rounds))
		}
		first, second := gjson.Parse(rounds[0]), gjson.Parse(rounds[1])
		if first.Get("tools.0.type").Str != "function" || first.Get("tools.0.function.name").Str != "web_fetch" {
			t.Fatalf("the provider got tools %s", first.Get("tools").Raw)
		}
		result := second.Get("messages.2")
		if second.Get("messages.1.tool_calls.0.function.name").Str != "web_fetch" || result.Get("role").Str != "tool" ||
			!strings.Contains(result.Get("content").Str, "# Go 1.26\n\nThe green tea collector is the default.") {
			t.Fatalf("second round: %s", second.Get("messages").Raw)
		}
		msg := r.JSON.Get("choices.0.message")
		anns := msg.Get("annotations").Array()
		if r.JSON.Get("choices.0.finish_reason").Str != "stop" || msg.Get("tool_calls").Exists() || !strings.Contains(msg.Get("content").Str, "tool result URL: "+site.URL+"/article") ||
			len(anns) != 1 || anns[0].Get("url_citation.url").Str != site.URL+"/article" || anns[0].Get("url_citation.title").Str != "Green Tea" {
			t.Fatalf("answer: %s", r.Body)
		}
		tokens, prompt, completion := roundsCost(t, rounds)
		want := plusFetches(tokens, 1)
		u := r.JSON.Get("usage")
		if creditAmount(t, u.Get("cost")) != want || u.Get("prompt_tokens").Int() != prompt || u.Get("completion_tokens").Int() != completion ||
			u.Get("server_tool_use_details.web_fetch_requests").Int() != 1 {
			t.Fatalf("usage %s, want cost %v, %d+%d tokens", u.Raw, want, prompt, completion)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "two rounds and a fetch")
	})

	t.Run("streamed", func(t *testing.T) {
		tap.take()
		before := c.snapshot(key, org.MgmtKey)
		body := strings.TrimSuffix(toolChat("tollgate-mock", "", site.URL+"/article"), "}") + `,"stream":true}`
		evs := c.streamOf(t, "/chat/completions", key, body)
		s := parseStream(t, evs)
		rounds := tap.take()
		var anns []gjson.Result
		for _, ev := range evs {
			anns = append(anns, gjson.Get(ev.Data, "choices.0.delta.annotations").Array()...)
			if gjson.Get(ev.Data, "choices.0.delta.tool_calls").Exists() {
				t.Fatalf("the gateway's call reached the client: %s", ev.Data)
			}
		}
		tokens, prompt, completion := roundsCost(t, rounds)
		want := plusFetches(tokens, 1)
		if len(rounds) != 2 || gjson.Get(rounds[0], "stream").Bool() || !s.done || !strings.Contains(s.text, "The green tea collector is the default.") ||
			len(anns) != 1 || anns[0].Get("url_citation.url").Str != site.URL+"/article" ||
			creditAmount(t, s.usage.Get("cost")) != want || s.usage.Get("prompt_tokens").Int() != prompt || s.usage.Get("completion_tokens").Int() != completion ||
			s.usage.Get("server_tool_use_details.web_fetch_requests").Int() != 1 {
			t.Fatalf("stream (%d rounds): %+v %v", len(rounds), s, anns)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "a streamed loop")
		// Responses, streamed through a chat provider.
		body = `{"model":"fetch/chat","stream":true,"input":[{"role":"user","content":"mock-tool-call: web_fetch {\"url\":\"` + site.URL + `/q3.pdf\"}"}],"tools":[{"type":"service:web_fetch"}]}`
		s = parseStream(t, c.streamOf(t, "/responses", key, body))
		tokens, _, _ = roundsCost(t, tap.take())
		if s.finalEvent != "response.completed" || !strings.Contains(s.text, "Revenue grew 12% in Q3.") || creditAmount(t, s.usage.Get("cost")) != plusFetches(tokens, 1) {
			t.Fatalf("responses stream: %+v", s)
		}
	})

	t.Run("responses through a chat provider", func(t *testing.T) {
		tap.take()
		body := `{"model":"fetch/chat","input":[{"role":"user","content":"mock-tool-call: web_fetch {\"url\":\"` + site.URL + `/q3.pdf\"}"}],"tools":[{"type":"service:web_fetch"}]}`
		r := c.mustPost("/responses", key, body, nil).expect(t, 200)
		rounds := tap.take()
		var text string
		var anns []gjson.Result
		for _, it := range r.JSON.Get("output").Array() {
			if it.Get("type").Str == "function_call" {
				t.Fatalf("the gateway's call reached the client: %s", r.Body)
			}
			text += it.Get("content.0.text").Str
			anns = append(anns, it.Get("content.0.annotations").Array()...)
		}
		tokens, prompt, completion := roundsCost(t, rounds)
		u := r.JSON.Get("usage")
		if len(rounds) != 2 || !strings.Contains(text, "Revenue grew 12% in Q3.") || len(anns) != 1 || anns[0].Get("url").Str != site.URL+"/q3.pdf" ||
			creditAmount(t, u.Get("cost")) != plusFetches(tokens, 1) || u.Get("server_tool_use_details.web_fetch_requests").Int() != 1 ||
			u.Get("input_tokens").Int() != prompt || u.Get("output_tokens").Int() != completion || u.Get("total_tokens").Int() != prompt+completion ||
			r.JSON.Get("tools").Raw != `[{"type":"service:web_fetch"}]` {
			t.Fatalf("answer (%d rounds): %s", len(rounds), r.Body)
		}
		// A provider speaking Responses cannot run the loop.
		r = c.mustPost("/responses", key, `{"model":"tollgate-mock","input":"hi","tools":[{"type":"service:web_fetch"}]}`, nil)
		if r.Status != 400 || !strings.Contains(r.JSON.Get("error.message").Str, "tools[0].type: the service:web_fetch server tool needs a provider that speaks chat completions") {
			t.Fatalf("responses provider: %d %s", r.Status, r.Body)
		}
	})

	t.Run("refused and failed fetches are the tool's error text", func(t *testing.T) {
		tap.take()
		refused := "http://127.0.0.2" + portOnly(strings.TrimPrefix(site.URL, "http://")) + "/article"
		r := c.mustPost("/chat/completions", key, toolChat("tollgate-mock", "", refused, site.URL+"/missing", "http://169.254.169.254/latest/meta-data/"), nil).expect(t, 200)
		rounds := tap.take()
		if len(rounds) != 2 {
			t.Fatalf("%d rounds", len(rounds))
		}
		results := gjson.Get(rounds[1], `messages.#(role=="tool")#.content`).Array()
		if len(results) != 3 || !strings.HasPrefix(results[0].Str, "Error fetching "+refused+": could not be fetched: refused by the gateway's customer_egress policy: 127.0.0.2 is not a public address") ||
			results[1].Str != "Error fetching "+site.URL+"/missing: the URL answered 404 Not Found" ||
			!strings.Contains(results[2].Str, "refused by the gateway's customer_egress policy: 169.254.169.254 is not a public address") {
			t.Fatalf("tool results: %v", results)
		}
		tokens, _, _ := roundsCost(t, rounds)
		// Only the 404 was an answer from a site.
		if u := r.JSON.Get("usage"); creditAmount(t, u.Get("cost")) != plusFetches(tokens, 1) || u.Get("server_tool_use_details.web_fetch_requests").Int() != 1 {
			t.Fatalf("usage: %s", u.Raw)
		}
	})

	t.Run("max_uses withdraws the tool", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, toolChat("tollgate-mock", `{"max_uses":1}`, site.URL+"/article", site.URL+"/q3.pdf"), nil).expect(t, 200)
		rounds := tap.take()
		if len(rounds) != 2 || gjson.Get(rounds[1], "tools").Exists() {
			t.Fatalf("rounds: %q", rounds)
		}
		results := gjson.Get(rounds[1], `messages.#(role=="tool")#.content`).Array()
		if len(results) != 2 || results[1].Str != "Error fetching "+site.URL+"/q3.pdf: max_uses_exceeded: this request may fetch at most 1 pages" ||
			r.JSON.Get("usage.server_tool_use_details.web_fetch_requests").Int() != 1 {
			t.Fatalf("results %v, answer %s", results, r.Body)
		}
	})

	t.Run("invalid calls spend max_uses", func(t *testing.T) {
		tap.take()
		// The mock calls web_fetch without a url in every round that
		// offers it: the second round withdraws the tool.
		body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"mock-tool-call: web_fetch {\"href\":\"x\"}"}],"tools":[{"type":"service:web_fetch","parameters":{"max_uses":1}}]}`
		r := c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
		rounds := tap.take()
		if len(rounds) != 2 || gjson.Get(rounds[1], "tools").Exists() ||
			!strings.Contains(gjson.Get(rounds[1], `messages.#(role=="tool").content`).Str, "invalid_tool_input") ||
			r.JSON.Get("usage.server_tool_use_details.web_fetch_requests").Int() != 0 {
			t.Fatalf("rounds %q, answer %s", rounds, r.Body)
		}
	})

	t.Run("a later round failing ends the loop with the rounds done", func(t *testing.T) {
		tap.take()
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, toolChat("fetch/flaky", "", site.URL+"/article"), nil).expect(t, 200)
		rounds := tap.take()
		if len(rounds) != 2 {
			t.Fatalf("%d rounds", len(rounds))
		}
		// The first round's tokens and the fetch; the failed round is free.
		want := plusFetches(func() money.Amount { a, _, _ := roundsCost(t, rounds[:1]); return a }(), 1)
		if r.JSON.Get("choices.0.finish_reason").Str != "error" || r.JSON.Get("choices.0.message.tool_calls").Exists() ||
			creditAmount(t, r.JSON.Get("usage.cost")) != want || r.JSON.Get("usage.server_tool_use_details.web_fetch_requests").Int() != 1 {
			t.Fatalf("answer: %s (want cost %v)", r.Body, want)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "the first round and the fetch")
	})

	t.Run("a client leaving mid-loop pays the rounds done", func(t *testing.T) {
		tap.take()
		before := c.snapshot(key, org.MgmtKey)
		hits := site.hits.Load()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", c.gateway+"/api/v1/chat/completions", strings.NewReader(toolChat("tollgate-mock", "", site.URL+"/slow")))
		req.Header.Set("Authorization", "Bearer "+key)
		done := make(chan error, 1)
		go func() {
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				res.Body.Close()
			}
			done <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for site.hits.Load() == hits {
			if time.Now().After(deadline) {
				t.Fatal("the gateway never fetched the page")
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
		after := c.waitUsage(key, org.MgmtKey, before, 10*time.Second, 200*time.Millisecond)
		rounds := tap.take()
		if len(rounds) != 1 {
			t.Fatalf("%d rounds", len(rounds))
		}
		// The first round's tokens; the fetch the client abandoned is free.
		tokens, _, _ := roundsCost(t, rounds)
		expectCharged(t, before, after, tokens, "the first round")
	})

	t.Run("the hold covers the rounds and fetches", func(t *testing.T) {
		tap.take()
		// max_uses 1 holds one more round of tollgate-mock's whole
		// context window (8192 tokens at 0.000002) and one fetch (0.01):
		// 0.026384 beyond the request's own hold, which a key limited to
		// 0.02 cannot cover; the request without the tool fits.
		capped, _ := c.newKey(org.MgmtKey, `{"name":"fetch-capped","limit":0.02}`)
		body := toolChat("tollgate-mock", `{"max_uses":1}`, site.URL+"/article")
		r := c.mustPost("/chat/completions", capped, body, nil)
		if r.Status != 402 || len(tap.take()) != 0 {
			t.Fatalf("with the tool: %d %s", r.Status, r.Body)
		}
		without := strings.Replace(body, `,"tools":[{"type":"service:web_fetch","parameters":{"max_uses":1}}]`, "", 1)
		if without == body {
			t.Fatal("the tool was not taken out")
		}
		c.mustPost("/chat/completions", capped, without, nil).expect(t, 200)
		tap.take()
	})

	t.Run("refusals name the field", func(t *testing.T) {
		tap.take()
		for name, tc := range map[string]struct{ path, body, msg string }{
			"max_uses":    {"/chat/completions", toolChat("tollgate-mock", `{"max_uses":26}`, site.URL), "tools[0].parameters.max_uses: expected an integer from 1 to 25"},
			"engine":      {"/chat/completions", toolChat("tollgate-mock", `{"engine":"exa"}`, site.URL), `tools[0].parameters.engine: this gateway fetches pages itself: expected one of "auto", "service"`},
			"unknown":     {"/chat/completions", toolChat("tollgate-mock", `{"depth":1}`, site.URL), "tools[0].parameters.depth: unknown field of the web_fetch tool's parameters"},
			"name":        {"/chat/completions", `{"model":"tollgate-mock","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"web_fetch"}},{"type":"service:web_fetch"}]}`, `tools[0]: the function name "web_fetch" is the service:web_fetch server tool's`},
			"with search": {"/chat/completions", `{"model":"tollgate-mock","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"service:web_search"},{"type":"service:web_fetch","parameters":{"max_uses":0}}]}`, "tools[1].parameters.max_uses: expected an integer from 1 to 25"},
			"twice":       {"/chat/completions", `{"model":"tollgate-mock","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"service:web_fetch"},{"type":"service:web_fetch"}]}`, "tools[1]: only one service:web_fetch tool"},
			"messages":    {"/messages", `{"model":"tollgate-mock","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"service:web_fetch"}]}`, "tools[0].type: the service:web_fetch server tool applies to /chat/completions and /responses"},
		} {
			r := c.mustPost(tc.path, key, tc.body, nil)
			if r.Status != 400 || !strings.Contains(r.JSON.Get("error.message").Str, tc.msg) {
				t.Errorf("%s: %d %s", name, r.Status, r.Body)
			}
		}
		if n := len(tap.take()); n != 0 {
			t.Fatalf("%d refused requests reached the provider", n)
		}
	})
}
