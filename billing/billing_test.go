package billing

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func price(t *testing.T, s string) Price {
	t.Helper()
	p, err := ParsePrice(s)
	if err != nil {
		t.Fatalf("ParsePrice(%q): %v", s, err)
	}
	return p
}

func TestParsePrice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Price
		ok   bool
	}{
		{"0", 0, true},
		{"0.000001", 1_000_000_000, true},
		{"0.000000015", 15_000_000, true},
		{"4e-3", 4_000_000_000_000, true},
		{"0.000000000000001", 1, true},
		{"0.0000000000000001", 0, false}, // finer than a femto-credit
		{"-1", 0, false},
		{"abc", 0, false},
		{"", 0, false},
	} {
		got, err := ParsePrice(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePrice(%q) = %d, %v", tc.in, got, err)
		}
		if tc.ok {
			back, _ := ParsePrice(got.String())
			if back != got {
				t.Errorf("%q does not round-trip through %q", tc.in, got.String())
			}
		}
	}
}

func TestCostExact(t *testing.T) {
	p := Pricing{Prompt: price(t, "0.000003"), Completion: price(t, "0.000015"), Request: price(t, "0.0001")}
	got := mustCost(t, p, Usage{PromptTokens: 1234, CompletionTokens: 567})
	// 1234*3e-6 + 567*15e-6 + 1e-4 = 0.003702 + 0.008505 + 0.0001 = 0.012307
	if got.String() != "0.012307" {
		t.Fatalf("cost = %s", got)
	}
	// Sub-nano prices round once per request, half up.
	tiny := Pricing{Prompt: price(t, "0.0000000015")}
	if c := mustCost(t, tiny, Usage{PromptTokens: 1}); c != 2 {
		t.Fatalf("1.5 nano rounds to %d", c)
	}
	if c := mustCost(t, tiny, Usage{PromptTokens: 3}); c != 5 { // 4.5 -> 5
		t.Fatalf("4.5 nano rounds to %d", c)
	}
	// Web search results and extra charges add exactly.
	ws := Pricing{WebSearch: price(t, "0.004")}
	if c := mustCost(t, ws, Usage{SearchResults: 5, Extra: 10}); c != 20_000_010 {
		t.Fatalf("web search cost %d", c)
	}
}

// 10,000 charges add up to exactly 10,000 times one charge: no float drift.
func TestTotalsDoNotDrift(t *testing.T) {
	p := Pricing{Prompt: price(t, "0.0000001"), Completion: price(t, "0.0000003")}
	one := mustCost(t, p, Usage{PromptTokens: 7, CompletionTokens: 3})
	var total money.Amount
	for range 10_000 {
		total += mustCost(t, p, Usage{PromptTokens: 7, CompletionTokens: 3})
	}
	if total != one*10_000 || total.String() != "0.016" {
		t.Fatalf("total %s, one %s", total, one)
	}
}

func TestHugeQuantitiesAreRefused(t *testing.T) {
	p := Pricing{Completion: Price(1 << 62)}
	if c, err := Cost(p, Usage{CompletionTokens: 1 << 62}); err != ErrCostRange {
		t.Fatalf("overflow priced at %d, %v", c, err)
	}
	// The case: 9007199254740991 tokens at 0.000002 is 18 billion
	// credits, beyond any Amount; the estimate used to wrap negative.
	p = Pricing{Prompt: price(t, "0.000001"), Completion: price(t, "0.000002")}
	if c, err := TokenCost(p, 10, 9007199254740991); err != ErrCostRange {
		t.Fatalf("TokenCost = %d, %v", c, err)
	}
	if e, err := EstimateRequest(RequestFacts{Pricing: p, InputTokens: 10, MaxTokens: 9007199254740991}, policy); err != ErrCostRange {
		t.Fatalf("EstimateRequest = %+v, %v", e, err)
	}
	if c, err := TokenCost(p, 0, 1<<63-1); err != ErrCostRange {
		t.Fatalf("TokenCost(max int64) = %d, %v", c, err)
	}
	// An extra charge that would overflow the sum.
	if c, err := Cost(Pricing{Request: price(t, "1")}, Usage{Extra: money.MaxAmount}); err != ErrCostRange {
		t.Fatalf("Cost with a huge extra = %d, %v", c, err)
	}
	// Exactly the largest Amount still prices.
	if c, err := Cost(Pricing{Completion: Price(femtoPerNano)}, Usage{CompletionTokens: int64(money.MaxAmount)}); err != nil || c != money.MaxAmount {
		t.Fatalf("largest cost = %d, %v", c, err)
	}
	// Without max_tokens the context window's cost only bounds the
	// per-request cap, so an unpriceable window holds the cap.
	e, err := EstimateRequest(RequestFacts{Pricing: Pricing{Completion: Price(1 << 62)}, ContextLength: 1 << 62}, policy)
	if err != nil || e.Hold != policy.PerRequestCap {
		t.Fatalf("window estimate = %+v, %v", e, err)
	}
}

