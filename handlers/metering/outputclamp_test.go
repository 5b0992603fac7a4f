package metering

import (
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// defaultPolicy never applies the in-flight budget (every balance is at or
// above the threshold) and caps an estimate at one credit.
var defaultPolicy = billing.InFlightPolicy{
	FractionPPM: 1_000_000, Ceiling: money.AmountScale, PerRequestCap: money.AmountScale,
	SettlementWindow: time.Minute,
}

// Each attempt gets the limit its own prices afford, and the hold covers
// the costliest; a chat-only provider of a Responses request gets
// max_tokens, OpenAI's chat max_completion_tokens.
func TestOutputClampPerAttempt(t *testing.T) {
	cheap := testgw.PricedModel("cheap", testgw.Pricing, testgw.UpstreamProvider("/v1"))
	pricey := testgw.PricedModel("pricey", billing.Pricing{Prompt: 2 * testgw.Pricing.Prompt, Completion: 4 * testgw.Pricing.Completion},
		testgw.Provider("openai", "https", "api.openai.com", "api.openai.com:443", "/v1", "gpt", "sk"))
	route := &upstream.Route{Kind: "chat", Prompt: prompt.Bound{Tokens: 100},
		Attempts: []upstream.Attempt{{Model: cheap, Provider: cheap.Providers[0]}, {Model: pricey, Provider: pricey.Providers[0]}}}
	limit := money.Amount(100*2_000 + 1_000*8_000) // pricey: 100 prompt tokens and 1000 output
	v := storage.LedgerView{Key: storage.APIKey{Limit: &limit}}
	_, est, err := estimateAttempts(route, defaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	var c upstream.OutputClamp
	c.Init(route, defaultPolicy, 0, est.Hold)
	hold, rej := c.Fit(keyFacts(v), v, nil, false)
	if rej != nil || hold != limit {
		t.Fatalf("hold %s, %+v", hold, rej)
	}
	if c.Limits[0] != 4_050 || c.Limits[1] != 1_000 {
		t.Fatalf("limits %v", c.Limits)
	}
	for i, n := range c.Limits {
		route.Attempts[i].OutputLimit = n
	}
	for _, tc := range []struct {
		a         upstream.Attempt
		kind      string
		field     string
		chatOnlyP bool
	}{
		{route.Attempts[0], "chat", "max_tokens", false},
		{route.Attempts[1], "chat", "max_completion_tokens", false},
		{route.Attempts[0], "responses", "max_output_tokens", false},
		{route.Attempts[0], "responses", "max_tokens", true},
	} {
		a := tc.a
		if tc.chatOnlyP {
			p := *a.Provider
			p.API = dialect.APIChat
			a.Provider = &p
		}
		body, err := a.WithOutputLimit([]byte(`{"model":"x"}`), dialect.Kind(tc.kind), tc.kind != "responses" || !tc.chatOnlyP)
		if err != nil || gjson.GetBytes(body, tc.field).Int() != a.OutputLimit {
			t.Errorf("%s on %s: %s, %v", tc.kind, a.Provider.Name, body, err)
		}
	}
	// Without a cap nothing is fitted.
	c.Init(route, defaultPolicy, 12345, est.Hold)
	if hold, rej := c.Fit(keyFacts(storage.LedgerView{}), storage.LedgerView{}, nil, false); rej != nil || hold != 12345 || c.Limits != nil {
		t.Fatalf("uncapped: %s %+v %v", hold, rej, c.Limits)
	}
}

// The hold and the clamp price at the dearest an override may charge the
// prompt's bound, at the instant the route is priced: a long-context
// price above the bound's threshold, a time window's price while it is in
// force; the charge takes the prices in force for the answer's prompt.
func TestHoldPricesOverridesThatMayApply(t *testing.T) {
	p := billing.Pricing{Prompt: 1_000_000, Completion: 2_000_000} // 1 and 2 nano-credits a token
	p.Overrides = &billing.Overrides{Entries: []billing.Override{
		{MinPromptTokens: 150, HasMinPrompt: true, Prompt: 3_000_000, Completion: 4_000_000, Sets: billing.KeyPrompt | billing.KeyCompletion},
		{UTCStart: 0, UTCEnd: 60, HasWindow: true, Completion: 10_000_000, Sets: billing.KeyCompletion},
	}}
	m := testgw.PricedModel("long", p, testgw.UpstreamProvider("/v1"))
	noon := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		bound int64
		at    time.Time
		want  money.Amount
	}{
		{100, noon, 100*1 + 1_000*2},                                      // below the threshold: the base prices
		{200, noon, 200*3 + 1_000*4},                                      // a prompt up to 200 tokens may pass it
		{100, noon.Add(-11*time.Hour - 30*time.Minute), 100*1 + 1_000*10}, // 00:30: the night's completion price
	} {
		route := &upstream.Route{Kind: "chat", Prompt: prompt.Bound{Tokens: tc.bound}, MaxTokens: 1_000, PricedAt: tc.at,
			Attempts: []upstream.Attempt{{Model: m, Provider: m.Providers[0]}}}
		_, est, err := estimateAttempts(route, defaultPolicy)
		if err != nil || est.Hold != tc.want {
			t.Errorf("bound %d at %s: hold %s, want %s (%v)", tc.bound, tc.at.Format("15:04"), est.Hold, tc.want, err)
		}
		route.Model = m
		if got := route.ChargePricing(tc.bound); tc.bound == 200 && got.Prompt != 3_000_000 || tc.bound == 100 && got.Prompt != 1_000_000 {
			t.Errorf("charge pricing of %d tokens: %+v", tc.bound, got)
		}
	}
}
