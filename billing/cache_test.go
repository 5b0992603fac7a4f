package billing

import "testing"

func TestCostChargesCacheTokensAtTheirPrices(t *testing.T) {
	p := Pricing{Prompt: mustPrice(t, "0.000003"), Completion: mustPrice(t, "0.000015"),
		InputCacheRead: mustPrice(t, "0.0000003"), InputCacheWrite: mustPrice(t, "0.00000375"),
		CacheReadSet: true, CacheWriteSet: true}
	// 100 prompt tokens: 60 read, 30 written, 10 plain; 20 completion.
	got, err := Cost(p, Usage{PromptTokens: 100, CacheReadTokens: 60, CacheWriteTokens: 30, CompletionTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	// 10*3e-6 + 60*0.3e-6 + 30*3.75e-6 + 20*15e-6 = 30e-6+18e-6+112.5e-6+300e-6
	if want := "0.0004605"; got.String() != want {
		t.Fatalf("cost = %s, want %s", got, want)
	}
	in, _ := InputCost(p, Usage{PromptTokens: 100, CacheReadTokens: 60, CacheWriteTokens: 30})
	if in.String() != "0.0001605" {
		t.Fatalf("input cost = %s", in)
	}
	// The estimate prices every prompt token at the dearest input price.
	if p.InputPrice() != p.InputCacheWrite {
		t.Fatalf("InputPrice = %v", p.InputPrice())
	}
}

func TestCacheTokensWithoutCachePricesCostThePromptPrice(t *testing.T) {
	p := Pricing{Prompt: mustPrice(t, "0.000001"), Completion: mustPrice(t, "0.000002")}
	a, _ := Cost(p, Usage{PromptTokens: 50, CacheReadTokens: 20, CacheWriteTokens: 10, CompletionTokens: 5})
	b, _ := Cost(p, Usage{PromptTokens: 50, CompletionTokens: 5})
	if a != b {
		t.Fatalf("%s != %s", a, b)
	}
	// Counts beyond the prompt never make negative tokens.
	c, _ := Cost(Pricing{Prompt: p.Prompt, InputCacheRead: 0, CacheReadSet: true}, Usage{PromptTokens: 10, CacheReadTokens: 30, CacheWriteTokens: 5})
	if c != 0 {
		t.Fatalf("cost = %s, want 0 (all read, free reads)", c)
	}
}

func mustPrice(t *testing.T, s string) Price {
	t.Helper()
	p, err := ParsePrice(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
