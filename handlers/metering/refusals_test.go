package metering

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
)

func TestRateLimitErrorShape(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 30, 0, time.UTC)
	e := RateLimitError(&gateway.RateLimited{Limit: 20, Reset: now.Add(30 * time.Second), Scope: "free_model_per_minute"}, now)
	if e.Status != 429 || e.Message != "Rate limit exceeded" || e.Metadata["error_type"] != "rate_limit_exceeded" {
		t.Fatalf("%+v", e)
	}
	for k, want := range map[string]string{
		"X-Ratelimit-Limit": "20", "X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset": "1795262460000", // 2026-11-21T12:01:00Z in epoch ms
		"Retry-After":       "30",
	} {
		if got := e.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}
