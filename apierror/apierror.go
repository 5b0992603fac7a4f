// Package apierror is the gateway's own error answer: the public API's JSON
// error body {"error":{"code","message","metadata?"}}, its writer, and the
// handoff of such an error to Caddy's error routes (Fail).
package apierror

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Error is the body of every error the gateway answers itself:
// {"error":{"code":<status>,"message":...,"metadata":...}}.
type Error struct {
	Status   int            `json:"code"`
	Message  string         `json:"message"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// Header holds extra response headers, such as Retry-After.
	Header http.Header `json:"-"`
}

func (e *Error) Error() string { return strconv.Itoa(e.Status) + " " + e.Message }

// New is an error with the given status and message.
func New(status int, msg string) *Error { return &Error{Status: status, Message: msg} }

// BadRequest is a 400 that names the offending field in its message.
func BadRequest(msg string) *Error { return New(http.StatusBadRequest, msg) }

// NotFound is a 404.
func NotFound(msg string) *Error { return New(http.StatusNotFound, msg) }

// Write writes e as the public API's JSON error body with e.Status.
func Write(w http.ResponseWriter, e *Error) {
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(e.Status)
	// An Error is strings and numbers: encoding fails only when the
	// client is gone, after the status was sent.
	_ = json.NewEncoder(w).Encode(struct {
		Error *Error `json:"error"`
	}{e})
}

// WriteJSON writes v as a JSON body with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Write(w, New(http.StatusInternalServerError, "Internal Server Error"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // the status is sent: a failed write is a client gone
}

// Var marks a request whose error is the gateway's own, for the matcher
// of the error route that writes it.
const Var = "tollgate.error"

// Fail hands a gateway error to Caddy, so that its error log and the
// operator's handle_errors see it; the error route writes the body.
func Fail(r *http.Request, e *Error) error {
	caddyhttp.SetVar(r.Context(), Var, true)
	return caddyhttp.Error(e.Status, e)
}
