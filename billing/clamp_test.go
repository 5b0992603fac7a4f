package billing

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// AffordableOutput is exact: n tokens fit the budget and n+1 do not, for
// prices that do not divide evenly and fees that round.
func TestAffordableOutputIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		f := RequestFacts{
			Pricing: Pricing{
				Prompt:     Price(r.Int64N(5_000_000_000)),
				Completion: Price(1 + r.Int64N(20_000_000_000)),
				Request:    Price(r.Int64N(3) * r.Int64N(1_000_000_000_000)),
			},
			InputTokens: r.Int64N(100_000),
		}
		budget := money.Amount(r.Int64N(50_000_000))
		n := AffordableOutput(f, budget)
		fee, _ := Cost(Pricing{Request: f.Pricing.Request}, Usage{})
		cost := func(out int64) money.Amount { c, _ := TokenCost(f.Pricing, f.InputTokens, out); return c + fee }
		if n < 0 {
			if cost(0) <= budget {
				t.Fatalf("%+v budget %d: -1, but the prompt costs %d", f, budget, cost(0))
			}
			continue
		}
		if cost(n) > budget || cost(n+1) <= budget {
			t.Fatalf("%+v budget %d: n=%d costs %d, n+1 costs %d", f, budget, n, cost(n), cost(n+1))
		}
	}
}

