package billing

import (
	"math"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// InFlightPolicy configures the in-flight spending budget: how much of a
// prepaid account's balance its running requests may hold at once.
type InFlightPolicy struct {
	// Fraction of the balance that may be held at once, in parts per million.
	FractionPPM int64
	// Ceiling bounds the budget whatever the balance.
	Ceiling money.Amount
	// PerRequestCap bounds one request's estimate, and is the estimate of a
	// request that does not set max_tokens.
	PerRequestCap money.Amount
	// SettlementWindow is how long a finished request's actual cost stays
	// held before it is released.
	SettlementWindow time.Duration
	// BalanceThreshold: accounts at or above it are not subject to the budget.
	BalanceThreshold money.Amount
	// EstablishedUsage: accounts whose all-time usage reached it have an
	// established spending history and are not subject to the budget; zero
	// applies the budget to every account below the threshold.
	EstablishedUsage money.Amount
}

// Budget is the in-flight budget of an account with this balance.
func (p InFlightPolicy) Budget(balance money.Amount) money.Amount {
	if balance <= 0 {
		return 0
	}
	b, ok := mulDiv(int64(balance), p.FractionPPM, 1_000_000)
	if !ok {
		// The fraction of the balance is beyond any Amount, so beyond the
		// ceiling too.
		return p.Ceiling
	}
	return min(money.Amount(b), p.Ceiling)
}

// mulDiv computes a*b/c exactly for non-negative inputs and a positive c,
// and reports false when the quotient does not fit an int64.
func mulDiv(a, b, c int64) (int64, bool) {
	var f femto
	f = f.add(Price(a), b)
	if f.hi >= uint64(c) {
		return 0, false
	}
	q, _ := divide(f.hi, f.lo, uint64(c))
	if q > 1<<63-1 {
		return 0, false
	}
	return int64(q), true
}

// Estimate is what admission holds for a request.
type Estimate struct {
	// Hold is the amount reserved against the balance and the key cap: an
	// upper bound of the request's cost.
	Hold money.Amount
	// InFlight is the amount counted against the in-flight budget; zero when
	// the budget does not apply to the request.
	InFlight money.Amount
}

// RequestFacts are what admission knows about a request before it runs.
type RequestFacts struct {
	Pricing     Pricing
	InputTokens int64 // estimated
	MaxTokens   int64 // 0: not set by the client
	// Choices is how many answers the request asks for (chat's n), each
	// up to MaxTokens; 0 counts as 1.
	Choices int64
	// ContextLength bounds output when MaxTokens is unset (0: unknown).
	ContextLength int64
	// OutputLimit is the model's max_completion_tokens (0: unknown): a
	// clamped output limit never exceeds it (PlanOutput).
	OutputLimit int64
	Free        bool // a ":free" model
	BYOK        bool // served by the caller's own provider key
	// NoOutput: the route produces no output tokens (rerank, images):
	// the hold is the prompt's tokens, not the context window's.
	NoOutput bool
	// Units are the most items the request may use of those priced per
	// item (search units, documents, images): held at their prices.
	Units Usage
}

// EstimateRequest computes the hold of a request. Balance and key caps hold
// the token cost for the input plus max_tokens (or, unset, the rest of the
// context window, bounded by the per-request cap) plus the request fee; the
// in-flight budget holds the token estimate bounded by the per-request cap,
// or the cap itself when max_tokens is unset.
//
// BYOK requests hold too, for keys that count BYOK usage against their cap,
// but never count against the in-flight budget; free models hold nothing.
// A hold beyond storage.MaxAmount is ErrCostRange, never saturated.
func EstimateRequest(f RequestFacts, p InFlightPolicy) (Estimate, error) {
	if f.Free {
		return Estimate{}, nil
	}
	var e Estimate
	fee, err := Cost(Pricing{Request: f.Pricing.Request}, Usage{})
	if err != nil {
		return Estimate{}, err
	}
	var tokens money.Amount
	if f.NoOutput {
		if tokens, err = TokenCost(f.Pricing, f.InputTokens, 0); err != nil {
			return Estimate{}, err
		}
		var items money.Amount
		if items, err = ItemsCost(f.Pricing, f.Units); err != nil {
			return Estimate{}, err
		}
		e.InFlight = min(tokens, p.PerRequestCap)
		var ok bool
		if tokens, ok = money.AddAmounts(tokens, items); !ok {
			return Estimate{}, ErrCostRange
		}
	} else if f.MaxTokens > 0 {
		// Refused when out of range: the client asked for the tokens.
		out, ok := f.outputTokens(f.MaxTokens)
		if !ok {
			return Estimate{}, ErrCostRange
		}
		if tokens, err = TokenCost(f.Pricing, f.InputTokens, out); err != nil {
			return Estimate{}, err
		}
		e.InFlight = min(tokens, p.PerRequestCap)
	} else {
		e.InFlight = p.PerRequestCap
		tokens = p.PerRequestCap
		if out, ok := f.outputTokens(f.ContextLength - f.InputTokens); ok && out > 0 {
			// A cost beyond any Amount is beyond the cap too.
			if c, err := TokenCost(f.Pricing, f.InputTokens, out); err == nil {
				tokens = min(c, tokens)
			}
		}
	}
	var ok bool
	if e.Hold, ok = money.AddAmounts(tokens, fee); !ok {
		return Estimate{}, ErrCostRange
	}
	if !f.Pricing.HasTokenPrice() || f.BYOK {
		e.InFlight = 0
	}
	return e, nil
}

// choices is the number of answers, at least 1.
func (f RequestFacts) choices() int64 { return max(f.Choices, 1) }

// outputTokens is the most output tokens the request may produce when each
// answer may have perAnswer; ok is false past an int64.
func (f RequestFacts) outputTokens(perAnswer int64) (int64, bool) {
	n := f.choices()
	if perAnswer > 0 && perAnswer > math.MaxInt64/n {
		return 0, false
	}
	return perAnswer * n, true
}

// AccountFacts are an account's figures at admission.
type AccountFacts struct {
	Balance      money.Amount // purchased - charged
	Held         money.Amount // holds of running requests
	InFlightHeld money.Amount // in-flight holds plus settling costs
	Usage        money.Amount // all-time charged (spending history)
	BYOKUsage    money.Amount // all-time BYOK charges, not paid in credits
	Prepaid      bool
	NextRelease  time.Duration // until the earliest settling cost is released; 0: none
}

// KeyFacts are a key's figures at admission.
type KeyFacts struct {
	Limit       *money.Amount
	CapUsage    money.Amount // usage counted against the cap this period
	Held        money.Amount // holds of the key's running requests
	LimitResets bool
	IncludeBYOK bool // BYOK usage counts against the cap
}

// Cap is the key's cap as a Budget, and whether it binds a request; a
// BYOK request only when the key counts BYOK usage.
func (k KeyFacts) Cap(byok bool) (Budget, bool) {
	if k.Limit == nil || (byok && !k.IncludeBYOK) {
		return Budget{}, false
	}
	hint := "Raise the key's limit"
	if k.LimitResets {
		hint += " or wait for its limit_reset"
	}
	return Budget{Source: "key_limit", Limit: *k.Limit, Used: k.CapUsage, Held: k.Held,
		Message: "This API key's credit limit is exhausted", Hint: hint + "."}, true
}

// Rejection says why admission refused a request.
type Rejection struct {
	// Source is the limit_source suffix: "credits", "key_limit",
	// "in_flight_budget".
	Source string
	// Reason is the metadata reason, when the refusal has one
	// (weight_exceeds_budget, in_flight_budget_exhausted).
	Reason     string
	Message    string
	RemedyHint string
	RetryAfter time.Duration // zero: no Retry-After header
}

// Admit decides whether a request with estimate e may start, in the order a
// client can act on: the key's cap, the account balance, then the in-flight
// budget. It returns nil to admit.
//
// A prepaid account's zero or negative balance refuses every request that
// spends credits, free models included; BYOK requests spend none,
// and enterprise, subscription and invoiced accounts are billed after use.
func Admit(e Estimate, f RequestFacts, acct AccountFacts, key KeyFacts, p InFlightPolicy) *Rejection {
	if b, ok := key.Cap(f.BYOK); ok {
		if rej := AdmitBudget(e.Hold, b); rej != nil {
			return rej
		}
	}
	// Every counter a charge lands in (key, workspace, member) is at most
	// the account's all-time charges, so this keeps them all in range.
	if _, ok := money.SumAmounts(acct.Usage, acct.BYOKUsage, acct.Held, e.Hold); !ok {
		return &Rejection{Source: "credits", Message: "This request's hold would take the account's usage beyond " + money.MaxAmount.String() + " credits",
			RemedyHint: "Lower max_tokens."}
	}
	if f.BYOK {
		return nil
	}
	if !acct.Prepaid {
		// Enterprise, subscription and invoiced accounts are billed after use.
		return nil
	}
	available, ok := money.AddAmounts(acct.Balance, -acct.Held)
	if acct.Balance <= 0 || !ok || available < e.Hold {
		return InsufficientCredits()
	}
	if e.InFlight == 0 || acct.Balance >= p.BalanceThreshold ||
		(p.EstablishedUsage > 0 && acct.Usage >= p.EstablishedUsage) {
		return nil
	}
	budget := p.Budget(acct.Balance)
	if e.InFlight > budget {
		return &Rejection{Source: "credits", Reason: "weight_exceeds_budget",
			Message:    "This request's estimated cost exceeds the whole in-flight budget",
			RemedyHint: "Lower max_tokens or the prompt size, or add credits."}
	}
	if !fits(budget, acct.InFlightHeld, e.InFlight) {
		retry := acct.NextRelease
		if retry <= 0 {
			retry = time.Second
		}
		return &Rejection{Source: "in_flight_budget", Reason: "in_flight_budget_exhausted",
			Message:    "Running and recently completed requests fill the in-flight budget",
			RemedyHint: "Wait for Retry-After and retry.", RetryAfter: retry}
	}
	return nil
}

// InsufficientCredits is the refusal of a request a prepaid account's
// balance cannot cover.
func InsufficientCredits() *Rejection {
	return &Rejection{Source: "credits", Message: "Insufficient credits: the balance cannot cover this request",
		RemedyHint: "Add credits to the account, or lower max_tokens."}
}

// fits reports whether the amounts add up to at most limit; a sum beyond
// storage.MaxAmount is beyond any limit. An exhausted limit fits nothing.
func fits(limit, used money.Amount, more ...money.Amount) bool {
	if used >= limit {
		return false
	}
	sum := used
	for _, m := range more {
		var ok bool
		if sum, ok = money.AddAmounts(sum, m); !ok {
			return false
		}
	}
	return sum <= limit
}
