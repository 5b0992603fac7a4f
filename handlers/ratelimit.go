package handlers

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// RateLimited is a platform rate-limit refusal (SPEC.md 7.2).
type RateLimited struct {
	Limit     int64
	Remaining int64
	Reset     time.Time // when the window that refused ends
	Scope     string    // which limit: "free_model_per_minute", ...
}

func (r *RateLimited) Error() string { return "rate limit exceeded: " + r.Scope }

// Check applies the free-model caps to an account at t; nil admits. The
// windows are fixed UTC minutes and days.
func (l FreeModelLimits) Check(a storage.Account, t time.Time) *RateLimited {
	if used := a.FreeModelRequestsThisMinute(t); used >= l.PerMinute {
		return &RateLimited{Limit: l.PerMinute, Reset: money.PeriodEnd(money.IntervalMinute, t), Scope: "free_model_per_minute"}
	}
	daily := l.DailyLimit(a)
	if used := a.FreeModelRequestsToday(t); used >= daily {
		return &RateLimited{Limit: daily, Reset: money.PeriodEnd(money.IntervalDaily, t), Scope: "free_model_per_day"}
	}
	return nil
}

// rateLimitError is the platform's 429: the spec's body, X-RateLimit-*
// headers (reset in epoch milliseconds) and Retry-After in seconds.
func rateLimitError(rl *RateLimited, t time.Time) *APIError {
	retry := int64(math.Ceil(rl.Reset.Sub(t).Seconds()))
	return &APIError{
		Status:  http.StatusTooManyRequests,
		Message: "Rate limit exceeded",
		Metadata: map[string]any{
			"error_type": "rate_limit_exceeded",
			"limit_type": rl.Scope,
		},
		Header: http.Header{
			"X-Ratelimit-Limit":     {strconv.FormatInt(rl.Limit, 10)},
			"X-Ratelimit-Remaining": {strconv.FormatInt(rl.Remaining, 10)},
			"X-Ratelimit-Reset":     {strconv.FormatInt(rl.Reset.UnixMilli(), 10)},
			"Retry-After":           {strconv.FormatInt(max(retry, 1), 10)},
		},
	}
}
