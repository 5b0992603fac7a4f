package upstream

import (
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// OutputClamp fits a request to what the caps binding it still afford
// (billing.PlanOutput): a request without an output limit is sent upstream
// with the limit the tightest cap's room affords, and held for that. It
// decides in the admission (admit), whose holds are committed only on the
// figures it read, so that concurrent requests share the room instead of
// each seeing all of it.
type OutputClamp struct {
	route  *Route
	policy billing.InFlightPolicy
	facts  []billing.RequestFacts  // per attempt
	one    [1]billing.RequestFacts // facts' first backing array
	hold   money.Amount            // the hold with every attempt as the client sent it
	extra  money.Amount            // held besides tokens and fees (a web search)
	Limits []int64                 // per attempt, once fitted; nil: none lowered
}

// Init prepares c as the clamp of a request whose admission holds hold,
// of which tokens (estimateAttempts's hold) for the tokens and fees of its
// costliest attempt. The request state holds its clamp (one allocation
// less per request).
func (c *OutputClamp) Init(route *Route, policy billing.InFlightPolicy, hold, tokens money.Amount) {
	*c = OutputClamp{route: route, policy: policy, hold: hold, extra: max(hold-tokens, 0)}
	c.facts = c.one[:0] // most requests have one attempt
	for i := range route.Attempts {
		a := &route.Attempts[i]
		c.facts = append(c.facts, billing.RequestFacts{
			Pricing:       route.HoldPricing(a),
			InputTokens:   route.Prompt.TokensFor(a.Model),
			MaxTokens:     route.MaxTokens,
			Choices:       route.Choices,
			ContextLength: a.Model.ContextLength,
			OutputLimit:   a.Model.MaxCompletionTokens,
			Free:          a.Model.IsFree(),
			BYOK:          a.BYOK,
		})
		route.ServiceFacts(&c.facts[len(c.facts)-1])
	}
}

// Fit returns the request's hold under the caps that bind it in v (the
// key's cap, key being its facts in v; guardrail and workspace budgets;
// byok as for policy.AdmitScopes),
// lowering attempts' output limits when a cap does not cover them; a
// request that does not fit even so is refused.
func (c *OutputClamp) Fit(key billing.KeyFacts, v storage.LedgerView, rules *storage.Rules, byok bool) (money.Amount, *billing.Rejection) {
	c.Limits = nil
	var caps billing.Caps
	if b, ok := key.Cap(byok); ok {
		caps.Add(b)
	}
	policy.ScopeBudgets(v, rules, byok, func(b billing.Budget) bool { caps.Add(b); return true })
	tight, ok := caps.Tightest()
	if !ok {
		return c.hold, nil
	}
	plan, rej := billing.PlanOutput(c.facts, c.extra, tight, c.policy, c.route.clampable(), nil)
	if rej != nil {
		return 0, rej
	}
	c.Limits = plan.Limits
	return plan.Hold + c.extra, nil
}

// Apply gives the attempts their fitted output limits and prepares the
// first attempt again with its own (the meter sends it).
func (c *OutputClamp) Apply() error {
	if c.Limits == nil {
		return nil
	}
	for i, n := range c.Limits {
		c.route.Attempts[i].OutputLimit = n
	}
	return c.route.Prepare(0)
}

// clampable reports whether the route's requests have an output-limit
// field the gateway can set. A Messages request always sets max_tokens,
// which the clamp never lowers.
func (rt *Route) clampable() bool {
	return rt.Kind != dialect.Other
}

// WithOutputLimit sets the attempt's fitted output limit in the body it
// is sent, when admission lowered it, in the field its dialect reads for
// the route (native: as the client's API, else as chat completions).
func (a Attempt) WithOutputLimit(body []byte, kind dialect.Kind, native bool) ([]byte, error) {
	if a.OutputLimit <= 0 {
		return body, nil
	}
	return sjson.SetBytes(body, a.Provider.D().OutputLimitField(kind, native), a.OutputLimit)
}
