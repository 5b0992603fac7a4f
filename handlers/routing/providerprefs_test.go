package routing

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/routestats"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// prefsCatalog is a model "multi" served by four providers of different
// facts and prices (credits per token, prompt/completion):
//
//	zdr    ZDR, fp8, 0.000003/0.000006, supports every OpenAI parameter
//	deny   no data collection, bf16, 0.000002/0.000004
//	cheap  collects data, fp16, 0.0000005/0.000001, request 0.01
//	claude Anthropic dialect, quantization unknown, model price 0.000001/0.000002
//
// "multi" is distillable; "solo" (one provider, "cheap") is not; "alt"
// (provider "alt", ZDR) is a fallback model.
func prefsCatalog() *catalog.Catalog {
	prov := func(name string, mod func(p *catalog.Provider)) *catalog.Provider {
		p := testgw.Provider(name, "http", name+".test", name+".test:80", "/v1", name+"-model", "k-"+name)
		p.Stats = new(routestats.Stats)
		mod(p)
		return p
	}
	priced := func(prompt, completion string) *billing.Pricing {
		return &billing.Pricing{Prompt: testgw.Price(prompt), Completion: testgw.Price(completion)}
	}
	zdr := prov("zdr", func(p *catalog.Provider) {
		p.DataPolicy = catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true}
		p.Quantization, p.Pricing = "fp8", priced("0.000003", "0.000006")
	})
	deny := prov("deny", func(p *catalog.Provider) {
		p.DataPolicy = catalog.DataPolicy{NoDataCollection: true}
		p.Quantization, p.Pricing = "bf16", priced("0.000002", "0.000004")
	})
	cheap := prov("cheap", func(p *catalog.Provider) {
		p.Quantization, p.Pricing = "fp16", priced("0.0000005", "0.000001")
		p.Pricing.Request = testgw.Price("0.01")
		p.SupportedParameters = []string{"max_tokens", "temperature"}
	})
	claude := prov("claude", func(p *catalog.Provider) { p.Style = anthropic.Style })
	multi := testgw.PricedModel("multi", testgw.Pricing, zdr, deny, cheap, claude)
	multi.Distillable = true
	solo := testgw.PricedModel("solo", testgw.Pricing, prov("cheap", func(*catalog.Provider) {}))
	alt := testgw.PricedModel("alt", testgw.Pricing, prov("alt", func(p *catalog.Provider) {
		p.DataPolicy = catalog.DataPolicy{ZDR: true, NoDataCollection: true, NoPublication: true}
	}))
	return catalog.New([]*catalog.Model{multi, solo, alt})
}

// routeOf routes a chat request with the given extra members through rt.
func routeOf(t *testing.T, rt *Router, members string) (*upstream.Route, int, string) {
	t.Helper()
	body := `{"messages":[{"role":"user","content":"hi"}],` + members + `}`
	f, apiErr := ValidateInference(dialect.Chat, []byte(body))
	if apiErr != nil {
		return nil, apiErr.Status, apiErr.Message
	}
	route, apiErr := rt.Route(&pipeline.State{API: chatRoute}, []byte(body), f)
	if apiErr != nil {
		return nil, apiErr.Status, apiErr.Message
	}
	return route, http.StatusOK, ""
}

// providersOf names the attempts' providers, in order.
func providersOf(r *upstream.Route) string {
	var names []string
	for _, a := range r.Attempts {
		names = append(names, a.Model.ID+"/"+a.Provider.Name)
	}
	return strings.Join(names, ",")
}

// orderedRouter routes over the preferences catalog in catalog order
// among equally ranked endpoints.
func orderedRouter(t *testing.T) *Router {
	rt := newRoutingRouter(t, prefsCatalog())
	rt.LoadBalancing = LoadBalancingOrdered
	return rt
}

