// Package upstream is what an inference request is sent upstream: the
// router's plan (Route), its attempts at the model's provider endpoints
// (Attempt), and for each the body and header its provider takes, in its
// API, with the output limit admission fitted (OutputClamp) and the prompt
// fitted to the context windows (Route.CountPrompt). It changes no
// request of the client's: the meter applies an attempt to its own copy
// (Route.Apply).
package upstream

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	"github.com/tollgate-dev/caddy-tollgate/dialect/contract"
	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/messages"
)

// Route is the router's plan for one inference request, kept in the
// request state for the meter: the endpoints to try in order and, for
// each, the body and the header it is sent (Prepare). Routing changes
// nothing on the client's request; the meter sends each attempt, once,
// in its loop (Apply).
type Route struct {
	// Model, Provider and BYOK describe the current attempt, Attempts[current].
	Model    *catalog.Model
	Provider *catalog.Provider
	// BYOK is true when the upstream call uses the account's own key.
	BYOK bool
	// Attempts are the endpoints to try in order: the model's providers,
	// then those of the request's `models` fallbacks.
	Attempts []Attempt
	// Kind is the route the client called: the API of the body.
	Kind      dialect.Kind
	Stream    bool
	MaxTokens int64 // max_tokens, max_completion_tokens or max_output_tokens; 0: unset
	// Choices is chat's n, at least 1: each choice may run to the output
	// limit, so holds and bounds count the output limit that many times.
	Choices int64
	// MaxTokensField is the name of the field MaxTokens came from.
	MaxTokensField string
	// InputTokens is the prompt's tokens charged when the provider reports
	// no usage: one per three bytes of the body the provider received.
	InputTokens int64
	// Prompt bounds the prompt's tokens for admission.
	Prompt prompt.Bound
	// PricedAt is the instant the prices' time windows are read at: the
	// same for admission's hold and the charge (the meter sets it).
	PricedAt time.Time
	// PromptGrows: a run adds to the prompt after admission (a search's
	// results), which the hold's prices then allow for up to the context
	// window (the meter sets it).
	PromptGrows bool
	// User is the request's end-user id (the body's `user` field), if any.
	User string
	// Routing says how the attempts were chosen and ranked, for the
	// generation record (routingOf).
	Routing string
	// Router is the auto model the request named, whose choice the
	// attempts serve ("" when it named a catalog model).
	Router string
	// Service is the route's API when it is no chat one (rerank,
	// images); nil otherwise.
	Service Service

	current int // the index of the current attempt

	Body []byte // as the client sent it, less the gateway's own fields
	URI  string // path below the provider's base path, with the query
	// Query is the client's query less its credential parameters
	// (withoutCredentialParams): the one the attempts are sent with.
	Query string
	// Header is the header the attempts are sent with: the client's, less
	// what never reaches a provider (notForwarded), with the current
	// attempt's dialect headers and length (Prepare). It is the route's
	// own map: the client's request keeps its own.
	Header http.Header
	// length is header's Content-Length value, in the route's allocation
	// (reverse_proxy copies the values it sends).
	length [1]string
	// prepared is 1 + the attempt whose body (Sent) and header Prepare
	// computed last; 0: none yet.
	prepared int
	// Betas is the anthropic-beta header of a Messages request's
	// Anthropic-style attempts: the client's betas on the allow-list.
	Betas string
	// ParsedFields are body's fields when the file parser turned its PDF
	// parts into text (the file-parser plugin): the prompt's bound counts the text.
	ParsedFields *reqbody.Fields

	// A Responses request for providers that speak only Chat Completions
	// (dialect.APIChat), or a Messages request: the translated body, the
	// fields a Responses answer repeats, and whether the current attempt
	// is translated.
	ChatBody  []byte
	Echo      *translate.Echo
	Translate bool
	// ImpliedEffort: a Messages request's chat body carries the
	// reasoning_effort its thinking or output_config.effort implies,
	// which reaches only providers that take reasoning (see Apply).
	ImpliedEffort bool
	// Dialect speaks the current attempt's provider's API.
	Dialect dialect.Dialect
	// MessagesAPI: the current attempt's provider speaks Anthropic's
	// Messages API natively. ViaChat: the request reaches it as a chat
	// (or Responses) request in the provider's own API (the dialect's
	// FromChat), and so the answer comes back (its ToChat).
	MessagesAPI, ViaChat bool
	// Embeddings: the request is POST /embeddings. Embed: the current
	// attempt's provider takes it in its own API (dialect.Embedder), and
	// so the answer comes back.
	Embeddings, Embed bool
	// native: the current attempt's provider takes the request in the
	// client's API (Dialect.Native).
	native bool
	// Sent is the body the current attempt sends, which a dialect.Signer
	// signs (Prepare).
	Sent []byte
	// AnthropicExtra are members of the request the chat body cannot
	// carry (normalize.AnthropicExtra: top_k) that the dialects
	// translating chat into their own API take: Anthropic's adds them to
	// the Messages body, the others read them in the chat body.
	AnthropicExtra string
	// Key is the current attempt's provider key. It is never put on the
	// request, which reverse_proxy logs: the provider proxies' transport
	// adds it to the copy it sends (keyTransport).
	Key string
	// Signature is the signature the current attempt's signed request
	// carried (dialect.Signer), removed like key from provider text
	// (redact).
	Signature string
	// Keyed is the first attempt's request as its provider receives it
	// (withProviderKey), in the route's allocation; keyedUsed: taken. A
	// later attempt's is its own: the transport may still hold the
	// first's.
	Keyed     http.Request
	KeyedUsed bool
	// upstream is the URL an attempt's request carries while the provider
	// proxy handles it (WithUpstreamURI).
	upstream url.URL
	// firstBody is the body of the first attempt Apply sends, in the
	// route's allocation (firstBodyUsed once it has).
	firstBody     reqbody.Buffered
	firstBodyUsed bool
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
	// request that set none (OutputClamp); 0: as the client sent it.
	OutputLimit int64
}

