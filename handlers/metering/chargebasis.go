package metering

import (
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

// What an attempt whose answer reached the meter is charged for, for every
// dialect (chat, Responses, Messages) and every translation between them:
// the usage its provider reported, within the bounds the gateway can
// prove (defendUsage), or, when it reported none, the gateway's estimate
// (answer.Writer.EstimateUsage). settle asks nothing else.

// Provider usage anomalies, as telemetry counts them.
const (
	anomalyPromptInvalid     = "prompt_invalid"     // missing, negative or not a number
	anomalyPromptAbove       = "prompt_above_bound" // above admission's prompt bound
	anomalyCompletionInvalid = "completion_invalid"
	anomalyCompletionAbove   = "completion_above_limit"   // above the output limit sent
	anomalyCacheInvalid      = "cache_invalid"            // negative, or more cached than prompt tokens
	anomalyCacheUnknown      = "cache_unknown"            // a cache count the meter does not read
	anomalyPromptBelow       = "prompt_below_visible"     // below the prompt the provider was visibly sent
	anomalyCompletionBelow   = "completion_below_visible" // below the output the provider visibly produced
)

// defendUsage is the usage the provider reported, within what the gateway
// can prove, so that no cap is exceeded because of a provider's report:
//
//   - a count that is missing, negative or not a number is replaced by
//     the gateway's estimate (answer.Writer.EstimateUsage's rule);
//   - a prompt above admission's prompt bound (an upper bound of any
//     tokenizer's count of the body) is lowered to that bound;
//   - a completion above the output limit the provider was sent (times n
//     choices) is lowered to that limit;
//   - a count below what was visibly sent or produced (no prompt tokens
//     for a request, which always has one; no completion tokens for an
//     answer with output) is raised to the gateway's estimate, so that a
//     provider's report cannot make an answer free;
//   - cached tokens are at least 0 and at most the prompt.
//
// Only a count of zero is provably below what was visible: the output's
// bytes bound no tokenizer's count from below once it holds audio or
// images, and a prompt's bytes hold images a provider counts in few
// tokens.
//
// Each correction is a provider anomaly: counted
// (tollgate_provider_usage_anomalies_total) and logged as a warning with
// the figures only; the answer then reports the usage charged (chat and
// Messages; a Responses answer keeps the provider's, with the cost).
func (m *Meter) defendUsage(st *pipeline.State, mw *answer.Writer) billing.Usage {
	route, seen := st.Route, mw.Usage
	if ttl := mw.CacheTTL; ttl.Reported {
		seen.CacheWrite1h, seen.CacheUnknown = ttl.Hour, seen.CacheUnknown || ttl.Unknown
	}
	u := billing.Usage{PromptTokens: seen.Prompt, CompletionTokens: seen.Completion,
		CacheReadTokens: seen.CacheRead, CacheWriteTokens: seen.CacheWrite, CacheWrite1hTokens: seen.CacheWrite1h}
	report := func(kind string, reported, charged int64) {
		mw.Corrected = true
		telemetry.UsageAnomaly(route.Provider.Name, kind)
		m.logger.Warn("provider usage anomaly; charged the gateway's bound",
			zap.String("anomaly", kind), zap.String("generation", st.GenID),
			zap.String("provider", route.Provider.Name), zap.String("model", route.Model.ID),
			zap.Int64("reported", reported), zap.Int64("charged", charged))
	}
	if seen.PromptBad {
		u.PromptTokens = route.PromptEstimate()
		report(anomalyPromptInvalid, seen.Prompt, u.PromptTokens)
	} else if bound, ok := promptBoundFor(route, st.Plugins); ok && u.PromptTokens > bound {
		u.PromptTokens = bound
		report(anomalyPromptAbove, seen.Prompt, bound)
	} else if u.PromptTokens < 1 {
		u.PromptTokens = max(route.PromptEstimate(), 1)
		report(anomalyPromptBelow, seen.Prompt, u.PromptTokens)
	}
	if !seen.CompletionBad && u.CompletionTokens < 1 {
		if mw.AnswerHeld() {
			mw.Delivered = mw.HeldOutput()
		}
		if est, _ := mw.EstimateUsage(route, true); max(mw.Delivered, mw.Produced) > 0 {
			u.CompletionTokens = max(est.CompletionTokens, 1)
			report(anomalyCompletionBelow, seen.Completion, u.CompletionTokens)
		}
	}
	if seen.CompletionBad {
		if mw.AnswerHeld() {
			// Measured only now: an answer with usage is not searched.
			mw.Delivered = mw.HeldOutput()
		}
		est, _ := mw.EstimateUsage(route, true)
		u.CompletionTokens = est.CompletionTokens
		report(anomalyCompletionInvalid, seen.Completion, u.CompletionTokens)
	} else if bound := route.OutputBound(); bound > 0 && u.CompletionTokens > bound {
		if bound *= route.NChoices(); u.CompletionTokens > bound {
			u.CompletionTokens = bound
			report(anomalyCompletionAbove, seen.Completion, bound)
		}
	}
	if read, write := u.CacheReadTokens, u.CacheWriteTokens; read < 0 || write < 0 || read+write > u.PromptTokens || read+write < 0 {
		u.CacheReadTokens = min(max(read, 0), u.PromptTokens)
		u.CacheWriteTokens = min(max(write, 0), u.PromptTokens-u.CacheReadTokens)
		report(anomalyCacheInvalid, read+write, u.CacheReadTokens+u.CacheWriteTokens)
	}
	if hour := u.CacheWrite1hTokens; hour < 0 || hour > u.CacheWriteTokens {
		u.CacheWrite1hTokens = min(max(hour, 0), u.CacheWriteTokens)
		report(anomalyCacheInvalid, hour, u.CacheWrite1hTokens)
	}
	if seen.CacheUnknown {
		// A cache count of a form the meter does not read is charged as
		// the rest of the prompt; the charge stands, the report is noted.
		telemetry.UsageAnomaly(route.Provider.Name, anomalyCacheUnknown)
	}
	return u
}

// promptBoundFor is admission's bound of the current attempt's prompt,
// with what the request's runs added after admission (a gateway-side
// search's results, which the hold covers apart). A prompt that holds
// content the body does not (a previous response, a file by reference, a
// provider's own search) is bounded by the context window alone.
func promptBoundFor(rt *upstream.Route, runs []plugin.Run) (int64, bool) {
	unbounded, extra := rt.Prompt.Unbounded, int64(0)
	for _, run := range runs {
		if pe, ok := run.(plugin.PromptExtender); ok {
			tokens, u := pe.PromptExtra()
			unbounded = unbounded || u
			extra += tokens
		}
	}
	c := rt.Model.ContextLength
	switch {
	case c > 0 && (unbounded || rt.Prompt.Tokens+extra > c):
		return c, true
	case unbounded:
		return 0, false
	}
	return rt.Prompt.Tokens + extra, true
}
