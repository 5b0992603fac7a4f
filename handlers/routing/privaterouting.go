package routing

import (
	"errors"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// privateProviderPrefix names a private endpoint as a provider
// ("private:<id>") in generation records and provider preferences.
const privateProviderPrefix = policy.PrivateProviderPrefix

// privateAttempts are the caller's account's enabled private endpoints for
// modelID, as attempts priced by each endpoint's pricing; catalogModel,
// when the catalog has the id, lends its context length and whether it is
// distillable. Memory only,
// except for the lookup of an endpoint's host when its cached addresses
// expired (egress.CacheTTL): an endpoint whose host the customer_egress
// policy refuses is skipped, and the first refusal returned, for the
// caller to answer when no other provider serves the request.
func (rt *Router) privateAttempts(modelID string, catalogModel *catalog.Model, st *pipeline.State) ([]upstream.Attempt, *apierror.Error) {
	id := st.ID
	if rt.Gateway == nil || id == nil || id.Management {
		return nil, nil
	}
	sealer := rt.Gateway.BYOKSealer()
	if sealer == nil {
		return nil, nil
	}
	if st.Store == nil {
		return nil, pipeline.StoreUnavailable() // the account's endpoints are unknown
	}
	eps := st.Store.EnabledEndpointsFor(id.AccountID, modelID)
	if len(eps) == 0 {
		return nil, nil
	}
	var refusal *apierror.Error
	var out []upstream.Attempt
	for _, e := range eps {
		key, err := e.OpenSecret(sealer)
		p, perr := admin.EndpointProvider(e.BaseURL)
		if err != nil || perr != nil {
			rt.log().Error("private endpoint cannot be used; skipping it",
				zap.String("endpoint", e.ID), zap.Error(errors.Join(err, perr)))
			continue
		}
		if apiErr := pinEgress(rt.Gateway.EgressPolicy(), p, e.ID); apiErr != nil {
			rt.log().Warn("private endpoint refused by the egress policy; skipping it",
				zap.String("endpoint", e.ID), zap.String("error", apiErr.Message))
			if refusal == nil {
				refusal = apiErr
			}
			continue
		}
		p.Name, p.Model, p.APIKey = privateProviderPrefix+e.ID, e.UpstreamModel, key
		m := &catalog.Model{ID: modelID, Name: e.Name, Providers: []*catalog.Provider{p}}
		if catalogModel != nil {
			m.ContextLength, m.MaxCompletionTokens = catalogModel.ContextLength, catalogModel.MaxCompletionTokens
			m.Distillable = catalogModel.Distillable
		}
		// The prices were checked when the endpoint was stored.
		m.Pricing.Prompt, _ = billing.ParsePrice(e.Pricing.Prompt)
		m.Pricing.Completion, _ = billing.ParsePrice(e.Pricing.Completion)
		m.Pricing.Request, _ = billing.ParsePrice(e.Pricing.Request)
		out = append(out, upstream.Attempt{Model: m, Provider: p, Key: key})
	}
	return out, refusal
}

// checkEndUser refuses, with 403, a request whose `user` names an end user
// its account deactivated: a memory lookup, before any hold or upstream
// call. A `user` longer than the public API allows gets 400.
func (rt *Router) checkEndUser(st *pipeline.State, route *upstream.Route) *apierror.Error {
	if route.User == "" || rt.Gateway == nil {
		return nil
	}
	if storage.ValidEndUser(route.User) != nil {
		return apierror.BadRequest("user: expected at most 256 characters")
	}
	id := st.ID
	if id == nil {
		return nil
	}
	if st.Store == nil {
		return pipeline.StoreUnavailable()
	}
	if st.Store.EndUserDeactivated(id.AccountID, route.User) {
		return apierror.New(http.StatusForbidden, "End user "+strconv.Quote(route.User)+" is deactivated")
	}
	return nil
}
