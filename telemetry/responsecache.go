package telemetry

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The response cache's figures: lookups by outcome, what this node's
// memory holds and evicts, and the credits hits saved.
var (
	cacheBytes, cacheEvictions, cacheSaved atomic.Int64
)

// responseCacheMetrics are the response cache's collectors.
type responseCacheMetrics struct {
	lookups      *prometheus.CounterVec // outcome
	hits, misses prometheus.Counter
	bytes        prometheus.GaugeFunc
	evictions    prometheus.CounterFunc
	saved        prometheus.CounterFunc
}

func newResponseCacheMetrics() responseCacheMetrics {
	m := responseCacheMetrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "response_cache_lookups_total",
			Help: "Requests to a cached model that looked up the response cache, by outcome: hit (answered without a provider call) or miss.",
		}, []string{"outcome"}),
		bytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "response_cache_bytes",
			Help: "Bytes of the response cache's entries in this node's memory.",
		}, func() float64 { return float64(cacheBytes.Load()) }),
		evictions: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace, Name: "response_cache_evictions_total",
			Help: "Response cache entries this node evicted from its memory to stay within max_bytes.",
		}, func() float64 { return float64(cacheEvictions.Load()) }),
		saved: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace, Name: "response_cache_saved_credits_total",
			Help: "Credits the response cache's hits saved: what the provider's answer would have cost, less the cache price charged.",
		}, func() float64 { return credits(cacheSaved.Load()) }),
	}
	m.hits, m.misses = m.lookups.WithLabelValues("hit"), m.lookups.WithLabelValues("miss")
	return m
}

func (m *responseCacheMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.lookups, m.bytes, m.evictions, m.saved}
}

// ResponseCacheLookup counts a response cache lookup: a hit, or a miss.
func ResponseCacheLookup(hit bool) {
	if hit {
		std.cache.hits.Inc()
		return
	}
	std.cache.misses.Inc()
}

// ResponseCacheBytes adds delta to the bytes this node's cache holds.
func ResponseCacheBytes(delta int64) { cacheBytes.Add(delta) }

// ResponseCacheEvicted counts n entries evicted for room.
func ResponseCacheEvicted(n int) { cacheEvictions.Add(int64(n)) }

// ResponseCacheSaved counts the nano-credits a hit saved.
func ResponseCacheSaved(nano int64) {
	if nano > 0 {
		cacheSaved.Add(nano)
	}
}
