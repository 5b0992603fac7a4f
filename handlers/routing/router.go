// Package routing is the pipeline's routing stage (Router): it checks an
// inference request's body, finds its model and the provider endpoints to
// try, ranked, and plans what each is sent (an upstream.Route in the
// request's pipeline.State), changing nothing on the request. It applies
// the guardrails' content filters (FilterBody, FiltersFor) and answers
// the routes that reach no provider: the model lists and token counts.
package routing

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/breaker"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/normalize"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/sticky"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Router is the pipeline's routing stage: it prepares inference requests
// for reverse_proxy. It checks the JSON
// body with a 400 that names the wrong field, so that malformed requests
// never reach a provider; finds the model in the catalog and picks its
// provider; and asks for an identity-encoded answer so that the gateway can
// read usage from it. It serves the model lists (GET /models and
// GET /models/user) itself.
//
// It changes nothing on the request: its plan (the *Route in the request
// state) holds the endpoints in order and what each is sent, and the
// meter points its own copy of the request at each attempt, with the
// provider's Host and key, and the placeholders
//
//	{tollgate.upstream.dial}         the provider's host:port (a private endpoint's checked IP:port)
//	{tollgate.upstream.uri}          path below /api/v1 under the provider's base path, with the query
//	{tollgate.upstream.host}         the provider's Host
//	{tollgate.upstream.scheme}       http or https
//	{tollgate.upstream.server_name}  the provider's host name, for tls_server_name
//	{tollgate.model}                 the public model id
//	{tollgate.provider}              the provider's name
//
// which the pipeline maps once the request is planned. It answers
// the other requests of its routes itself (ServeOther): nothing but
// an inference POST reaches a provider.
type Router struct {
	// MaxBodyBytes bounds inference request bodies. Default 16 MiB.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// MediaPartTokens bounds the prompt tokens of one image or audio part
	// in the admission estimate (prompt.Bound). Default
	// DefaultMediaPartTokens.
	MediaPartTokens int64 `json:"media_part_tokens,omitempty"`
	// AnthropicBetas extend the anthropic-beta values a Messages request
	// may send to Anthropic-style providers (betasFor).
	AnthropicBetas []string `json:"anthropic_betas,omitempty"`

	// LoadBalancing orders equally ranked endpoints of a model:
	// LoadBalancingPrice (the default: drawn at random, weighted by the
	// inverse square of their price) or LoadBalancingOrdered (the
	// catalog's order).
	LoadBalancing string `json:"load_balancing,omitempty"`
	// StickyIdle is how long a conversation stays on the endpoint that
	// served it without a request (sticky routing, package sticky):
	// default sticky.DefaultIdle; negative: no sticky routing.
	StickyIdle caddy.Duration `json:"sticky_idle,omitempty"`

	// Gateway is the catalog, the store and the policies routing reads;
	// Logger its log.
	Gateway gateway.Gateway `json:"-"`
	Logger  *zap.Logger     `json:"-"`
	// BetaList is the allow-list of anthropic-beta values
	// (AnthropicBetas and the defaults), made by Provision.
	BetaList map[string]bool `json:"-"`
	// Random draws load balancing's choices, in [0, 1); nil: math/rand.
	Random func() float64 `json:"-"`
	// Plugins are the plugins requests may ask for; nil: those
	// registered (a router not provisioned, in unit tests).
	Plugins plugin.Set `json:"-"`
	// Breakers are the thresholds of the endpoints' circuit breakers:
	// an open one keeps its endpoint out of routing. Zero: off.
	Breakers breaker.Settings `json:"-"`
	// MinUptime ranks an endpoint that answered less than this share of
	// its calls of the last 30 minutes (percent) behind the others of its
	// rank. Zero: off.
	MinUptime float64 `json:"-"`
}

// RewriteBody has the plugins that rewrite every request's body (the
// file parser) rewrite body, of a route of kind tried on attempts, whose
// fields are f: the body and, when rewritten, its fields; nil fields when
// no plugin changed it.
func (rt *Router) RewriteBody(st *pipeline.State, kind dialect.Kind, body []byte, f *reqbody.Fields, attempts []upstream.Attempt) ([]byte, *reqbody.Fields, *apierror.Error) {
	st.OwnModels = attempts
	req := &st.OwnPluginReq
	*req = plugin.Request{Kind: kind, Body: body, Models: &st.OwnModels}
	req.Plugins, _ = f.Get("plugins") // the body no longer has them
	rewritten := false
	for _, p := range rt.pluginSet() {
		bw, ok := p.(plugin.BodyRewriter)
		if !ok {
			continue
		}
		out, changed, apiErr := bw.RewriteBody(st.Context(), req)
		if apiErr != nil {
			return nil, nil, apiErr
		}
		if changed {
			req.Body, rewritten = out, true
		}
	}
	if !rewritten {
		return body, nil, nil
	}
	parsed, apiErr := reqbody.ParseObject(req.Body)
	return req.Body, parsed, apiErr
}

