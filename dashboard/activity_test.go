package dashboard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
		res, err := st.Reserve(a.ID, k, storage.Holds{Hold: 1})
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
	one := scanActivity(st, a.ID, q, from, to, nil, true)
	defer func(n int32) { onePassValues = n }(onePassValues)
	onePassValues = 2
	two := scanActivity(st, a.ID, q, from, to, nil, true)
	byModel := scanActivity(st, a.ID, activityQuery{Days: 30, By: "model"}, from, to, nil, true)
	if one.totals != two.totals || one.totals != byModel.totals || one.totals.Requests != 300 {
		t.Fatalf("totals %+v, %+v, %+v", one.totals, two.totals, byModel.totals)
	}
	if !slices.Equal(one.order, two.order) || len(one.order) != 8 || len(byModel.order) != 3 {
		t.Fatalf("orders %v, %v, %v", one.order, two.order, byModel.order)
	}
	for i, id := range one.order {
		if one.values[id].value != two.values[id].value || one.values[id].sums != two.values[id].sums {
			t.Fatalf("key %d: %+v and %+v", i, one.values[id], two.values[id])
		}
		if i > 0 && one.values[id].sums.Usage > one.values[one.order[i-1]].sums.Usage {
			t.Fatalf("key %d spent more than key %d", i, i-1)
		}
	}
	if !slices.Equal(one.models, []string{"m0", "m1", "m2"}) || !slices.Equal(one.providers, []string{"p"}) || !slices.Equal(two.models, one.models) {
		t.Fatalf("choices %v %v", one.models, one.providers)
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	for day := range 30 {
		if !near(one.other[day].usage, two.other[day].usage) || one.other[day].requests != two.other[day].requests {
			t.Fatalf("day %d other: %+v and %+v", day, one.other[day], two.other[day])
		}
		sumKeys, sumModels := one.other[day], dayFigures{}
		for i := range maxSeries - 1 {
			x, y := one.series[i][day], two.series[i][day]
			if !near(x.usage, y.usage) || x.requests != y.requests || x.tokens != y.tokens {
				t.Fatalf("day %d key %d: %+v and %+v", day, i, x, y)
			}
			sumKeys.usage, sumKeys.requests, sumKeys.tokens = sumKeys.usage+x.usage, sumKeys.requests+x.requests, sumKeys.tokens+x.tokens
		}
		for _, m := range byModel.series {
			sumModels.usage, sumModels.requests, sumModels.tokens = sumModels.usage+m[day].usage, sumModels.requests+m[day].requests, sumModels.tokens+m[day].tokens
		}
		if !near(sumKeys.usage, sumModels.usage) || sumKeys.requests != sumModels.requests || sumKeys.tokens != sumModels.tokens {
			t.Fatalf("day %d: keys %+v, models %+v", day, sumKeys, sumModels)
		}
	}
}

// The table by key lists 100 values a page, largest spend first, with
// links to the next and previous pages; the chart names the largest keys.
func TestActivityTablePages(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	for i := range tableRows + 5 {
		k, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: a.ID, Name: fmt.Sprintf("key-%03d", i)})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Reserve(a.ID, k.Hash, storage.Holds{Hold: 1})
		if err != nil {
			t.Fatal(err)
		}
		cost := money.Amount(1000 * (i + 1)) // key-104 spent most
		g := storage.Generation{ID: storage.NewGenerationID(now()), AccountID: a.ID, KeyHash: k.Hash, Model: "m", Provider: "p",
			Status: "completed", PromptTokens: 1, CompletionTokens: 1, Cost: cost, CreatedAt: now()}
		if err := st.Settle(res, storage.Charge{Cost: cost, Generation: &g}); err != nil {
			t.Fatal(err)
		}
	}
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID})
	body := c.do("GET", "/dashboard/activity?by=key", nil).Body.String()
	if !strings.Contains(body, "1–100 of 105") || !strings.Contains(body, "offset=100") || strings.Contains(body, ">Previous<") ||
		!strings.Contains(body, "> key-104</td>") || strings.Contains(body, "> key-004</td>") ||
		!strings.Contains(body, "<span>key-104</span>") && !strings.Contains(body, "</span>key-104</span>") {
		t.Fatalf("first page:\n%s", body)
	}
	body = c.do("GET", "/dashboard/activity?by=key&offset=100", nil).Body.String()
	if !strings.Contains(body, "101–105 of 105") || !strings.Contains(body, ">Previous<") || strings.Contains(body, ">Next<") ||
		!strings.Contains(body, "> key-000</td>") || strings.Contains(body, "> key-104</td>") {
		t.Fatalf("second page:\n%s", body)
	}
}
