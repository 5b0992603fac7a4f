package billing

import (
	"math"
	"math/bits"
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// The output clamp: a request that sets no output limit holds the rest of
// the context window (at most the per-request cap), more than a small key
// limit, workspace budget or guardrail limit affords. Rather than refuse
// it, admission lowers the output limit sent upstream to what the tightest
// of those caps still affords, and holds that; the request is refused only
// when its prompt and a minimal completion do not fit. The account's
// balance and in-flight budget never clamp: a request they cannot cover
// is refused, as before.

// MinCompletionTokens is the least output a clamped request is served
// with: a shorter answer is of little use, and OpenAI's Responses API
// refuses a max_output_tokens below 16.
const MinCompletionTokens = 16

// Room is what the budget still affords a new request: its limit less what
// was spent and what running requests hold; zero or less when nothing is
// left.
func (b Budget) Room() money.Amount {
	left, ok := money.AddAmounts(b.Limit, -b.Used)
	if ok {
		left, ok = money.AddAmounts(left, -b.Held)
	}
	if !ok {
		return math.MinInt64 + 1
	}
	return left
}

// exhausted reports whether nothing remains of the budget's limit, holds
// aside: the limit_remaining a client reads is zero or less.
func (b Budget) exhausted() bool { return b.Used >= b.Limit }

// Caps collects the caps that bind one request and keeps the one that
// decides it: the first exhausted one (its "exhausted" message is the
// truth whatever the others hold), else the one with the least room.
type Caps struct {
	tight Budget
	any   bool
}

// Add considers a cap that binds the request.
func (c *Caps) Add(b Budget) {
	switch {
	case !c.any:
		c.tight, c.any = b, true
	case c.tight.exhausted():
	case b.exhausted() || b.Room() < c.tight.Room():
		c.tight = b
	}
}

// Tightest returns the deciding cap; false when no cap binds the request.
func (c *Caps) Tightest() (Budget, bool) { return c.tight, c.any }

// AffordableOutput is the most output tokens each answer of a request of f
// may ask for when its token cost and per-request fee may reach budget: the
// largest n with TokenCost(in, n × choices) + fee <= budget, math.MaxInt64
// when output is free, and -1 when not even the prompt fits.
func AffordableOutput(f RequestFacts, budget money.Amount) int64 {
	fee, err := Cost(Pricing{Request: f.Pricing.Request}, Usage{})
	if err != nil || f.Free {
		if f.Free {
			return math.MaxInt64
		}
		return -1
	}
	left, ok := money.AddAmounts(budget, -fee)
	if !ok || left < 0 {
		return -1
	}
	// TokenCost rounds up to the nano-credit, so it is at most left
	// exactly when the femto-credit cost is at most left's femto-credits.
	hi, lo := bits.Mul64(uint64(left), femtoPerNano)
	avail := femto{hi, lo}
	prompt := femto{}.add(f.Pricing.InputPrice(), f.InputTokens)
	if less(avail, prompt) {
		return -1
	}
	if f.Pricing.Completion <= 0 {
		return math.MaxInt64
	}
	lo, borrow := bits.Sub64(avail.lo, prompt.lo, 0)
	hi, _ = bits.Sub64(avail.hi, prompt.hi, borrow)
	c := uint64(f.Pricing.Completion)
	if hi >= c {
		return math.MaxInt64
	}
	n, _ := divide(hi, lo, c)
	// Each of the answers may run to the limit: the budget covers them all.
	return int64(min(n, math.MaxInt64)) / f.choices()
}

// OutputPlan is how a request runs under the caps that bind it.
type OutputPlan struct {
	// Hold is the tokens and fee held for the costliest attempt at its
	// output limit (without the request's other fixed charges).
	Hold money.Amount
	// Limits are, per attempt, the output limit to send upstream; 0 sends
	// the attempt as the client wrote it. Nil when nothing is clamped.
	Limits []int64
}

// PlanOutput fits a request under tight, the deciding cap of those that
// bind it (Caps), of which extra (fixed charges besides tokens and fees,
// such as a web search) is already spoken for. attempts are the facts of
// each endpoint that may serve it; a fallback may price differently, so
// each attempt gets its own limit and the hold covers the costliest.
//
// An attempt whose estimate fits is left as it is. Without a client
// output limit, and when clamp (the route has an output-limit field), an
// attempt that does not fit is lowered to what the room affords, at most
// its model's output limit, and refused when that is below
// MinCompletionTokens (or the rest of its context window). With the
// client's own limit nothing is lowered: a request that does not fit is
// refused with the numbers. limits is reused for Limits when long enough.
func PlanOutput(attempts []RequestFacts, extra money.Amount, tight Budget, p InFlightPolicy, clamp bool, limits []int64) (OutputPlan, *Rejection) {
	room, ok := money.AddAmounts(tight.Room(), -extra)
	if !ok {
		room = math.MinInt64 + 1
	}
	var plan OutputPlan
	for i, f := range attempts {
		e, err := EstimateRequest(f, p)
		if err != nil {
			return OutputPlan{}, &Rejection{Source: tight.Source, Message: "This request's cost is beyond any amount", RemedyHint: tight.Hint}
		}
		if e.Hold <= room {
			plan.Hold = max(plan.Hold, e.Hold)
			continue
		}
		if tight.exhausted() {
			return OutputPlan{}, &Rejection{Source: tight.Source, Message: tight.Message, RemedyHint: tight.Hint}
		}
		if f.MaxTokens > 0 || !clamp {
			return OutputPlan{}, tooCostly(attempts, room, tight, p)
		}
		n := AffordableOutput(f, room)
		if f.OutputLimit > 0 {
			n = min(n, f.OutputLimit)
		}
		if n < leastOutput(f) {
			return OutputPlan{}, promptTooCostly(f, room, tight)
		}
		if plan.Limits == nil {
			plan.Limits = limits[:0]
			plan.Limits = append(plan.Limits, make([]int64, len(attempts))...)
		}
		plan.Limits[i] = n
		out, _ := f.outputTokens(n)
		tokens, _ := TokenCost(f.Pricing, f.InputTokens, out) // within room, so in range
		fee, _ := Cost(Pricing{Request: f.Pricing.Request}, Usage{})
		plan.Hold = max(plan.Hold, tokens+fee)
	}
	return plan, nil
}

// leastOutput is the smallest clamp worth serving: MinCompletionTokens,
// or the whole rest of a smaller context window.
func leastOutput(f RequestFacts) int64 {
	if rest := f.ContextLength - f.InputTokens; f.ContextLength > 0 && rest < MinCompletionTokens {
		return max(rest, 1)
	}
	return MinCompletionTokens
}

// tooCostly refuses a request whose output limit does not fit, in the
// public service's words, naming the most output every attempt affords.
func tooCostly(attempts []RequestFacts, room money.Amount, tight Budget, p InFlightPolicy) *Rejection {
	f := attempts[0]
	if f.MaxTokens == 0 {
		// A route without an output-limit field (e.g. /completions).
		var most money.Amount
		for _, a := range attempts {
			if e, err := EstimateRequest(a, p); err == nil {
				most = max(most, e.Hold)
			}
		}
		return &Rejection{Source: tight.Source, RemedyHint: tight.Hint,
			Message: "This request requires more credits. It may cost up to " + most.String() +
				" credits, but only " + max(room, 0).String() + " remain"}
	}
	afford := int64(math.MaxInt64)
	for _, a := range attempts {
		afford = min(afford, max(AffordableOutput(a, room), 0))
	}
	return &Rejection{Source: tight.Source, RemedyHint: tight.Hint,
		Message: "This request requires more credits, or fewer max_tokens. You requested up to " +
			strconv.FormatInt(f.MaxTokens, 10) + " tokens, but can only afford " + strconv.FormatInt(afford, 10)}
}

// promptTooCostly refuses a request without an output limit whose prompt
// and a minimal completion do not fit.
func promptTooCostly(f RequestFacts, room money.Amount, tight Budget) *Rejection {
	least := leastOutput(f)
	out, _ := f.outputTokens(least)
	cost, _ := TokenCost(f.Pricing, f.InputTokens, out)
	fee, _ := Cost(Pricing{Request: f.Pricing.Request}, Usage{})
	total, _ := money.AddAmounts(cost, fee)
	return &Rejection{Source: tight.Source, RemedyHint: tight.Hint,
		Message: "This request requires more credits, or a shorter prompt. Its prompt (up to " +
			strconv.FormatInt(f.InputTokens, 10) + " tokens) and a minimal completion of " + strconv.FormatInt(least, 10) +
			" tokens cost up to " + total.String() + " credits, but only " + max(room, 0).String() + " remain"}
}
