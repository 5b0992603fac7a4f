package routestats

import (
	"sync"
	"testing"
	"time"
)

func TestPercentilesOfRecentSamples(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var s Stats
	if s.Latency(now).OK {
		t.Fatal("no samples yet: want OK false")
	}
	for i := 1; i <= 100; i++ {
		s.ObserveLatency(time.Duration(i)*time.Millisecond, now)
	}
	// The ring keeps the last 64: 37..100 ms.
	p := s.Latency(now)
	if !p.OK || p.P50 < 0.068 || p.P50 > 0.069 || p.P99 < 0.0999 || p.P99 > 0.1001 {
		t.Fatalf("latency percentiles = %+v, want p50 68 ms and p99 100 ms", p)
	}
	s.ObserveThroughput(50, now.Add(-Window-time.Second)) // too old
	s.ObserveThroughput(80, now)
	if tp := s.Throughput(now); !tp.OK || tp.P50 != 80 {
		t.Fatalf("throughput = %+v, want only the recent 80", tp)
	}
	if s.Latency(now.Add(Window + time.Minute)).OK {
		t.Fatal("samples older than the window must not count")
	}
	var nilStats *Stats
	nilStats.ObserveLatency(time.Second, now) // no panic
	if nilStats.Latency(now).OK {
		t.Fatal("nil stats have no samples")
	}
}

func TestForIsStable(t *testing.T) {
	a := For("m", "a")
	if a != For("m", "a") || a == For("m", "b") {
		t.Fatal("For must return one Stats per endpoint")
	}
}

func TestConcurrentObservations(t *testing.T) {
	var s Stats
	now := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				s.ObserveThroughput(100, now)
				_ = s.Throughput(now)
			}
		}()
	}
	wg.Wait()
	if p := s.Throughput(now); !p.OK || p.P50 != 100 {
		t.Fatalf("throughput = %+v", p)
	}
}

func BenchmarkObserve(b *testing.B) {
	var s Stats
	now := time.Now()
	for b.Loop() {
		s.ObserveLatency(time.Millisecond, now)
	}
}
