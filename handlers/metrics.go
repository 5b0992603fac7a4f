package handlers

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
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

// The pipeline's calls into package telemetry, kept here so that the
// stages carry one line each.

// seriesOf is the metrics of the route's current attempt. A private
// endpoint's model and provider are the customer's names: they count as
// "private", one series for all.
func seriesOf(route *upstream.Route) *telemetry.Series {
	if strings.HasPrefix(route.Provider.Name, policy.PrivateProviderPrefix) {
		return telemetry.For(string(route.Kind), telemetry.Private, telemetry.Private)
	}
	return telemetry.For(string(route.Kind), route.Model.ID, route.Provider.Name)
}

// isInferencePost reports whether a request counts in requests_total: a
// POST to an inference route (the model lists and token counts are not).
func isInferencePost(r *http.Request, st *pipeline.State) bool {
	return r.Method == http.MethodPost && (st.API.Op == admin.OpInfer || st.API.Op == admin.OpInferBelow)
}

// observeAnswer counts how the gateway answered a request: its 402s and
// 429s on any route, and every answer to an inference POST. It returns
// err, so that callers can wrap their return.
func observeAnswer(r *http.Request, st *pipeline.State, err error) error {
	status, apiErr := answerStatus(r, st, err)
	if apiErr != nil {
		observeRefusal(apiErr)
	}
	if !st.Inference {
		return err
	}
	if st.Route != nil {
		seriesOf(st.Route).Request(status)
	} else {
		telemetry.For(string(st.API.Dialect()), telemetry.None, telemetry.None).Request(status)
	}
	return err
}

// answerStatus is the status a request was answered with: the gateway's
// error's, 499 when the client left, else the provider's (200 when no
// provider was called).
func answerStatus(r *http.Request, st *pipeline.State, err error) (int, *apierror.Error) {
	if err != nil {
		var he caddyhttp.HandlerError
		if errors.As(err, &he) {
			apiErr, _ := he.Err.(*apierror.Error)
			return he.StatusCode, apiErr
		}
		return http.StatusInternalServerError, nil
	}
	switch {
	case r.Context().Err() != nil:
		return 499, nil
	case st.Status != 0:
		return st.Status, nil
	}
	return http.StatusOK, nil
}

// observeRefusal counts a 402 by its limit_source and a 429 by its origin:
// the gateway's limit_type, or "provider" when every provider refused.
func observeRefusal(e *apierror.Error) {
	switch e.Status {
	case http.StatusPaymentRequired:
		if src, ok := e.Metadata["limit_source"].(string); ok {
			telemetry.Refused(src)
		}
	case http.StatusTooManyRequests:
		origin := "provider"
		if lt, ok := e.Metadata["limit_type"].(string); ok {
			origin = lt
		}
		telemetry.RateLimited(origin)
	}
}

// observeAttempt counts one provider call: its outcome and duration, the
// fallback when another attempt follows, and a streamed answer's time to
// first text.
func observeAttempt(st *pipeline.State, mw *answer.Writer, began time.Time, fallback bool) {
	s := seriesOf(st.Route)
	status := mw.Status
	if mw.Mode == sse.Undecided {
		status = 0
	}
	end := now()
	s.Attempt(status, end.Sub(began))
	recordAttempt(st, mw, status, began, end)
	if fallback {
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
	seriesOf(st.Route).Charged(gen.PromptTokens, gen.CompletionTokens, int64(credits), int64(byok))
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
