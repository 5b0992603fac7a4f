package handlers

import (
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/handlers/responsecache"
)

// BenchmarkResponseCacheHit is the chain answering every request from the
// response cache, after one miss: no provider call, the hold and the
// charge as for any request. It reports the 99th percentile of the
// gateway's time per hit.
//
//	go test ./handlers -run '^$' -bench ResponseCacheHit -benchmem
func BenchmarkResponseCacheHit(b *testing.B) {
	s := newBenchSetup(b)
	c, err := responsecache.New(&responsecache.Config{Models: []string{"bench-model"}, Unseeded: true}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.tollgate.cache = c
	var calls atomic.Int64
	h := s.chain(caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		calls.Add(1)
		return benchUpstreamJSON.ServeHTTP(w, r)
	}))
	checkOnce(b, h, benchChatBody, s.secret, true)
	w := newBenchWriter()
	took := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.reset()
		r := newBenchRequest(benchChatBody, s.secret)
		start := time.Now()
		if err := h.ServeHTTP(w, r); err != nil || w.status != http.StatusOK || w.h.Get("X-Cache") != "HIT" {
			b.Fatalf("status %d, X-Cache %q, err %v", w.status, w.h.Get("X-Cache"), err)
		}
		if len(took) < cap(took) {
			took = append(took, time.Since(start))
		}
	}
	b.StopTimer()
	if calls.Load() != 1 {
		b.Fatalf("%d provider calls, want the miss's alone", calls.Load())
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
