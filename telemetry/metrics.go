// Package telemetry holds the gateway's Prometheus metrics: what the
// pipeline answered and charged, its refusals, the providers' latency and
// the storage and export machinery's health.
//
// The collectors are created once per process and registered into the
// metrics registry of every config Caddy loads (Register), as Caddy's own
// reverse proxy does with its package-level collectors: a reload
// provisions the new config while the old one still serves, and counters
// keep counting across it. Caddy serves that registry on the admin
// endpoint's /metrics and through the `metrics` handler.
//
// The request path calls the cheap functions of this package: a Series is
// resolved once per (route kind, model, provider) and cached, so that
// counting a request is a map lookup and a few atomic adds.
//
// Names follow Prometheus conventions (tollgate_ namespace, _total for
// counters, _seconds, credits as the unit of money); the docs'
// "Metrics" page maps them to the OpenTelemetry GenAI semantic
// conventions.
package telemetry

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "tollgate"

// Label values for requests that were not routed to a model, and for
// series past a bound.
const (
	// None is the model and provider of a request refused before routing.
	None = ""
	// Other stands for the series past a bound (per-key labels, or model
	// and provider pairs beyond maxSeries).
	Other = "other"
	// Private stands for a customer's private endpoint, whose ids are not
	// the operator's and would make a label per endpoint.
	Private = "private"
)

// Buckets, in seconds.
var (
	upstreamBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300}
	ttftBuckets     = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30}
	commitBuckets   = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}
)

// metrics is the process's one set of collectors.
type metrics struct {
	requests         *prometheus.CounterVec   // kind, model, provider, status_class
	attempts         *prometheus.CounterVec   // kind, model, provider, outcome
	fallbacks        *prometheus.CounterVec   // kind, model, provider
	retries          *prometheus.CounterVec   // kind, model, provider
	tokens           *prometheus.CounterVec   // kind, model, provider, type
	credits          *amountVec               // kind, model, provider
	byokUsage        *amountVec               // kind, model, provider
	upstreamDuration *prometheus.HistogramVec // kind, model, provider
	ttft             *prometheus.HistogramVec // kind, model, provider

	refusals    *prometheus.CounterVec // limit_source
	rateLimited *prometheus.CounterVec // origin

	usageAnomalies *prometheus.CounterVec // provider, anomaly

	breakerState       *prometheus.GaugeVec   // model, provider
	breakerTransitions *prometheus.CounterVec // model, provider, state

	holds       prometheus.GaugeFunc
	heldCredits prometheus.GaugeFunc

	commitDuration prometheus.Histogram
	commitFailures prometheus.Counter

	searchCalls    *prometheus.CounterVec // engine
	searchResults  *prometheus.CounterVec // engine
	searchFailures *prometheus.CounterVec // engine

	exportQueue     prometheus.GaugeFunc
	exportDelivered prometheus.CounterFunc
	exportDropped   prometheus.CounterFunc

	keyRequests *prometheus.CounterVec // account, key
	keyCredits  *amountVec             // account, key, byok

	sticky                *prometheus.CounterVec // outcome
	stickyHit, stickyMiss prometheus.Counter     // its two series, resolved once

	cache responseCacheMetrics
}

var std = newMetrics()

var routeLabels = []string{"kind", "model", "provider"}

