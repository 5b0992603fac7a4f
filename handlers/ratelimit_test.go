package handlers

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// countRequests records n free-model requests at t, as admission does.
func countRequests(a storage.Account, t time.Time, n int) storage.Account {
	for range n {
		a.FreeModelRequests = a.FreeModelRequests.Add(money.IntervalDaily, t, 1)
		a.FreeModelMinute = a.FreeModelMinute.Add(money.IntervalMinute, t, 1)
	}
	return a
}

func TestFreeModelCheck(t *testing.T) {
	l := gateway.FreeModelLimits{PerMinute: 3, PerDay: 5, PerDayPaid: 8}.WithDefaults()
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	t0 := at("2026-11-21T23:58:10Z")

	var a storage.Account
	a = countRequests(a, t0, 3)
	rl := l.Check(a, t0)
	if rl == nil || rl.Scope != "free_model_per_minute" || rl.Limit != 3 || !rl.Reset.Equal(at("2026-11-21T23:59:00Z")) {
		t.Fatalf("per-minute cap: %+v", rl)
	}
	// The next minute admits again, until the day's cap.
	t1 := at("2026-11-21T23:59:00Z")
	if rl := l.Check(a, t1); rl != nil {
		t.Fatalf("next minute refused: %+v", rl)
	}
	a = countRequests(a, t1, 2)
	rl = l.Check(a, t1.Add(30*time.Second))
	if rl == nil || rl.Scope != "free_model_per_day" || rl.Limit != 5 || !rl.Reset.Equal(at("2026-11-22T00:00:00Z")) {
		t.Fatalf("per-day cap: %+v", rl)
	}
	// UTC midnight resets the day.
	if rl := l.Check(a, at("2026-11-22T00:00:00Z")); rl != nil {
		t.Fatalf("after midnight: %+v", rl)
	}
	// The paid tier starts at the threshold (9 credits by default).
	a.CreditsPurchased = 9 * money.AmountScale
	if rl := l.Check(a, t1.Add(30*time.Second)); rl != nil {
		t.Fatalf("paid tier refused at 5 requests: %+v", rl)
	}
	a.CreditsPurchased = 9*money.AmountScale - 1
	if rl := l.Check(a, t1.Add(30*time.Second)); rl == nil {
		t.Fatal("just below the threshold must stay on the lower tier")
	}
}
