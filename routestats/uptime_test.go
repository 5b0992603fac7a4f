package routestats

import (
	"testing"
	"time"
)

func TestUptime(t *testing.T) {
	var s Stats
	now := time.Unix(1_800_000_000, 0)
	if _, _, ok := s.Uptime(Window, now); ok {
		t.Fatal("uptime without calls")
	}
	// 40 minutes ago: outside 30 minutes, inside the day.
	for range 10 {
		s.ObserveOutcome(false, now.Add(-40*time.Minute))
	}
	// 10 minutes ago: 3 of 4 answered.
	for i := range 4 {
		s.ObserveOutcome(i != 0, now.Add(-10*time.Minute))
	}
	// Now: 6 answered.
	for range 6 {
		s.ObserveOutcome(true, now)
	}
	if p, n, ok := s.Uptime(Window, now); !ok || n != 10 || p != 90 {
		t.Fatalf("30m: %v%% of %d (%v)", p, n, ok)
	}
	if p, n, ok := s.Uptime(UptimeShort, now); !ok || n != 6 || p != 100 {
		t.Fatalf("5m: %v%% of %d (%v)", p, n, ok)
	}
	if p, n, ok := s.Uptime(UptimeDay, now); !ok || n != 20 || p != 45 {
		t.Fatalf("1d: %v%% of %d (%v)", p, n, ok)
	}
	if !s.LowUptime(95, now) || s.LowUptime(90, now) || s.LowUptime(0, now) {
		t.Fatal("LowUptime")
	}
	// An hour on, the minutes are gone.
	if _, _, ok := s.Uptime(Window, now.Add(time.Hour)); ok {
		t.Fatal("30m uptime from calls an hour old")
	}
	var few Stats
	for range MinUptimeCalls - 1 {
		few.ObserveOutcome(false, now)
	}
	if few.LowUptime(90, now) {
		t.Fatal("ranked on fewer calls than MinUptimeCalls")
	}
	var none *Stats
	none.ObserveOutcome(true, now)
	if _, _, ok := none.Uptime(Window, now); ok {
		t.Fatal("nil stats")
	}
}
