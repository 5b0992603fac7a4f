package admin

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// rateLimits reads the rate_limits member over cur (reqbody.RateLimits);
// present: the member was sent. A bad value is f's error.
func rateLimits(f *reqbody.Fields, cur *storage.RateLimits) (_ *storage.RateLimits, present bool) {
	v, ok := f.Get("rate_limits")
	if !ok {
		return cur, false
	}
	l, e := reqbody.RateLimits(v, cur)
	if e != nil {
		f.FailWith(e)
	}
	return l, true
}

// rateLimitsView is a record's rate_limits: each limit, null when none;
// nil (left out) when the record sets none.
type rateLimitsView struct {
	RequestsPerMinute         *int64 `json:"requests_per_minute"`
	RequestsPerDay            *int64 `json:"requests_per_day"`
	PromptTokensPerMinute     *int64 `json:"prompt_tokens_per_minute"`
	CompletionTokensPerMinute *int64 `json:"completion_tokens_per_minute"`
	ConcurrentRequests        *int64 `json:"concurrent_requests"`
}

func newRateLimitsView(l *storage.RateLimits) *rateLimitsView {
	if !l.Any() {
		return nil
	}
	opt := func(v int64) *int64 {
		if v <= 0 {
			return nil
		}
		return &v
	}
	return &rateLimitsView{opt(l.RequestsPerMinute), opt(l.RequestsPerDay), opt(l.PromptTokensPerMinute),
		opt(l.CompletionTokensPerMinute), opt(l.ConcurrentRequests)}
}

// rateLeftView is one of the calling key's rate limits in GET /key: the
// limit, what is left of it now, and when its window ends (epoch
// milliseconds, as X-RateLimit-Reset; null for concurrent requests).
type rateLeftView struct {
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	Reset     *int64 `json:"reset"`
}

// rateLeft is the key's rate limits with what is left of each at t, by
// name; nil when the key sets none.
func rateLeft(l *storage.RateLimits, u storage.RateUse, t time.Time) map[string]rateLeftView {
	if !l.Any() {
		return nil
	}
	out := map[string]rateLeftView{}
	add := func(name string, limit int64, used money.Amount, iv money.Interval) {
		if limit <= 0 {
			return
		}
		v := rateLeftView{Limit: limit, Remaining: max(limit-int64(used), 0)}
		if iv != money.IntervalNone {
			ms := money.PeriodEnd(iv, t).UnixMilli()
			v.Reset = &ms
		}
		out[name] = v
	}
	add("requests_per_minute", l.RequestsPerMinute, u.Minute.At(money.IntervalMinute, t), money.IntervalMinute)
	add("requests_per_day", l.RequestsPerDay, u.Day.At(money.IntervalDaily, t), money.IntervalDaily)
	add("prompt_tokens_per_minute", l.PromptTokensPerMinute, u.Prompt.At(money.IntervalMinute, t), money.IntervalMinute)
	add("completion_tokens_per_minute", l.CompletionTokensPerMinute, u.Completion.At(money.IntervalMinute, t), money.IntervalMinute)
	add("concurrent_requests", l.ConcurrentRequests, money.Amount(u.Running), money.IntervalNone)
	return out
}
