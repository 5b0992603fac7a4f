package levels

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

var t0 = time.Date(2026, 3, 31, 23, 59, 59, 0, time.UTC) // a Tuesday, last second of a month

func full() Levels {
	return Levels{Key: &Scope{}, Workspace: &Scope{}, Member: &Scope{}}
}

func TestPlaceThenUnholdLeavesNothing(t *testing.T) {
	for _, h := range []Holds{
		{Hold: 100, InFlight: 40},
		{Hold: 100, KeyOnly: true},
		{Hold: 100, KeyOnly: true, Credits: 7},
		{Hold: 100, CountFree: true},
	} {
		for _, countsBYOK := range []bool{false, true} {
			lv := full()
			lv.WorkspaceCountsBYOK = countsBYOK
			p := lv.Place(h, t0)
			wantAccount := h.Hold
			if h.KeyOnly {
				wantAccount = h.Credits
			}
			wantWS := h.Hold
			if h.KeyOnly && !countsBYOK {
				wantWS = h.Credits
			}
			if lv.Account.Held != wantAccount || lv.Key.Held != h.Hold || lv.Member.Held != h.Hold || lv.Workspace.Held != wantWS || lv.Account.Running != h.InFlight {
				t.Fatalf("%+v (byok in budgets %v): placed account %s key %s ws %s member %s running %s", h, countsBYOK,
					lv.Account.Held, lv.Key.Held, lv.Workspace.Held, lv.Member.Held, lv.Account.Running)
			}
			// What was placed comes off, even after the workspace's rule changed.
			lv.WorkspaceCountsBYOK = !countsBYOK
			lv.Unhold(p)
			if lv.Account.Held != 0 || lv.Key.Held != 0 || lv.Workspace.Held != 0 || lv.Member.Held != 0 || lv.Account.Running != 0 {
				t.Fatalf("%+v: left %+v %+v %+v %+v", h, lv.Account, *lv.Key, *lv.Workspace, *lv.Member)
			}
			if free := lv.Account.FreeDay.At(money.IntervalDaily, t0); (free == 1) != h.CountFree {
				t.Fatalf("%+v: free-model requests today %s", h, free)
			}
		}
	}
}

func TestUnholdSkipsScopesGoneSincePlaced(t *testing.T) {
	lv := full()
	p := lv.Place(Holds{Hold: 5}, t0)
	gone := Levels{Account: lv.Account} // the key, workspace and member were deleted
	gone.Unhold(p)
	if gone.Account.Held != 0 {
		t.Fatalf("account still holds %s", gone.Account.Held)
	}
}

func TestChargeSplitsCreditsAndBYOK(t *testing.T) {
	cases := []struct {
		c                 Charge
		credits, byok     money.Amount
		keyUsage, keyBYOK money.Amount
	}{
		{Charge{Cost: 10}, 10, 0, 10, 0},
		{Charge{Cost: 10, BYOK: true}, 0, 10, 0, 10},
		{Charge{Cost: 10, BYOK: true, Credits: 3}, 3, 7, 3, 7},
		{Charge{Cost: 10, BYOK: true, Credits: 30}, 10, 0, 10, 0},
		{Charge{Cost: 10, BYOK: true, Credits: -1}, 0, 10, 0, 10},
	}
	for _, tc := range cases {
		lv := full()
		if !lv.Charge(tc.c, t0) {
			t.Fatalf("%+v: nothing charged", tc.c)
		}
		if lv.Account.Usage != tc.credits || lv.Account.BYOKUsage != tc.byok {
			t.Fatalf("%+v: account %s + byok %s", tc.c, lv.Account.Usage, lv.Account.BYOKUsage)
		}
		if lv.Key.Usage.Total != tc.keyUsage || lv.Key.BYOKUsage.Total != tc.keyBYOK {
			t.Fatalf("%+v: key %s + byok %s", tc.c, lv.Key.Usage.Total, lv.Key.BYOKUsage.Total)
		}
		for name, sc := range map[string]*Scope{"workspace": lv.Workspace, "member": lv.Member} {
			if sc.Usage.Total != tc.credits || sc.BYOKUsage.Total != tc.byok {
				t.Fatalf("%+v: %s %s + byok %s", tc.c, name, sc.Usage.Total, sc.BYOKUsage.Total)
			}
			if sc.Usage.Monthly.At(money.IntervalMonthly, t0) != tc.credits {
				t.Fatalf("%+v: %s's month not charged", tc.c, name)
			}
		}
	}
	lv := full()
	if lv.Charge(Charge{}, t0) {
		t.Fatal("a zero charge changed the levels")
	}
}

func TestChargeLandsInTheWindowsOfItsTime(t *testing.T) {
	lv := full()
	lv.Charge(Charge{Cost: 4}, t0)
	next := t0.Add(time.Second) // a new day and month
	lv.Charge(Charge{Cost: 3}, next)
	if got := lv.Key.Usage.In(money.IntervalDaily, next); got != 3 {
		t.Fatalf("the new day's key usage is %s, want 3", got)
	}
	if got := lv.Key.Usage.In(money.IntervalWeekly, next); got != 7 {
		t.Fatalf("the week's key usage is %s, want 7", got)
	}
	if lv.Key.Usage.Total != 7 || lv.Account.Usage != 7 {
		t.Fatalf("totals %s and %s, want 7", lv.Key.Usage.Total, lv.Account.Usage)
	}
}

func TestWithinStopsAtMaxAmount(t *testing.T) {
	c := Charge{Cost: 100, Credits: 80, BYOK: true}.Within(money.MaxAmount-30, 10)
	if c.Cost != 20 || c.Credits != 20 {
		t.Fatalf("bounded charge %+v, want cost and credits 20", c)
	}
	if c := (Charge{Cost: 5}).Within(0, 0); c.Cost != 5 {
		t.Fatalf("a charge with room was cut: %+v", c)
	}
}

func TestFitsRefusesWrappingSums(t *testing.T) {
	lv := full()
	lv.Key.Held = money.MaxAmount - 1
	if lv.Fits(Holds{Hold: 2}, 0) {
		t.Fatal("a hold that wraps the key's sum fits")
	}
	if !lv.Fits(Holds{Hold: 1}, 0) {
		t.Fatal("a hold that reaches MaxAmount does not fit")
	}
	if (&Levels{}).Fits(Holds{InFlight: 2}, money.MaxAmount-1) {
		t.Fatal("an in-flight hold that wraps fits")
	}
	if !KeepsSettling(1, 1, time.Second) || KeepsSettling(0, 1, time.Second) || KeepsSettling(1, 0, time.Second) || KeepsSettling(1, 1, 0) {
		t.Fatal("KeepsSettling")
	}
}
