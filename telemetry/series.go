package telemetry

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxSeries bounds the (kind, model, provider) label sets; past it, new
// ones count under model and provider "other". The catalog is the
// operator's, so only a very large one reaches it. A variable for the
// tests.
var maxSeries = 4096

// Series is the metrics of one route kind, model and provider, resolved
// once: counting through it takes no label lookup.
type Series struct {
	kind, model, provider string

	requests   [numClasses]atomic.Pointer[prometheus.Counter] // by status class, made on first use
	attempts   [numClasses]atomic.Pointer[prometheus.Counter] // by outcome, made on first use
	fallbacks  prometheus.Counter
	retries    prometheus.Counter
	prompt     prometheus.Counter
	completion prometheus.Counter
	credits    *amountChild
	byok       *amountChild
	upstream   prometheus.Observer
	ttft       prometheus.Observer
}

// Status classes: index 0 is "transport_error" (no HTTP status), then
// 1xx..5xx.
const numClasses = 6

var classNames = [numClasses]string{"transport_error", "1xx", "2xx", "3xx", "4xx", "5xx"}

// class is the index of an HTTP status's class; 0 for none.
func class(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}

// seriesKey names a Series.
type seriesKey struct{ kind, model, provider string }

// seriesMap is copied on write: the request path only loads it.
var (
	seriesMu  sync.Mutex
	seriesMap atomic.Pointer[map[seriesKey]*Series]
)

// For returns the Series of a route kind, model and provider.
func For(kind, model, provider string) *Series {
	k := seriesKey{kind, model, provider}
	if m := seriesMap.Load(); m != nil {
		if s := (*m)[k]; s != nil {
			return s
		}
	}
	return newSeries(k)
}

// newSeries adds a Series to the map, or returns the one another request
// added first; past maxSeries it returns the kind's "other" Series.
func newSeries(k seriesKey) *Series {
	seriesMu.Lock()
	defer seriesMu.Unlock()
	var old map[seriesKey]*Series
	if p := seriesMap.Load(); p != nil {
		old = *p
	}
	if s := old[k]; s != nil {
		return s
	}
	if len(old) >= maxSeries {
		k.model, k.provider = Other, Other
		if s := old[k]; s != nil {
			return s
		}
	}
	s := std.newSeries(k)
	m := make(map[seriesKey]*Series, len(old)+1)
	for kk, v := range old {
		m[kk] = v
	}
	m[k] = s
	seriesMap.Store(&m)
	return s
}

func (m *metrics) newSeries(k seriesKey) *Series {
	return &Series{
		kind: k.kind, model: k.model, provider: k.provider,
		fallbacks:  m.fallbacks.WithLabelValues(k.kind, k.model, k.provider),
		retries:    m.retries.WithLabelValues(k.kind, k.model, k.provider),
		prompt:     m.tokens.WithLabelValues(k.kind, k.model, k.provider, "prompt"),
		completion: m.tokens.WithLabelValues(k.kind, k.model, k.provider, "completion"),
		credits:    m.credits.with(k.kind, k.model, k.provider),
		byok:       m.byokUsage.with(k.kind, k.model, k.provider),
		upstream:   m.upstreamDuration.WithLabelValues(k.kind, k.model, k.provider),
		ttft:       m.ttft.WithLabelValues(k.kind, k.model, k.provider),
	}
}

// counter returns the child of slot, resolving it on first use.
func (s *Series) counter(slot *atomic.Pointer[prometheus.Counter], vec *prometheus.CounterVec, class int) prometheus.Counter {
	if c := slot.Load(); c != nil {
		return *c
	}
	c := vec.WithLabelValues(s.kind, s.model, s.provider, classNames[class])
	slot.Store(&c)
	return c
}

// Request counts a request answered with status.
func (s *Series) Request(status int) {
	c := class(status)
	s.counter(&s.requests[c], std.requests, c).Inc()
}

// Attempt counts a provider call that answered status (0: no answer) and
// took d.
func (s *Series) Attempt(status int, d time.Duration) {
	c := class(status)
	s.counter(&s.attempts[c], std.attempts, c).Inc()
	s.upstream.Observe(d.Seconds())
}

// Fallback counts a failed attempt after which the next one is tried.
func (s *Series) Fallback() { s.fallbacks.Inc() }

// Retry counts a failed attempt tried again on the same endpoint.
func (s *Series) Retry() { s.retries.Inc() }

// FirstToken records a streamed answer's time to its first text.
func (s *Series) FirstToken(d time.Duration) { s.ttft.Observe(d.Seconds()) }

// Charged counts a settled request's tokens and its charge in
// nano-credits: credits against the balance, byok the BYOK usage.
func (s *Series) Charged(promptTokens, completionTokens, credits, byok int64) {
	if promptTokens > 0 {
		s.prompt.Add(float64(promptTokens))
	}
	if completionTokens > 0 {
		s.completion.Add(float64(completionTokens))
	}
	s.credits.add(credits)
	s.byok.add(byok)
}

// StatusClass is the status_class label of an HTTP status.
func StatusClass(status int) string { return classNames[class(status)] }
