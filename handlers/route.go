package handlers

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
)

// Route is the router's decision for one inference request, kept in the
// request state for the meter.
type Route struct {
	// Model, Provider and BYOK describe the current attempt.
	Model    *catalog.Model
	Provider *catalog.Provider
	// BYOK is true when the upstream call uses the account's own key.
	BYOK bool
	// Attempts are the endpoints to try in order: the model's providers,
	// then those of the request's `models` fallbacks.
	Attempts []Attempt
	// Kind is "chat" (chat completions), "responses", "messages"
	// (Anthropic's Messages API) or "other".
	Kind      string
	Stream    bool
	MaxTokens int64 // max_tokens, max_completion_tokens or max_output_tokens; 0: unset
	// MaxTokensField is the name of the field MaxTokens came from.
	MaxTokensField string
	// InputTokens is the prompt's tokens charged when the provider reports
	// no usage: one per three bytes of the body the provider received.
	InputTokens int64
	// prompt bounds the prompt's tokens for admission (promptbound.go).
	prompt promptBound
	// User is the request's end-user id (the body's `user` field), if any.
	User string

	body []byte // as the client sent it, less the gateway's own fields
	uri  string // path below the provider's base path, with the query

	// A Responses request for providers that speak only Chat Completions
	// (catalog.APIChat), or a Messages request: the translated body, the
	// fields a Responses answer repeats, and whether the current attempt
	// is translated.
	chatBody  []byte
	echo      *translate.Echo
	translate bool
}

// Attempt is one provider endpoint for one model.
type Attempt struct {
	Model    *catalog.Model
	Provider *catalog.Provider
	Key      string // the provider key to call it with
	BYOK     bool
	// DeclaredZDR is the BYOK credential's declared_zdr (nil: the
	// provider's catalog facts decide ZDR guardrails).
	DeclaredZDR *bool
	// OutputLimit is the output limit admission fitted to the caps of a
	// request that set none (outputclamp.go); 0: as the client sent it.
	OutputLimit int64
}

// placeholder resolves the route's placeholders on lookup, for the current
// attempt.
func (rt *Route) placeholder(key string) (any, bool) {
	p := rt.Provider
	switch key {
	case "tollgate.upstream.dial":
		return p.Dial, true
	case "tollgate.upstream.uri":
		if rt.translate && rt.Kind == "messages" {
			// Anthropic's query parameters (Claude Code's beta=true) mean
			// nothing to a chat provider; Caddy's rewrite clears the query
			// for a URI ending in "?".
			return p.BasePath + "/chat/completions?", true
		}
		if rt.translate {
			return p.BasePath + "/chat/completions" + strings.TrimPrefix(rt.uri, "/responses"), true
		}
		return p.BasePath + rt.uri, true
	case "tollgate.upstream.host":
		return p.Host, true
	case "tollgate.upstream.scheme":
		return p.Scheme, true
	case "tollgate.upstream.server_name":
		return serverName(p.Host), true
	case "tollgate.model":
		return rt.Model.ID, true
	case "tollgate.provider":
		return p.Name, true
	}
	return nil, false
}

// apply points r at attempt i: the body (replayed from the start) carries
// the provider's model id, the request carries the provider's key and Host,
// and the placeholders for reverse_proxy name the provider's address.
func (rt *Route) apply(r *http.Request, i int) error {
	a := rt.Attempts[i]
	rt.Model, rt.Provider, rt.BYOK = a.Model, a.Provider, a.BYOK
	body := rt.body
	rt.translate = rt.Kind == "responses" && a.Provider.ChatOnly() || rt.Kind == "messages"
	if rt.translate {
		body = rt.chatBody
	}
	if rt.translate || rt.Kind == "chat" {
		body = forProvider(body, a.Provider)
	}
	body, err := withModel(body, a.Provider.Model)
	if err == nil {
		body, err = a.withOutputLimit(body, rt.Kind)
	}
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+a.Key)
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	r.Host = a.Provider.Host
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return nil
}

// translateFor prepares a Responses request for the chat-only providers
// among its attempts. A request that has no chat form is served only by
// providers that speak Responses: the chat-only ones are dropped, and
// none left is the translation's 400.
func (rt *Route) translateFor() *apierror.Error {
	if rt.Kind == "messages" {
		return rt.translateMessages()
	}
	if rt.Kind != "responses" || !slices.ContainsFunc(rt.Attempts, func(a Attempt) bool { return a.Provider.ChatOnly() }) {
		return nil
	}
	chat, err := translate.ResponsesToChat(rt.body)
	if err == nil {
		rt.chatBody, rt.echo = chat, translate.NewEcho(rt.body)
		return nil
	}
	rt.Attempts = slices.DeleteFunc(rt.Attempts, func(a Attempt) bool { return a.Provider.ChatOnly() })
	if len(rt.Attempts) == 0 {
		return apierror.BadRequest(err.Error())
	}
	return nil
}

// withModel returns body with its top-level "model" set to model: spliced
// in place of the old value when there is one, so the rest of the body
// stays byte for byte.
func withModel(body []byte, model string) ([]byte, error) {
	if model == "" {
		return body, nil
	}
	old := gjson.GetBytes(body, "model")
	if old.Type == gjson.String && old.Str == model {
		return body, nil
	}
	if old.Type != gjson.String || old.Index <= 0 {
		return sjson.SetBytes(body, "model", model)
	}
	quoted := jsonQuote(model)
	out := make([]byte, 0, len(body)-len(old.Raw)+len(quoted))
	out = append(out, body[:old.Index]...)
	out = append(out, quoted...)
	return append(out, body[old.Index+len(old.Raw):]...), nil
}
