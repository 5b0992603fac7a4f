package metering

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// msgStoreResyncing answers them while a replica reloads every record
// from the shared database because its change feed lost continuity (a
// Redis restart or failover, a broken connection, a gap): until then its
// copy of keys, budgets and guardrails may be stale, so it decides nothing.
const msgStoreResyncing = "The gateway is reloading its records from the shared database; retry shortly"

// ErrStoreResyncing is the 503 of a replica that reloads its records.
func ErrStoreResyncing() *apierror.Error {
	return apierror.New(http.StatusServiceUnavailable, msgStoreResyncing)
}

// CeilingRefusal is the 429 of the shared per-key ceiling: the same answer
// as the replica's own per_key bucket gives.
func CeilingRefusal(e *storage.CeilingError) *apierror.Error {
	return RateLimitError(&gateway.RateLimited{Limit: int64(e.Burst), Reset: e.Reset, Scope: "abuse_per_key"}, now())
}

// RateLimitError is the platform's 429: the public API's error body, X-RateLimit-*
// headers (reset in epoch milliseconds) and Retry-After in seconds.
func RateLimitError(rl *gateway.RateLimited, t time.Time) *apierror.Error {
	retry := int64(math.Ceil(rl.Reset.Sub(t).Seconds()))
	return &apierror.Error{
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
