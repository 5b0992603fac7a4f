package billing

import (
	"testing"
	"time"
)

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

func TestCostChargesHourCacheWritesAtTheirPrice(t *testing.T) {
	p := Pricing{Prompt: mustPrice(t, "0.000003"), Completion: mustPrice(t, "0.000015"),
		InputCacheRead: mustPrice(t, "0.0000003"), InputCacheWrite: mustPrice(t, "0.00000375"), InputCacheWrite1h: mustPrice(t, "0.000006"),
		CacheReadSet: true, CacheWriteSet: true, CacheWrite1hSet: true}
	// 100 prompt tokens: 10 plain, 20 read, 30 written for 5 minutes, 40 for an hour; 5 completion.
	u := Usage{PromptTokens: 100, CacheReadTokens: 20, CacheWriteTokens: 70, CacheWrite1hTokens: 40, CompletionTokens: 5}
	got, err := Cost(p, u)
	if err != nil {
		t.Fatal(err)
	}
	// 10*3e-6 + 20*0.3e-6 + 30*3.75e-6 + 40*6e-6 + 5*15e-6 = 30+6+112.5+240+75 = 463.5e-6
	if want := "0.0004635"; got.String() != want {
		t.Fatalf("cost = %s, want %s", got, want)
	}
	if p.InputPrice() != p.InputCacheWrite1h {
		t.Fatalf("InputPrice = %v, want the hour's write price", p.InputPrice())
	}
	// Without an hour's price, those writes cost the write price.
	p.CacheWrite1hSet = false
	if got, _ := Cost(p, u); got.String() != "0.0003735" {
		t.Fatalf("cost without a 1h price = %s", got)
	}
	// More hour writes than writes are taken as all the writes.
	if a, b := mustCost(t, p, Usage{PromptTokens: 10, CacheWriteTokens: 4, CacheWrite1hTokens: 9}), mustCost(t, p, Usage{PromptTokens: 10, CacheWriteTokens: 4, CacheWrite1hTokens: 4}); a != b {
		t.Fatalf("%s != %s", a, b)
	}
}

func TestCacheDiscount(t *testing.T) {
	p := Pricing{Prompt: mustPrice(t, "0.000003"), InputCacheRead: mustPrice(t, "0.0000003"), InputCacheWrite: mustPrice(t, "0.00000375"),
		InputCacheWrite1h: mustPrice(t, "0.000006"), CacheReadSet: true, CacheWriteSet: true, CacheWrite1hSet: true}
	if _, ok, _ := CacheDiscount(p, Usage{PromptTokens: 100}); ok {
		t.Fatal("a discount without cache tokens")
	}
	// 1000 read: saved 1000 × 2.7e-6.
	if d, ok, _ := CacheDiscount(p, Usage{PromptTokens: 1200, CacheReadTokens: 1000}); !ok || d.String() != "0.0027" {
		t.Fatalf("read discount = %s %v", d, ok)
	}
	// 100 written for 5 minutes and 100 for an hour: paid 0.75e-6 and 3e-6 more a token.
	if d, _, _ := CacheDiscount(p, Usage{PromptTokens: 300, CacheWriteTokens: 200, CacheWrite1hTokens: 100}); d.String() != "-0.000375" {
		t.Fatalf("write discount = %s", d)
	}
}

func TestOverridesApplyInOrderPerKey(t *testing.T) {
	base := Pricing{Prompt: 3, Completion: 15, InputCacheRead: 1, CacheReadSet: true}
	base.Overrides = &Overrides{Entries: []Override{
		{MinPromptTokens: 200, HasMinPrompt: true, Prompt: 6, Completion: 22, Sets: KeyPrompt | KeyCompletion},
		{UTCStart: 23 * 60, UTCEnd: 6 * 60, HasWindow: true, Completion: 10, Sets: KeyCompletion},
		{MinPromptTokens: 1000, HasMinPrompt: true, InputCacheWrite1h: 40, Sets: KeyInputCacheWrite1h},
	}}
	day := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	night := time.Date(2026, 1, 1, 2, 30, 0, 0, time.UTC)
	atMidnight := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC) // the window's end is exclusive
	for _, tt := range []struct {
		prompt                 int64
		at                     time.Time
		wantPrompt, completion Price
		write1h                Price
	}{
		{200, day, 3, 15, 3}, // strictly above the threshold
		{201, day, 6, 22, 6},
		{201, night, 6, 10, 6}, // the later entry wins the completion
		{10, night, 3, 10, 3},
		{10, atMidnight, 3, 15, 3},
		{1001, day, 6, 22, 40},
	} {
		got := base.At(tt.prompt, tt.at)
		if got.Prompt != tt.wantPrompt || got.Completion != tt.completion || got.cacheWrite1h() != tt.write1h || got.cacheRead() != 1 {
			t.Errorf("At(%d, %s) = %+v", tt.prompt, tt.at.Format("15:04"), got)
		}
	}
	// The hold's prices are the dearest any prompt up to the bound may get.
	h := base.ForHold(500, night)
	if h.Prompt != 6 || h.Completion != 22 || h.InputPrice() != 6 {
		t.Errorf("ForHold(500, night) = %+v", h)
	}
	if h := base.ForHold(100, day); h.Prompt != 3 || h.Completion != 15 {
		t.Errorf("ForHold(100, day) = %+v", h)
	}
	if h := base.ForHold(5000, day); h.InputPrice() != 40 {
		t.Errorf("ForHold(5000, day).InputPrice = %v", h.InputPrice())
	}
}

func TestParseClock(t *testing.T) {
	for v, want := range map[float64]int{0: 0, 100: 60, 1030: 630, 2400: 1440} {
		if got, err := ParseClock(v); err != nil || got != want {
			t.Errorf("ParseClock(%v) = %d, %v", v, got, err)
		}
	}
	for _, v := range []float64{-1, 160, 2401, 10.5} {
		if _, err := ParseClock(v); err == nil {
			t.Errorf("ParseClock(%v) accepted", v)
		}
	}
}
