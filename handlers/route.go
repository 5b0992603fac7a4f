package handlers

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
)

// Route is the router's decision for one inference request, attached to the
// request for the meter.
type Route struct {
	Model    *catalog.Model
	Provider *catalog.Provider
	// Kind is "chat" (chat completions), "responses" or "other".
	Kind      string
	Stream    bool
	MaxTokens int64 // max_tokens, max_completion_tokens or max_output_tokens; 0: unset
	// InputTokens is the admission estimate of the prompt's tokens.
	InputTokens int64
	// BYOK is true when the upstream call uses the account's own key.
	BYOK bool
	// User is the request's end-user id (the body's `user` field), if any.
	User string
}

type routeKey struct{}

// RouteFrom returns the route the router attached to the request.
func RouteFrom(r *http.Request) (*Route, bool) {
	rt, ok := r.Context().Value(routeKey{}).(*Route)
	return rt, ok
}
