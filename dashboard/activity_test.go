package dashboard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The breakdown by key in one pass gives the figures of the two-pass
// scan, and both add up to the breakdown by model.
func TestActivityByKeyScansAgree(t *testing.T) {
	st := openStore(t)
	a, _, _ := org(t, st)
	rng := rand.New(rand.NewPCG(3, 4))
	var keys []string
	for i := range 8 {
		k, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: a.ID, Name: fmt.Sprint("k", i)})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.Hash)
	}
	end := time.Now().UTC()
	for range 300 {
		k := keys[rng.IntN(len(keys))]
		res, err := st.Reserve(a.ID, k, storage.Holds{Hold: 1}, func(storage.LedgerView) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		at := end.Add(-time.Duration(rng.Int64N(int64(20 * 24 * time.Hour))))
		cost := money.Amount(rng.Int64N(1_000_000))
		g := storage.Generation{ID: storage.NewGenerationID(at), AccountID: a.ID, KeyHash: k, Model: fmt.Sprint("m", rng.IntN(3)),
			Provider: "p", Status: "completed", PromptTokens: rng.Int64N(100), CompletionTokens: rng.Int64N(100), Cost: cost, CreatedAt: at}
		if err := st.Settle(res, storage.Charge{Cost: cost, Generation: &g}); err != nil {
			t.Fatal(err)
		}
	}
	q := activityQuery{Days: 30, By: "key"}
	today := storage.BucketStart(end, storage.GranularityDay)
	from, to := today.AddDate(0, 0, -29), today.AddDate(0, 0, 1)
	one := scanKeys(st, a.ID, q, from, to, nil, true)
	groups := keyGroups(st, a.ID, q, from, to, nil)
	two := scanActivity(st, a.ID, q, from, to, nil, topGroups(groups, maxSeries-1), true)
	two.groups = groups
	byModel := scanActivity(st, a.ID, activityQuery{Days: 30, By: "model"}, from, to, nil, nil, true)
	if one.totals != two.totals || one.totals != byModel.totals || one.totals.Requests != 300 {
		t.Fatalf("totals %+v, %+v, %+v", one.totals, two.totals, byModel.totals)
	}
	if len(one.groups) != len(two.groups) {
		t.Fatalf("%d and %d keys", len(one.groups), len(two.groups))
	}
	for k, s := range one.groups {
		if *s != *two.groups[k] {
			t.Fatalf("key %s: %+v and %+v", k, *s, *two.groups[k])
		}
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	for day := range 30 {
		if !near(one.other[day].usage, two.other[day].usage) || one.other[day].requests != two.other[day].requests {
			t.Fatalf("day %d other: %+v and %+v", day, one.other[day], two.other[day])
		}
		for _, k := range topGroups(groups, maxSeries-1) {
			x, y := one.days[dayGroup{day, k}], two.days[dayGroup{day, k}]
			var fx, fy dayFigures
			if x != nil {
				fx = *x
			}
			if y != nil {
				fy = *y
			}
			if !near(fx.usage, fy.usage) || fx.requests != fy.requests || fx.tokens != fy.tokens {
				t.Fatalf("day %d key %s: %+v and %+v", day, k, fx, fy)
			}
		}
	}
}
