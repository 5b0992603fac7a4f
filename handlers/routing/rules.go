package routing

import (
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The handlers' side of guardrail enforcement: the caller's effective rules
// come from the store's cache (storage.Store.EffectiveRules), package
// policy decides what they admit, and its refusals become API errors here.

// RulesFor returns the caller's effective guardrails from the request's
// store; nil (no rule) for management keys and anonymous callers. It
// fails closed: without a store the rules are unknown, and a request is
// never served as if it had none (503).
func RulesFor(st *pipeline.State) (*storage.Rules, *apierror.Error) {
	id := st.ID
	if id == nil || id.Management || id.Hash == "" {
		return nil, nil
	}
	if st.Store == nil {
		return nil, pipeline.StoreUnavailable()
	}
	return st.Store.EffectiveRules(id.Hash), nil
}

// RefusalError is the API error of a policy refusal (nil for none).
func RefusalError(r *policy.Refusal) *apierror.Error {
	if r == nil {
		return nil
	}
	return &apierror.Error{Status: r.Status, Message: r.Message, Metadata: r.Metadata}
}

// attemptEndpoint states an attempt's endpoint for the policy: a BYOK
// credential's declared_zdr applies to the attempts it serves only.
func attemptEndpoint(a upstream.Attempt) policy.Endpoint {
	var declared *bool
	if a.BYOK {
		declared = a.DeclaredZDR
	}
	return policy.EndpointOf(a.Model, a.Provider, declared)
}

// usableBy returns whether the caller reaches a provider of m: through one
// of its workspace's BYOK credentials (which then serves it, with its
// declared_zdr), or with the operator's key.
func (rt *Router) usableBy(m *catalog.Model, st *pipeline.State) func(*catalog.Provider) (bool, *bool) {
	byok := map[*catalog.Provider]*storage.Credential{}
	rt.byokCredentials(m, st, func(p *catalog.Provider, c storage.Credential, _ *storage.Sealer) bool {
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
