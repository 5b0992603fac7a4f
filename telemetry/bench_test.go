package telemetry

import (
	"testing"
	"time"
)

// requestMetrics is what the pipeline records for one served request with
// one provider attempt (the handlers' observe* calls): the hold, the attempt, the
// charge (with per-key metrics on or off) and the answer.
func requestMetrics(model string) {
	HoldOpened(2_000_000)
	s := For("chat", model, "provider")
	s.Attempt(200, 350*time.Millisecond)
	s.FirstToken(120 * time.Millisecond)
	s = For("chat", model, "provider")
	s.Charged(1200, 300, 1_800_000, 0)
	KeyCharged("account", "key-hash", 1_800_000, 0)
	HoldClosed(2_000_000)
	For("chat", model, "provider").Request(200)
}

func BenchmarkRequestMetrics(b *testing.B) {
	requestMetrics("bench/model") // the series exist, as after the first request
	b.ReportAllocs()
	for b.Loop() {
		requestMetrics("bench/model")
	}
}

func BenchmarkRequestMetricsPerKey(b *testing.B) {
	SetKeyBound(1000)
	defer SetKeyBound(0)
	requestMetrics("bench/model")
	b.ReportAllocs()
	for b.Loop() {
		requestMetrics("bench/model")
	}
}

// BenchmarkRequestMetricsParallel is the same from every core at once, on
// one model: the shared counters' cache lines bounce between cores.
func BenchmarkRequestMetricsParallel(b *testing.B) {
	requestMetrics("bench/model")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			requestMetrics("bench/model")
		}
	})
}
