package metering

import (
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/sse"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// The meter's calls into package telemetry, kept here so that the meter
// carries one line each.

// SeriesOf is the metrics of the route's current attempt. A private
// endpoint's model and provider are the customer's names: they count as
// "private", one series for all.
func SeriesOf(route *upstream.Route) *telemetry.Series {
	if strings.HasPrefix(route.Provider.Name, policy.PrivateProviderPrefix) {
		return telemetry.For(string(route.Kind), telemetry.Private, telemetry.Private)
	}
	return telemetry.For(string(route.Kind), route.Model.ID, route.Provider.Name)
}

// observeAttempt counts one provider call: its outcome and duration, the
// retry on the same endpoint or the fallback when another attempt
// follows, and a streamed answer's time to first text.
func observeAttempt(st *pipeline.State, mw *answer.Writer, began time.Time, fallback, retried bool) {
	s := SeriesOf(st.Route)
	status := mw.Status
	if mw.Mode == sse.Undecided {
		status = 0
	}
	if st.Cache.Hit() {
		// The response cache answered: no provider call to count or
		// measure.
		st.Status = status
		return
	}
	end := now()
	s.Attempt(status, end.Sub(began))
	recordAttempt(st, mw, status, began, end)
	switch {
	case retried:
		s.Retry()
		return
	case fallback:
		s.Fallback()
		return
	}
	st.Status = status
	if mw.Mode == sse.Stream && !mw.FirstText.IsZero() {
		s.FirstToken(mw.FirstText.Sub(st.Start))
	}
}

// observeCharge counts a durable charge: tokens, credits (the balance's
// part and the BYOK usage, split as the ledger splits them), the key's
// series when the operator turned them on, and the runs' parts (a native
// search's results).
func observeCharge(st *pipeline.State, gen *storage.Generation) {
	credits, byok := gen.Cost, money.Amount(0)
	if gen.BYOK {
		credits = min(max(gen.Credits, 0), gen.Cost)
		byok = gen.Cost - credits
	}
	SeriesOf(st.Route).Charged(gen.PromptTokens, gen.CompletionTokens, int64(credits), int64(byok))
	telemetry.KeyCharged(gen.AccountID, gen.KeyHash, int64(credits), int64(byok))
	for _, run := range st.Plugins {
		if co, ok := run.(plugin.ChargeObserver); ok {
			co.ObserveCharge()
		}
	}
}

// recordAttempt keeps one provider call of a request with several
// endpoints for the generation record (provider_responses) and, for an answer, the endpoint's measurements
// the router ranks by: latency to the first text of a stream (to the
// whole answer otherwise), and completion tokens per second from then to
// the end.
func recordAttempt(st *pipeline.State, mw *answer.Writer, status int, began, end time.Time) {
	route := st.Route
	if len(route.Attempts) > 1 { // one: the record's provider and latency say it all
		st.AttemptRecords = append(st.AttemptRecords, storage.ProviderAttempt{Provider: route.Provider.Name, Model: route.Model.ID,
			Status: status, LatencyMS: end.Sub(began).Milliseconds(), BYOK: route.BYOK})
	}
	if status < 200 || status > 299 {
		return
	}
	stats := route.Provider.Stats
	first := end
	if mw.Mode == sse.Stream && !mw.FirstText.IsZero() {
		first = mw.FirstText
	}
	stats.ObserveLatency(first.Sub(began), end)
	if gen := end.Sub(first); mw.Usage.OK && mw.Usage.Completion > 0 && first != end && gen > 0 {
		stats.ObserveThroughput(float64(mw.Usage.Completion)/gen.Seconds(), end)
	} else if mw.Usage.OK && mw.Usage.Completion > 0 && mw.Mode != sse.Stream && end.Sub(began) > 0 {
		stats.ObserveThroughput(float64(mw.Usage.Completion)/end.Sub(began).Seconds(), end)
	}
}

// observeCacheHit counts what a response cache hit saved: the answer's
// cost at the model's prices, less the cache's price.
func (m *Meter) observeCacheHit(pricing billing.Pricing, usage billing.Usage, price money.Amount) {
	if full, err := billing.Cost(pricing, usage); err == nil {
		telemetry.ResponseCacheSaved(int64(full - price))
	}
}

// observeHealth tells the endpoint's uptime and circuit breaker what the
// call says of it: it answered, or it failed (no answer, a timeout, a
// server error, an answer that is none). A call the provider refused for
// the request's sake (a 4xx, a rate limit) or that the client abandoned
// says nothing of the endpoint.
func (m *Meter) observeHealth(route *upstream.Route, mw *answer.Writer, proxyErr error, clientHere bool) {
	if !clientHere {
		return
	}
	var failed bool
	switch {
	case mw.Mode == sse.Undecided:
		if proxyErr == nil {
			return
		}
		failed = true
	case mw.UpstreamFailed():
		if mw.Status < 500 {
			return
		}
		failed = true
	case mw.AnswerHeld():
		failed = !mw.UsableJSON()
	}
	at := now()
	route.Provider.Stats.ObserveOutcome(!failed, at)
	route.Provider.Breaker.Observe(failed, at, &m.Breakers)
}
