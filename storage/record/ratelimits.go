package record

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