func TestProviderFiltersExcludeExactly(t *testing.T) {
	rt := orderedRouter(t)
	for _, tt := range []struct{ prefs, want string }{
		{`{}`, "multi/zdr,multi/deny,multi/cheap,multi/claude"},
		{`{"zdr":true}`, "multi/zdr"},
		{`{"zdr":false}`, "multi/zdr,multi/deny,multi/cheap,multi/claude"},
		{`{"data_collection":"deny"}`, "multi/zdr,multi/deny"},
		{`{"data_collection":"allow"}`, "multi/zdr,multi/deny,multi/cheap,multi/claude"},
		{`{"enforce_distillable_text":true}`, "multi/zdr,multi/deny,multi/cheap,multi/claude"},
		{`{"quantizations":["fp8","fp16"]}`, "multi/zdr,multi/cheap"},
		{`{"quantizations":["unknown"]}`, "multi/claude"},
		// Per million tokens: zdr 3/6, deny 2/4, cheap 0.5/1, claude 1/2.
		{`{"max_price":{"prompt":1}}`, "multi/cheap,multi/claude"},
		{`{"max_price":{"prompt":1e0,"completion":"2E+0"}}`, "multi/cheap,multi/claude"},
		{`{"max_price":{"prompt":"2","completion":"3.9"}}`, "multi/cheap,multi/claude"},
		{`{"max_price":{"completion":4}}`, "multi/deny,multi/cheap,multi/claude"},
		{`{"max_price":{"request":0.001}}`, "multi/zdr,multi/deny,multi/claude"},
		{`{"max_price":{"image":0,"audio":0}}`, "multi/zdr,multi/deny,multi/cheap,multi/claude"},
		// Combined: no collection and at most 2.5 per million prompt tokens.
		{`{"data_collection":"deny","max_price":{"prompt":2.5}}`, "multi/deny"},
		{`{"zdr":true,"ignore":["deny"],"quantizations":["fp8"]}`, "multi/zdr"},
		{`{"only":["cheap","claude"],"max_price":{"request":0}}`, "multi/claude"},
	} {
		r, status, msg := routeOf(t, rt, `"model":"multi","provider":`+tt.prefs)
		if status != 200 {
			t.Errorf("%s: %d %s", tt.prefs, status, msg)
			continue
		}
		if got := providersOf(r); got != tt.want {
			t.Errorf("%s: attempts %s, want %s", tt.prefs, got, tt.want)
		}
	}
}

// A model that is not distillable has no endpoint for
// enforce_distillable_text; the fallback model serves.
func TestProviderFiltersApplyToFallbacks(t *testing.T) {
	rt := orderedRouter(t)
	r, status, msg := routeOf(t, rt, `"model":"solo","models":["multi","alt"],"provider":{"zdr":true}`)
	if status != 200 || providersOf(r) != "multi/zdr,alt/alt" {
		t.Fatalf("zdr across fallbacks: %d %s %v", status, msg, r)
	}
	r, status, msg = routeOf(t, rt, `"model":"solo","models":["multi"],"provider":{"enforce_distillable_text":true,"max_price":{"prompt":0.6}}`)
	if status != 200 || providersOf(r) != "multi/cheap" {
		t.Fatalf("distillable: %d %s %v", status, msg, r)
	}
}

func TestProviderFiltersRequireParameters(t *testing.T) {
	rt := orderedRouter(t)
	for _, tt := range []struct{ members, want string }{
		{`"temperature":0.5`, "multi/zdr,multi/deny,multi/cheap,multi/claude"},
		{`"logprobs":true`, "multi/zdr,multi/deny"},
		{`"logprobs":false`, "multi/zdr,multi/deny,multi/cheap,multi/claude"},
		{`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}`, "multi/zdr,multi/deny"},
		{`"tools":[{"type":"function","function":{"name":"f"}}]`, "multi/zdr,multi/deny,multi/claude"},
		{`"max_completion_tokens":5,"top_k":3`, "multi/claude"},
	} {
		r, status, msg := routeOf(t, rt, `"model":"multi","provider":{"require_parameters":true},`+tt.members)
		if status != 200 {
			t.Errorf("%s: %d %s", tt.members, status, msg)
			continue
		}
		if got := providersOf(r); got != tt.want {
			t.Errorf("%s: attempts %s, want %s", tt.members, got, tt.want)
		}
	}
	// Without require_parameters every endpoint serves.
	r, _, _ := routeOf(t, rt, `"model":"multi","logprobs":true`)
	if len(r.Attempts) != 4 {
		t.Errorf("without require_parameters: %s", providersOf(r))
	}
}