func newMetrics() *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "requests_total",
			Help: "Inference requests answered, by route kind, model, provider that served (empty when refused before routing) and status class.",
		}, append(routeLabels, "status_class")),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "upstream_attempts_total",
			Help: "Calls to providers, by outcome: the status class of the provider's answer, or transport_error when none came.",
		}, append(routeLabels, "outcome")),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "fallbacks_total",
			Help: "Failed attempts after which the gateway tried the next provider, by the failed attempt's model and provider.",
		}, routeLabels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "upstream_retries_total",
			Help: "Failed attempts the gateway tried again on the same provider before anything reached the client, by the attempt's model and provider.",
		}, routeLabels),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "tokens_total",
			Help: "Tokens charged, by type (prompt or completion); OpenTelemetry gen_ai.client.token.usage.",
		}, append(routeLabels, "type")),
		credits: newAmountVec(prometheus.NewDesc(namespace+"_credits_charged_total",
			"Credits charged to account balances (BYOK requests: their web search only).", routeLabels, nil), routeLabels),
		byokUsage: newAmountVec(prometheus.NewDesc(namespace+"_byok_usage_credits_total",
			"Cost of BYOK requests at the catalog's prices, counted in byok_usage and paid to the provider with the customer's key.", routeLabels, nil), routeLabels),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "upstream_duration_seconds", Buckets: upstreamBuckets,
			Help: "Duration of each provider attempt, until its answer ended; OpenTelemetry gen_ai.client.operation.duration.",
		}, routeLabels),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "time_to_first_token_seconds", Buckets: ttftBuckets,
			Help: "Streamed answers: time from the first provider call to the first generated text sent; OpenTelemetry gen_ai.server.time_to_first_token.",
		}, routeLabels),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "credit_refusals_total",
			Help: "Requests refused with 402, by the limit_source of the answer.",
		}, []string{"limit_source"}),
		usageAnomalies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "provider_usage_anomalies_total",
			Help: "Provider-reported token counts the gateway replaced by its own bound (missing, negative or non-numeric, or above the prompt bound or the output limit sent), by provider and anomaly.",
		}, []string{"provider", "anomaly"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "rate_limited_total",
			Help: "Requests answered 429, by origin: the gateway's limit_type (abuse_per_key, abuse_per_ip, free_model_per_minute, free_model_per_day, or an operator's rate limit such as key_requests_per_minute) or provider.",
		}, []string{"origin"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "circuit_breaker_state",
			Help: "Each endpoint's circuit breaker, once it left closed: 0 closed, 1 half-open (probing), 2 open (out of routing).",
		}, []string{"model", "provider"}),
		breakerTransitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "circuit_breaker_transitions_total",
			Help: "Transitions of the endpoints' circuit breakers, by the state entered: open, half_open or closed.",
		}, []string{"model", "provider", "state"}),
		holds: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "holds_in_flight",
			Help: "Admitted requests whose cost is held and not yet settled.",
		}, func() float64 { return float64(holdCount.Load()) }),
		heldCredits: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "held_credits",
			Help: "Credits held by requests in flight.",
		}, func() float64 { return credits(holdAmount.Load()) }),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "commit_duration_seconds", Buckets: commitBuckets,
			Help: "Duration of the database's group commits (one transaction shared by concurrent requests).",
		}),
		commitFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "commit_failures_total",
			Help: "Group commits that failed and were retried.",
		}),
		searchCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "web_search_calls_total",
			Help: "Web searches run, by engine (native: searches by the provider, counted when they returned results).",
		}, []string{"engine"}),
		searchResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "web_search_results_total",
			Help: "Web search results handed to the model, by engine.",
		}, []string{"engine"}),
		searchFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "web_search_failures_total",
			Help: "Gateway-side web searches that failed (the request was answered with an error and not charged), by engine.",
		}, []string{"engine"}),
		exportQueue: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: namespace, Name: "export_queue_depth",
			Help: "Generation records waiting in the observability destinations' queues.",
		}, func() float64 { return float64(exportStats().QueueDepth) }),
		exportDelivered: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace, Name: "export_delivered_total",
			Help: "Generation records delivered to observability destinations.",
		}, func() float64 { return float64(exportStats().Delivered) }),
		exportDropped: prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: namespace, Name: "export_dropped_total",
			Help: "Generation records dropped because a destination's queue was full or it refused them for good.",
		}, func() float64 { return float64(exportStats().Dropped) }),
		keyRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "key_requests_total",
			Help: "Inference requests charged, by account and key hash (only with metrics_per_key; keys past its bound count as \"other\").",
		}, []string{"account", "key"}),
	}
	m.sticky = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "sticky_routing_total",
		Help: "Requests that could stick to an endpoint (several equally ranked, no provider.order or sort), by outcome: hit (the conversation's endpoint was among them and leads) or miss (none known, expired, or no longer eligible).",
	}, []string{"outcome"})
	m.stickyHit, m.stickyMiss = m.sticky.WithLabelValues("hit"), m.sticky.WithLabelValues("miss")
	m.cache = newResponseCacheMetrics()
	keyLabels := []string{"account", "key", "byok"}
	m.keyCredits = newAmountVec(prometheus.NewDesc(namespace+"_key_credits_total",
		"Credits charged (byok=false) or BYOK usage (byok=true), by account and key hash (only with metrics_per_key).", keyLabels, nil), keyLabels)
	return m
}

