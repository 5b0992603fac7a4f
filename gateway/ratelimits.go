package gateway

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
)

// RateWant is what a request takes from a rate limit: one request, and at
// most these tokens (the prompt's count and the output it may produce).
type RateWant struct {
	Prompt, Completion int64
}

// concurrencyRetry is the Retry-After of a refused concurrent request: a
// running one may end at any time.
const concurrencyRetry = time.Second

// CheckRateLimits applies the rate limits of the view's key, its
// workspace and its account (the account's own, else defaults) to a
// request that takes w; it returns the scopes the request counts on, or
// the first limit it would pass. A limit lowered below what is used
// refuses until the window ends; nothing is refunded.
func CheckRateLimits(v *storage.LedgerView, defaults *storage.RateLimits, w RateWant) (storage.RateHold, *RateLimited) {
	h := storage.RateHold{Prompt: w.Prompt, Completion: w.Completion}
	acct := v.Account.RateLimits
	if acct == nil {
		acct = defaults
	}
	var ws *storage.RateLimits
	if v.Workspace != nil {
		ws = v.Workspace.RateLimits
	}
	if rl := checkScope(v.Key.RateLimits, &v.KeyRate, "key", w, v.Now); rl != nil {
		return h, rl
	}
	if rl := checkScope(ws, &v.WorkspaceRate, "workspace", w, v.Now); rl != nil {
		return h, rl
	}
	if rl := checkScope(acct, &v.AccountRate, "account", w, v.Now); rl != nil {
		return h, rl
	}
	if v.Key.RateLimits.Any() {
		h.On |= levels.RateOnKey
	}
	if ws.Any() {
		h.On |= levels.RateOnWorkspace
	}
	if acct.Any() {
		h.On |= levels.RateOnAccount
	}
	return h, nil
}

// checkScope applies one scope's limits l to its use u at t.
func checkScope(l *storage.RateLimits, u *storage.RateUse, scope string, w RateWant, t time.Time) *RateLimited {
	if !l.Any() {
		return nil
	}
	minute := money.PeriodEnd(money.IntervalMinute, t)
	if rl := passes(l.RequestsPerMinute, u.Minute.At(money.IntervalMinute, t), 1, minute, scope, "requests_per_minute"); rl != nil {
		return rl
	}
	if rl := passes(l.RequestsPerDay, u.Day.At(money.IntervalDaily, t), 1, money.PeriodEnd(money.IntervalDaily, t), scope, "requests_per_day"); rl != nil {
		return rl
	}
	if rl := passes(l.PromptTokensPerMinute, u.Prompt.At(money.IntervalMinute, t), w.Prompt, minute, scope, "prompt_tokens_per_minute"); rl != nil {
		return rl
	}
	if rl := passes(l.CompletionTokensPerMinute, u.Completion.At(money.IntervalMinute, t), w.Completion, minute, scope, "completion_tokens_per_minute"); rl != nil {
		return rl
	}
	return passes(l.ConcurrentRequests, money.Amount(u.Running), 1, t.Add(concurrencyRetry), scope, "concurrent_requests")
}

// passes is the refusal of a request that takes want where used of limit
// (0: none) is taken until reset; nil when it fits.
func passes(limit int64, used money.Amount, want int64, reset time.Time, scope, name string) *RateLimited {
	if limit <= 0 || int64(used) <= limit-want {
		return nil
	}
	return &RateLimited{Limit: limit, Remaining: max(limit-int64(used), 0), Reset: reset, Scope: scope + "_" + name}
}
