package retry

import (
	"context"
	"testing"
	"time"
)

func TestNextBacksOffWithinBudget(t *testing.T) {
	p := Policy{Attempts: 3, Budget: time.Second, Backoff: 100 * time.Millisecond, Rand: func() float64 { return 0.5 }}
	var s State
	t0 := time.Unix(1000, 0)
	// 100ms, 200ms, 400ms, each with half of it random (here a quarter).
	for i, want := range []time.Duration{75 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond} {
		d, ok := p.Next(&s, t0, 0, 0)
		if !ok || d != want {
			t.Fatalf("retry %d: %v %v, want %v", i, d, ok, want)
		}
	}
	if _, ok := p.Next(&s, t0, 0, 0); ok {
		t.Fatal("a fourth retry beyond Attempts")
	}
	if s.Made() != 3 {
		t.Fatalf("made %d", s.Made())
	}
}

func TestNextStopsAtBudget(t *testing.T) {
	p := Policy{Attempts: 10, Budget: time.Second, Backoff: 100 * time.Millisecond, Rand: func() float64 { return 0 }}
	var s State
	t0 := time.Unix(1000, 0)
	if _, ok := p.Next(&s, t0, 0, 0); !ok {
		t.Fatal("first retry refused")
	}
	// 900ms after the first failure, a 100ms wait ends past the budget.
	if _, ok := p.Next(&s, t0.Add(901*time.Millisecond), 0, 0); ok {
		t.Fatal("a retry past the budget")
	}
}

func TestNextCountsTheCallAgain(t *testing.T) {
	p := Policy{Attempts: 2, Budget: 2 * time.Second, Backoff: 100 * time.Millisecond}
	t0 := time.Unix(1000, 0)
	// A call that timed out after 2s would add more than the budget.
	var s State
	if _, ok := p.Next(&s, t0, 2*time.Second, 0); ok {
		t.Fatal("a 2s call retried within a 2s budget")
	}
	var quick State
	if _, ok := p.Next(&quick, t0, 10*time.Millisecond, 0); !ok {
		t.Fatal("a quick failure not retried")
	}
}

func TestNextHonoursRetryAfter(t *testing.T) {
	p := Policy{Attempts: 2, Budget: 3 * time.Second, Backoff: 100 * time.Millisecond}
	var s State
	t0 := time.Unix(1000, 0)
	if d, ok := p.Next(&s, t0, 0, time.Second); !ok || d != time.Second {
		t.Fatalf("Retry-After 1: %v %v", d, ok)
	}
	// A hint longer than what is left of the budget: the next endpoint.
	var s2 State
	if _, ok := p.Next(&s2, t0, 0, 5*time.Second); ok {
		t.Fatal("a retry waiting past the budget")
	}
}

func TestNoRetries(t *testing.T) {
	var s State
	if _, ok := (Policy{Attempts: -1}).WithDefaults().Next(&s, time.Now(), 0, 0); ok {
		t.Fatal("retries off, yet a retry")
	}
	if p := (Policy{}).WithDefaults(); p.Attempts != DefaultAttempts || p.Budget != DefaultBudget || p.Backoff != DefaultBackoff {
		t.Fatalf("defaults %+v", p)
	}
}

func TestWaitStopsWhenClientLeaves(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Wait(ctx, time.Minute) {
		t.Fatal("waited for a client that left")
	}
	if time.Since(start) > time.Second {
		t.Fatal("the wait did not stop")
	}
	if !Wait(context.Background(), time.Millisecond) {
		t.Fatal("a wait that ended reports the client gone")
	}
}
