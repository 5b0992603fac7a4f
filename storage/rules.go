package storage

import "github.com/tollgate-dev/caddy-tollgate/contentfilter"

// A key's effective rules are the guardrails that apply to it, in the order
// enforcement checks them: its workspace's default guardrail, the
// guardrails assigned to its member (the key's creator_user_id, when that
// user is a member of the organization), then the guardrail assigned to the
// key itself. Every one of them must admit a request; package
// policy decides what they admit, from this plain data.
//
// They are computed once per key and cached in memory; any change to a
// guardrail, an assignment, a member, a workspace or a key bumps a
// generation number, which invalidates every cached entry at once. A
// lookup of a cached entry takes no lock and allocates nothing.

// GuardrailScope says why a guardrail applies to a key.
type GuardrailScope string

const (
	ScopeWorkspaceDefault GuardrailScope = "workspace_default"
	ScopeMember           GuardrailScope = "member"
	ScopeAPIKey           GuardrailScope = "api_key"
)

// AppliedGuardrail is a guardrail that applies to a key, and why.
type AppliedGuardrail struct {
	Scope     GuardrailScope
	Guardrail *Guardrail // the store's snapshot; never modified
}

// Rules are a key's effective guardrails.
type Rules struct {
	gen        uint64
	Guardrails []AppliedGuardrail
	// MemberID is the key's member (empty when the key has none).
	MemberID string
	// Filters are the content filters of the guardrails, in their order;
	// nil when none has any.
	Filters contentfilter.Set
}

// rulesChanged invalidates every cached Rules. Callers hold the kernel's lock (write).
func (s *OrgStore) rulesChanged() { s.rulesGen.Add(1) }

// EffectiveRules returns the key's effective rules from memory.
func (s *OrgStore) EffectiveRules(keyHash string) *Rules {
	if v, ok := s.rules.Load(keyHash); ok {
		if r := v.(*Rules); r.gen == s.rulesGen.Load() {
			return r
		}
	}
	s.k.RLock()
	r := s.computeRules(keyHash)
	s.k.RUnlock()
	s.rules.Store(keyHash, r)
	return r
}

// computeRules builds a key's rules. Callers hold the kernel's lock; the generation is
// stable meanwhile, since it changes only under the write lock.
func (s *OrgStore) computeRules(keyHash string) *Rules {
	r := &Rules{gen: s.rulesGen.Load()}
	k, ok := s.acct.keys.get(keyHash)
	if !ok {
		return r
	}
	gs := s.guardrails[k.AccountID]
	if ws, ok := s.workspaces[k.AccountID][k.WorkspaceID]; ok {
		if g, ok := gs[ws.DefaultGuardrailID]; ok {
			r.Guardrails = append(r.Guardrails, AppliedGuardrail{ScopeWorkspaceDefault, g})
		}
	}
	if k.CreatorUserID != nil {
		if m, ok := s.members[k.AccountID][*k.CreatorUserID]; ok {
			r.MemberID = m.ID
			for _, g := range sortedGuardrails(gs) {
				if _, in := g.Members[m.ID]; in {
					r.Guardrails = append(r.Guardrails, AppliedGuardrail{ScopeMember, g})
				}
			}
		}
	}
	for _, g := range sortedGuardrails(gs) {
		if _, in := g.Keys[keyHash]; in {
			r.Guardrails = append(r.Guardrails, AppliedGuardrail{ScopeAPIKey, g})
		}
	}
	for _, a := range r.Guardrails {
		if f := a.Guardrail.filters; !f.Empty() {
			r.Filters = append(r.Filters, f)
		}
	}
	return r
}

// sortedGuardrails orders guardrails by creation, so that the first
// blocker reported is stable.
func sortedGuardrails(gs map[string]*Guardrail) []*Guardrail {
	out := make([]*Guardrail, 0, len(gs))
	for _, g := range gs {
		out = append(out, g)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].CreatedAt.Before(out[j-1].CreatedAt) ||
			out[j].CreatedAt.Equal(out[j-1].CreatedAt) && out[j].ID < out[j-1].ID); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