func TestAffordableOutputEdges(t *testing.T) {
	paid := Pricing{Prompt: 1_000_000, Completion: 2_000_000} // 1 and 2 nano-credits a token
	for _, tc := range []struct {
		name   string
		f      RequestFacts
		budget money.Amount
		want   int64
	}{
		{"prompt only", RequestFacts{Pricing: paid, InputTokens: 10}, 10, 0},
		{"prompt beyond", RequestFacts{Pricing: paid, InputTokens: 10}, 9, -1},
		{"negative budget", RequestFacts{Pricing: paid}, -5, -1},
		{"output", RequestFacts{Pricing: paid, InputTokens: 10}, 10_000_010, 5_000_000},
		{"free output", RequestFacts{Pricing: Pricing{Prompt: 1_000_000}, InputTokens: 10}, 10, math.MaxInt64},
		{"free model", RequestFacts{Pricing: paid, Free: true}, 0, math.MaxInt64},
		{"beyond int64", RequestFacts{Pricing: Pricing{Completion: 1}}, money.MaxAmount, math.MaxInt64},
		{"fee", RequestFacts{Pricing: Pricing{Completion: 2_000_000, Request: 5_000_000}}, 9, 2},
	} {
		if got := AffordableOutput(tc.f, tc.budget); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCapsKeepTheDecidingOne(t *testing.T) {
	key := Budget{Source: "key_limit", Limit: 100, Used: 10, Held: 20}  // room 70
	ws := Budget{Source: "workspace_budget", Limit: 1000, Used: 950}    // room 50
	spent := Budget{Source: "guardrail_budget", Limit: 100, Used: 100}  // exhausted
	busy := Budget{Source: "guardrail_budget", Limit: 100, Held: 1_000} // room -900, not exhausted
	var c Caps
	if _, ok := c.Tightest(); ok {
		t.Fatal("no cap binds an empty set")
	}
	for _, tc := range []struct {
		caps []Budget
		want Budget
	}{
		{[]Budget{key}, key},
		{[]Budget{key, ws}, ws},
		{[]Budget{ws, key}, ws},
		{[]Budget{busy, spent, key}, spent}, // "exhausted" whatever holds the others carry
		{[]Budget{spent, busy}, spent},
	} {
		var c Caps
		for _, b := range tc.caps {
			c.Add(b)
		}
		if got, ok := c.Tightest(); !ok || got != tc.want {
			t.Errorf("%v: %+v", tc.caps, got)
		}
	}
	if r := busy.Room(); r != -900 {
		t.Errorf("room %d", r)
	}
	if r := (Budget{Limit: 0, Used: money.MaxAmount, Held: money.MaxAmount}).Room(); r > 0 {
		t.Errorf("room %d does not saturate", r)
	}
}

func TestPlanOutput(t *testing.T) {
	paid := Pricing{Prompt: 1_000_000, Completion: 2_000_000} // 1 and 2 nano-credits a token
	pricey := Pricing{Prompt: 2_000_000, Completion: 4_000_000}
	p := InFlightPolicy{PerRequestCap: money.AmountScale}
	unset := RequestFacts{Pricing: paid, InputTokens: 100, ContextLength: 8192}
	// Unclamped, it holds 100 + 2*8092 = 16,284 nano-credits.
	key := func(limit money.Amount) Budget {
		return Budget{Source: "key_limit", Limit: limit, Message: "This API key's credit limit is exhausted", Hint: "Raise the key's limit."}
	}

	t.Run("fits", func(t *testing.T) {
		plan, rej := PlanOutput([]RequestFacts{unset}, 0, key(16_284), p, true, nil)
		if rej != nil || plan.Limits != nil || plan.Hold != 16_284 {
			t.Fatalf("%+v %+v", plan, rej)
		}
	})
	t.Run("clamped", func(t *testing.T) {
		plan, rej := PlanOutput([]RequestFacts{unset}, 0, key(1_100), p, true, nil)
		if rej != nil || len(plan.Limits) != 1 || plan.Limits[0] != 500 || plan.Hold != 1_100 {
			t.Fatalf("%+v %+v", plan, rej)
		}
		// Fixed charges (a web search) come off the room first.
		plan, _ = PlanOutput([]RequestFacts{unset}, 100, key(1_100), p, true, make([]int64, 0, 4))
		if plan.Limits[0] != 450 || plan.Hold != 1_000 {
			t.Fatalf("%+v", plan)
		}
	})
	t.Run("the model's output limit", func(t *testing.T) {
		f := unset
		f.OutputLimit = 300
		plan, rej := PlanOutput([]RequestFacts{f}, 0, key(1_100), p, true, nil)
		if rej != nil || plan.Limits[0] != 300 || plan.Hold != 700 {
			t.Fatalf("%+v %+v", plan, rej)
		}
	})
	t.Run("each attempt its own limit", func(t *testing.T) {
		cheap := RequestFacts{Pricing: paid, InputTokens: 100, ContextLength: 300}  // holds 500
		costly := RequestFacts{Pricing: pricey, InputTokens: 100, ContextLength: 0} // holds the per-request cap
		plan, rej := PlanOutput([]RequestFacts{cheap, costly}, 0, key(1_000), p, true, nil)
		if rej != nil || plan.Limits[0] != 0 || plan.Limits[1] != 200 || plan.Hold != 1_000 {
			t.Fatalf("%+v %+v", plan, rej)
		}
	})
	t.Run("prompt and a minimal completion do not fit", func(t *testing.T) {
		_, rej := PlanOutput([]RequestFacts{unset}, 0, key(131), p, true, nil)
		if rej == nil || rej.Source != "key_limit" || rej.RemedyHint != "Raise the key's limit." ||
			rej.Message != "This request requires more credits, or a shorter prompt. Its prompt (up to 100 tokens) and a minimal completion of 16 tokens cost up to 0.000000132 credits, but only 0.000000131 remain" {
			t.Fatalf("%+v", rej)
		}
		if plan, rej := PlanOutput([]RequestFacts{unset}, 0, key(132), p, true, nil); rej != nil || plan.Limits[0] != 16 {
			t.Fatalf("%+v %+v", plan, rej)
		}
	})
	t.Run("a small context window", func(t *testing.T) {
		f := unset
		f.ContextLength = 105 // 5 tokens of output at most: the least worth serving
		_, rej := PlanOutput([]RequestFacts{f}, 0, key(109), p, true, nil)
		if rej == nil || !strings.Contains(rej.Message, "a minimal completion of 5 tokens") {
			t.Fatalf("%+v", rej)
		}
		if plan, rej := PlanOutput([]RequestFacts{f}, 0, key(110), p, true, nil); rej != nil || plan.Limits != nil {
			t.Fatalf("%+v %+v", plan, rej)
		}
	})
	t.Run("the client's max_tokens", func(t *testing.T) {
		f := unset
		f.MaxTokens = 1000
		_, rej := PlanOutput([]RequestFacts{f}, 0, key(1_100), p, true, nil)
		want := "This request requires more credits, or fewer max_tokens. You requested up to 1000 tokens, but can only afford 500"
		if rej == nil || rej.Message != want || rej.Source != "key_limit" {
			t.Fatalf("%+v", rej)
		}
		// Held by running requests: nothing affordable, though not exhausted.
		b := key(1_100)
		b.Held = 1_100
		if _, rej := PlanOutput([]RequestFacts{f}, 0, b, p, true, nil); rej == nil || !strings.HasSuffix(rej.Message, "can only afford 0") {
			t.Fatalf("%+v", rej)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		b := key(1_100)
		b.Used = 1_100
		for _, f := range []RequestFacts{unset, {Pricing: paid, MaxTokens: 1}} {
			if _, rej := PlanOutput([]RequestFacts{f}, 0, b, p, true, nil); rej == nil || rej.Message != "This API key's credit limit is exhausted" {
				t.Fatalf("%+v", rej)
			}
		}
	})
	t.Run("a route without an output limit field", func(t *testing.T) {
		_, rej := PlanOutput([]RequestFacts{unset}, 0, key(1_100), p, false, nil)
		if rej == nil || rej.Message != "This request requires more credits. It may cost up to 0.000016284 credits, but only 0.0000011 remain" {
			t.Fatalf("%+v", rej)
		}
	})
}
