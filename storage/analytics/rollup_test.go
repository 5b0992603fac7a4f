package analytics

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// The rollup remembers the last cell it counted in: a generation that
// differs from the last one in any dimension, or in its hour, still gets
// its own cell.
func TestRollupCellsChangeWithEveryDimension(t *testing.T) {
	r := newRollup()
	t0 := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	base := record.Generation{AccountID: "acct", KeyHash: "k", Model: "m", Provider: "p", Status: "completed", CreatedAt: t0, Cost: 1}
	variants := []func(g *record.Generation){
		func(g *record.Generation) {},
		func(g *record.Generation) { g.KeyHash = "k2" },
		func(g *record.Generation) { g.Model = "m2" },
		func(g *record.Generation) { g.Provider = "p2" },
		func(g *record.Generation) { g.User = "u" },
		func(g *record.Generation) { g.WorkspaceID = "w" },
		func(g *record.Generation) { g.Status = "error" },
		func(g *record.Generation) { g.BYOK = true },
		func(g *record.Generation) { g.CreatedAt = t0.Add(time.Hour) },
	}
	// Each variant after the base, then the base again, twice over.
	for range 2 {
		for _, change := range variants {
			g := base
			change(&g)
			r.addGeneration(g)
			r.addGeneration(base)
		}
	}
	a := r.account("acct", false)
	if len(a.cells) != len(variants) {
		t.Fatalf("%d cells, want %d", len(a.cells), len(variants))
	}
	for i, c := range a.cells {
		want := int64(2)
		if i == 0 {
			want = 2 + 2*int64(len(variants)) // the base's own and its repeats
		}
		if c.s.Requests != want {
			t.Errorf("cell %d %+v: %d requests, want %d", i, c.k, c.s.Requests, want)
		}
	}
}

// BenchmarkRollupAddGeneration counts settled generations into the rollup
// as the store's subscription does, each like the one before (one key,
// model and provider under load).
func BenchmarkRollupAddGeneration(b *testing.B) {
	r := newRollup()
	g := record.Generation{ID: "gen-1", AccountID: "acct-0123456789", KeyHash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Model: "vendor/model", Provider: "provider", WorkspaceID: "ws-0123456789", Status: "completed",
		PromptTokens: 100, CompletionTokens: 50, Cost: 900, CreatedAt: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		r.addGeneration(g)
	}
}
