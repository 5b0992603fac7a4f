package billing

import (
	"errors"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Pricing is what a model's endpoint charges.
type Pricing struct {
	Prompt     Price // per input token
	Completion Price // per output token
	Request    Price // per request
	WebSearch  Price // per search result
}

// IsFree reports whether nothing about the endpoint costs money.
func (p Pricing) IsFree() bool {
	return p.Prompt == 0 && p.Completion == 0 && p.Request == 0 && p.WebSearch == 0
}

// HasTokenPrice reports whether the endpoint prices tokens; a request with
// no token price is not held by the in-flight budget (SPEC.md 8.2 rule 1).
func (p Pricing) HasTokenPrice() bool { return p.Prompt > 0 || p.Completion > 0 }

// Usage is what one request consumed.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	SearchResults    int64
	// Extra is a charge computed elsewhere (X search items), added as is.
	Extra money.Amount
}

// ErrCostRange is returned for a cost beyond storage.MaxAmount: the token
// counts or prices are too large to price, and nothing is rounded down or
// wrapped to make them fit.
var ErrCostRange = errors.New("cost out of range")

// Cost prices a request exactly: tokens × prices + the per-request fee +
// search results, rounded once to the nano-credit.
func Cost(p Pricing, u Usage) (money.Amount, error) {
	var f femto
	f = f.add(p.Prompt, u.PromptTokens)
	f = f.add(p.Completion, u.CompletionTokens)
	f = f.add(p.Request, 1)
	f = f.add(p.WebSearch, u.SearchResults)
	a, ok := f.amount()
	if ok {
		a, ok = money.AddAmounts(a, u.Extra)
	}
	if !ok {
		return 0, ErrCostRange
	}
	return a, nil
}

// TokenCost prices input and output tokens only, rounded up so that an
// estimate is never below the exact cost.
func TokenCost(p Pricing, in, out int64) (money.Amount, error) {
	var f femto
	f = f.add(p.Prompt, in)
	f = f.add(p.Completion, out)
	a, ok := f.amount()
	if !ok {
		return 0, ErrCostRange
	}
	// amount() rounds half up; make the estimate a ceiling.
	if back := (femto{}).add(Price(femtoPerNano), int64(a)); less(back, f) {
		if a == money.MaxAmount {
			return 0, ErrCostRange
		}
		a++
	}
	return a, nil
}

func less(a, b femto) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// EstimateTokens estimates a request's input tokens from its body size:
// one token per three bytes, an upper bound for English and most code (the
// JSON around the text only adds to it).
func EstimateTokens(bodyBytes int) int64 { return int64(bodyBytes+2) / 3 }

// EstimateTextTokens estimates the tokens of delivered text when a stream
// ends without a usage report: one token per four bytes, rounded up.
func EstimateTextTokens(textBytes int) int64 { return int64(textBytes+3) / 4 }