// Nothing left: 503 naming the preference that excluded the last endpoint.
func TestProviderFiltersNothingLeft(t *testing.T) {
	rt := orderedRouter(t)
	for prefs, want := range map[string]string{
		`{"zdr":true,"quantizations":["bf16"]}`:                `provider.quantizations excluded "zdr" for model "multi"`,
		`{"zdr":true,"only":["deny","cheap"]}`:                 `provider.zdr excluded "cheap" for model "multi"`,
		`{"max_price":{"prompt":0.1}}`:                         `provider.max_price.prompt excluded "claude" for model "multi"`,
		`{"data_collection":"deny","only":["cheap","claude"]}`: `provider.data_collection excluded "claude" for model "multi"`,
		`{"enforce_distillable_text":true,"only":["x"]}`:       `provider.only excluded "claude" for model "multi"`,
		`{"ignore":["zdr","deny","cheap","claude"]}`:           `provider.ignore excluded "claude" for model "multi"`,
		`{"require_parameters":true,"only":["cheap"]}`:         `provider.require_parameters (logprobs) excluded "cheap" for model "multi"`,
	} {
		_, status, msg := routeOf(t, rt, `"model":"multi","logprobs":true,"provider":`+prefs)
		want = "No provider satisfies the request's provider preferences: " + want + " (the last endpoint left)"
		if status != 503 || msg != want {
			t.Errorf("%s: %d %q\nwant 503 %q", prefs, status, msg, want)
		}
	}
	_, status, msg := routeOf(t, rt, `"model":"solo","provider":{"enforce_distillable_text":true}`)
	if status != 503 || !strings.Contains(msg, `provider.enforce_distillable_text excluded "cheap" for model "solo"`) {
		t.Errorf("distillable: %d %s", status, msg)
	}
}

func TestProviderPrefsRefuseUnknownAndWrongTypes(t *testing.T) {
	rt := orderedRouter(t)
	for prefs, want := range map[string]string{
		`{"nonsense_field":1}`:                           "provider.nonsense_field: unknown field",
		`{"zdr":"yes"}`:                                  "provider.zdr: expected a boolean",
		`{"require_parameters":1}`:                       "provider.require_parameters: expected a boolean",
		`{"enforce_distillable_text":[]}`:                "provider.enforce_distillable_text: expected a boolean",
		`{"data_collection":"never"}`:                    `provider.data_collection: expected "allow" or "deny"`,
		`{"quantizations":["fp7"]}`:                      "provider.quantizations: expected an array of int4",
		`{"quantizations":"fp8"}`:                        "provider.quantizations: expected an array of int4",
		`{"max_price":{"prompt":-1}}`:                    "provider.max_price.prompt: expected a non-negative decimal",
		`{"max_price":{"prompt":"cheap"}}`:               "provider.max_price.prompt: expected a non-negative decimal",
		`{"max_price":{"prompt":1e-999999999}}`:          "provider.max_price.prompt: expected a non-negative decimal",
		`{"max_price":{"prompt":"1/2"}}`:                 "provider.max_price.prompt: expected a non-negative decimal",
		`{"max_price":{"prompt":true}}`:                  "provider.max_price.prompt: expected a non-negative decimal",
		`{"max_price":{"tokens":1}}`:                     "provider.max_price.tokens: unknown field",
		`{"max_price":3}`:                                "provider.max_price: expected an object",
		`{"sort":"fastest"}`:                             `provider.sort: expected "price", "throughput" or "latency"`,
		`{"sort":"exacto"}`:                              `provider.sort: "exacto" is not supported`,
		`{"sort":{"by":"price","partition":"all"}}`:      `provider.sort.partition: expected "model" or "none"`,
		`{"sort":{"by":"price","order":1}}`:              "provider.sort.order: unknown field",
		`{"preferred_max_latency":"fast"}`:               "provider.preferred_max_latency: expected a positive number",
		`{"preferred_min_throughput":{"p95":10}}`:        "provider.preferred_min_throughput.p95: unknown field",
		`{"preferred_min_throughput":{"p90":-1}}`:        "provider.preferred_min_throughput.p90: expected a positive number",
		`{"order":"zdr"}`:                                "provider.order: expected an array of provider names",
		`{"allow_fallbacks":"no"}`:                       "provider.allow_fallbacks: expected a boolean",
		`[]`:                                             "provider: expected an object",
		`{"zdr":true,"only":["zdr"],"nonsense_field":1}`: "provider.nonsense_field: unknown field",
	} {
		_, status, msg := routeOf(t, rt, `"model":"multi","provider":`+prefs)
		if status != 400 || !strings.HasPrefix(msg, want) {
			t.Errorf("%s: %d %q, want 400 %q", prefs, status, msg, want)
		}
	}
	// null members are the defaults.
	r, status, msg := routeOf(t, rt, `"model":"multi","provider":{"zdr":null,"sort":null,"max_price":{"prompt":null},"preferred_max_latency":null}`)
	if status != 200 || len(r.Attempts) != 4 {
		t.Fatalf("nulls: %d %s", status, msg)
	}
}

