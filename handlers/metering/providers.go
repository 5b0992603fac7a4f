package metering

import (
	"context"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// Providers is where the meter sends each attempt: the handler that
// carries a request to the attempt's provider.
type Providers interface {
	Forward(p *catalog.Provider) caddyhttp.Handler
}

// routeKey is the request context's key of the request's Route, which
// names the current attempt's provider key, for a request without
// Caddy's vars.
type routeKey struct{}

// routeVar is the name of the request's Route in Caddy's vars of the
// request: set there, the route takes no context and request copy of
// its own.
const routeVar = "tollgate.route"

// routeRef is the request's Route in its vars. A placeholder or log that
// reads the vars shows nothing of it: the route holds the provider key.
type routeRef struct{ *upstream.Route }

func (routeRef) String() string { return "" }

// WithRoute gives the attempts of r the route's provider keys
// (the provider proxy signs with them).
func WithRoute(r *http.Request, rt *upstream.Route) *http.Request {
	if vars, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		vars[routeVar] = routeRef{rt}
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), routeKey{}, rt))
}

// AttemptRoute is the Route WithRoute gave req, or nil.
func AttemptRoute(req *http.Request) *upstream.Route {
	if vars, ok := req.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		if ref, ok := vars[routeVar].(routeRef); ok {
			return ref.Route
		}
	}
	rt, _ := req.Context().Value(routeKey{}).(*upstream.Route)
	return rt
}
