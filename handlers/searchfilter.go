package handlers

import (
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
)

// filterSearchQuery applies the filters to the query a gateway-side
// engine will receive (a search_prompt is not part of the messages).
func filterSearchQuery(st *requestState, plan *searchPlan) *apierror.Error {
	set, apiErr := routing.FiltersFor(&st.State)
	if apiErr != nil || set.Empty() {
		return apiErr
	}
	// The results pass them too, once the search has run (fetchedFilter).
	plan.filter = &fetchedFilter{set: set, st: st}
	if plan.query == "" {
		return nil
	}
	var res contentfilter.Result
	q := set.Text(plan.query, true, &res)
	if apiErr := routing.StoppedError(&res); apiErr != nil {
		return apiErr
	}
	plan.query = q
	st.ContentFlags = routing.AppendFlags(st.ContentFlags, res.Flags)
	return nil
}
