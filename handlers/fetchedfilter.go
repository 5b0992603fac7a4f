package handlers

import (
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
)

// What the gateway brings in for the model (pages of the web-fetch
// plugin and server tool, the results of a gateway-side web search)
// passes the caller's content filters as the prompt did: a block refuses
// the request before any provider sees it (the server tool, whose loop is
// under way, tells the model the page was withheld instead), a redaction
// rewrites the text the model and the citations get, a flag is recorded
// with the generation. It is not the user's text (scan_scope user_only).

// fetchedFilter is a request's filters for fetched text; nil: none.
type fetchedFilter struct {
	set contentfilter.Set
	st  *pipeline.State
}

// newFetchedFilter is the filter of the caller's guardrails; nil when
// none is in force.
func newFetchedFilter(st *pipeline.State) (*fetchedFilter, *apierror.Error) {
	set, apiErr := routing.FiltersFor(st)
	if apiErr != nil || set.Empty() {
		return nil, apiErr
	}
	return &fetchedFilter{set: set, st: st}, nil
}

// guardrails are a request's guardrails as the plugins see them
// (plugin.Guardrails); one pointer, so that handing them to the plugins
// allocates nothing for a request that fetches no text.
type guardrails struct{ st *pipeline.State }

// FetchedFilter implements plugin.Guardrails: the filter of the caller's
// guardrails for the text a plugin brings in; nil when none is in force.
func (g guardrails) FetchedFilter() (plugin.TextFilter, *apierror.Error) {
	f, apiErr := newFetchedFilter(g.st)
	if f == nil {
		return nil, apiErr // no filter: an interface without a value
	}
	return f, nil
}

// Filter implements plugin.TextFilter: it filters each text in place; a
// block comes back, and the texts are then not to be used. A scan that
// stopped before its end (the text too costly for the custom patterns)
// blocks too: fetched text the filters did not see whole does not reach
// the model.
func (f *fetchedFilter) Filter(ts ...*string) *contentfilter.Hit {
	if f == nil {
		return nil
	}
	var res contentfilter.Result
	for _, t := range ts {
		*t = f.set.Text(*t, false, &res)
		if res.Block != nil {
			return res.Block
		}
		if res.Stopped() {
			return &tooCostlyToScan
		}
	}
	f.st.ContentFlags = routing.AppendFlags(f.st.ContentFlags, res.Flags)
	return nil
}

// Refusal implements plugin.TextFilter.
func (f *fetchedFilter) Refusal(block *contentfilter.Hit) *apierror.Error {
	return routing.BlockedError(block)
}

// FilterQuery implements plugin.TextFilter: the query a gateway-side
// engine will receive (a search_prompt is not part of the messages)
// passes the filters as the user's own text.
func (f *fetchedFilter) FilterQuery(q *string) *apierror.Error {
	var res contentfilter.Result
	out := f.set.Text(*q, true, &res)
	if apiErr := routing.StoppedError(&res); apiErr != nil {
		return apiErr
	}
	*q = out
	f.st.ContentFlags = routing.AppendFlags(f.st.ContentFlags, res.Flags)
	return nil
}

// tooCostlyToScan is the block of fetched text the scan budget did not
// cover.
var tooCostlyToScan = contentfilter.Hit{Label: "text too costly to scan", Action: contentfilter.Block}

// Interface guards
var (
	_ plugin.Guardrails = guardrails{}
	_ plugin.TextFilter = (*fetchedFilter)(nil)
)
