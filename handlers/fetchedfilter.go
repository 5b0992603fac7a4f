package handlers

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/webfetch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
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
	st  *requestState
}

// newFetchedFilter is the filter of the caller's guardrails; nil when
// none is in force.
func newFetchedFilter(st *requestState) (*fetchedFilter, *apierror.Error) {
	set, apiErr := routing.FiltersFor(&st.State)
	if apiErr != nil || set.Empty() {
		return nil, apiErr
	}
	return &fetchedFilter{set: set, st: st}, nil
}

// texts filters each text in place; a block comes back, and the texts
// are then not to be used. A scan that stopped before its end (the text
// too costly for the custom patterns) blocks too: fetched text the
// filters did not see whole does not reach the model.
func (f *fetchedFilter) texts(ts ...*string) *contentfilter.Hit {
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

// tooCostlyToScan is the block of fetched text the scan budget did not
// cover.
var tooCostlyToScan = contentfilter.Hit{Label: "text too costly to scan", Action: contentfilter.Block}

// page filters a fetched page's title and text.
func (f *fetchedFilter) page(p *webfetch.Page) *contentfilter.Hit {
	if p.Err != "" {
		return nil
	}
	return f.texts(&p.Title, &p.Text)
}

// withhold makes a blocked page an error the model is told, without its
// content.
func withhold(p *webfetch.Page, h *contentfilter.Hit) {
	p.Title, p.Text, p.Truncated = "", "", false
	p.Err = "blocked_by_content_filter: the page matched content filter " + strconv.Quote(h.Label) +
		" of guardrail " + strconv.Quote(h.GuardrailName) + "; its content was withheld"
}

// source filters a search result's title and snippet.
func (f *fetchedFilter) source(s *websearch.Source) *contentfilter.Hit {
	return f.texts(&s.Title, &s.Snippet)
}