// pluginSet is the plugins requests may ask for.
func (rt *Router) pluginSet() plugin.Set {
	if rt.Plugins == nil {
		return plugin.Registered()
	}
	return rt.Plugins
}

// Load balancing modes (Router.LoadBalancing).
const (
	LoadBalancingPrice   = "price"
	LoadBalancingOrdered = "ordered"
)

// Provision sets defaults and, given a Caddy context, finds the tollgate
// app (the tollgate handler hands it the gateway instead).
func (rt *Router) Provision(ctx caddy.Context) error {
	if rt.MaxBodyBytes == 0 {
		rt.MaxBodyBytes = 16 << 20
	}
	if rt.MediaPartTokens == 0 {
		rt.MediaPartTokens = prompt.DefaultMediaPartTokens
	}
	if rt.StickyIdle == 0 {
		rt.StickyIdle = caddy.Duration(sticky.DefaultIdle)
	}
	switch rt.LoadBalancing {
	case "", LoadBalancingPrice, LoadBalancingOrdered:
	default:
		return fmt.Errorf("load_balancing: expected %s or %s, got %q", LoadBalancingPrice, LoadBalancingOrdered, rt.LoadBalancing)
	}
	if rt.MediaPartTokens < 0 {
		return fmt.Errorf("media_part_tokens must be positive: %d", rt.MediaPartTokens)
	}
	betas, err := upstream.BetaSet(rt.AnthropicBetas)
	if err != nil {
		return err
	}
	rt.BetaList = betas
	// A zero Context (unit tests of the body checks) holds no apps; such a
	// router has an empty catalog.
	if rt.Gateway == nil && ctx.Context != nil {
		gw, err := gateway.Load(ctx)
		if err != nil {
			return err
		}
		rt.Gateway = gw
		rt.Logger = ctx.Logger()
	}
	return nil
}

// Serve implements pipeline.Stage: it routes the request (Plan).
func (rt *Router) Serve(st *pipeline.State, _ http.ResponseWriter, r *http.Request) *apierror.Error {
	return rt.Plan(r, st, st.Body)
}

// catalog is the current catalog; nil (empty) without a gateway.
func (rt *Router) catalog() *catalog.Catalog {
	if rt.Gateway == nil {
		return nil
	}
	return rt.Gateway.Catalog()
}

// ServeOther answers an inference route's request other than a POST, and
// the public routes, from the catalog (serveGateway).
func (rt *Router) ServeOther(w http.ResponseWriter, r *http.Request, st *pipeline.State) error {
	return rt.serveGateway(w, r, st)
}

