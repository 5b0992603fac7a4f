package billing

import "testing"

// Rerank's search units and documents and the images returned are priced
// per item, exactly, and only where the catalog prices them.
func TestItemsCost(t *testing.T) {
	p := Pricing{SearchUnit: price(t, "0.002"), Document: price(t, "0.0001"), ImageOutput: price(t, "0.04")}
	if c := mustCost(t, p, Usage{SearchUnits: 3, Documents: 7, Images: 2}); c.String() != "0.0867" {
		t.Fatalf("items cost %s", c)
	}
	if c := mustCost(t, Pricing{Prompt: price(t, "0.001")}, Usage{PromptTokens: 10, Images: 5, SearchUnits: 5}); c.String() != "0.01" {
		t.Fatalf("unpriced items cost %s", c)
	}
	if (Pricing{ImageOutput: 1}).IsFree() || (Pricing{SearchUnit: 1}).IsFree() || (Pricing{Document: 1}).IsFree() {
		t.Fatal("a per-item price is not free")
	}
}

// A route without output holds its prompt and its most items, never the
// context window's output or the per-request cap.
func TestEstimateRequestNoOutput(t *testing.T) {
	p := Pricing{Prompt: price(t, "0.001"), ImageOutput: price(t, "0.04"), Request: price(t, "0.01")}
	e := mustEstimate(t, RequestFacts{Pricing: p, InputTokens: 100, ContextLength: 100000, NoOutput: true, Units: Usage{Images: 3}}, policy)
	// 100 × 0.001 + 3 × 0.04 + 0.01
	if e.Hold != credits("0.23") || e.InFlight != credits("0.1") {
		t.Fatalf("no output: %+v", e)
	}
	e = mustEstimate(t, RequestFacts{Pricing: Pricing{SearchUnit: price(t, "0.002")}, NoOutput: true, Units: Usage{SearchUnits: 2}}, policy)
	if e.Hold != credits("0.004") || e.InFlight != 0 {
		t.Fatalf("search units alone: %+v", e)
	}
}

// The audio routes' characters spoken and seconds transcribed are priced
// per item, and held by a route without output.
func TestAudioItemsCost(t *testing.T) {
	p := Pricing{Character: price(t, "0.000015"), AudioSecond: price(t, "0.0001")}
	if c := mustCost(t, p, Usage{Characters: 1000, AudioSeconds: 60}); c.String() != "0.021" {
		t.Fatalf("audio cost %s", c)
	}
	if (Pricing{Character: 1}).IsFree() || (Pricing{AudioSecond: 1}).IsFree() {
		t.Fatal("an audio price is not free")
	}
	e := mustEstimate(t, RequestFacts{Pricing: p, NoOutput: true, Units: Usage{Characters: 2000}}, policy)
	if e.Hold != credits("0.03") {
		t.Fatalf("characters held: %+v", e)
	}
}
