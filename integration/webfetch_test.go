package integration

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/pdftext/pdftest"
	"github.com/tollgate-dev/caddy-tollgate/money"
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