func TestAdmitRefusesOverflowingSums(t *testing.T) {
	limit := money.MaxAmount
	huge := Estimate{Hold: money.MaxAmount / 2}
	f := RequestFacts{Pricing: Pricing{Prompt: 1}}
	// Key cap: usage + held + hold beyond any Amount is beyond the cap.
	key := KeyFacts{Limit: &limit, CapUsage: money.MaxAmount / 2, Held: 2}
	if rej := Admit(huge, f, AccountFacts{}, key, policy); rej == nil || rej.Source != "key_limit" {
		t.Fatalf("key cap overflow admitted: %+v", rej)
	}
	// Account totals, for an account billed after use too.
	acct := AccountFacts{Usage: money.MaxAmount / 2, BYOKUsage: 1, Held: 1}
	if rej := Admit(huge, f, acct, KeyFacts{}, policy); rej == nil || rej.Source != "credits" {
		t.Fatalf("usage overflow admitted: %+v", rej)
	}
	// A budget with room for exactly the hold admits; one more does not.
	b := Budget{Source: "workspace_budget", Limit: money.MaxAmount, Used: money.MaxAmount - 5, Held: 2}
	if rej := AdmitBudget(3, b); rej != nil {
		t.Fatalf("exact fit refused: %+v", rej)
	}
	if rej := AdmitBudget(money.MaxAmount, b); rej == nil {
		t.Fatal("budget overflow admitted")
	}
}

func TestBudgetBeyondAnyAmountIsTheCeiling(t *testing.T) {
	p := policy
	p.FractionPPM = 4_000_000 // 4 times the balance
	if got := p.Budget(money.MaxAmount / 2); got != p.Ceiling {
		t.Fatalf("budget = %d", got)
	}
	if _, ok := mulDiv(int64(money.MaxAmount), 2, 1); ok {
		t.Fatal("mulDiv overflow not reported")
	}
	if q, ok := mulDiv(int64(money.MaxAmount), 3, 3); !ok || q != int64(money.MaxAmount) {
		t.Fatalf("mulDiv = %d, %v", q, ok)
	}
}

func TestTokenCostRoundsUp(t *testing.T) {
	p := Pricing{Prompt: price(t, "0.0000000011")}
	if c := mustTokenCost(t, p, 1, 0); c != 2 { // 1.1 nano -> 2
		t.Fatalf("TokenCost = %d", c)
	}
	if c := mustTokenCost(t, p, 10, 0); c != 11 {
		t.Fatalf("TokenCost exact = %d", c)
	}
}

var policy = InFlightPolicy{
	FractionPPM:      500_000,
	Ceiling:          50 * money.AmountScale,
	PerRequestCap:    2 * money.AmountScale,
	SettlementWindow: 10 * time.Second,
	BalanceThreshold: 100 * money.AmountScale,
}

