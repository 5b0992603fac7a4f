package upstream

import (
	"math"

	"github.com/tollgate-dev/caddy-tollgate/billing"
)

// HoldPricing is attempt a's pricing for admission's hold: per price, the
// dearest any prompt up to the attempt's bound may be charged at PricedAt
// (billing.Pricing.ForHold).
func (rt *Route) HoldPricing(a *Attempt) billing.Pricing {
	p := a.Model.Pricing
	if p.Overrides == nil {
		return p
	}
	bound := rt.Prompt.TokensFor(a.Model)
	if rt.PromptGrows {
		bound = math.MaxInt64
		if c := a.Model.ContextLength; c > 0 {
			bound = c
		}
	}
	return p.ForHold(bound, rt.PricedAt)
}

// ChargePricing is the current attempt's pricing of an answer whose
// prompt had prompt tokens, at PricedAt (billing.Pricing.At).
func (rt *Route) ChargePricing(prompt int64) billing.Pricing {
	return rt.Model.Pricing.At(prompt, rt.PricedAt)
}