// collectors are the metrics every config registers; the per-key ones
// only when the operator turns them on.
func (m *metrics) collectors(perKey bool) []prometheus.Collector {
	cs := []prometheus.Collector{
		m.requests, m.attempts, m.fallbacks, m.retries, m.tokens, m.credits, m.byokUsage,
		m.upstreamDuration, m.ttft, m.refusals, m.rateLimited, m.usageAnomalies, m.breakerState, m.breakerTransitions, m.holds, m.heldCredits,
		m.commitDuration, m.commitFailures, m.searchCalls, m.searchResults, m.searchFailures,
		m.exportQueue, m.exportDelivered, m.exportDropped, m.sticky,
	}
	cs = append(cs, m.cache.collectors()...)
	if perKey {
		cs = append(cs, m.keyRequests, m.keyCredits)
	}
	return cs
}

// Register adds the gateway's collectors to reg, a config's registry
// (caddy.Context.GetMetricsRegistry), and the per-key ones with perKey.
// Registering into a registry that already has them (a second tollgate
// app in one config) is not an error; a nil reg (a context that loads no
// config, as in unit tests) gets nothing.
func Register(reg *prometheus.Registry, perKey bool) error {
	if reg == nil {
		return nil
	}
	for _, c := range std.collectors(perKey) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) && are.ExistingCollector == c {
				continue
			}
			return err
		}
	}
	return nil
}

// Holds in flight, in nano-credits (money.Amount's unit) so that the gauge
// returns to exactly zero.
var holdCount, holdAmount atomic.Int64

// HoldOpened counts an admitted request's hold of amount nano-credits.
func HoldOpened(amount int64) {
	holdCount.Add(1)
	holdAmount.Add(amount)
}

// HoldClosed counts the hold's settlement or release.
func HoldClosed(amount int64) {
	holdCount.Add(-1)
	holdAmount.Add(-amount)
}

// ObserveCommit is the storage kernel's commit observer: how long a group
// commit took, and whether it failed.
func ObserveCommit(d time.Duration, err error) {
	if err != nil {
		std.commitFailures.Inc()
		return
	}
	std.commitDuration.Observe(d.Seconds())
}

// Refused counts a 402 with its limit_source.
func Refused(limitSource string) {
	std.refusals.WithLabelValues(limitSource).Inc()
}

// UsageAnomaly counts a provider's usage report the gateway corrected.
func UsageAnomaly(provider, anomaly string) {
	std.usageAnomalies.WithLabelValues(provider, anomaly).Inc()
}

// RateLimited counts a 429 by its origin.
func RateLimited(origin string) {
	std.rateLimited.WithLabelValues(origin).Inc()
}

// BreakerTransition counts an endpoint's circuit breaker entering state
// (named name: closed, half_open, open) and sets its state gauge.
func BreakerTransition(model, provider string, state int, name string) {
	std.breakerState.WithLabelValues(model, provider).Set(float64(state))
	std.breakerTransitions.WithLabelValues(model, provider, name).Inc()
}

// WebSearch counts one gateway-side search by engine: its results, or its
// failure.
func WebSearch(engine string, results int, failed bool) {
	std.searchCalls.WithLabelValues(engine).Inc()
	if failed {
		std.searchFailures.WithLabelValues(engine).Inc()
		return
	}
	std.searchResults.WithLabelValues(engine).Add(float64(results))
}

// StickyRouting counts a sticky routing lookup: a hit, or a miss.
func StickyRouting(hit bool) {
	if hit {
		std.stickyHit.Inc()
		return
	}
	std.stickyMiss.Inc()
}

// ExportStats is what the observability exporter reports.
type ExportStats struct {
	QueueDepth int
	Delivered  uint64
	Dropped    uint64
}

// exportSource is the running exporter's report; nil before one starts.
var exportSource atomic.Pointer[func() ExportStats]

// SetExportSource makes the export metrics read src at each scrape.
func SetExportSource(src func() ExportStats) {
	exportSource.Store(&src)
}

func exportStats() ExportStats {
	if p := exportSource.Load(); p != nil {
		return (*p)()
	}
	return ExportStats{}
}

// credits converts nano-credits to credits.
func credits(nano int64) float64 { return float64(nano) / 1e9 }
