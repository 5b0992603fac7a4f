package billing

import "github.com/tollgate-dev/caddy-tollgate/money"

// Budget is a spending cap besides the account's balance: the key's cap
// (KeyFacts.Cap), a workspace budget or a guardrail's limit, over its
// current interval.
type Budget struct {
	// Source is the limit_source suffix: "key_limit", "workspace_budget"
	// or "guardrail_budget".
	Source  string
	Limit   money.Amount
	Used    money.Amount // spent in the current interval
	Held    money.Amount // holds of running requests under the budget
	Message string
	Hint    string
}

// AdmitBudget refuses a request whose hold does not fit under the budget
// with the running requests' holds, or when the budget is already spent.
// It returns nil to admit.
func AdmitBudget(hold money.Amount, b Budget) *Rejection {
	if !fits(b.Limit, b.Used, b.Held, hold) {
		return &Rejection{Source: b.Source, Message: b.Message, RemedyHint: b.Hint}
	}
	return nil
}
