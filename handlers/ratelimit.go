package handlers

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
)

// rateLimitError is the platform's 429: the public API's error body, X-RateLimit-*
// headers (reset in epoch milliseconds) and Retry-After in seconds.
func rateLimitError(rl *gateway.RateLimited, t time.Time) *apierror.Error {
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