func TestProviderSortByPrice(t *testing.T) {
	rt := orderedRouter(t)
	r, _, msg := routeOf(t, rt, `"model":"multi","provider":{"sort":"price"}`)
	if got := providersOf(r); got != "multi/cheap,multi/claude,multi/deny,multi/zdr" {
		t.Fatalf("sort price: %s %s", got, msg)
	}
	if !strings.Contains(r.Routing, "sorted by price") {
		t.Errorf("routing %q", r.Routing)
	}
	// :floor is the same sort; the model is the catalog's.
	r, _, msg = routeOf(t, rt, `"model":"multi:floor"`)
	if got := providersOf(r); got != "multi/cheap,multi/claude,multi/deny,multi/zdr" {
		t.Fatalf(":floor: %s %s", got, msg)
	}
	if !strings.Contains(r.Routing, "model suffix") {
		t.Errorf("routing %q", r.Routing)
	}
	// order comes first, then the sort.
	r, _, _ = routeOf(t, rt, `"model":"multi","provider":{"order":["zdr"],"sort":"price"}`)
	if got := providersOf(r); got != "multi/zdr,multi/cheap,multi/claude,multi/deny" {
		t.Fatalf("order then sort: %s", got)
	}
	// Without fallbacks, only the first.
	r, _, _ = routeOf(t, rt, `"model":"multi","provider":{"sort":"price","allow_fallbacks":false}`)
	if got := providersOf(r); got != "multi/cheap" {
		t.Fatalf("no fallbacks: %s", got)
	}
	// Unknown suffixed ids stay unknown.
	if _, status, msg := routeOf(t, rt, `"model":"nope:nitro"`); status != 400 || msg != `model: unknown model "nope:nitro"` {
		t.Fatalf("unknown :nitro: %d %s", status, msg)
	}
}

// measure gives each provider of "multi" controlled measurements.
func measure(cat *catalog.Catalog, latency map[string]time.Duration, throughput map[string]float64) {
	m, _ := cat.Lookup("multi")
	at := time.Now()
	for _, p := range m.Providers {
		p.Stats = new(routestats.Stats)
		for range 5 {
			if d, ok := latency[p.Name]; ok {
				p.Stats.ObserveLatency(d, at)
			}
			if tp, ok := throughput[p.Name]; ok {
				p.Stats.ObserveThroughput(tp, at)
			}
		}
	}
}

func TestProviderSortByMeasurements(t *testing.T) {
	cat := prefsCatalog()
	measure(cat,
		map[string]time.Duration{"zdr": 900 * time.Millisecond, "deny": 200 * time.Millisecond, "cheap": 2 * time.Second},
		map[string]float64{"zdr": 40, "deny": 120, "claude": 300})
	rt := newRoutingRouter(t, cat)
	rt.LoadBalancing = LoadBalancingOrdered
	for _, tt := range []struct{ members, want string }{
		// Unmeasured endpoints come last, in catalog order.
		{`"model":"multi","provider":{"sort":"latency"}`, "multi/deny,multi/zdr,multi/cheap,multi/claude"},
		{`"model":"multi","provider":{"sort":"throughput"}`, "multi/claude,multi/deny,multi/zdr,multi/cheap"},
		{`"model":"multi:nitro"`, "multi/claude,multi/deny,multi/zdr,multi/cheap"},
		{`"model":"multi","provider":{"sort":{"by":"latency","partition":"model"}}`, "multi/deny,multi/zdr,multi/cheap,multi/claude"},
		// Preferred cutoffs put endpoints that miss them last, keeping
		// the order otherwise; unmeasured endpoints meet them.
		{`"model":"multi","provider":{"preferred_max_latency":1}`, "multi/zdr,multi/deny,multi/claude,multi/cheap"},
		{`"model":"multi","provider":{"preferred_max_latency":{"p90":0.5}}`, "multi/deny,multi/claude,multi/zdr,multi/cheap"},
		{`"model":"multi","provider":{"preferred_min_throughput":100}`, "multi/deny,multi/cheap,multi/claude,multi/zdr"},
		{`"model":"multi","provider":{"preferred_min_throughput":{"p50":100},"sort":"price"}`, "multi/cheap,multi/claude,multi/deny,multi/zdr"},
	} {
		r, status, msg := routeOf(t, rt, tt.members)
		if status != 200 {
			t.Errorf("%s: %d %s", tt.members, status, msg)
			continue
		}
		if got := providersOf(r); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.members, got, tt.want)
		}
	}
}