// Placeholder resolves the route's placeholders on lookup, for the current
// attempt.
func (rt *Route) Placeholder(key string) (any, bool) {
	p := rt.Provider
	switch key {
	case "tollgate.upstream.dial":
		return p.DialValue(), true
	case "tollgate.upstream.uri":
		return rt.upstreamURI(), true
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

// upstreamURI is the current attempt's {tollgate.upstream.uri}: the path
// under the provider's base path, with the query.
func (rt *Route) upstreamURI() string {
	if rt.Embed {
		return rt.Provider.Path(rt.Dialect.(dialect.Embedder).EmbeddingsURI())
	}
	if rt.Service != nil {
		return rt.Provider.Path(rt.Service.URI(rt.Dialect))
	}
	return rt.Provider.Path(rt.Dialect.URI(rt.Kind, rt.native, rt.URI, rt.Stream))
}

// WithUpstreamURI points r at the current attempt's provider URI
// ({tollgate.upstream.uri}) while the provider proxy handles it, and
// returns r's URL and RequestURI, which the caller puts back. The
// proxies' rewrite to that placeholder (ConfigureProviderProxy) is
// dropped once they are provisioned (addProviderKeys): Caddy's rewrite
// module parsed the URI template, looked the placeholder up through every
// replacer provider and rebuilt the URL for every request. r's URL ends
// up as that rewrite left the copy reverse_proxy sends
// (RewriteUpstreamURI), and its RequestURI, which reverse_proxy logs, as
// the rewrite set it.
func (rt *Route) WithUpstreamURI(r *http.Request) (*url.URL, string) {
	u, uri := r.URL, r.RequestURI
	rt.upstream = *u
	RewriteUpstreamURI(&rt.upstream, rt.upstreamURI())
	r.URL = &rt.upstream
	r.RequestURI = rt.upstream.RequestURI()
	return u, uri
}

// RewriteUpstreamURI sets u's path and query from uri as Caddy's rewrite
// handler with the URI "{tollgate.upstream.uri}" does once the placeholder
// is replaced by uri (rewrite.Rewrite.Rewrite, Caddy 2.11): a fragment is
// dropped; the path is unescaped (kept as it is when it does not
// unescape) with no raw form; a query in uri, its braces escaped,
// replaces u's (empty components dropped, as buildQueryString does), and
// without one u's query stays. TestRewriteUpstreamURIAsCaddy compares the
// two.
func RewriteUpstreamURI(u *url.URL, uri string) {
	uri, _, _ = strings.Cut(uri, "#")
	path, query, hasQuery := strings.Cut(uri, "?")
	if p, err := url.PathUnescape(path); err == nil {
		u.Path = p
	} else {
		u.Path = path
	}
	u.RawPath = ""
	if hasQuery {
		if strings.ContainsAny(query, "{}") {
			query = strings.ReplaceAll(strings.ReplaceAll(query, "{", "%7B"), "}", "%7D")
		}
		u.RawQuery = joinQuery(query)
	}
}

// joinQuery is Caddy's rewrite's buildQueryString for a query without
// placeholders: its keys and values as they are, but for empty keys,
// which are dropped with their '&', and a last '=' or '&'. The query
// itself when none of those is there (no allocation).
func joinQuery(qs string) string {
	if qs == "" || !strings.Contains(qs, "&&") && !strings.Contains(qs, "&=") &&
		qs[0] != '&' && qs[0] != '=' && qs[len(qs)-1] != '&' && qs[len(qs)-1] != '=' {
		return qs
	}
	var sb strings.Builder
	sb.Grow(len(qs))
	wroteVal := true // the first component is a key
	for len(qs) > 0 {
		nextEq, nextAmp := strings.IndexByte(qs, '='), strings.IndexByte(qs, '&')
		if !wroteVal {
			nextEq = -1 // a value ends only at '&'
		}
		ampIsNext := nextAmp >= 0 && (nextAmp < nextEq || nextEq < 0)
		end := len(qs)
		if ampIsNext {
			end = nextAmp
		} else if nextEq >= 0 && (nextEq < nextAmp || nextAmp < 0) {
			end = nextEq
		}
		comp := qs[:end]
		if end < len(qs) {
			end++
		}
		qs = qs[end:]
		if wroteVal {
			if sb.Len() > 0 && len(comp) > 0 {
				sb.WriteByte('&')
			}
		} else {
			sb.WriteByte('=')
		}
		sb.WriteString(comp)
		wroteVal = ampIsNext
	}
	return sb.String()
}

// Apply points r, the request the meter sends for one attempt (never
// the client's own), at attempt i: the route's header, the provider's
// Host, the attempt's body (replayed from the start) and the query
// without the client's credentials. The attempt is prepared unless
// Prepare just did; the provider's key is added by the provider
// proxies' transport (keyTransport), and reverse_proxy's placeholders
// name the current attempt's provider.
func (rt *Route) Apply(r *http.Request, i int) error {
	if rt.prepared != i+1 {
		if err := rt.Prepare(i); err != nil {
			return err
		}
	}
	r.Header = rt.Header
	r.Host = rt.Provider.Host
	if !rt.firstBodyUsed {
		// The first attempt's body, in the route's allocation; each
		// later one is its own (a transport may still read the last).
		rt.firstBodyUsed = true
		r.Body = reqbody.InitBuffered(&rt.firstBody, rt.Sent)
	} else {
		r.Body = reqbody.NewBuffered(rt.Sent)
	}
	r.ContentLength = int64(len(rt.Sent))
	if r.URL.RawQuery != rt.Query {
		// The client's URL is shared with its request: a copy, only
		// when the query loses a credential.
		u := *r.URL
		u.RawQuery = rt.Query
		r.URL = &u
	}
	return nil
}

// Prepare makes attempt i the current one and computes what it is sent,
// changing no request: the body (Sent) carries the provider's model id in
// the provider's API and the output limit admission fitted; the header
// (header) the provider's dialect headers, its anthropic-beta and the
// body's length.
func (rt *Route) Prepare(i int) error {
	a := rt.Attempts[i]
	rt.prepared = 0
	rt.current = i
	rt.Model, rt.Provider, rt.BYOK = a.Model, a.Provider, a.BYOK
	body := rt.Body
	d := a.Provider.D()
	rt.Dialect = d
	// A Responses or Messages request the provider does not take as it
	// is goes to it as chat completions.
	native := d.Native(rt.Kind)
	rt.native = native
	if rt.Service != nil {
		return rt.prepareService(i, a, d)
	}
	rt.Translate = !native && (rt.Kind == dialect.Responses || rt.Kind == dialect.Messages)
	if rt.Translate {
		body = rt.ChatBody
		if rt.ImpliedEffort && !slices.Contains(a.Provider.Parameters(), "reasoning") {
			// The client (Claude Code always) sent thinking, not a chat
			// parameter: a model that takes no reasoning effort (gpt-4o,
			// gpt-4.1) would refuse it with a 400.
			body = messages.WithoutReasoningEffort(body)
		}
	}
	body, err := withModel(body, a.Provider.Model)
	if err == nil {
		body, err = a.WithOutputLimit(body, rt.Kind, native)
	}
	rt.MessagesAPI = d.Native(dialect.Messages)
	rt.ViaChat = !native && !d.Native(dialect.Chat)
	rt.Embed = false
	switch {
	case err != nil:
	case rt.ViaChat && rt.Embeddings:
		// A dialect that serves embeddings in its own API (DialectsFor
		// kept no other).
		rt.ViaChat, rt.Embed = false, true
		body, err = d.(dialect.Embedder).FromEmbeddings(rt.Body)
	case native:
		body, err = d.Adapt(rt.Kind, body, a.requiredOutputLimit())
	case rt.ViaChat && rt.MessagesAPI:
		body, err = d.FromChat(body, a.requiredOutputLimit())
		if err == nil {
			body = anthropic.WithExtra(body, rt.AnthropicExtra)
		}
	case rt.ViaChat:
		// The public fields chat cannot carry (top_k) reach the
		// dialect's translation in the chat body.
		body, err = d.FromChat(dialect.WithMembers(body, rt.AnthropicExtra), a.requiredOutputLimit())
	default:
		body, err = d.Adapt(dialect.Chat, body, a.requiredOutputLimit())
	}
	if err != nil {
		return err
	}
	rt.setHeader(i, a, body)
	return nil
}

// prepareService is Prepare of a route with a service: the body is the
// service's for the provider.
func (rt *Route) prepareService(i int, a Attempt, d dialect.Dialect) error {
	rt.Translate, rt.ViaChat, rt.MessagesAPI = false, false, false
	var body []byte
	var err error
	tb, typed := rt.Service.(TypedBody)
	contentType := ""
	if typed {
		body, contentType, err = tb.TypedBody(d, a.ModelFor())
	} else {
		body, err = rt.Service.Body(d, a.ModelFor())
	}
	if err != nil {
		return err
	}
	rt.setHeader(i, a, body)
	if typed {
		// The client's content type was its own upload's (its boundary).
		rt.Header["Content-Type"] = []string{contentType}
	}
	return nil
}

// setHeader finishes Prepare of attempt i, a, whose body is body: the
// header and the body sent.
func (rt *Route) setHeader(i int, a Attempt, body []byte) {
	rt.Key, rt.Signature = a.Key, ""
	h := rt.Header
	if h == nil {
		h = make(http.Header, 4)
		rt.Header = h
	}
	rt.Dialect.SetHeaders(h)
	if betas := rt.betasFor(a.Provider); betas != "" {
		h["Anthropic-Beta"] = []string{betas}
	} else {
		delete(h, "Anthropic-Beta")
	}
	// A canonical name, set directly: Header.Set would canonicalize it on
	// every request.
	rt.length[0] = strconv.Itoa(len(body))
	h["Content-Length"] = rt.length[:1:1]
	rt.Sent = body
	rt.prepared = i + 1
}

// requiredOutputLimit is the output limit a provider that requires one
// (Anthropic's max_tokens) gets when the request sets none: the model's
// max_completion_tokens, else messages.DefaultMaxTokens within its
// context window. A limit admission fitted is already in the body.
func (a Attempt) requiredOutputLimit() int64 {
	if n := a.Model.MaxCompletionTokens; n > 0 {
		return n
	}
	if c := a.Model.ContextLength; c > 0 {
		return min(c, messages.DefaultMaxTokens)
	}
	return messages.DefaultMaxTokens
}

// DialectsFor checks that the request can be sent to its providers whose
// dialect does not take it natively and speaks chat in its own API
// (FromChat): only the routes they serve, and only requests their
// translation can express. The others are served by the other providers
// alone; none left is the translation's 400.
func (rt *Route) DialectsFor() *apierror.Error {
	viaChat := func(a Attempt) bool {
		d := a.Provider.D()
		return !d.Native(rt.Kind) && !d.Native(dialect.Chat)
	}
	if !slices.ContainsFunc(rt.Attempts, viaChat) {
		return nil
	}
	var refusal *apierror.Error
	checked := map[string]bool{} // dialects whose translation took the body
	refused := func(a Attempt) bool {
		if !viaChat(a) {
			return false
		}
		d := a.Provider.D()
		if checked[d.Name()] {
			return false
		}
		if e, ok := d.(dialect.Embedder); ok && rt.Embeddings {
			// Served in the provider's own API, when it takes the input.
			if _, err := e.FromEmbeddings(rt.Body); err != nil {
				if refusal == nil {
					refusal = apierror.BadRequest(err.Error())
				}
				return true
			}
			checked[d.Name()] = true
			return false
		}
		if !d.Serves(rt.Kind) {
			if refusal == nil {
				refusal = apierror.BadRequest("model: its providers speak " + dialectAPI(d) + ", which does not serve " + rt.uriPath())
			}
			return true
		}
		chat := rt.Body
		if rt.Kind != dialect.Chat {
			chat = rt.ChatBody
		}
		if chat == nil {
			return false // dropped with the chat-only providers by TranslateFor
		}
		if _, err := d.FromChat(chat, messages.DefaultMaxTokens); err != nil {
			if refusal == nil {
				refusal = apierror.BadRequest(err.Error())
			}
			return true
		}
		checked[d.Name()] = true
		return false
	}
	rt.Attempts = slices.DeleteFunc(rt.Attempts, refused)
	if len(rt.Attempts) == 0 {
		return refusal
	}
	return nil
}

// ContractsFor leaves out the providers whose API would refuse the
// request as the gateway would send it (contract.CheckChat): too many
// stop sequences or tools, a tool name the API does not take, ... A
// request no provider left can take is a 400 naming the client's field,
// before anything is held. sub is the client's path below /api/v1.
func (rt *Route) ContractsFor(sub string) *apierror.Error {
	if rt.Kind == dialect.Other && sub == "/embeddings" {
		return rt.embeddingsFor()
	}
	if rt.Kind == dialect.Responses {
		if err := rt.responsesFor(); err != nil {
			return err
		}
	}
	// Otherwise a client's API passed as it is meets the provider's: only
	// translated requests are checked.
	translated := func(a Attempt) bool { return !a.Provider.D().Native(rt.Kind) }
	if !slices.ContainsFunc(rt.Attempts, translated) {
		return nil
	}
	chat := rt.Body
	if rt.Kind != dialect.Chat {
		chat = rt.ChatBody
	}
	if chat == nil {
		return nil // no provider gets a translation
	}
	type verdict struct {
		style   string
		refusal *contract.Refusal
	}
	var seen []verdict // by style: a request has few providers
	var first *contract.Refusal
	refused := func(a Attempt) bool {
		if !translated(a) {
			return false
		}
		style := a.Provider.D().Name()
		i := slices.IndexFunc(seen, func(v verdict) bool { return v.style == style })
		if i < 0 {
			seen = append(seen, verdict{style, contract.CheckChat(style, rt.Kind, chat)})
			i = len(seen) - 1
		}
		r := seen[i].refusal
		if r != nil && first == nil {
			first = r
		}
		return r != nil
	}
	rt.Attempts = slices.DeleteFunc(rt.Attempts, refused)
	if len(rt.Attempts) == 0 && first != nil {
		return apierror.BadRequest(first.Message())
	}
	return nil
}

// embeddingsFor is ContractsFor of an embeddings request, which reaches
// the OpenAI-style providers (the others do not serve it) as it is: their
// API takes at most 2048 inputs, none empty.
func (rt *Route) embeddingsFor() *apierror.Error {
	openAIStyle := func(a Attempt) bool { return a.Provider.D().Native(dialect.Chat) }
	return rt.leaveOutRefused(openAIStyle, func() *contract.Refusal { return contract.CheckEmbeddings(rt.Body) })
}

// responsesFor leaves out the providers that take a Responses request as
// it is (OpenAI-style, api responses) when their API would refuse it: a
// max_output_tokens below 16, which a provider translating to chat takes.
func (rt *Route) responsesFor() *apierror.Error {
	native := func(a Attempt) bool { return a.Provider.D().Native(dialect.Responses) }
	return rt.leaveOutRefused(native, func() *contract.Refusal { return contract.CheckResponses(rt.Body) })
}

// leaveOutRefused leaves out the attempts that take the body as it is
// when check, run only if there is one, refuses it; with none left, the
// refusal is the client's 400.
func (rt *Route) leaveOutRefused(takes func(Attempt) bool, check func() *contract.Refusal) *apierror.Error {
	if !slices.ContainsFunc(rt.Attempts, takes) {
		return nil
	}
	r := check()
	if r == nil {
		return nil
	}
	rt.Attempts = slices.DeleteFunc(rt.Attempts, takes)
	if len(rt.Attempts) == 0 {
		return apierror.BadRequest(r.Message())
	}
	return nil
}

// dialectAPI names a dialect's API in messages.
func dialectAPI(d dialect.Dialect) string {
	if d.Native(dialect.Messages) {
		return "Anthropic's Messages API"
	}
	return "the " + d.Name() + " API"
}

// uriPath names the route's kind for messages.
func (rt *Route) uriPath() string {
	if rt.Kind == dialect.Other {
		return "this route"
	}
	return rt.Kind.Path()
}

// TranslateFor prepares a Responses request for the chat-only providers
// among its attempts. A request that has no chat form is served only by
// providers that speak Responses: the chat-only ones are dropped, and
// none left is the translation's 400.
func (rt *Route) TranslateFor() *apierror.Error {
	if rt.Kind == dialect.Messages {
		return rt.translateMessages()
	}
	if rt.Kind != dialect.Responses || !slices.ContainsFunc(rt.Attempts, func(a Attempt) bool { return a.Provider.ChatOnly() }) {
		return nil
	}
	chat, err := translate.ResponsesToChat(rt.Body)
	if err == nil {
		rt.ChatBody, rt.Echo = chat, translate.NewEcho(rt.Body)
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
	old := jsonpeek.Get(body, "model") // only its place and text are read: no copy
	if old.Type == gjson.String && old.Str == model {
		return body, nil
	}
	if old.Type != gjson.String || old.Index <= 0 {
		return sjson.SetBytes(body, "model", model)
	}
	quoted := jsonstr.Quote(model)
	out := make([]byte, 0, len(body)-len(old.Raw)+len(quoted))
	out = append(out, body[:old.Index]...)
	out = append(out, quoted...)
	return append(out, body[old.Index+len(old.Raw):]...), nil
}

// translateMessages prepares the chat body of a Messages request's
// attempts at providers that are not Anthropic-style. A request that has
// no chat form is served by the Anthropic-style providers alone; none
// left is the translation's 400.
func (rt *Route) translateMessages() *apierror.Error {
	if !slices.ContainsFunc(rt.Attempts, func(a Attempt) bool { return !a.Provider.D().Native(dialect.Messages) }) {
		return nil
	}
	// The reasoning_effort thinking implies goes to the providers that
	// take reasoning: left out when none does (no copy per attempt), else
	// taken out for those that do not (Apply).
	takes, lacks := false, false
	for _, a := range rt.Attempts {
		if !a.Provider.D().Native(dialect.Messages) {
			if slices.Contains(a.Provider.Parameters(), "reasoning") {
				takes = true
			} else {
				lacks = true
			}
		}
	}
	chat, err := messages.ToChat(rt.Body, !takes)
	if err == nil {
		rt.ChatBody, rt.ImpliedEffort = chat.Body, chat.ImpliedEffort && lacks
		return nil
	}
	rt.Attempts = slices.DeleteFunc(rt.Attempts, func(a Attempt) bool { return !a.Provider.D().Native(dialect.Messages) })
	if len(rt.Attempts) == 0 {
		return apierror.BadRequest(err.Error())
	}
	return nil
}

// serverName is the TLS server name of a Host header value.
func serverName(host string) string {
	if u, err := url.Parse("//" + host); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return host
}
