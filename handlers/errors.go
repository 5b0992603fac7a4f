// Package handlers is the gateway's request pipeline: the tollgate
// handler (Tollgate) and its stages in order: authentication and the
// abuse ceilings, the hand-off to the administrative resources (package
// admin), web search planning, routing to the model's providers, and
// metering (reserve, attempts with fallback, settle), with the response
// writers that rewrite what providers answer. Package caddymodule registers
// the modules and expands the tollgate Caddyfile directive.
package handlers

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/messages"
)

// ErrorWriter is the handler of the error route the tollgate directive
// adds: it writes the gateway's errors (an *apierror.Error returned by
// Tollgate) as the public API's JSON body, with their headers such as
// Retry-After, and passes any other error on to the next error route. On
// the Messages route the body also has Anthropic's members
// (messages.WriteError).
type ErrorWriter struct{}

// CaddyModule returns the Caddy module information.
func (ErrorWriter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tollgate_error",
		New: func() caddy.Module { return new(ErrorWriter) },
	}
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (ErrorWriter) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	err, _ := r.Context().Value(caddyhttp.ErrorCtxKey).(error)
	var apiErr *apierror.Error
	if !errors.As(err, &apiErr) {
		return next.ServeHTTP(w, r)
	}
	// The Messages API's errors take Anthropic's shape. The error route
	// has no request state: it asks the route table again.
	if api, _ := admin.ClassifyRoute(r.URL.Path); api.Dialect() == dialect.Messages {
		messages.WriteError(w, apiErr)
		return nil
	}
	apierror.Write(w, apiErr)
	return nil
}

// ErrorRouteMatcher is the matcher set of ErrorWriter's route: requests
// whose error is the gateway's own.
func ErrorRouteMatcher() caddyhttp.VarsMatcher {
	return caddyhttp.VarsMatcher{apierror.Var: {"true"}}
}

// Interface guard
var _ caddyhttp.MiddlewareHandler = ErrorWriter{}
