package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/handlers/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Enforcement of guardrails and workspace budgets on the request path, all
// from memory: the key's effective rules come from the store's cache
// (storage.Store.EffectiveRules), and the budgets' figures from the ledger
// view that Store.Reserve takes under its lock.

// rulesFor returns the caller's effective guardrails; nil (no rule) for
// management keys, anonymous callers or without a store.
func (rt *Router) rulesFor(id *Identity) *storage.Rules {
	if rt.gw == nil || id == nil || id.Management || id.Hash == "" {
		return nil
	}
	store, err := rt.gw.Store()
	if err != nil {
		return nil
	}
	return store.EffectiveRules(id.Hash)
}

// guardrailBlocked is the 403 of a guardrail that refuses a request.
func guardrailBlocked(g *storage.Guardrail, what string) *APIError {
	return &APIError{Status: http.StatusForbidden,
		Message:  what + " is not allowed by guardrail " + strconv.Quote(g.Name),
		Metadata: map[string]any{"guardrail_id": g.ID, "guardrail_name": g.Name}}
}

// checkModel refuses a model that a guardrail does not admit.
func checkModel(rules *storage.Rules, modelID string) *APIError {
	if g := rules.ModelBlocker(modelID); g != nil {
		return guardrailBlocked(g, "Model "+strconv.Quote(modelID))
	}
	return nil
}

// allowedAttempts keeps the attempts whose provider every guardrail admits;
// when none is left it returns the 403 of the guardrail that removed the
// last. The slice is filtered in place.
func allowedAttempts(rules *storage.Rules, attempts []Attempt) ([]Attempt, *APIError) {
	if rules == nil || len(rules.Guardrails) == 0 || len(attempts) == 0 {
		return attempts, nil
	}
	var blocked *APIError
	out := attempts[:0]
	for _, a := range attempts {
		if g := rules.ProviderBlocker(a.Provider.Name); g != nil {
			blocked = guardrailBlocked(g, "Provider "+strconv.Quote(a.Provider.Name))
			continue
		}
		if g, why := rules.DataPolicyBlocker(attemptEndpoint(a)); g != nil {
			blocked = dataPolicyBlocked(g, a.Provider.Name, why)
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, blocked
	}
	return out, nil
}

// dataPolicyBlocked is the 403 of a guardrail whose data policy a provider
// does not meet.
func dataPolicyBlocked(g *storage.Guardrail, provider, why string) *APIError {
	return &APIError{Status: http.StatusForbidden,
		Message:  "Provider " + strconv.Quote(provider) + " does not meet guardrail " + strconv.Quote(g.Name) + ": " + why,
		Metadata: map[string]any{"guardrail_id": g.ID, "guardrail_name": g.Name}}
}

// endpointOf states the catalog's data-policy facts of provider p serving
// m for the guardrails' decision. A private endpoint is the account's own
// deployment and meets every data policy. declaredZDR is a BYOK
// credential's declared_zdr: true makes the endpoint ZDR, false makes it
// not ZDR, nil keeps the provider's facts.
func endpointOf(m *catalog.Model, p *catalog.Provider, declaredZDR *bool) storage.Endpoint {
	dp := p.DataPolicy
	e := storage.Endpoint{
		Model:     m.ID,
		Free:      m.IsFree() || m.Pricing.IsFree(),
		ZDR:       dp.ZDR,
		Trains:    !dp.NoDataCollection,
		Publishes: !dp.NoPublication,
		Region:    dp.Region,
		Own:       strings.HasPrefix(p.Name, privateProviderPrefix),
	}
	if declaredZDR != nil {
		e.ZDR = *declaredZDR
	}
	return e
}

func attemptEndpoint(a Attempt) storage.Endpoint {
	var declared *bool
	if a.BYOK {
		declared = a.DeclaredZDR
	}
	return endpointOf(a.Model, a.Provider, declared)
}

// admitsModel reports whether the rules let the caller use m through one
// of the providers it can reach (for the model lists); usable also
// returns the declared_zdr of the BYOK credential that reaches a provider.
func admitsModel(rules *storage.Rules, m *catalog.Model, usable func(*catalog.Provider) (bool, *bool)) bool {
	if rules == nil {
		return true
	}
	if rules.ModelBlocker(m.ID) != nil {
		return false
	}
	for _, p := range m.Providers {
		ok, declaredZDR := usable(p)
		if ok && rules.ProviderBlocker(p.Name) == nil && blockerOf(rules.DataPolicyBlocker(endpointOf(m, p, declaredZDR))) == nil {
			return true
		}
	}
	return false
}

func blockerOf(g *storage.Guardrail, _ string) *storage.Guardrail { return g }

// admitScopes checks the budgets of the key's guardrails and workspace,
// in the order of the public API's budget scopes: the workspace default
// guardrail (against the member's total, then the key's), member
// guardrails, the key's guardrail, then the workspace budgets. byok says
// whether the request spends the caller's own provider credits.
func admitScopes(v storage.LedgerView, rules *storage.Rules, hold money.Amount, byok bool) *billing.Rejection {
	var rej *billing.Rejection
	scopeBudgets(v, rules, byok, func(b billing.Budget) bool {
		rej = billing.AdmitBudget(hold, b)
		return rej == nil
	})
	return rej
}

// scopeBudgets calls yield with each guardrail and workspace budget that
// binds the request, in admitScopes' order, until it returns false.
func scopeBudgets(v storage.LedgerView, rules *storage.Rules, byok bool, yield func(billing.Budget) bool) {
	if rules != nil {
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
					return
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
				return
			}
		}
	}
	if ws := v.Workspace; ws != nil && (!byok || ws.IncludeBYOKInBudgets) {
		for _, iv := range []storage.BudgetInterval{storage.BudgetDaily, storage.BudgetWeekly, storage.BudgetMonthly, storage.BudgetLifetime} {
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

// usableBy returns whether the caller reaches a provider of m: through one
// of its workspace's BYOK credentials (which then serves it, with its
// declared_zdr), or with the operator's key.
func (rt *Router) usableBy(m *catalog.Model, id *Identity) func(*catalog.Provider) (bool, *bool) {
	byok := map[*catalog.Provider]*storage.Credential{}
	rt.byokCredentials(m, id, func(p *catalog.Provider, c storage.Credential, _ *storage.Sealer) bool {
		byok[p] = &c
		return true
	})
	return func(p *catalog.Provider) (bool, *bool) {
		if c, ok := byok[p]; ok {
			return true, c.DeclaredZDR
		}
		return operatorUsable(p), nil
	}
}
