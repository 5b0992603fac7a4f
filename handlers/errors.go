// Package handlers holds the gateway's HTTP logic: the tollgate handler
// (tollgate.go) and the stages of its pipeline (authentication, the
// administrative routes, web search, routing, metering), and the mock
// provider. Package caddymodule registers the modules and expands the
// tollgate Caddyfile directive.
package handlers

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// APIError is the body of every error the gateway answers itself:
// {"error":{"code":<status>,"message":...,"metadata":...}}.
type APIError struct {
	Status   int            `json:"code"`
	Message  string         `json:"message"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// Header holds extra response headers, such as Retry-After.
	Header http.Header `json:"-"`
}

func (e *APIError) Error() string { return strconv.Itoa(e.Status) + " " + e.Message }

// Errorf-style constructors for the common statuses.
func newError(status int, msg string) *APIError { return &APIError{Status: status, Message: msg} }

// BadRequest is a 400 that names the offending field in its message.
func BadRequest(msg string) *APIError { return newError(http.StatusBadRequest, msg) }

// NotFound is a 404.
func NotFound(msg string) *APIError { return newError(http.StatusNotFound, msg) }

// WriteError writes e as the spec's JSON error body with e.Status.
func WriteError(w http.ResponseWriter, e *APIError) {
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(struct {
		Error *APIError `json:"error"`
	}{e})
}

// writeJSON writes v as a JSON body with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, newError(http.StatusInternalServerError, "Internal Server Error"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// errorVar marks a request whose error is the gateway's own, for the
// matcher of ErrorWriter's error route.
const errorVar = "tollgate.error"

// fail hands a gateway error to Caddy, so that its error log and the
// operator's handle_errors see it; ErrorWriter writes the body.
func fail(r *http.Request, e *APIError) error {
	caddyhttp.SetVar(r.Context(), errorVar, true)
	return caddyhttp.Error(e.Status, e)
}

// ErrorWriter is the handler of the error route the tollgate directive
// adds: it writes the gateway's errors (an *APIError returned by
// Tollgate) as the spec's JSON body, with their headers such as
// Retry-After, and passes any other error on to the next error route.
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
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return next.ServeHTTP(w, r)
	}
	WriteError(w, apiErr)
	return nil
}

// ErrorRouteMatcher is the matcher set of ErrorWriter's route: requests
// whose error is the gateway's own.
func ErrorRouteMatcher() caddyhttp.VarsMatcher {
	return caddyhttp.VarsMatcher{errorVar: {"true"}}
}

// Interface guard
var _ caddyhttp.MiddlewareHandler = ErrorWriter{}
