package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/breaker"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/abuse"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/citations"
	"github.com/tollgate-dev/caddy-tollgate/handlers/responsecache"
	"github.com/tollgate-dev/caddy-tollgate/handlers/retry"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/scimapi"
)

// Tollgate is the gateway's one HTTP handler. It runs the fixed pipeline
// of every request, in this order, with no stage that configuration can
// leave out or reorder, each stage reading the store that ServeHTTP looked
// up once, at the start (a store that cannot be had is a 503 there):
//
//  1. authenticate the bearer key and apply the abuse ceilings (Auth);
//  2. serve the administrative routes, GET /key and the SCIM service (package admin);
//  3. plan an inference request: the stages pipelineStages lists, in
//     order, each a pipeline.Stage reading and changing the request's
//     state (pipeline.State): refuse a key that cannot pay before any
//     work on the body, read it, apply the guardrails' content filters,
//     the plugins planned before routing (Prerouter: web-fetch, web
//     search), route it (Router: the
//     model's providers and what each is sent, its prompt fitted to the
//     context windows by the plugins that fit prompts, changing nothing
//     on the request), plan the plugins the request asks for or its
//     model requires; or serve the model lists;
//  4. hold its cost and the plugins' (Coster), let the plugins that act
//     on an admitted request refuse it (Admitter: moderation), have the
//     runs prepare the attempts (AttemptPreparer: a gateway-side
//     search), send each attempt in turn
//     through reverse_proxy on the meter's own copy of the request, the
//     answer through the plugins' writers (AnswerWrapper), and charge what
//     the answer and the plugins used (Meter).
//
// The plugins are Caddy modules in the tollgate.plugins namespace (package
// plugin), every registered one loaded by Provision.
//
// Each attempt goes through Caddy's own reverse_proxy, provisioned inside
// this handler (HTTPSProxyRaw, HTTPProxyRaw): no route leads to it, and the
// provider's address and key are set only here, around the metered calls,
// so no request reaches a provider without being charged. Requests outside
// /api/v1 go on to next.
//
// Errors the gateway answers itself are returned as caddyhttp.Error
// carrying an *apierror.Error; ErrorWriter (the directive's error route) writes
// them as the public API's JSON body.
type Tollgate struct {
	// PerIP and PerKey are the abuse ceilings (see Auth).
	PerIP  *RateCeiling `json:"per_ip,omitempty"`
	PerKey *RateCeiling `json:"per_key,omitempty"`
	// MaxBodyBytes bounds inference request bodies. Default 16 MiB.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// MediaPartTokens bounds the prompt tokens of one image or audio part
	// in the admission estimate. Default DefaultMediaPartTokens.
	MediaPartTokens int64 `json:"media_part_tokens,omitempty"`
	// AnthropicBetas extend the anthropic-beta values a Messages request
	// may send to Anthropic-style providers (betasFor).
	AnthropicBetas []string `json:"anthropic_betas,omitempty"`
	// LoadBalancing orders a model's equally ranked endpoints: "price"
	// (the default: weighted by the inverse square of their price) or
	// "ordered" (the catalog's order). See Router.LoadBalancing.
	LoadBalancing string `json:"load_balancing,omitempty"`
	// StickyIdle is how long a conversation stays on the endpoint that
	// served it without a request (sticky routing): default
	// sticky.DefaultIdle; negative: off. See Router.StickyIdle.
	StickyIdle caddy.Duration `json:"sticky_idle,omitempty"`
	// WebFetchPrice is the price of one fetch of the web-fetch plugin, in
	// credits, handed to the plugin's module (its price). Default the
	// module's.
	WebFetchPrice string `json:"web_fetch_price,omitempty"`
	// FirstByteTimeout bounds the wait for a streamed answer's first byte,
	// for providers that set no first_byte_timeout of their own. Default
	// DefaultFirstByteTimeout.
	FirstByteTimeout caddy.Duration `json:"first_byte_timeout,omitempty"`
	// Retries is how many times in all a request's failed attempts may be
	// tried again on the same endpoint before the next one is tried (a
	// failure before anything reached the client: no connection, a
	// timeout, the provider's 502, 503, or 429 with a short Retry-After);
	// 0: none. Default retry.DefaultAttempts.
	Retries *int `json:"retries,omitempty"`
	// RetryBudget bounds the time retries may add to a request, from its
	// first failure. Default retry.DefaultBudget.
	RetryBudget caddy.Duration `json:"retry_budget,omitempty"`
	// RetryBackoff is the wait before a request's first retry, doubled
	// for each further one, with jitter. Default retry.DefaultBackoff.
	RetryBackoff caddy.Duration `json:"retry_backoff,omitempty"`
	// CircuitBreaker turns on the endpoints' circuit breakers; nil: off.
	CircuitBreaker *CircuitBreaker `json:"circuit_breaker,omitempty"`
	// MinUptime is the uptime (percent of calls answered in the last 30
	// minutes) below which an endpoint is ranked behind the others of its
	// rank; 0 (the default): uptime does not rank.
	MinUptime float64 `json:"min_uptime,omitempty"`
	// ResponseCache turns on the response cache for the models it names;
	// nil: off.
	ResponseCache *responsecache.Config `json:"response_cache,omitempty"`
	// HTTPSProxyRaw and HTTPProxyRaw are the reverse_proxy handlers that
	// carry attempts to HTTPS and to plain-HTTP providers; the tollgate
	// directive fills them with the block's reverse_proxy subdirectives.
	// Default: ConfigureProviderProxy's settings alone.
	HTTPSProxyRaw json.RawMessage `json:"https_proxy,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
	HTTPProxyRaw  json.RawMessage `json:"http_proxy,omitempty" caddy:"namespace=http.handlers inline_key=handler"`
	// PluginsRaw configures plugin modules by name (response_healing);
	// every plugin registered is loaded, those not named here with their
	// defaults.
	PluginsRaw caddy.ModuleMap `json:"plugins,omitempty" caddy:"namespace=tollgate.plugins"`

	// plugins are the plugins requests may ask for.
	plugins plugin.Set
	// stages are the inference pipeline's, in order (pipelineStages).
	stages []pipeline.Stage
	// cache is the response cache; nil: off.
	cache *responsecache.Cache

	proxies metering.Providers
	auth    Auth
	admin   *admin.Admin
	router  routing.Router
	meter   metering.Meter
	logger  *zap.Logger
	// shareCeiling hands PerKey to the shared store once (refuseWhileUnavailable);
	// made by Provision.
	shareCeiling *sync.Once
	// stopBreakerSync ends the sharing of the breakers with the other
	// replicas (breaker.Sync); nil when breakers are off.
	stopBreakerSync context.CancelFunc
}

// CaddyModule returns the Caddy module information.
func (*Tollgate) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tollgate",
		New: func() caddy.Module { return new(Tollgate) },
	}
}

// Provision finds the tollgate app and sets up the stages.
func (t *Tollgate) Provision(ctx caddy.Context) error {
	gw, err := gateway.Load(ctx)
	if err != nil {
		return err
	}
	t.shareCeiling = new(sync.Once)
	if t.proxies, err = t.loadProxies(ctx, gw.Catalog()); err != nil {
		return err
	}
	if err := t.priceWebFetch(); err != nil {
		return err
	}
	if t.plugins, err = plugin.Load(ctx, t, "PluginsRaw", t.PluginsRaw); err != nil {
		return err
	}
	if err := t.setup(gw, ctx.Logger()); err != nil {
		return err
	}
	if t.router.Breakers.Failures > 0 {
		sctx, cancel := context.WithCancel(context.Background())
		t.stopBreakerSync = cancel
		go breaker.Sync(sctx, sharedBreakers(gw), breakerSyncPeriod, t.logger)
	}
	return nil
}

// setup gives every stage the gateway and the handler's options.
func (t *Tollgate) setup(gw gateway.Gateway, logger *zap.Logger) error {
	t.logger = logger
	byIP, err := abuse.Load("per_ip", t.PerIP)
	if err != nil {
		return err
	}
	byKey, err := abuse.Load("per_key", t.PerKey)
	if err != nil {
		byIP.Release()
		return err
	}
	t.auth = Auth{PerIP: t.PerIP, PerKey: t.PerKey, gw: gw, logger: logger, byIP: byIP, byKey: byKey}
	if t.plugins == nil { // not provisioned by Caddy (unit tests)
		t.plugins = plugin.Registered()
	}
	t.router = routing.Router{MaxBodyBytes: t.MaxBodyBytes, MediaPartTokens: t.MediaPartTokens,
		AnthropicBetas: t.AnthropicBetas, LoadBalancing: t.LoadBalancing, StickyIdle: t.StickyIdle, Gateway: gw, Plugins: t.plugins,
		Breakers: t.breakerSettings(logger), MinUptime: t.MinUptime}
	if err := t.router.Provision(caddy.Context{}); err != nil {
		return err
	}
	t.router.Logger = logger
	t.meter = metering.New(gw, logger)
	if t.cache, err = responsecache.New(t.ResponseCache, gw.BYOKSealer(), logger); err != nil {
		return err
	}
	t.meter.Retry = t.retryPolicy()
	t.meter.Breakers = t.router.Breakers
	t.stages = t.pipelineStages()
	srv, err := scimapi.NewService(gw.Store, logger)
	t.admin = admin.New(gw, logger, srv)
	if t.cache != nil {
		t.admin.PurgeWith(t.cache)
	}
	return err
}

// Validate checks the options; a bad value fails the config load with
// the option named.
func (t *Tollgate) Validate() error {
	for _, c := range []struct {
		name string
		rc   *RateCeiling
	}{{"per_ip", t.PerIP}, {"per_key", t.PerKey}} {
		if err := c.rc.Validate(c.name); err != nil {
			return err
		}
	}
	if t.MaxBodyBytes < 0 {
		return fmt.Errorf("max_body_bytes: must be positive, got %d", t.MaxBodyBytes)
	}
	if t.MediaPartTokens < 0 {
		return fmt.Errorf("media_part_tokens: must be positive, got %d", t.MediaPartTokens)
	}
	switch t.LoadBalancing {
	case "", routing.LoadBalancingPrice, routing.LoadBalancingOrdered:
	default:
		return fmt.Errorf("load_balancing: expected %s or %s, got %q", routing.LoadBalancingPrice, routing.LoadBalancingOrdered, t.LoadBalancing)
	}
	if _, err := t.webFetchPrice(); err != nil {
		return err
	}
	if t.Retries != nil && *t.Retries < 0 {
		return fmt.Errorf("retries: must be 0 or more, got %d", *t.Retries)
	}
	if t.RetryBudget < 0 || t.RetryBackoff < 0 {
		return fmt.Errorf("retry_budget, retry_backoff: must be positive")
	}
	if cb := t.CircuitBreaker; cb != nil && (cb.Failures != nil && *cb.Failures < 0 || cb.Cooldown < 0) {
		return fmt.Errorf("circuit_breaker: failures and cooldown must be positive")
	}
	if t.MinUptime < 0 || t.MinUptime > 100 {
		return fmt.Errorf("min_uptime: expected a percentage from 0 to 100, got %v", t.MinUptime)
	}
	return t.ResponseCache.Validate()
}

// CircuitBreaker configures the endpoints' circuit breakers.
type CircuitBreaker struct {
	// Failures is how many failed calls in a row take an endpoint out of
	// routing; 0: breakers are off. Default breaker.DefaultFailures.
	Failures *int `json:"failures,omitempty"`
	// Cooldown is how long it stays out before a probe. Default
	// breaker.DefaultCooldown.
	Cooldown caddy.Duration `json:"cooldown,omitempty"`
}

// breakerSettings are the router's and the meter's breaker thresholds.
func (t *Tollgate) breakerSettings(logger *zap.Logger) breaker.Settings {
	cb := t.CircuitBreaker
	if cb == nil {
		return breaker.Settings{}
	}
	s := breaker.Settings{Failures: breaker.DefaultFailures, Cooldown: breaker.DefaultCooldown, Log: logger}
	if cb.Failures != nil {
		s.Failures = *cb.Failures
	}
	if cb.Cooldown > 0 {
		s.Cooldown = time.Duration(cb.Cooldown)
	}
	return s
}

// retryPolicy is the meter's policy of retries on the same endpoint.
func (t *Tollgate) retryPolicy() retry.Policy {
	p := retry.Policy{Budget: time.Duration(t.RetryBudget), Backoff: time.Duration(t.RetryBackoff)}
	if t.Retries != nil {
		p.Attempts = *t.Retries
		if p.Attempts == 0 {
			p.Attempts = -1 // none
		}
	}
	return p.WithDefaults()
}

// Cleanup stops sharing the breakers and releases the abuse buckets; a
// new config with the same ceilings
// has taken them over by now, so clients keep their state across reloads.
// The handler keeps its pointers: requests still draining from the old
// server during a reload read them, and the buckets are plain memory.
func (t *Tollgate) Cleanup() error {
	if t.stopBreakerSync != nil {
		t.stopBreakerSync()
	}
	t.auth.byIP.Release()
	t.auth.byKey.Release()
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (t *Tollgate) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if isSCIMPath(r.URL.Path) {
		store, apiErr := t.openStore()
		if apiErr == nil {
			apiErr = t.refuseWhileUnavailable(r, store, 0, true)
		}
		if apiErr != nil {
			return apierror.Fail(r, apiErr)
		}
		return t.admin.ServeSCIM(w, r)
	}
	api, ok := admin.ClassifyRoute(r.URL.Path)
	if !ok {
		return next.ServeHTTP(w, r)
	}
	st := &pipeline.State{API: api, Ctx: r.Context()}
	st.Inference = isInferencePost(r, st)
	var apiErr *apierror.Error
	if st.Store, apiErr = t.openStore(); apiErr == nil {
		apiErr = t.refuseWhileUnavailable(r, st.Store, st.API.Kind, false)
	}
	if apiErr != nil {
		return apierror.Fail(r, apiErr)
	}
	if apiErr := t.auth.authenticate(r, st); apiErr != nil {
		return observeAnswer(r, st, apierror.Fail(r, apiErr))
	}
	switch st.API.Kind {
	case admin.RouteManagement, admin.RouteAnyKey, admin.RouteKeyless:
		return t.admin.Serve(w, r, st.Store, st.ID, st.API)
	}
	return observeAnswer(r, st, t.infer(w, r, st))
}

// infer serves an inference route: the model lists and requests not routed
// by model directly, the others planned, routed and metered.
func (t *Tollgate) infer(w http.ResponseWriter, r *http.Request, st *pipeline.State) error {
	switch {
	case !st.API.Op.Takes(r.Method):
		return t.router.ServeOther(w, r, st)
	case st.API.Op == admin.OpCountTokens:
		return t.router.ServeCountTokens(w, r, st)
	case st.API.Op == admin.OpInputTokens:
		return t.router.ServeInputTokens(w, r, st)
	case st.API.Op != admin.OpInfer && st.API.Op != admin.OpInferBelow:
		return t.router.ServeOther(w, r, st)
	}
	for _, stage := range t.stages {
		if apiErr := stage.Serve(st, w, r); apiErr != nil {
			return apierror.Fail(r, apiErr)
		}
	}
	for _, run := range st.Plugins {
		if ah, ok := run.(plugin.AnswerHeader); ok {
			ah.SetAnswerHeader(w.Header())
		}
	}
	if len(st.Plugins) == 0 {
		return t.meter.Run(w, r, st, t.proxies)
	}
	// The answer's rewriters, closest to the client first: citations
	// index the text that the plugins (response-healing) wrote.
	out := w
	var cw *citations.Writer
	if cw = newCiteWriter(w, st); cw != nil {
		out = cw
	}
	for _, run := range st.Plugins {
		if aw, ok := run.(plugin.AnswerWrapper); ok {
			out = aw.WrapAnswer(out)
		}
	}
	err := t.meter.Run(out, r, st, t.proxies)
	for i := len(st.Plugins) - 1; i >= 0; i-- {
		if aw, ok := st.Plugins[i].(plugin.AnswerWrapper); ok {
			aw.FinishAnswer()
		}
	}
	if cw != nil {
		cw.Finish()
	}
	return err
}

// newCiteWriter is the one citation writer of the request's runs that
// cite pages (citations.Citer: a search's results, fetched pages); nil:
// none cites.
func newCiteWriter(w http.ResponseWriter, st *pipeline.State) *citations.Writer {
	var citers []citations.Citer
	for _, run := range st.Plugins {
		if c, ok := run.(citations.Citer); ok {
			citers = append(citers, c)
		}
	}
	if citers == nil {
		return nil
	}
	return citations.NewWriter(w, st.API.Dialect(), st.Route, citers)
}

// planPlugins has each plugin plan its part in the routed request (body
// as the stages before left it): st.Plugins gets the runs. Every request
// is planned: a model may require a plugin the request does not name
// (moderation).
func (t *Tollgate) planPlugins(st *pipeline.State, body []byte) *apierror.Error {
	plugins, _ := st.OwnFields.Get("plugins")
	st.OwnModels = st.Route.Attempts
	req := &st.OwnPluginReq
	*req = plugin.Request{Kind: st.Route.Kind, Body: body, Plugins: plugins, Models: &st.OwnModels, API: routing.FilterAPI(st)}
	if st.Route.ParsedFields != nil {
		req.Rewritten = st.Route.Body // with the PDFs' text (the file parser)
	}
	if st.Plugins == nil { // else with the runs of fitPrompt
		st.Plugins = st.OwnPlugins[:0]
	}
	for _, p := range t.plugins {
		run, apiErr := p.Plan(req)
		if apiErr != nil {
			return apiErr
		}
		if run != nil {
			st.Plugins = append(st.Plugins, run)
		}
	}
	return nil
}

// isSCIMPath reports whether path is the SCIM service's.
func isSCIMPath(path string) bool { return scimapi.Serves(path) }

// Interface guards
var (
	_ caddy.Provisioner           = (*Tollgate)(nil)
	_ caddy.Validator             = (*Tollgate)(nil)
	_ caddy.CleanerUpper          = (*Tollgate)(nil)
	_ caddyhttp.MiddlewareHandler = (*Tollgate)(nil)
)
