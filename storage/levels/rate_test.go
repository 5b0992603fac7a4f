package levels

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func TestRatePlaceSettleUnhold(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	var key, ws Scope
	l := Levels{Key: &key, Workspace: &ws}
	p := l.Place(Holds{Rate: RateHold{On: RateOnKey | RateOnAccount, Prompt: 100, Completion: 50}}, t0)
	if key.Rate.Running != 1 || key.Rate.Minute.At(money.IntervalMinute, t0) != 1 || key.Rate.Day.At(money.IntervalDaily, t0) != 1 ||
		key.Rate.Prompt.Value != 100 || key.Rate.Completion.Value != 50 || l.Account.Rate.Running != 1 {
		t.Fatalf("placed: key %+v account %+v", key.Rate, l.Account.Rate)
	}
	if ws.Rate != (Rate{}) {
		t.Fatalf("a scope the request is not counted on changed: %+v", ws.Rate)
	}
	l.Unhold(p)
	l.SettleRate(p.Rate, 30, 20, t0.Add(time.Second))
	if key.Rate.Running != 0 || key.Rate.Prompt.Value != 30 || key.Rate.Completion.Value != 20 || key.Rate.Minute.Value != 1 {
		t.Fatalf("settled: %+v", key.Rate)
	}
	// Settled in a later minute: the earlier minute's hold stands, the new
	// minute is not charged; never below zero, never twice unheld.
	p = l.Place(Holds{Rate: RateHold{On: RateOnKey, Prompt: 10}}, t0)
	l.Unhold(p)
	l.Unhold(p)
	l.SettleRate(p.Rate, 5, 0, t0.Add(time.Minute))
	if key.Rate.Running != 0 || key.Rate.Prompt.Value != 40 {
		t.Fatalf("late settlement: %+v", key.Rate)
	}
	l.SettleRate(RatePlaced{On: RateOnKey, Minute: p.Rate.Minute, Prompt: 1000}, 0, 0, t0)
	if key.Rate.Prompt.Value != 0 {
		t.Fatalf("corrected below zero: %+v", key.Rate)
	}
}