// Plan checks an inference request's body (read by readBody) and routes
// it: st.Route gets the attempts, the header and query they are sent
// with, and the first attempt prepared (its body is the one the input
// estimate counts). r is read, never changed.
func (rt *Router) Plan(r *http.Request, st *pipeline.State, body []byte) *apierror.Error {
	f, apiErr := validateInferenceIn(&st.OwnFields, st.API.Dialect(), body)
	if apiErr == nil {
		st.Sticky.SessionID, apiErr = sticky.SessionID(f, r.Header)
	}
	var route *upstream.Route
	if apiErr == nil {
		route, apiErr = rt.Route(st, body, f)
	}
	if apiErr == nil && route.ParsedFields != nil {
		// The PDFs' text passes the content filters, as the rest of the
		// prompt did before routing.
		route.Body, apiErr = rt.FilterBody(r.Context(), st, route.Body)
	}
	for _, run := range st.Plugins {
		// The runs planned before routing adapt it (a native web
		// search's chat form for the chat-only attempts).
		if ra, ok := run.(plugin.RouteAdapter); ok && apiErr == nil {
			apiErr = ra.AdaptRoute(route)
		}
	}
	if apiErr == nil {
		apiErr = rt.checkEndUser(st, route)
	}
	if apiErr == nil {
		// Bounded on the longest body any provider receives: the model id
		// spliced in per attempt is no prompt text.
		bf := f
		if route.ParsedFields != nil {
			bf = route.ParsedFields // PDFs as their text
		}
		route.Prompt = prompt.NewBound(bf, max(len(route.Body), len(route.ChatBody)), rt.MediaPartTokens)
		apiErr = rt.fitPrompt(st, route)
	}
	if apiErr == nil {
		apiErr = route.CountPrompt(r.Context(), rt.MediaPartTokens)
	}
	if apiErr != nil {
		return apiErr
	}
	// A key in the query (Google's ?key=) never reaches a provider.
	route.Query = WithoutCredentialParams(r.URL.RawQuery)
	route.URI = st.API.Sub
	if route.Query != "" {
		route.URI += "?" + route.Query
	}
	st.Route = route
	// The attempts' header is a copy of the client's: the client's request
	// (and its header map) is left as it came.
	h := UpstreamHeader(r.Header)
	if route.Kind == dialect.Messages {
		route.Betas = upstream.AllowedBetas(rt.BetaList, h)
		upstream.DropAnthropicHeaders(h)
	}
	route.Header = h
	if err := route.Prepare(0); err != nil {
		return apierror.BadRequest("Request body is not valid JSON")
	}
	// Estimated on the body as the first provider receives it.
	route.InputTokens = billing.EstimateTokens(len(route.Sent))
	return nil
}

// UpstreamHeader copies the map of a request's header, not its values: the
// gateway replaces or deletes whole entries of the copy, never edits a value
// slice, and reverse_proxy deep-copies the header before it changes any.
// The provider's key is added only to the copy the transport sends (the
// operator's, or the account's own BYOK secret, which must never reach a
// log, even with log_credentials).
// Header.Clone would also copy every value (one more allocation and a copy
// of every header, per request). The entries no provider is sent
// (notForwarded) are left out of the copy rather than deleted from it.
func UpstreamHeader(h http.Header) http.Header {
	c := make(http.Header, len(h)+2) // room for the provider's headers
	for k, v := range h {
		if !notForwarded(k) {
			c[k] = v
		}
	}
	return c
}

// notForwarded reports whether the client's header entry named k (a
// canonical name: none is canonicalized per request) is never sent to a
// provider: Accept-Encoding, the client's credentials
// (ClientCredentialHeaders), the session id (the gateway's, as the body's
// session_id is) and Incremental (the body was read whole, so
// it is not forwarded as it arrives; and reverse_proxy with
// request_buffers, an operator's option, refuses a request that asks for
// that).
func notForwarded(k string) bool {
	return k == "Accept-Encoding" || k == "Incremental" || k == sticky.HeaderName || slices.Contains(ClientCredentialHeaders, k)
}

