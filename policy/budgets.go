package policy

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Budgets of the key's guardrails and workspace, for admission: their
// figures come from the ledger view that the store's reservation takes
// under its lock, so the decision reads every level at one instant.

// AdmitScopes checks the budgets of the key's guardrails and workspace,
// in the order of the public API's budget scopes: the workspace default
// guardrail (against the member's total, then the key's), member
// guardrails, the key's guardrail, then the workspace budgets. byok says
// whether the request spends the caller's own provider credits.
func AdmitScopes(v storage.LedgerView, rules *storage.Rules, hold money.Amount, byok bool) *billing.Rejection {
	var rej *billing.Rejection
	ScopeBudgets(v, rules, byok, func(b billing.Budget) bool {
		rej = billing.AdmitBudget(hold, b)
		return rej == nil
	})
	return rej
}

// ScopeBudgets calls yield with each guardrail and workspace budget that
// binds the request, in AdmitScopes' order, until it returns false.
func ScopeBudgets(v storage.LedgerView, rules *storage.Rules, byok bool, yield func(billing.Budget) bool) {
	if rules != nil && !guardrailBudgets(v, rules, byok, yield) {
		return
	}
	workspaceBudgets(v, byok, yield)
}

// guardrailBudgets yields the budgets of the key's guardrails; false when
// yield stopped.
func guardrailBudgets(v storage.LedgerView, rules *storage.Rules, byok bool, yield func(billing.Budget) bool) bool {
	for _, a := range rules.Guardrails {
		g := a.Guardrail
		if g.Limit == nil || (byok && !g.IncludeBYOKInBudgets) {
			continue
		}
		perMember := a.Scope == storage.ScopeMember || a.Scope == storage.ScopeWorkspaceDefault
		if perMember && v.Member != nil {
			used := v.Member.Usage.In(g.ResetInterval, v.Now)
			if g.IncludeBYOKInBudgets {
				used = money.SpendingSum(used, v.Member.BYOKUsage.In(g.ResetInterval, v.Now))
			}
			if !yield(guardrailBudget(g, used, v.MemberHeld, "member")) {
				return false
			}
		}
		if a.Scope == storage.ScopeMember {
			continue
		}
		used := v.Key.Usage.In(g.ResetInterval, v.Now)
		if g.IncludeBYOKInBudgets {
			used = money.SpendingSum(used, v.Key.BYOKUsage.In(g.ResetInterval, v.Now))
		}
		if !yield(guardrailBudget(g, used, v.KeyHeld, "API key")) {
			return false
		}
	}
	return true
}

// workspaceIntervals are the workspace budgets' intervals, in the order
// they are checked.
var workspaceIntervals = [...]storage.BudgetInterval{storage.BudgetDaily, storage.BudgetWeekly, storage.BudgetMonthly, storage.BudgetLifetime}

// workspaceBudgets yields the budgets of the key's workspace.
func workspaceBudgets(v storage.LedgerView, byok bool, yield func(billing.Budget) bool) {
	ws := v.Workspace
	if ws == nil || (byok && !ws.IncludeBYOKInBudgets) {
		return
	}
	for _, iv := range workspaceIntervals {
		b, ok := ws.Budgets[iv]
		if !ok {
			continue
		}
		budget := billing.Budget{
			Source: "workspace_budget", Limit: b.Limit, Used: ws.BudgetUsage(iv, v.Now), Held: v.WorkspaceHeld,
			Message: "Workspace " + strconv.Quote(ws.Slug) + " has reached its " + string(iv) + " budget",
			Hint:    "Raise the workspace's " + string(iv) + " budget" + resetHint(iv != storage.BudgetLifetime),
		}
		if !yield(budget) {
			return
		}
	}
}

func guardrailBudget(g *storage.Guardrail, used, held money.Amount, per string) billing.Budget {
	return billing.Budget{
		Source: "guardrail_budget", Limit: *g.Limit, Used: used, Held: held,
		Message: "Guardrail " + strconv.Quote(g.Name) + " budget is exhausted for this " + per,
		Hint:    "Raise the guardrail's limit_usd, or unassign it" + resetHint(true),
	}
}

func resetHint(resets bool) string {
	if resets {
		return ", or wait for the interval to reset."
	}
	return "."
}
