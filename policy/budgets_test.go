package policy

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func TestAdmitScopes(t *testing.T) {
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	amt := func(a money.Amount) *money.Amount { return &a }
	keyUsed := money.UsageCounters{}.Add(now, 40)
	memberUsed := money.UsageCounters{}.Add(now, 70)
	view := func() storage.LedgerView {
		return storage.LedgerView{
			Now: now, Key: storage.APIKey{Usage: keyUsed}, KeyHeld: 5,
			Member: &storage.Member{Usage: memberUsed}, MemberHeld: 10,
			Workspace: &storage.Workspace{Slug: "w", Usage: memberUsed, BYOKUsage: keyUsed, Budgets: map[storage.BudgetInterval]*storage.WorkspaceBudget{
				storage.BudgetDaily: {Interval: storage.BudgetDaily, Limit: 100},
			}},
			WorkspaceHeld: 10,
		}
	}
	rules := func(scope storage.GuardrailScope, limit money.Amount) *storage.Rules {
		return &storage.Rules{Guardrails: []storage.AppliedGuardrail{{Scope: scope,
			Guardrail: &storage.Guardrail{Name: "G", Limit: amt(limit), ResetInterval: money.IntervalDaily}}}}
	}
	for _, tt := range []struct {
		name   string
		rules  *storage.Rules
		hold   money.Amount
		byok   bool
		source string // "" admits
	}{
		{"workspace room", nil, 20, false, ""},
		{"workspace full", nil, 21, false, "workspace_budget"},
		{"workspace ignores byok", nil, 21, true, ""},
		{"key guardrail room", rules(storage.ScopeAPIKey, 50), 5, false, ""},
		{"key guardrail full", rules(storage.ScopeAPIKey, 50), 6, false, "guardrail_budget"},
		{"member guardrail counts the member", rules(storage.ScopeMember, 85), 6, false, "guardrail_budget"},
		{"member guardrail room", rules(storage.ScopeMember, 85), 5, false, ""},
		{"workspace default checks the member", rules(storage.ScopeWorkspaceDefault, 80), 1, false, "guardrail_budget"},
		{"guardrail without byok skips byok", rules(storage.ScopeAPIKey, 1), 5, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rej := AdmitScopes(view(), tt.rules, tt.hold, tt.byok)
			got := ""
			if rej != nil {
				got = rej.Source
			}
			if got != tt.source {
				t.Fatalf("source %q, want %q (%+v)", got, tt.source, rej)
			}
		})
	}
}