// Route finds the request's model (and its `models` fallbacks) in the
// catalog and lists the provider endpoints to try, filtered by the
// request's `provider` preferences. The body was checked by
// ValidateInference.
func (rt *Router) Route(st *pipeline.State, body []byte, f *reqbody.Fields) (*upstream.Route, *apierror.Error) {
	kind := st.API.Dialect()
	field := func(name string) gjson.Result { v, _ := f.Get(name); return v }
	var idsBuf [4]string // most requests name one or two models
	ids, apiErr := requestedModels(idsBuf[:0], field("model"), field("models"))
	if apiErr == nil && kind == dialect.Messages {
		ids, apiErr = WithMessagesFallbacks(ids, field("fallbacks"), field("models"))
	}
	if apiErr != nil {
		return nil, apiErr
	}
	var svc upstream.Service
	if kind == dialect.Other {
		if svc, apiErr = serviceFor(st.API.Sub, f); apiErr != nil {
			return nil, apiErr
		}
	}
	prefs, apiErr := parseProviderPrefs(field("provider"))
	if apiErr != nil {
		return nil, apiErr
	}
	ef := endpointFilter{prefs: &prefs}
	if prefs.requireParameters {
		ef.params = requestParameters(kind, field)
	}
	rk := ranker{prefs: &prefs, balance: rt.LoadBalancing != LoadBalancingOrdered, rand: rt.Random, minUptime: rt.MinUptime}
	if rk.rand == nil {
		rk.rand = rand.Float64
	}
	if rk.prefs.maxLatency.set() || rk.prefs.minThroughput.set() || prefs.sort != "" {
		rk.now = time.Now()
	}
	var attempts []upstream.Attempt
	var refusal *apierror.Error // a private endpoint the egress policy refused
	var excluded string         // the preference that excluded the last endpoint
	var suffixSorted string     // the sort a model suffix (:nitro, :floor) asked for
	viaAlias := false           // a family alias (or the auto model) named one of the models
	available := false
	allOpen := false // every endpoint left of a model has its breaker open
	rules, apiErr := RulesFor(st)
	if apiErr != nil {
		return nil, apiErr
	}
	router := "" // the auto model the request named
	for n, modelID := range ids {
		if c := rt.chooserFor(modelID); c != nil {
			requested := modelID
			if modelID, apiErr = rt.chooseModel(c, st, kind, body, f, rules); apiErr != nil {
				return nil, apiErr
			}
			if router == "" {
				router = requested
			}
			viaAlias = true // chosen and named both: its endpoints once
		}
		m, ok := rt.catalog().Lookup(modelID)
		rk.sort = prefs.sort
		if base, suffixSort := modelSuffixSort(modelID); !ok && suffixSort != "" {
			if m, ok = rt.catalog().Lookup(base); ok {
				if rk.sort == "" {
					rk.sort = suffixSort
					rk.now = time.Now()
					suffixSorted = suffixSort
				}
			}
		}
		if ok && modelID != m.ID {
			viaAlias = viaAlias || catalog.IsAlias(modelID)
			modelID = m.ID // the base of a suffix, an alias's model
		}
		if viaAlias && n > 0 && routedModel(attempts, modelID) {
			continue // an alias and its model both named: its endpoints once
		}
		// The account's own enabled private endpoints serve the id first,
		// also one the catalog does not have.
		candidates, refused := rt.privateAttempts(modelID, m, st)
		if refusal == nil {
			refusal = refused
		}
		if !ok && len(candidates) == 0 && refused != nil {
			return nil, refused
		}
		if !ok && len(candidates) == 0 {
			name := "model"
			if n > 0 || field("model").Str == "" {
				name = "models"
			}
			return nil, apierror.BadRequest(fmt.Sprintf("%s: unknown model %q", name, modelID))
		}
		if denied := policy.CheckModel(rules, modelID); denied != nil {
			return nil, RefusalError(denied)
		}
		if ok {
			candidates = appendAttempts(candidates, rt.candidates(m, st))
		}
		candidates, denied := policy.AllowedEndpoints(rules, candidates, attemptEndpoint)
		if denied != nil {
			return nil, RefusalError(denied)
		}
		available = available || len(candidates) > 0
		candidates, why := ef.filter(candidates)
		if why != "" {
			excluded = why
		}
		candidates, open := rt.withoutOpen(candidates)
		allOpen = allOpen || open && len(candidates) == 0
		ranked := rk.order(candidates)
		if len(attempts) == 0 && rk.lead > 1 {
			rt.stick(st, kind, f, modelID, ranked[:rk.lead])
		}
		attempts = appendAttempts(attempts, rk.fallbacks(ranked))
	}
	if len(attempts) == 0 {
		if refusal != nil {
			return nil, refusal
		}
		if available && !allOpen {
			msg := "No provider satisfies the request's provider preferences"
			if excluded != "" {
				msg += ": " + excluded + " (the last endpoint left)"
			}
			return nil, apierror.New(http.StatusServiceUnavailable, msg)
		}
		return nil, apierror.New(http.StatusServiceUnavailable, "No provider is available for model "+ids[0])
	}
	if len(ids) > 1 {
		rk.sort = prefs.sort
		if prefs.partitionNone && prefs.sort != "" {
			rk.sortAcross(attempts)
		}
		rk.preferAcross(attempts)
	}
	routing := rk.routingOf(len(attempts), suffixSorted)
	if body, apiErr = normalize.Body(kind, body, f, rt.pluginSet()); apiErr != nil {
		return nil, apiErr
	}
	var parsed *reqbody.Fields
	if body, parsed, apiErr = rt.RewriteBody(st, kind, body, f, attempts); apiErr != nil {
		return nil, apiErr
	}
	// In the request state's allocation: a request is routed once.
	route := &st.OwnRoute
	*route = upstream.Route{
		Attempts: attempts,
		Kind:     kind,
		Stream:   field("stream").Bool(),
		User:     field("user").Str,
		Routing:  routing,
		Router:   router,
		Body:     body,

		Embeddings:   kind == dialect.Other && st.API.Sub == "/embeddings",
		ParsedFields: parsed,
	}
	// With several of the fields, the provider reads one of them: the hold
	// and the limit take the largest.
	for _, name := range maxTokensFields {
		if n, ok := TokenCount(field(name)); ok && n > route.MaxTokens {
			route.MaxTokens, route.MaxTokensField = n, name
		}
	}
	route.Choices = 1
	if kind == dialect.Chat {
		// Each of n choices may run to the output limit (validated above).
		if n, ok := TokenCount(field("n")); ok {
			route.Choices = n
		}
	}
	if route.Attempts, apiErr = withinOutputLimit(attempts, route.MaxTokens, route.MaxTokensField); apiErr != nil {
		return nil, apiErr
	}
	if svc != nil {
		route.Service = svc
		if apiErr := route.ServiceFor(); apiErr != nil {
			return nil, apiErr
		}
		return route, nil
	}
	if apiErr := route.TranslateFor(); apiErr != nil {
		return nil, apiErr
	}
	if apiErr := route.DialectsFor(); apiErr != nil {
		return nil, apiErr
	}
	if apiErr := route.ContractsFor(st.API.Sub); apiErr != nil {
		return nil, apiErr
	}
	if slices.ContainsFunc(route.Attempts, func(a upstream.Attempt) bool { return !a.Provider.D().Native(dialect.Chat) }) {
		route.AnthropicExtra = normalize.AnthropicExtra(f)
	}
	return route, nil
}