// With partition "none", the endpoints of every model are sorted together.
func TestProviderSortPartitionNone(t *testing.T) {
	rt := orderedRouter(t)
	r, _, _ := routeOf(t, rt, `"model":"multi","models":["alt"],"provider":{"sort":"price","only":["zdr","alt"]}`)
	if got := providersOf(r); got != "multi/zdr,alt/alt" {
		t.Fatalf("partition model: %s", got)
	}
	r, _, _ = routeOf(t, rt, `"model":"multi","models":["alt"],"provider":{"sort":{"by":"price","partition":"none"},"only":["zdr","alt"]}`)
	if got := providersOf(r); got != "alt/alt,multi/zdr" {
		t.Fatalf("partition none: %s", got)
	}
}

// Load balancing draws the first endpoint with weight 1/price²: with
// prices 9 (zdr), 6 (deny), 1.5 (cheap) and 3 (claude) per million
// prompt+completion tokens, the draw's cumulative shares are zdr up to
// 0.021, deny to 0.067, cheap to 0.814, claude to 1.
func TestProviderLoadBalancingByPrice(t *testing.T) {
	rt := newRoutingRouter(t, prefsCatalog())
	for _, tt := range []struct {
		draw  float64
		first string
	}{{0, "zdr"}, {0.05, "deny"}, {0.5, "cheap"}, {0.9, "claude"}} {
		rt.Random = func() float64 { return tt.draw }
		r, _, _ := routeOf(t, rt, `"model":"multi"`)
		if r.Attempts[0].Provider.Name != tt.first || len(r.Attempts) != 4 {
			t.Errorf("draw %v: %s, want %s first", tt.draw, providersOf(r), tt.first)
		}
		if r.Routing != "load balanced by price" {
			t.Errorf("routing %q", r.Routing)
		}
	}
	// Over many draws the shares follow the weights.
	rng := func() func() float64 {
		x := uint64(42)
		return func() float64 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			return float64(x>>11) / (1 << 53)
		}
	}()
	rt.Random = rng
	counts := map[string]int{}
	const n = 4000
	for range n {
		r, _, _ := routeOf(t, rt, `"model":"multi"`)
		counts[r.Attempts[0].Provider.Name]++
	}
	w := map[string]float64{"zdr": 1 / 81.0, "deny": 1 / 36.0, "cheap": 1 / 2.25, "claude": 1 / 9.0}
	total := w["zdr"] + w["deny"] + w["cheap"] + w["claude"]
	for name, wt := range w {
		want := wt / total * n
		if got := float64(counts[name]); got < want*0.85-20 || got > want*1.15+20 {
			t.Errorf("%s first %v times of %d, want about %.0f", name, got, n, want)
		}
	}
	// A free endpoint is always first.
	cat := prefsCatalog()
	m, _ := cat.Lookup("multi")
	m.Providers[2].Pricing = &billing.Pricing{}
	cat = catalog.New([]*catalog.Model{testgw.PricedModel("multi", testgw.Pricing, m.Providers...)})
	rt = newRoutingRouter(t, cat)
	rt.Random = rng
	for range 50 {
		if r, _, _ := routeOf(t, rt, `"model":"multi"`); r.Attempts[0].Provider.Name != "cheap" {
			t.Fatalf("free endpoint not first: %s", providersOf(r))
		}
	}
}

// A model with one provider is not ranked, and its route says nothing
// of routing.
func TestProviderOneEndpointSkipsRanking(t *testing.T) {
	rt := newRoutingRouter(t, prefsCatalog())
	rt.Random = func() float64 { t.Fatal("one endpoint drew a random number"); return 0 }
	r, status, _ := routeOf(t, rt, `"model":"solo"`)
	if status != 200 || providersOf(r) != "solo/cheap" || r.Routing != "" {
		t.Fatalf("%d %s %q", status, providersOf(r), r.Routing)
	}
}

// The attempt carries the provider's own pricing, which the meter charges.
func TestProviderPricingReachesTheAttempt(t *testing.T) {
	rt := orderedRouter(t)
	r, _, _ := routeOf(t, rt, `"model":"multi"`)
	for _, a := range r.Attempts {
		want := testgw.Pricing
		if a.Provider.Pricing != nil {
			want = *a.Provider.Pricing
		}
		if a.Model.Pricing != want || a.Model.ID != "multi" {
			t.Errorf("%s: pricing %+v, want %+v", a.Provider.Name, a.Model.Pricing, want)
		}
	}
}

