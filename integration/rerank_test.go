package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// withRerankModels adds cohere/rerank-v3.5 (0.002 credits per search
// unit) and a model whose Cohere-style provider fails as its name asks,
// both served by the mock's strict Cohere-style rerank API through p.
func withRerankModels(t *testing.T, p *countingProxy) func(string) string {
	return func(cfg string) string {
		block := ""
		for _, m := range []struct{ id, upstream string }{{"cohere/rerank-v3.5", "rerank-v3.5"}, {"cohere/rerank-error-500", "rerank-error-500"},
			{"cohere/rerank-wrong-usage", "rerank-wrong-usage"}} {
			block += fmt.Sprintf("\t\tmodel %s {\n\t\t\tpricing {\n\t\t\t\tprompt 0\n\t\t\t\tcompletion 0\n\t\t\t\tsearch_unit 0.002\n\t\t\t}\n"+
				"\t\t\tprovider cohere http://%s {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key mock\n\t\t\t\tstyle cohere\n\t\t\t}\n\t\t}\n", m.id, p.addr(), m.upstream)
		}
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

const rerankBody = `{"model":"cohere/rerank-v3.5","query":"capital of France","documents":["Berlin is in Germany",{"text":"Paris is the capital of France"}],"top_n":1}`

func TestRerank(t *testing.T) {
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string { return withRerankModels(t, proxy)(withCountingProxy(proxy)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("organization", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"rerank"}`)
	unit := money.Amount(2_000_000) // 0.002 credits

	t.Run("ranked, priced per search unit", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		r := c.mustPost("/rerank", key, rerankBody, nil).expect(t, 200)
		j := r.JSON
		if j.Get("model").Str != "cohere/rerank-v3.5" || j.Get("provider").Str != "cohere" || j.Get("results.#").Int() != 1 ||
			j.Get("results.0.index").Int() != 1 || j.Get("results.0.document.text").Str != "Paris is the capital of France" ||
			j.Get("results.0.relevance_score").Num != 1 || j.Get("usage.search_units").Int() != 1 {
			t.Fatalf("answer %s", r.Body)
		}
		id := r.Header.Get("X-Generation-Id")
		if id == "" || j.Get("id").Str != id {
			t.Fatalf("id %q, generation %q", j.Get("id").Str, id)
		}
		if got := creditAmount(t, j.Get("usage.cost")); got != unit {
			t.Fatalf("usage.cost %s, want %s", got, unit)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), unit, "rerank")
		g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("model").Str != "cohere/rerank-v3.5" || creditAmount(t, g.Get("total_cost")) != unit {
			t.Fatalf("generation %s", g.Raw)
		}
	})

	t.Run("bad input is a 400 naming the field, nothing sent or held", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"model":"cohere/rerank-v3.5","query":"q","documents":[]}`:                            "documents",
			`{"model":"cohere/rerank-v3.5","query":"q"}`:                                           "documents",
			`{"model":"cohere/rerank-v3.5","documents":["a"]}`:                                     "query",
			`{"model":"cohere/rerank-v3.5","query":"q","documents":["a"],"top_n":0}`:               "top_n",
			`{"model":"cohere/rerank-v3.5","query":"q","documents":[{"image":"https://x/y.png"}]}`: "documents[0].image",
			`{"model":"tollgate-mock","query":"q","documents":["a"]}`:                              "model",
		} {
			before := c.snapshot(key, tn.MgmtKey)
			calls := proxy.calls.Load()
			r := c.mustPost("/rerank", key, body, nil).expectError(t, 400, field+":")
			if proxy.calls.Load() != calls {
				t.Fatalf("%s reached the provider", body)
			}
			if r.Header.Get("X-Generation-Id") != "" {
				t.Fatalf("%s has a generation", body)
			}
			expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 0, body)
		}
	})

	t.Run("a provider error charges nothing", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		r := c.mustPost("/rerank", key, strings.Replace(rerankBody, "rerank-v3.5", "rerank-error-500", 1), nil)
		r.expectError(t, 500, "internal server error")
		if r.JSON.Get("error.metadata.provider_name").Str != "cohere" {
			t.Fatalf("error %s", r.Body)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 0, "provider 500")
	})

	t.Run("reported usage beyond the bound is charged the bound", func(t *testing.T) {
		before := c.snapshot(key, tn.MgmtKey)
		r := c.mustPost("/rerank", key, strings.Replace(rerankBody, "rerank-v3.5", "rerank-wrong-usage", 1), nil).expect(t, 200)
		if r.JSON.Get("usage.search_units").Int() != 1 {
			t.Fatalf("usage %s", r.JSON.Get("usage").Raw)
		}
		expectCharged(t, before, c.snapshot(key, tn.MgmtKey), unit, "wrong usage")
	})

	t.Run("guardrails filter the query and the documents", func(t *testing.T) {
		filtered, hash := c.newKey(tn.MgmtKey, `{"name":"filtered"}`)
		g := c.api("POST", "/guardrails", tn.MgmtKey, `{"name":"rules","content_filters":[
			{"pattern":"\\bPROJ-[0-9]{4}\\b","action":"block","label":"project code"},
			{"pattern":"sk-[a-z0-9]{8}","action":"redact","label":"[API_KEY]"}]}`).expect(t, 201).JSON.Get("data.id").Str
		c.api("POST", "/guardrails/"+g+"/assignments/keys", tn.MgmtKey, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
		for _, body := range []string{
			`{"model":"cohere/rerank-v3.5","query":"status of PROJ-1234","documents":["a"]}`,
			`{"model":"cohere/rerank-v3.5","query":"status","documents":["a",{"text":"PROJ-1234 is late"}]}`,
		} {
			before := c.snapshot(filtered, tn.MgmtKey)
			calls := proxy.calls.Load()
			c.mustPost("/rerank", filtered, body, nil).expectError(t, 403, "project code")
			if proxy.calls.Load() != calls {
				t.Fatalf("%s reached the provider", body)
			}
			expectCharged(t, before, c.snapshot(filtered, tn.MgmtKey), 0, "blocked")
		}
		r := c.mustPost("/rerank", filtered, `{"model":"cohere/rerank-v3.5","query":"key","documents":["the key sk-abcd1234"]}`, nil).expect(t, 200)
		if doc := r.JSON.Get("results.0.document.text").Str; doc != "the key [API_KEY]" {
			t.Fatalf("document %q", doc)
		}
	})

	t.Run("a key cap that fits one request refuses the second", func(t *testing.T) {
		capped, _ := c.newKey(tn.MgmtKey, fmt.Sprintf(`{"name":"one rerank","limit":%s}`, unit+unit/2))
		c.mustPost("/rerank", capped, rerankBody, nil).expect(t, 200)
		refused(t, c, proxy, tn, capped, "/rerank", rerankBody, "service_key_limit", "", false)
	})
}
