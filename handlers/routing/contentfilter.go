package routing

import (
	"context"
	"net/http"
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The pipeline's content filter stage: the caller's guardrails' filters
// (package contentfilter) run once per request on the body as the client
// sent it, before web search, routing and admission, so a blocked request
// reaches no provider and holds nothing, and every attempt and dialect
// translation starts from the redacted body. A gateway-side search's
// query passes them too (the handler's web search). A request under no filter
// pays one cached rules lookup.

// FiltersFor returns the content filters in force for the caller; a
// store that cannot be had refuses the request (503), since its filters
// are unknown.
func FiltersFor(st *pipeline.State) (contentfilter.Set, *apierror.Error) {
	rules, apiErr := RulesFor(st)
	if apiErr != nil || rules == nil {
		return nil, apiErr
	}
	if g := rules.Filters.Unusable(); g != nil {
		return nil, apierror.New(http.StatusServiceUnavailable,
			"The content filters of guardrail "+strconv.Quote(g.Name)+" cannot be applied; the request was not sent")
	}
	return rules.Filters, nil
}

// FilterBody applies the caller's content filters to an inference body:
// a block is a 403 naming the guardrail and the filter; redactions come
// back in the body; flags go to the request state for the generation
// record. A text too long for the custom patterns' cost is a 413, before
// its scan; the scan stops when ctx ends (the client left).
func (rt *Router) FilterBody(ctx context.Context, st *pipeline.State, body []byte) ([]byte, *apierror.Error) {
	set, apiErr := FiltersFor(st)
	if apiErr != nil || set == nil {
		return body, apiErr
	}
	out, res := set.BodyContext(ctx, FilterAPI(st), body)
	if apiErr := StoppedError(&res); apiErr != nil {
		return nil, apiErr
	}
	st.ContentFlags = AppendFlags(st.ContentFlags, res.Flags)
	return out, nil
}

// FilterAPI is the inbound API whose places of text the filters and
// moderation read (contentfilter.Fields).
func FilterAPI(st *pipeline.State) contentfilter.API {
	switch st.API.Dialect() {
	case dialect.Chat:
		return contentfilter.Chat
	case dialect.Responses:
		return contentfilter.Responses
	case dialect.Messages:
		return contentfilter.Messages
	}
	if st.API.Op == admin.OpInfer {
		switch st.API.Sub {
		case "/completions":
			return contentfilter.Completions
		case "/embeddings":
			return contentfilter.Embeddings
		case "/rerank":
			return contentfilter.Rerank
		case "/images", "/images/generations":
			return contentfilter.Images
		case "/audio/speech":
			return contentfilter.Speech
		case "/audio/transcriptions":
			return contentfilter.Transcriptions
		}
	}
	return contentfilter.AnyAPI
}

// StoppedError is the answer to a scan that stopped: a block's 403, the
// 413 of a text too costly to scan, the client gone; nil when it ran.
func StoppedError(res *contentfilter.Result) *apierror.Error {
	switch {
	case res.Block != nil:
		return BlockedError(res.Block)
	case res.TooCostly:
		return apierror.New(http.StatusRequestEntityTooLarge, "content_filters: the request's text is too long for the custom patterns of its guardrails: "+
			"its bytes times the patterns' cost exceed the "+strconv.Itoa(contentfilter.ScanBudget>>20)+"M instructions a request's scan may take; send less text or use fewer or cheaper patterns")
	case res.Err != nil:
		return apierror.New(499, "Client closed the request")
	}
	return nil
}

// BlockedError is the 403 of a blocking filter: the guardrail and the
// filter's label, never the text it matched.
func BlockedError(h *contentfilter.Hit) *apierror.Error {
	if h.GuardrailID == "" {
		return apierror.New(http.StatusServiceUnavailable, "The request's content filters could not be applied; the request was not sent")
	}
	md := map[string]any{"guardrail_id": h.GuardrailID, "guardrail_name": h.GuardrailName, "filter": h.Label}
	if h.Slug != "" {
		md["builtin"] = h.Slug
	}
	return &apierror.Error{Status: http.StatusForbidden,
		Message:  "Request blocked by content filter " + strconv.Quote(h.Label) + " of guardrail " + strconv.Quote(h.GuardrailName),
		Metadata: md}
}

// AppendFlags adds flags to the request's, once each.
func AppendFlags(to []storage.ContentFlag, hits []contentfilter.Hit) []storage.ContentFlag {
	for _, h := range hits {
		f := storage.ContentFlag{GuardrailID: h.GuardrailID, Label: h.Label, Builtin: h.Slug}
		dup := false
		for _, g := range to {
			dup = dup || g == f
		}
		if !dup {
			to = append(to, f)
		}
	}
	return to
}
