package handlers

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
)

// Route is the router's decision for one inference request, attached to the
// request for the meter.
type Route struct {
	// Model, Provider and BYOK describe the current attempt.
	Model    *catalog.Model
	Provider *catalog.Provider
	// BYOK is true when the upstream call uses the account's own key.
	BYOK bool
	// Attempts are the endpoints to try in order: the model's providers,
	// then those of the request's `models` fallbacks.
	Attempts []Attempt
	// Kind is "chat" (chat completions), "responses" or "other".
	Kind      string
	Stream    bool
	MaxTokens int64 // max_tokens, max_completion_tokens or max_output_tokens; 0: unset
	// InputTokens is the admission estimate of the prompt's tokens.
	InputTokens int64
	// User is the request's end-user id (the body's `user` field), if any.
	User string

	body []byte // as the client sent it, less the gateway's own fields
	uri  string // path below the provider's base path, with the query
}

// Attempt is one provider endpoint for one model.
type Attempt struct {
	Model    *catalog.Model
	Provider *catalog.Provider
	Key      string // the provider key to call it with
	BYOK     bool
}

type routeKey struct{}

// RouteFrom returns the route the router attached to the request.
func RouteFrom(r *http.Request) (*Route, bool) {
	rt, ok := r.Context().Value(routeKey{}).(*Route)
	return rt, ok
}

// apply points r at attempt i: the body (replayed from the start) carries
// the provider's model id, the request carries the provider's key and Host,
// and the placeholders for reverse_proxy name the provider's address.
func (rt *Route) apply(r *http.Request, i int) error {
	a := rt.Attempts[i]
	rt.Model, rt.Provider, rt.BYOK = a.Model, a.Provider, a.BYOK
	body := rt.body
	if model := a.Provider.Model; model != "" && gjson.GetBytes(body, "model").Str != model {
		var err error
		if body, err = sjson.SetBytes(body, "model", model); err != nil {
			return err
		}
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		p := a.Provider
		repl.Set("tollgate.upstream.dial", p.Dial)
		repl.Set("tollgate.upstream.uri", p.BasePath+rt.uri)
		repl.Set("tollgate.upstream.host", p.Host)
		repl.Set("tollgate.upstream.scheme", p.Scheme)
		repl.Set("tollgate.model", a.Model.ID)
		repl.Set("tollgate.provider", p.Name)
	}
	r.Header.Set("Authorization", "Bearer "+a.Key)
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	r.Host = a.Provider.Host
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return nil
}
