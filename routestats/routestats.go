// Package routestats keeps the gateway's own recent measurements of each
// provider endpoint: latency (time to the first answer byte of a stream,
// or to the whole answer), throughput (completion tokens per second of
// generation) and uptime (the share of its calls that answered, by the
// minute for 30 minutes and by the hour for a day). The router ranks
// endpoints by them (`provider.sort`, `preferred_max_latency`,
// `preferred_min_throughput`, low uptime behind).
//
// Each endpoint keeps its last Samples samples of each in a ring; samples
// older than Window are ignored. Writers and readers take no lock: a
// sample is one 64-bit word, claimed by an atomic counter and stored
// atomically.
package routestats

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// Samples is how many recent measurements of each kind an endpoint
	// keeps.
	Samples = 64
	// Window is how old a measurement may be and still count.
	Window = 30 * time.Minute
)

// Stats are one endpoint's recent measurements.
type Stats struct {
	latency, throughput ring
	// uptime is made on the first call's outcome: an endpoint never
	// called costs no buckets.
	uptime atomic.Pointer[uptime]
}

// ring holds the last Samples values; a slot is the value's float32 bits
// (high word) and the Unix second it was taken (low word); 0 is empty.
type ring struct {
	next  atomic.Uint64
	slots [Samples]atomic.Uint64
}

func (r *ring) add(v float64, at time.Time) {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	i := r.next.Add(1) - 1
	r.slots[i%Samples].Store(uint64(math.Float32bits(float32(v)))<<32 | uint64(uint32(at.Unix())))
}

// values appends the samples taken since since to buf, sorted.
func (r *ring) values(since time.Time, buf []float64) []float64 {
	cut := uint32(since.Unix())
	for i := range r.slots {
		s := r.slots[i].Load()
		if s == 0 || uint32(s) < cut {
			continue
		}
		buf = append(buf, float64(math.Float32frombits(uint32(s>>32))))
	}
	slices.Sort(buf)
	return buf
}

// ObserveLatency records one answer's latency.
func (s *Stats) ObserveLatency(d time.Duration, at time.Time) {
	if s != nil {
		s.latency.add(d.Seconds(), at)
	}
}

// ObserveThroughput records one answer's throughput, in tokens per second.
func (s *Stats) ObserveThroughput(tokensPerSecond float64, at time.Time) {
	if s != nil {
		s.throughput.add(tokensPerSecond, at)
	}
}

// Percentiles are an endpoint's measurements at p50, p75, p90 and p99;
// OK is false when it has none within the window.
type Percentiles struct {
	P50, P75, P90, P99 float64
	OK                 bool
}

// Latency is the endpoint's latency in seconds at the usual percentiles.
func (s *Stats) Latency(now time.Time) Percentiles {
	if s == nil {
		return Percentiles{}
	}
	return percentiles(&s.latency, now)
}

// Throughput is the endpoint's throughput in tokens per second.
func (s *Stats) Throughput(now time.Time) Percentiles {
	if s == nil {
		return Percentiles{}
	}
	return percentiles(&s.throughput, now)
}

func percentiles(r *ring, now time.Time) Percentiles {
	var buf [Samples]float64
	v := r.values(now.Add(-Window), buf[:0])
	if len(v) == 0 {
		return Percentiles{}
	}
	at := func(q float64) float64 { return v[min(len(v)-1, int(math.Ceil(q*float64(len(v))))-1)] }
	return Percentiles{P50: at(0.50), P75: at(0.75), P90: at(0.90), P99: at(0.99), OK: true}
}

// registry keeps each endpoint's Stats across catalog reloads.
var registry sync.Map // key{model, provider} -> *Stats

type key struct{ model, provider string }

// For returns the Stats of provider serving model, the same on every call.
func For(model, provider string) *Stats {
	k := key{model, provider}
	if s, ok := registry.Load(k); ok {
		return s.(*Stats)
	}
	s, _ := registry.LoadOrStore(k, new(Stats))
	return s.(*Stats)
}
