// Package handlers holds the gateway's HTTP logic: authentication, the
// administrative routes and the mock provider. Each handler is a Caddy module;
// package caddymodule registers them and parses their Caddyfile syntax.
package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
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
