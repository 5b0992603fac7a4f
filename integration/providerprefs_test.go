package integration

import (
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// prefsTaps count the calls each provider of the preferences catalog
// gets; each stands in front of the mock provider.
type prefsTaps struct {
	names []string
	calls map[string]*atomic.Int64
	addrs map[string]string
}

func startPrefsTaps(t *testing.T, names ...string) *prefsTaps {
	p := &prefsTaps{names: names, calls: map[string]*atomic.Int64{}, addrs: map[string]string{}}
	for _, n := range names {
		counter := new(atomic.Int64)
		p.calls[n] = counter
		p.addrs[n] = startTap(t, mockAddr, func(string, []byte) { counter.Add(1) }, nil).Listener.Addr().String()
	}
	return p
}

// counts is the calls of every tap, "name=n" in order.
func (p *prefsTaps) counts() string {
	var out []string
	for _, n := range p.names {
		out = append(out, fmt.Sprintf("%s=%d", n, p.calls[n].Load()))
	}
	return strings.Join(out, " ")
}

// served checks which taps got a call since the last check.
func (p *prefsTaps) expect(t *testing.T, want string, when string) {
	t.Helper()
	got := p.counts()
	if got != want {
		t.Fatalf("%s: upstream calls %s, want %s", when, got, want)
	}
}

// withPrefsModels adds the preferences catalog:
//
//	pp/multi (distillable)  zdr    ZDR, fp8, 3/6 per million tokens
//	                        deny   no data collection, bf16, 2/4
//	                        cheap  collects, fp16, 0.5/1, only max_tokens and temperature
//	pp/solo                 cheap  (the model's price, 1/2)
//	pp/fail                 zbad   ZDR, answers 500
//	                        open   collects
//	                        zgood  ZDR
func withPrefsModels(t *testing.T, taps *prefsTaps) func(string) string {
	return func(cfg string) string {
		prov := func(name, tap, model string, lines ...string) string {
			b := fmt.Sprintf("\t\t\tprovider %s http://%s/v1 {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key mock\n", name, taps.addrs[tap], model)
			for _, l := range lines {
				b += "\t\t\t\t" + strings.ReplaceAll(l, "\n", "\n\t\t\t\t") + "\n"
			}
			return b + "\t\t\t}\n"
		}
		model := func(id string, body ...string) string {
			return "\t\tmodel " + id + " {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n" +
				strings.Join(body, "") + "\t\t}\n"
		}
		price := func(prompt, completion string) string {
			return "pricing {\n\tprompt " + prompt + "\n\tcompletion " + completion + "\n}"
		}
		block := model("pp/multi",
			prov("zdr", "zdr", "tollgate-mock", "zdr", "quantization fp8", price("0.000003", "0.000006")),
			prov("deny", "deny", "tollgate-mock", "data_collection deny", "quantization bf16", price("0.000002", "0.000004")),
			prov("cheap", "cheap", "tollgate-mock", "quantization fp16", "supported_parameters max_tokens temperature", price("0.0000005", "0.000001")),
			"\t\t\tdistillable_text\n") +
			model("pp/solo", prov("cheap", "cheap", "tollgate-mock")) +
			model("pp/fail",
				prov("zbad", "zdr", "tollgate-mock-error-500", "zdr"),
				prov("open", "cheap", "tollgate-mock"),
				prov("zgood", "deny", "tollgate-mock", "zdr"))
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// Every provider preference through Caddy: each filter sends the request
// to exactly the providers it admits (the others get no call), the
// provider's own price is what is charged, nothing left is a 503 naming
// the preference, unknown fields and wrong types are a 400, fallbacks
// respect the filters, and GET /generation shows the attempts.
func TestProviderPreferences(t *testing.T) {
	taps := startPrefsTaps(t, "zdr", "deny", "cheap")
	startInProcessWith(t, withPrefsModels(t, taps))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"prefs"}`)
	body := func(model, members string) string {
		return `{"model":"` + model + `","max_tokens":5,"messages":[{"role":"user","content":"hello"}]` + members + `}`
	}
	zdr, deny, cheap := 0, 0, 0
	want := func() string { return fmt.Sprintf("zdr=%d deny=%d cheap=%d", zdr, deny, cheap) }

	for _, tt := range []struct {
		members  string
		provider string
		tap      *int
	}{
		{``, "zdr", &zdr}, // catalog order (the harness pins it)
		{`,"provider":{"zdr":true}`, "zdr", &zdr},
		{`,"provider":{"data_collection":"deny","ignore":["zdr"]}`, "deny", &deny},
		{`,"provider":{"quantizations":["bf16","fp16"]}`, "deny", &deny},
		{`,"provider":{"max_price":{"prompt":1,"completion":"2"}}`, "cheap", &cheap},
		{`,"provider":{"sort":"price"}`, "cheap", &cheap},
		{`,"provider":{"require_parameters":true},"seed":7`, "zdr", &zdr},
		{`,"provider":{"require_parameters":true,"order":["cheap","deny"]},"seed":7`, "deny", &deny},
		{`,"provider":{"enforce_distillable_text":true,"order":["cheap"]}`, "cheap", &cheap},
	} {
		r := c.mustPost("/chat/completions", key, body("pp/multi", tt.members), nil).expect(t, 200)
		*tt.tap++
		taps.expect(t, want(), tt.members)
		if got := r.JSON.Get("provider").Str; got != tt.provider {
			t.Errorf("%s: provider %q, want %q", tt.members, got, tt.provider)
		}
	}

	// The provider's own price is charged: cheap's 0.5/1 per million.
	r := c.mustPost("/chat/completions", key, body("pp/multi:floor", ""), nil).expect(t, 200)
	cheap++
	taps.expect(t, want(), ":floor")
	if r.JSON.Get("model").Str != "pp/multi" || r.JSON.Get("provider").Str != "cheap" {
		t.Errorf(":floor answer: %s", r.Body)
	}
	u := r.JSON.Get("usage")
	cost := new(big.Rat).Add(new(big.Rat).Mul(big.NewRat(u.Get("prompt_tokens").Int(), 1), big.NewRat(5, 10_000_000)),
		new(big.Rat).Mul(big.NewRat(u.Get("completion_tokens").Int(), 1), big.NewRat(1, 1_000_000)))
	if got, _ := new(big.Rat).SetString(u.Get("cost").Raw); got == nil || got.Cmp(cost) != 0 {
		t.Errorf("cost %s, want %s (cheap's prices) for %s", u.Get("cost").Raw, cost.FloatString(9), u.Raw)
	}

	// Nothing left: 503 naming the preference, before any provider call.
	for members, msg := range map[string]string{
		`,"provider":{"zdr":true,"quantizations":["fp16"]}`:                 `provider.quantizations excluded "zdr" for model "pp/multi"`,
		`,"provider":{"max_price":{"prompt":0.1}}`:                          `provider.max_price.prompt excluded "cheap" for model "pp/multi"`,
		`,"provider":{"only":["cheap"],"require_parameters":true},"seed":1`: `provider.require_parameters (seed) excluded "cheap" for model "pp/multi"`,
		`,"provider":{"data_collection":"deny","only":["cheap"]}`:           `provider.data_collection excluded "cheap"`,
	} {
		r := c.mustPost("/chat/completions", key, body("pp/multi", members), nil)
		r.expectError(t, 503, "No provider satisfies the request's provider preferences: "+msg)
	}
	c.mustPost("/chat/completions", key, body("pp/solo", `,"provider":{"enforce_distillable_text":true}`), nil).
		expectError(t, 503, `provider.enforce_distillable_text excluded "cheap" for model "pp/solo"`)
	// The same on the Responses route.
	c.mustPost("/responses", key, `{"model":"pp/multi","input":"hi","provider":{"max_price":{"completion":0.5}}}`, nil).
		expectError(t, 503, `provider.max_price.completion`)

	// Unknown fields and wrong types: 400 naming the field.
	for members, msg := range map[string]string{
		`,"provider":{"nonsense_field":1}`:        "provider.nonsense_field: unknown field",
		`,"provider":{"zdr":"yes"}`:               "provider.zdr: expected a boolean",
		`,"provider":{"sort":"fastest"}`:          "provider.sort",
		`,"provider":{"max_price":{"prompt":-1}}`: "provider.max_price.prompt",
		`,"provider":{"quantizations":["fp7"]}`:   "provider.quantizations",
	} {
		c.mustPost("/chat/completions", key, body("pp/multi", members), nil).expectError(t, 400, msg)
	}
	taps.expect(t, want(), "refused requests")

	// Fallback respects the filters: zbad (ZDR) fails, open (not ZDR) is
	// skipped, zgood (ZDR, behind the "deny" tap) serves.
	r = c.mustPost("/chat/completions", key, body("pp/fail", `,"provider":{"zdr":true}`), nil).expect(t, 200)
	zdr++
	deny++
	taps.expect(t, want(), "fallback with zdr")
	gen := c.api("GET", "/generation?id="+r.Header.Get("X-Generation-Id"), key, nil).expect(t, 200).JSON.Get("data")
	if gen.Get("provider_name").Str != "zgood" {
		t.Errorf("generation provider: %s", gen.Raw)
	}
	var attempts []string
	for _, a := range gen.Get("provider_responses").Array() {
		attempts = append(attempts, fmt.Sprintf("%s:%d", a.Get("provider_name").Str, a.Get("status").Int()))
	}
	if strings.Join(attempts, ",") != "zbad:500,zgood:200" {
		t.Errorf("provider_responses %v: %s", attempts, gen.Get("provider_responses").Raw)
	}
	if !strings.Contains(gen.Get("routing").Str, "filtered by provider preferences") {
		t.Errorf("routing %q", gen.Get("routing").Str)
	}
	// Without the filter, open serves after zbad.
	c.mustPost("/chat/completions", key, body("pp/fail", ""), nil).expect(t, 200)
	zdr++
	cheap++
	taps.expect(t, want(), "fallback without preferences")

	// The endpoints list shows each provider's facts and the gateway's
	// measurements of those that answered.
	eps := c.api("GET", "/models/pp/multi/endpoints", key, nil).expect(t, 200).JSON.Get("data.endpoints")
	for i, w := range []struct{ name, quant, prompt string }{{"zdr", "fp8", "0.000003"}, {"deny", "bf16", "0.000002"}, {"cheap", "fp16", "0.0000005"}} {
		e := eps.Get(fmt.Sprint(i))
		if e.Get("provider_name").Str != w.name || e.Get("quantization").Str != w.quant || e.Get("pricing.prompt").Str != w.prompt ||
			!e.Get("latency_last_30m.p50").Exists() || !e.Get("throughput_last_30m").Exists() {
			t.Errorf("endpoint %d: %s", i, e.Raw)
		}
	}
	if got := eps.Get("2.supported_parameters").Raw; got != `["max_tokens","temperature"]` {
		t.Errorf("cheap's supported_parameters %s", got)
	}
}

// With price load balancing (the default), a model's free endpoint is
// always drawn first; sort and order still decide.
func TestProviderLoadBalancingThroughCaddy(t *testing.T) {
	taps := startPrefsTaps(t, "zdr", "deny", "cheap")
	startInProcessWith(t, chain(withPrefsModels(t, taps),
		func(cfg string) string { return replaceOnce(t, cfg, "load_balancing ordered", "load_balancing price") },
		func(cfg string) string {
			// cheap serves pp/multi for free.
			return strings.Replace(cfg, "prompt 0.0000005\n\t\t\t\t\tcompletion 0.000001", "prompt 0\n\t\t\t\t\tcompletion 0", 1)
		}))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"lb"}`)
	for range 10 {
		r := c.mustPost("/chat/completions", key, `{"model":"pp/multi","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil).expect(t, 200)
		if r.JSON.Get("provider").Str != "cheap" {
			t.Fatalf("free endpoint not first: %s", r.Body)
		}
	}
	taps.expect(t, "zdr=0 deny=0 cheap=10", "balanced")
	r := c.mustPost("/chat/completions", key, `{"model":"pp/multi","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":{"order":["deny"]}}`, nil).expect(t, 200)
	if r.JSON.Get("provider").Str != "deny" {
		t.Fatalf("order: %s", r.Body)
	}
}

// Sorting by the gateway's own measurements: a provider whose answers take
// 200 ms longer is ranked after the other by latency and by throughput
// (:nitro), and the endpoints list shows what was measured.
func TestProviderSortByMeasuredLatency(t *testing.T) {
	var slowCalls, fastCalls atomic.Int64
	slow := startTap(t, mockAddr, func(string, []byte) { slowCalls.Add(1); time.Sleep(200 * time.Millisecond) }, nil)
	fast := startTap(t, mockAddr, func(string, []byte) { fastCalls.Add(1) }, nil)
	startInProcessWith(t, withModels(t, modelBlock("pp/lat", "0.000001", "0.000002",
		testProvider{name: "slow", baseURL: "http://" + slow.Listener.Addr().String() + "/v1", model: "tollgate-mock", apiKey: "mock"},
		testProvider{name: "fast", baseURL: "http://" + fast.Listener.Addr().String() + "/v1", model: "tollgate-mock", apiKey: "mock"})))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"lat"}`)
	post := func(model, provider string) string {
		t.Helper()
		r := c.mustPost("/chat/completions", key, `{"model":"`+model+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":`+provider+`}`, nil).expect(t, 200)
		return r.JSON.Get("provider").Str
	}
	// Measure each once.
	if post("pp/lat", `{"only":["slow"]}`) != "slow" || post("pp/lat", `{"only":["fast"]}`) != "fast" {
		t.Fatal("warm-up went elsewhere")
	}
	for _, tt := range []struct{ model, provider string }{
		{"pp/lat", `{"sort":"latency"}`},
		{"pp/lat", `{"sort":{"by":"throughput"}}`},
		{"pp/lat:nitro", `null`},
		{"pp/lat", `{"preferred_max_latency":{"p50":0.15}}`},
	} {
		if got := post(tt.model, tt.provider); got != "fast" {
			t.Errorf("%s %s: served by %s, want fast", tt.model, tt.provider, got)
		}
	}
	// Catalog order (the harness pins it) without a sort.
	if got := post("pp/lat", `{}`); got != "slow" {
		t.Errorf("no sort: served by %s", got)
	}
	if s, f := slowCalls.Load(), fastCalls.Load(); s != 2 || f != 5 {
		t.Errorf("upstream calls slow=%d fast=%d, want 2 and 5", s, f)
	}
	eps := c.api("GET", "/models/pp/lat/endpoints", key, nil).expect(t, 200).JSON.Get("data.endpoints")
	if p50 := eps.Get("0.latency_last_30m.p50").Float(); p50 < 0.2 {
		t.Errorf("slow's p50 latency %v s, want at least 0.2: %s", p50, eps.Get("0").Raw)
	}
	if p50 := eps.Get("1.latency_last_30m.p50").Float(); p50 >= 0.2 || !eps.Get("1.latency_last_30m.p50").Exists() {
		t.Errorf("fast's p50 latency %v s: %s", p50, eps.Get("1").Raw)
	}
}

// A guardrail and the request's preferences both apply, the stricter
// winning: the guardrail's "no paid training" leaves zdr and deny, the
// request's zdr leaves zdr, and data_collection "allow" loosens nothing.
func TestProviderPreferencesWithGuardrails(t *testing.T) {
	taps := startPrefsTaps(t, "zdr", "deny", "cheap")
	startInProcessWith(t, withPrefsModels(t, taps))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"guarded"}`)
	g := c.api("POST", "/guardrails", org.MgmtKey, `{"name":"No training","enable_paid_model_training":false}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.MgmtKey, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	post := func(provider string) response {
		return c.mustPost("/chat/completions", key, `{"model":"pp/multi","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":`+provider+`}`, nil)
	}
	for prefs, want := range map[string]string{
		`{"order":["cheap"]}`:                           "zdr",
		`{"order":["cheap","deny"]}`:                    "deny",
		`{"zdr":true,"order":["deny"]}`:                 "zdr",
		`{"data_collection":"allow","order":["cheap"]}`: "zdr",
	} {
		if got := post(prefs).expect(t, 200).JSON.Get("provider").Str; got != want {
			t.Errorf("%s: served by %s, want %s", prefs, got, want)
		}
	}
	// The guardrail leaves zdr and deny; the request's price ceiling
	// removes both: the request's 503.
	post(`{"max_price":{"prompt":1}}`).expectError(t, 503, `provider.max_price.prompt excluded "deny" for model "pp/multi"`)
	post(`{"only":["cheap"]}`).expectError(t, 503, `provider.only excluded "deny"`)
	// The guardrail alone removing every endpoint stays its 403.
	c.mustPost("/chat/completions", key, `{"model":"pp/solo","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"provider":{"zdr":true}}`, nil).
		expectError(t, 403, `guardrail "No training"`)
	taps.expect(t, "zdr=3 deny=1 cheap=0", "guarded")
}