func credits(s string) money.Amount {
	a, err := money.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

func TestBudget(t *testing.T) {
	for _, tc := range []struct{ balance, want string }{
		{"0", "0"}, {"-5", "0"}, {"10", "5"}, {"99", "49.5"}, {"1000", "50"},
	} {
		if got := policy.Budget(credits(tc.balance)); got != credits(tc.want) {
			t.Errorf("Budget(%s) = %s, want %s", tc.balance, got, tc.want)
		}
	}
}

func TestEstimateRequest(t *testing.T) {
	p := Pricing{Prompt: price(t, "0.001"), Completion: price(t, "0.002"), Request: price(t, "0.01")}
	// With max_tokens: tokens cost, capped for in-flight; hold adds the fee.
	e := mustEstimate(t, RequestFacts{Pricing: p, InputTokens: 100, MaxTokens: 50}, policy)
	if e.Hold != credits("0.21") || e.InFlight != credits("0.2") {
		t.Fatalf("with max_tokens: %+v", e)
	}
	e = mustEstimate(t, RequestFacts{Pricing: p, InputTokens: 100, MaxTokens: 5000}, policy)
	if e.InFlight != credits("2") || e.Hold != credits("10.11") {
		t.Fatalf("capped in-flight: %+v", e)
	}
	// Without max_tokens: the per-request cap is the in-flight estimate.
	e = mustEstimate(t, RequestFacts{Pricing: p, InputTokens: 100, ContextLength: 200}, policy)
	if e.InFlight != credits("2") || e.Hold != credits("0.31") {
		t.Fatalf("unset max_tokens: %+v", e)
	}
	if e := mustEstimate(t, RequestFacts{Pricing: p, Free: true, MaxTokens: 5}, policy); e != (Estimate{}) {
		t.Fatalf("free: %+v", e)
	}
	if e := mustEstimate(t, RequestFacts{Pricing: p, BYOK: true, MaxTokens: 5, InputTokens: 1}, policy); e.InFlight != 0 || e.Hold == 0 {
		t.Fatalf("byok holds for key caps but not in flight: %+v", e)
	}
	if e := mustEstimate(t, RequestFacts{Pricing: Pricing{Request: price(t, "0.5")}, MaxTokens: 5}, policy); e.InFlight != 0 || e.Hold != credits("0.5") {
		t.Fatalf("no token price: %+v", e)
	}
}

func TestAdmit(t *testing.T) {
	limit := credits("1")
	paid := Pricing{Prompt: price(t, "0.001"), Completion: price(t, "0.001")}
	for _, tc := range []struct {
		name   string
		e      Estimate
		f      RequestFacts
		acct   AccountFacts
		key    KeyFacts
		source string
		reason string
		retry  bool
	}{
		{name: "admitted", e: Estimate{Hold: credits("0.1"), InFlight: credits("0.1")}, f: RequestFacts{Pricing: paid},
			acct: AccountFacts{Balance: credits("10"), Prepaid: true}},
		{name: "key cap exhausted", e: Estimate{Hold: 1}, f: RequestFacts{Pricing: paid},
			acct: AccountFacts{Balance: credits("10"), Prepaid: true}, key: KeyFacts{Limit: &limit, CapUsage: limit}, source: "key_limit"},
		{name: "key cap with holds", e: Estimate{Hold: credits("0.5")}, f: RequestFacts{Pricing: paid},
			acct: AccountFacts{Balance: credits("10"), Prepaid: true}, key: KeyFacts{Limit: &limit, CapUsage: credits("0.3"), Held: credits("0.3")}, source: "key_limit"},
		{name: "byok outside the cap", e: Estimate{Hold: credits("5")}, f: RequestFacts{Pricing: paid, BYOK: true},
			key: KeyFacts{Limit: &limit}},
		{name: "byok inside the cap", e: Estimate{Hold: credits("5")}, f: RequestFacts{Pricing: paid, BYOK: true},
			key: KeyFacts{Limit: &limit, IncludeBYOK: true}, source: "key_limit"},
		{name: "zero balance blocks free models", f: RequestFacts{Free: true},
			acct: AccountFacts{Balance: 0, Prepaid: true}, source: "credits"},
		{name: "negative balance", f: RequestFacts{Free: true},
			acct: AccountFacts{Balance: -1, Prepaid: true}, source: "credits"},
		{name: "balance below estimate", e: Estimate{Hold: credits("2")}, f: RequestFacts{Pricing: paid},
			acct: AccountFacts{Balance: credits("3"), Held: credits("1.5"), Prepaid: true}, source: "credits"},
		{name: "invoiced account not gated", e: Estimate{Hold: credits("2"), InFlight: credits("2")}, f: RequestFacts{Pricing: paid},
			acct: AccountFacts{Balance: 0}},
		{name: "weight exceeds budget", e: Estimate{Hold: credits("3"), InFlight: credits("3")}, f: RequestFacts{Pricing: paid},
			acct: AccountFacts{Balance: credits("4"), Prepaid: true}, source: "credits", reason: "weight_exceeds_budget"},
		{name: "in-flight budget full", e: Estimate{Hold: credits("1"), InFlight: credits("1")}, f: RequestFacts{Pricing: paid},
			acct:   AccountFacts{Balance: credits("4"), InFlightHeld: credits("1.5"), Prepaid: true, NextRelease: 3 * time.Second},
			source: "in_flight_budget", reason: "in_flight_budget_exhausted", retry: true},
		{name: "in-flight budget full with nothing running", e: Estimate{Hold: credits("1"), InFlight: credits("1")}, f: RequestFacts{Pricing: paid},
			acct:   AccountFacts{Balance: credits("4"), InFlightHeld: credits("1.5"), Prepaid: true},
			source: "in_flight_budget", reason: "in_flight_budget_exhausted", retry: true},
		{name: "above threshold no budget", e: Estimate{Hold: credits("2"), InFlight: credits("2")}, f: RequestFacts{Pricing: paid},
			acct: AccountFacts{Balance: credits("100"), InFlightHeld: credits("1000"), Prepaid: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rej := Admit(tc.e, tc.f, tc.acct, tc.key, policy)
			if tc.source == "" {
				if rej != nil {
					t.Fatalf("refused: %+v", rej)
				}
				return
			}
			if rej == nil || rej.Source != tc.source || rej.Reason != tc.reason || rej.RemedyHint == "" || (rej.RetryAfter > 0) != tc.retry {
				t.Fatalf("got %+v, want source %s reason %q retry %v", rej, tc.source, tc.reason, tc.retry)
			}
		})
	}
	// Established spenders are exempt during the rollout.
	p := policy
	p.EstablishedUsage = credits("20")
	if rej := Admit(Estimate{Hold: 1, InFlight: credits("3")}, RequestFacts{Pricing: paid},
		AccountFacts{Balance: credits("4"), Usage: credits("25"), Prepaid: true}, KeyFacts{}, p); rej != nil {
		t.Fatalf("established account refused: %+v", rej)
	}
}

func mustCost(t *testing.T, p Pricing, u Usage) money.Amount {
	t.Helper()
	c, err := Cost(p, u)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustTokenCost(t *testing.T, p Pricing, in, out int64) money.Amount {
	t.Helper()
	c, err := TokenCost(p, in, out)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustEstimate(t *testing.T, f RequestFacts, p InFlightPolicy) Estimate {
	t.Helper()
	e, err := EstimateRequest(f, p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// n choices each may run to max_tokens: the hold covers them all, and the
// output a budget affords is per choice.
func TestEstimateRequestChoices(t *testing.T) {
	p := Pricing{Prompt: price(t, "0.001"), Completion: price(t, "0.002")}
	one := mustEstimate(t, RequestFacts{Pricing: p, InputTokens: 100, MaxTokens: 50}, policy)
	three := mustEstimate(t, RequestFacts{Pricing: p, InputTokens: 100, MaxTokens: 50, Choices: 3}, policy)
	if one.Hold != credits("0.2") || three.Hold != credits("0.4") {
		t.Fatalf("holds %s and %s, want 0.2 and 0.4", one.Hold, three.Hold)
	}
	if _, err := EstimateRequest(RequestFacts{Pricing: p, MaxTokens: 1 << 62, Choices: 4}, policy); err == nil {
		t.Fatal("an output beyond an int64 was priced")
	}
	// 0.4 credits after the prompt's 0.1 buy 150 output tokens: 50 each.
	if got := AffordableOutput(RequestFacts{Pricing: p, InputTokens: 100, Choices: 3}, credits("0.4")); got != 50 {
		t.Fatalf("affordable per choice %d, want 50", got)
	}
}
