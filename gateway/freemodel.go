package gateway

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// FreeModelLimits are the request caps on models whose id ends in ":free",
// per account.
type FreeModelLimits struct {
	// PerMinute caps requests in any minute. Default 20.
	PerMinute int64 `json:"per_minute,omitempty"`
	// PerDay caps requests per UTC day for accounts below PaidThreshold.
	// Default 50.
	PerDay int64 `json:"per_day,omitempty"`
	// PerDayPaid caps requests per UTC day once the account has purchased
	// at least PaidThreshold credits. Default 1000.
	PerDayPaid int64 `json:"per_day_paid,omitempty"`
	// PaidThreshold is the all-time purchase that unlocks PerDayPaid.
	// Default 9: the advertised 10 less a margin for rounding and fees.
	PaidThreshold money.Amount `json:"paid_threshold,omitempty"`
}

// WithDefaults fills unset limits with their defaults: 20 a minute, 50 a
// day, 1000 a day once 9 credits were bought.
func (l FreeModelLimits) WithDefaults() FreeModelLimits {
	if l.PerMinute == 0 {
		l.PerMinute = 20
	}
	if l.PerDay == 0 {
		l.PerDay = 50
	}
	if l.PerDayPaid == 0 {
		l.PerDayPaid = 1000
	}
	if l.PaidThreshold == 0 {
		l.PaidThreshold = 9 * money.AmountScale
	}
	return l
}

// DailyLimit is the account's free-model requests per UTC day; the tier
// follows credits purchased, not is_free_tier.
func (l FreeModelLimits) DailyLimit(a storage.Account) int64 {
	if a.CreditsPurchased >= l.PaidThreshold {
		return l.PerDayPaid
	}
	return l.PerDay
}

// RateLimited is a platform rate-limit refusal: a 429 whose
// X-RateLimit-* headers and Retry-After say which limit and until when.
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
