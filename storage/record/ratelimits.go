package record

import "fmt"

// RateLimits are the request and token rates an operator allows a key, a
// workspace or an account; a zero field sets no limit. Windows are fixed
// UTC minutes and days.
type RateLimits struct {
	RequestsPerMinute         int64 `json:"requests_per_minute"`
	RequestsPerDay            int64 `json:"requests_per_day"`
	PromptTokensPerMinute     int64 `json:"prompt_tokens_per_minute"`
	CompletionTokensPerMinute int64 `json:"completion_tokens_per_minute"`
	ConcurrentRequests        int64 `json:"concurrent_requests"`
}

// Any reports whether a limit is set; false on nil.
func (l *RateLimits) Any() bool {
	return l != nil && (l.RequestsPerMinute > 0 || l.RequestsPerDay > 0 || l.PromptTokensPerMinute > 0 ||
		l.CompletionTokensPerMinute > 0 || l.ConcurrentRequests > 0)
}

// MaxRateLimit bounds every rate limit: beyond it a limit is a mistake,
// not a setting.
const MaxRateLimit = 1_000_000_000_000

// Validate refuses a limit below zero or above MaxRateLimit, naming the
// field as prefix.<name>.
func (l *RateLimits) Validate(prefix string) error {
	if l == nil {
		return nil
	}
	for _, f := range l.fields() {
		if *f.v < 0 || *f.v > MaxRateLimit {
			return fmt.Errorf("%s.%s: expected an integer from 0 to %d, got %d", prefix, f.name, int64(MaxRateLimit), *f.v)
		}
	}
	return nil
}

// rateField is one of the limits, by its JSON name.
type rateField struct {
	name string
	v    *int64
}

func (l *RateLimits) fields() [5]rateField {
	return [5]rateField{
		{"requests_per_minute", &l.RequestsPerMinute},
		{"requests_per_day", &l.RequestsPerDay},
		{"prompt_tokens_per_minute", &l.PromptTokensPerMinute},
		{"completion_tokens_per_minute", &l.CompletionTokensPerMinute},
		{"concurrent_requests", &l.ConcurrentRequests},
	}
}

// Set sets the limit of that JSON name; false for an unknown name.
func (l *RateLimits) Set(name string, v int64) bool {
	for _, f := range l.fields() {
		if f.name == name {
			*f.v = v
			return true
		}
	}
	return false
}

// RateLimitNames are the limits' JSON names, in order.
var RateLimitNames = []string{"requests_per_minute", "requests_per_day", "prompt_tokens_per_minute", "completion_tokens_per_minute", "concurrent_requests"}