// stick has the request's conversation keep to the endpoint that served
// it (package sticky), when it is one of run: the first routed model's
// leading endpoints, equally ranked, each past every filter and
// guardrail. A request without a key (no session id, no messages)
// reads nothing.
func (rt *Router) stick(st *pipeline.State, kind dialect.Kind, f *reqbody.Fields, model string, run []upstream.Attempt) {
	if rt.StickyIdle < 0 || st.Store == nil || st.ID == nil {
		return
	}
	key, ok := sticky.KeyOf(st.ID.AccountID, model, st.Sticky.SessionID, kind, f)
	if !ok {
		return
	}
	st.Sticky.Stick(st.Context(), st.Store.Affinity(), key, time.Duration(rt.StickyIdle), model, run)
}

// appendAttempts is append(to, more...) that takes more itself when to is
// empty: the lists are each request's own, and most requests have one.
// routedModel reports whether attempts go to the model of id.
func routedModel(attempts []upstream.Attempt, id string) bool {
	return slices.ContainsFunc(attempts, func(a upstream.Attempt) bool { return a.Model != nil && a.Model.ID == id })
}

func appendAttempts(to, more []upstream.Attempt) []upstream.Attempt {
	if len(to) == 0 {
		return more
	}
	return append(to, more...)
}

// requestedModels is `model` followed by the `models` fallbacks, without
// repeats; `models` alone names the primary first. They are appended to
// ids (empty: the caller's buffer).
func requestedModels(ids []string, model, models gjson.Result) ([]string, *apierror.Error) {
	// A few ids are compared one by one; a map (its hash seed and
	// inserts cost more than the comparisons) only past linearIDs.
	var seen map[string]bool
	add := func(id string) {
		if seen == nil && len(ids) < LinearIDs {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
			return
		}
		if seen == nil {
			seen = make(map[string]bool, 2*LinearIDs)
			for _, prev := range ids {
				seen[prev] = true
			}
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if m := model.Str; m != "" {
		add(m)
	}
	if ms := models; ms.Exists() {
		if !ms.IsArray() {
			return nil, apierror.BadRequest("models: expected an array of model ids")
		}
		for _, v := range ms.Array() {
			if v.Type != gjson.String || v.Str == "" {
				return nil, apierror.BadRequest("models: expected an array of model ids")
			}
			add(v.Str)
		}
	}
	if len(ids) == 0 {
		if models.Exists() {
			return nil, apierror.BadRequest("models: expected an array of model ids")
		}
		return nil, apierror.BadRequest("model: required string")
	}
	return ids, nil
}

// LinearIDs is how many model ids requestedModels compares one by one.
const LinearIDs = 8

// candidates are the endpoints of m the caller can use (each priced as its
// provider prices m), in order: those the
// calling key's workspace holds a BYOK credential for (called with that
// credential), then
// those with the operator's key. A provider without an operator key is
// usable only through BYOK.
func (rt *Router) candidates(m *catalog.Model, st *pipeline.State) []upstream.Attempt {
	var out []upstream.Attempt
	if !st.OwnAttemptsUsed {
		// The first list in the state's allocation (a request is routed
		// once): one endpoint fits, more grow it onto the heap.
		st.OwnAttemptsUsed = true
		out = st.OwnAttempts[:0]
	}
	// Most requests have no BYOK attempt: no map to build then.
	var byok map[*catalog.Provider]bool
	for _, a := range rt.byokAttempts(m, st) {
		if byok == nil {
			byok = map[*catalog.Provider]bool{}
		}
		byok[a.Provider] = true
		out = append(out, a)
	}
	for _, p := range m.Providers {
		if !byok[p] && operatorUsable(p) {
			out = append(out, upstream.Attempt{Model: m.For(p), Provider: p, Key: p.APIKey})
		}
	}
	if len(out) == 0 {
		return nil // none, as before the buffer
	}
	return out
}

// byokCredentials calls fn for each provider of m with an address for which
// the calling key's workspace holds a credential that admits this request
// (another workspace's credentials never serve it), until fn returns
// false. Memory only; nothing when BYOK is off.
func (rt *Router) byokCredentials(m *catalog.Model, st *pipeline.State, fn func(*catalog.Provider, storage.Credential, *storage.Sealer) bool) {
	id, store := st.ID, st.Store
	if rt.Gateway == nil || id == nil || id.Management || store == nil {
		return
	}
	sealer := rt.Gateway.BYOKSealer()
	if sealer == nil {
		return
	}
	use := storage.BYOKUse{WorkspaceID: id.Key.WorkspaceID, KeyHash: id.Hash, Model: m.ID}
	if id.Key.CreatorUserID != nil {
		use.UserID = *id.Key.CreatorUserID
	}
	for _, p := range m.Providers {
		if p.Dial == "" {
			continue
		}
		if c, ok := store.BYOKForRequest(id.AccountID, p.Name, use); ok && !fn(p, c, sealer) {
			return
		}
	}
}

// byokAttempts are the providers of m the caller reaches with its
// workspace's own keys, the keys opened.
func (rt *Router) byokAttempts(m *catalog.Model, st *pipeline.State) []upstream.Attempt {
	var out []upstream.Attempt
	rt.byokCredentials(m, st, func(p *catalog.Provider, c storage.Credential, sealer *storage.Sealer) bool {
		key, err := c.Open(sealer)
		if err != nil {
			// Sealed under another byok_encryption_key, or damaged.
			rt.log().Error("BYOK credential cannot be opened; not using it",
				zap.String("credential", c.ID), zap.String("provider", p.Name), zap.Error(err))
			return true
		}
		out = append(out, upstream.Attempt{Model: m.For(p), Provider: p, Key: key, BYOK: true, DeclaredZDR: c.DeclaredZDR})
		return true
	})
	return out
}

func (rt *Router) log() *zap.Logger {
	if rt.Logger == nil {
		return zap.NewNop()
	}
	return rt.Logger
}

// reachableByBYOK reports whether the caller's workspace holds a credential
// admitting this caller for some provider of m (without opening it).
func (rt *Router) reachableByBYOK(m *catalog.Model, st *pipeline.State) bool {
	found := false
	rt.byokCredentials(m, st, func(*catalog.Provider, storage.Credential, *storage.Sealer) bool {
		found = true
		return false
	})
	return found
}

// operatorUsable reports whether the gateway can call p with the operator's
// key: it has an address and an api_key. (Providers the caller reaches
// through BYOK are found by Router.byokCredentials.)
func operatorUsable(p *catalog.Provider) bool { return p.Dial != "" && p.APIKey != "" }

// ValidateInference checks the fields every inference route shares and the
// route's own input field.
func ValidateInference(kind dialect.Kind, body []byte) (*reqbody.Fields, *apierror.Error) {
	return validateInferenceIn(new(reqbody.Fields), kind, body)
}

// validateInferenceIn is ValidateInference with the fields read into f.
func validateInferenceIn(f *reqbody.Fields, kind dialect.Kind, body []byte) (*reqbody.Fields, *apierror.Error) {
	f, apiErr := reqbody.ParseObjectIn(f, body)
	if apiErr != nil {
		return nil, apiErr
	}
	model, ok := f.String("model")
	if f.Err == nil && (!ok || model == "") {
		if v, present := f.Get("models"); !present || !v.IsArray() {
			return nil, apierror.BadRequest("model: required string")
		}
	}
	f.Bool("stream")
	// The end-user id is addressed by path later (/end-users/{user}):
	// bounded, without control characters or unpaired surrogates.
	f.String("user")
	// The session id keys sticky routing and groups generations: bounded
	// as the user's is.
	f.String("session_id")
	for _, name := range maxTokensFields {
		if v, ok := f.Get(name); ok && v.Type != gjson.Null {
			if _, ok := TokenCount(v); !ok {
				f.Fail(name, "a positive integer")
			}
		}
	}
	switch kind {
	case dialect.Chat:
		if v, ok := f.Get("messages"); !ok || !v.IsArray() {
			f.Fail("messages", "an array of messages")
		}
		// n choices multiply the output the hold must cover: bounded as
		// OpenAI bounds it.
		if v, ok := f.Get("n"); ok && v.Type != gjson.Null {
			if n, ok := TokenCount(v); !ok || n > maxChoices {
				f.Fail("n", "an integer from 1 to 128")
			}
		}
	case dialect.Responses:
		if v, ok := f.Get("input"); ok && v.Type != gjson.String && !v.IsArray() {
			f.Fail("input", "a string or an array of input items")
		}
	case dialect.Messages:
		validateMessages(f)
	}
	return f, f.Err
}

// maxChoices is the most choices (n) a chat request may ask for.
const maxChoices = 128

// maxTokensFields bound a request's output, by route and API generation.
var maxTokensFields = []string{"max_tokens", "max_completion_tokens", "max_output_tokens"}

// TokenCount reads a token count from its JSON text exactly: a positive
// integer that fits an int64, also when written 1e3 or 100.0. gjson's Int
// saturates and its Float rounds, so the text is parsed here instead.
func TokenCount(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, n >= 1
	}
	return exactInteger(v.Raw)
}

// exactInteger reads a JSON number with a fraction or an exponent, such as
// 1.5e3, as a positive int64, refusing any value that is not one.
func exactInteger(raw string) (int64, bool) {
	mantissa, exp, _ := strings.Cut(strings.ToLower(raw), "e")
	whole, frac, _ := strings.Cut(mantissa, ".")
	shift := 0
	if exp != "" {
		e, err := strconv.Atoi(exp)
		if err != nil || e > 100 || e < -100 {
			return 0, false // far beyond an int64, or below 1
		}
		shift = e
	}
	digits := strings.TrimLeft(whole+frac, "0")
	shift -= len(frac)
	for strings.HasSuffix(digits, "0") {
		digits, shift = digits[:len(digits)-1], shift+1
	}
	if digits == "" || shift < 0 || len(digits)+shift > 19 || strings.HasPrefix(raw, "-") {
		return 0, false
	}
	n, err := strconv.ParseInt(digits+strings.Repeat("0", shift), 10, 64)
	return n, err == nil
}

// outputLimit is the most tokens one answer of m may have: its
// max_completion_tokens, else its context window; 0 when unknown.
func outputLimit(m *catalog.Model) int64 {
	if m.MaxCompletionTokens > 0 {
		return m.MaxCompletionTokens
	}
	return m.ContextLength
}

// withinOutputLimit keeps the attempts whose model can give maxTokens
// tokens, as the provider would refuse the others; a `models` fallback
// then serves the request. With none left, the request gets the 400 the
// first model's provider would give, naming the field.
func withinOutputLimit(attempts []upstream.Attempt, maxTokens int64, field string) ([]upstream.Attempt, *apierror.Error) {
	if maxTokens == 0 {
		return attempts, nil
	}
	// Mostly every attempt can: attempts itself, copied only from the
	// first that cannot (out nil until then).
	var out []upstream.Attempt
	for i, a := range attempts {
		if limit := outputLimit(a.Model); limit == 0 || maxTokens <= limit {
			if out != nil {
				out = append(out, a)
			}
		} else if out == nil {
			out = append(make([]upstream.Attempt, 0, len(attempts)-1), attempts[:i]...)
		}
	}
	if out == nil {
		return attempts, nil
	}
	if len(out) == 0 {
		m := attempts[0].Model
		return nil, apierror.BadRequest(fmt.Sprintf("%s: must be at most %d for model %s", field, outputLimit(m), m.ID))
	}
	return out, nil
}
