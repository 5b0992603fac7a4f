package storage

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// benchRecords is the size of the synthetic generation history.
const benchRecords = 1_000_000

var (
	benchOnce   sync.Once
	rollupStore *Store
	benchWant   Sums
)

// benchAnalyticsStore is a store whose rollup holds 1,000,000 synthetic
// generations of one account over 30 days: 20 models, 5 providers, 50 keys,
// 5,000 end users, so that nearly every record has a cell of its own.
func benchAnalyticsStore(b *testing.B) *Store {
	benchOnce.Do(func() {
		s, err := Open(Options{InMemory: true})
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		end := time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
		for i := range benchRecords {
			g := Generation{
				ID: fmt.Sprint(i), AccountID: "acct", KeyHash: fmt.Sprintf("key%02d", rng.IntN(50)),
				Model: fmt.Sprintf("vendor/model-%02d", rng.IntN(20)), Provider: fmt.Sprintf("provider-%d", rng.IntN(5)),
				User: fmt.Sprintf("user-%04d", rng.IntN(5000)), WorkspaceID: "ws", Status: "completed",
				PromptTokens: rng.Int64N(2000), CompletionTokens: rng.Int64N(1000), Cost: money.Amount(rng.Int64N(1_000_000)),
				LatencyMS: rng.Int64N(3000), CreatedAt: end.Add(-time.Duration(rng.Int64N(int64(30 * 24 * time.Hour)))),
			}
			s.AnalyticsStore.a.CountGeneration(g, false)
			benchWant.Requests++
			benchWant.PromptTokens += g.PromptTokens
			benchWant.CompletionTokens += g.CompletionTokens
			benchWant.Usage += g.Cost
			benchWant.LatencyMS += g.LatencyMS
		}
		rollupStore = s
	})
	return rollupStore
}

// BenchmarkAnalyticsQuery1M runs the query of the analytics route (daily
// buckets by model, filtered on two providers) and the activity query
// (daily by model and provider) over 1,000,000 generation records.
func BenchmarkAnalyticsQuery1M(b *testing.B) {
	s := benchAnalyticsStore(b)
	from, to := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
	b.Run("daily-by-model-filtered", func(b *testing.B) {
		q := UsageQuery{From: from, To: to, Granularity: GranularityDay, GroupBy: []string{DimModel},
			Filters: []UsageFilter{{Dim: DimProvider, Values: []string{"provider-1", "provider-3"}}}}
		for b.Loop() {
			if _, err := s.QueryUsage("acct", q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("activity-daily-by-model-provider", func(b *testing.B) {
		q := UsageQuery{From: from.AddDate(0, 0, -1), To: to.Add(time.Hour), Granularity: GranularityDay, GroupBy: []string{DimModel, DimProvider}}
		for b.Loop() {
			rows, err := s.QueryUsage("acct", q)
			if err != nil {
				b.Fatal(err)
			}
			var got Sums
			for _, r := range rows {
				got.Add(r.Sums)
			}
			if got != benchWant {
				b.Fatalf("sums %+v, want %+v", got, benchWant)
			}
		}
	})
	b.Run("by-end-user-total", func(b *testing.B) {
		q := UsageQuery{From: from.AddDate(0, 0, -1), To: to.Add(time.Hour), GroupBy: []string{DimEndUser}}
		for b.Loop() {
			rows, _ := s.QueryUsage("acct", q)
			if len(rows) != 5000 {
				b.Fatalf("%d end users", len(rows))
			}
		}
	})
}

// BenchmarkAnalyticsRebuild1M measures Open on a database holding 1,000,000
// generation records: the rollup is rebuilt from them at startup.
func BenchmarkAnalyticsRebuild1M(b *testing.B) {
	dir := b.TempDir()
	// The records are written straight into Badger, as a store that ran
	// for a month would have left them.
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	wb := db.NewWriteBatch()
	rng := rand.New(rand.NewPCG(3, 4))
	end := time.Date(2026, 3, 31, 0, 0, 0, 0, time.UTC)
	var want Sums
	for i := range benchRecords {
		t := end.Add(-time.Duration(rng.Int64N(int64(30 * 24 * time.Hour))))
		g := Generation{
			ID: NewGenerationID(t), AccountID: "acct", KeyHash: fmt.Sprintf("key%02d", rng.IntN(50)),
			Model: fmt.Sprintf("vendor/model-%02d", rng.IntN(20)), Provider: fmt.Sprintf("provider-%d", rng.IntN(5)),
			User: fmt.Sprintf("user-%04d", i%5000), Status: "completed", PromptTokens: 10, CompletionTokens: 20,
			Cost: money.Amount(rng.Int64N(1_000_000)), CreatedAt: t,
		}
		v, _ := g.MarshalJSON()
		if err := wb.Set([]byte(prefixGeneration+g.ID), v); err != nil {
			b.Fatal(err)
		}
		want.Add(Sums{Requests: 1, PromptTokens: 10, CompletionTokens: 20, Usage: g.Cost})
	}
	if err := wb.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := Open(Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if got, _ := totals(s, "acct"); got != want {
			b.Fatalf("rebuilt %+v, want %+v", got, want)
		}
		if n := len(s.ListEndUsers("acct")); n != 5000 {
			b.Fatalf("%d end users", n)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
