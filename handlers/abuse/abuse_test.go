package abuse

import (
	"testing"
	"time"
)

func TestCeilingsRefillAndEvict(t *testing.T) {
	c := newBuckets(&Ceiling{Requests: 2, Window: 60_000_000_000})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		if ok, _ := c.Allow("ip", t0); !ok {
			t.Fatalf("request %d refused", i)
		}
	}
	ok, next := c.Allow("ip", t0)
	if ok || !next.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("third: %v %v", ok, next)
	}
	if ok, _ := c.Allow("other", t0); !ok {
		t.Fatal("buckets are per name")
	}
	if ok, _ := c.Allow("ip", t0.Add(30*time.Second)); !ok {
		t.Fatal("no refill after 30s")
	}
	c.Allow("late", t0.Add(time.Hour))
	if _, ok := c.buckets["ip"]; ok {
		t.Fatal("idle bucket kept")
	}
}