func TestRequestParameters(t *testing.T) {
	for _, tt := range []struct{ kind, body, want string }{
		{"chat", `{"temperature":1,"logprobs":true,"response_format":{"type":"json_object"}}`, "temperature,response_format,logprobs"},
		{"responses", `{"max_output_tokens":5,"text":{"format":{"type":"json_schema"}},"reasoning":{}}`, "reasoning,max_tokens,response_format,structured_outputs"},
		{"messages", `{"max_tokens":5,"thinking":{"type":"enabled"},"stop_sequences":["x"]}`, "max_tokens,reasoning,stop"},
	} {
		root := gjson.Parse(tt.body)
		got := requestParameters(dialect.Kind(tt.kind), func(name string) gjson.Result { return root.Get(name) })
		if strings.Join(got, ",") != tt.want {
			t.Errorf("%s %s: %v, want %s", tt.kind, tt.body, got, tt.want)
		}
	}
}

// Guardrails and the request's preferences both apply: the stricter wins.
func TestProviderPrefsMergeWithGuardrails(t *testing.T) {
	rt := orderedRouter(t)
	gw := rt.Gateway.(*testgw.Gateway)
	acct := gw.Account(t, storage.AccountOrganization)
	key, _ := gw.APIKey(t, acct, storage.NewAPIKey{})
	id := &gateway.Identity{Principal: storage.Principal{AccountID: acct.ID, Hash: key.Hash, Key: &key}, Account: &acct}
	no := false
	g, err := gw.Storage.CreateGuardrail(acct.ID, func(g *storage.Guardrail) error {
		g.Name, g.EnablePaidModelTraining = "no training", &no
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Storage.AssignKeys(acct.ID, g.ID, []string{key.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	route := func(prefs string) (string, int, string) {
		body := `{"model":"multi","messages":[],"provider":` + prefs + `}`
		f, _ := ValidateInference(dialect.Chat, []byte(body))
		r, apiErr := rt.Route(&pipeline.State{API: chatRoute, ID: id, Store: gw.Storage}, []byte(body), f)
		if apiErr != nil {
			return "", apiErr.Status, apiErr.Message
		}
		return providersOf(r), 200, ""
	}
	// The guardrail alone removes the collecting endpoints.
	if got, _, msg := route(`{}`); got != "multi/zdr,multi/deny" {
		t.Fatalf("guardrail alone: %s %s", got, msg)
	}
	// The request's zdr is stricter.
	if got, _, _ := route(`{"zdr":true}`); got != "multi/zdr" {
		t.Fatalf("zdr and guardrail: %s", got)
	}
	// The request's data_collection "allow" does not loosen the guardrail.
	if got, _, _ := route(`{"data_collection":"allow"}`); got != "multi/zdr,multi/deny" {
		t.Fatalf("allow under guardrail: %s", got)
	}
	// Each removes some; nothing left is the request's 503.
	if _, status, msg := route(`{"max_price":{"prompt":1}}`); status != 503 || !strings.Contains(msg, "provider.max_price.prompt") {
		t.Fatalf("both: %d %s", status, msg)
	}
	if !slices.Contains(catalog.Quantizations, "fp8") {
		t.Fatal("quantizations")
	}
}

// A fallback model's endpoint that meets the preferred cutoffs is tried
// before the primary model's that miss them.
func TestProviderPreferredCutoffsAcrossModels(t *testing.T) {
	cat := prefsCatalog()
	measure(cat, map[string]time.Duration{"zdr": 3 * time.Second, "deny": 3 * time.Second, "cheap": 3 * time.Second, "claude": 3 * time.Second}, nil)
	alt, _ := cat.Lookup("alt")
	alt.Providers[0].Stats = new(routestats.Stats)
	alt.Providers[0].Stats.ObserveLatency(100*time.Millisecond, time.Now())
	rt := newRoutingRouter(t, cat)
	rt.LoadBalancing = LoadBalancingOrdered
	r, _, _ := routeOf(t, rt, `"model":"multi","models":["alt"],"provider":{"only":["zdr","deny","alt"],"preferred_max_latency":1}`)
	if got := providersOf(r); got != "alt/alt,multi/zdr,multi/deny" {
		t.Fatalf("cutoffs across models: %s", got)
	}
	r, _, _ = routeOf(t, rt, `"model":"multi","models":["alt"],"provider":{"only":["zdr","deny","alt"]}`)
	if got := providersOf(r); got != "multi/zdr,multi/deny,alt/alt" {
		t.Fatalf("without cutoffs: %s", got)
	}
}
