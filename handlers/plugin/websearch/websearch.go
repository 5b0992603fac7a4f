package websearch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/citations"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	search "github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/telemetry"
)

func init() {
	caddy.RegisterModule(new(WebSearch))
}

// name is the plugin's name. A request asks for web search with the
// plugins entry {"id":"web"}, the server tool, the :online suffix or
// x_search_filter, all read before routing (Preroute); "web-search" is
// no id of the public API.
const name = "web-search"

// WebSearch is the web search plugin, the Caddy module
// tollgate.plugins.web_search: before the request is routed it turns
// every form of web search request into one plan: it validates the
// parameters (400 naming the field), removes the server tool, the
// deprecated plugin, the ":online" suffix and x_search_filter from the
// body, picks the engine, and for a native engine writes the provider
// family's own search tool into the body. A gateway-side engine runs
// later, once the request is admitted (the run's PrepareAttempts), once
// per request whatever the fallbacks. The answer's links to the results
// become url_citation annotations (the citation writer). Its engines and
// prices are the tollgate app's web_search block.
type WebSearch struct {
	gw       gateway.Gateway // nil: not provisioned (unit tests)
	settings *Settings
}

// CaddyModule returns the Caddy module information.
func (*WebSearch) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tollgate.plugins.web_search",
		New: func() caddy.Module { return new(WebSearch) },
	}
}

// Provision finds the operator's web search settings, the app's
// web_search block.
func (ws *WebSearch) Provision(ctx caddy.Context) error {
	gw, err := gateway.Load(ctx)
	if err != nil {
		return err
	}
	ws.setup(gw)
	return nil
}

// New is the plugin as Provision makes it on gw (a handler's tests).
func New(gw gateway.Gateway) *WebSearch {
	ws := new(WebSearch)
	ws.setup(gw)
	return ws
}

// setup takes the gateway's web search settings; gw nil: a plugin Caddy
// did not provision (unit tests), whose brand is "service", with no
// gateway-side engine.
func (ws *WebSearch) setup(gw gateway.Gateway) {
	ws.gw = gw
	if p, ok := gw.(Provider); ok {
		ws.settings = p.WebSearchSettings()
	}
	if ws.settings == nil {
		ws.settings = noEngines()
	}
}

// noEngines are the settings without a gateway-side engine.
var noEngines = sync.OnceValue(func() *Settings {
	s, _ := (*Config)(nil).Build(nil, nil) // without a config it cannot fail
	return s
})

// UnmarshalCaddyfile reads the plugin's directive, which takes nothing
// (the engines are the global web_search block):
//
//	web_search
func (*WebSearch) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugin.NoOptions(d, "web_search", " (the engines are the global web_search block)")
}

// Name implements plugin.Plugin.
func (*WebSearch) Name() string { return name }

// CheckEntry implements plugin.Plugin: id and enabled are an entry's only
// members.
func (*WebSearch) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	return plugin.CheckMembers(path, name, entry, nil)
}

// Plan implements plugin.Plugin: the search is planned before routing
// (Preroute). On a route without web search (/completions, /embeddings)
// an entry naming the plugin is an unknown plugin, as the public API has
// no such id.
func (*WebSearch) Plan(req *plugin.Request) (plugin.Run, *apierror.Error) {
	if req.Kind != dialect.Other {
		return nil, nil
	}
	if _, i := plugin.Entry(req.Plugins, name); i >= 0 {
		return nil, apierror.BadRequest(fmt.Sprintf("plugins[%d].id: unknown plugin %q", i, name))
	}
	return nil, nil
}

// conf is the web search settings: none for a plugin Caddy did not
// provision.
func (ws *WebSearch) conf() *Settings {
	if ws.settings == nil {
		return noEngines()
	}
	return ws.settings
}

// brand is the server tools' type prefix.
func (ws *WebSearch) brand() string {
	if ws.gw == nil {
		return "service"
	}
	return ws.gw.Brand()
}

// Preroute implements plugin.Prerouter: it rewrites the body of a
// request that asks for web search, filters its query and plans the
// search, the run; other bodies come back as they are.
func (ws *WebSearch) Preroute(req *plugin.Request) ([]byte, plugin.Run, *apierror.Error) {
	if req.Kind == dialect.Other {
		return req.Body, nil, nil
	}
	out, plan, deprecated, apiErr := ws.prepare(req.Body, req.Kind)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if plan == nil {
		return out, nil, nil
	}
	if len(deprecated) > 0 {
		// The request used a deprecated form (the web plugin, the
		// :online suffix); clients check the header's presence.
		req.Header.Set("Deprecation", "true")
	}
	// The query and the results pass the caller's content filters.
	if req.Filters != nil {
		if plan.filter, apiErr = req.Filters.FetchedFilter(); apiErr != nil {
			return nil, nil, apiErr
		}
	}
	if plan.filter != nil && plan.query != "" {
		if apiErr := plan.filter.FilterQuery(&plan.query); apiErr != nil {
			return nil, nil, apiErr
		}
	}
	return out, plan, nil
}

// searchPlan is one request's web search, the plugin's run: the meter
// and the citation writer reach it through the plugin hooks (all in the
// request's goroutine).
type searchPlan struct {
	spec   *search.Spec
	engine string       // "native" or a gateway-side engine name
	family string       // provider family of the model: openai, anthropic, x, ""
	kind   dialect.Kind // chat, responses or messages
	query  string

	eng   engines.Engine
	price billing.Price // per result when the model sets none

	// nativeTools is how many tools the native translation appended to a
	// Responses body (its chat-only attempts get the chat form instead).
	nativeTools int64

	// filter is the caller's content filters, which the results pass;
	// nil: none.
	filter plugin.TextFilter

	// After run: the results handed to the model.
	ran     bool
	sources []search.Source
	// After settle: what was charged.
	charged         bool
	results         int64
	xPosts, xProfil int64
}

// prepare normalizes the body and plans the search; plan is nil when the
// request asks for none (out is then body).
func (ws *WebSearch) prepare(body []byte, kind dialect.Kind) ([]byte, *searchPlan, []string, *apierror.Error) {
	if !mentionsSearch(body) {
		// The router answers for bodies that are not JSON objects.
		return body, nil, nil, nil
	}
	if kind == dialect.Messages {
		var apiErr *apierror.Error
		if body, apiErr = anthropicSearchTools(body, ws.brand()); apiErr != nil {
			return nil, nil, nil, apiErr
		}
	}
	out, spec, deprecated, ferr := search.NormalizeWith(body, ws.brand(), search.Options{Limits: ws.conf().limits})
	if ferr != nil {
		return nil, nil, nil, apierror.BadRequest(ferr.Error())
	}
	if spec == nil {
		return body, nil, nil, nil
	}
	model := gjson.GetBytes(out, "model").Str
	plan := &searchPlan{spec: spec, family: ws.family(model), kind: kind}
	if kind == dialect.Messages {
		if spec.Engine == "native" {
			return nil, nil, nil, apierror.BadRequest("engine: native web search is not available on the Messages route; use one of the gateway's engines")
		}
		// Served through the chat translation: the gateway's engines search.
		plan.family = ""
	}
	switch e := spec.Engine; {
	case e == "native":
		if plan.family == "" {
			return nil, nil, nil, apierror.BadRequest("engine: native web search is not available for model " + strconv.Quote(model))
		}
		plan.engine = e
	case e != "":
		if _, ok := ws.conf().engines[e]; !ok {
			return nil, nil, nil, apierror.BadRequest("engine: " + strconv.Quote(e) + " is not configured on this gateway")
		}
		plan.engine = e
	case plan.family != "":
		plan.engine = "native"
	case ws.conf().defaultEngine != "":
		plan.engine = ws.conf().defaultEngine
	default:
		return nil, nil, nil, apierror.BadRequest("engine: no web search engine is available for model " + strconv.Quote(model) + " on this gateway")
	}
	if spec.XSearch != nil && plan.engine != "native" {
		return nil, nil, nil, apierror.BadRequest("x_search: requires the native engine")
	}
	out = removeServerTool(out)
	if plan.engine == "native" {
		plan.price = ws.conf().nativePrice
		var apiErr *apierror.Error
		n := gjson.GetBytes(out, "tools.#").Int()
		if out, apiErr = nativeTranslate(out, kind, plan.family, spec); apiErr != nil {
			return nil, nil, nil, apiErr
		}
		plan.nativeTools = gjson.GetBytes(out, "tools.#").Int() - n
		return out, plan, deprecated, nil
	}
	se := ws.conf().engines[plan.engine]
	plan.eng, plan.price = se.engine, se.price
	plan.query = spec.SearchPrompt
	if plan.query == "" {
		if kind == dialect.Messages {
			plan.query = lastMessagesUserText(out)
		} else {
			plan.query = reqbody.LastUserText(out, kind == dialect.Responses)
		}
	}
	if strings.TrimSpace(plan.query) == "" {
		field := "messages"
		if kind == dialect.Responses {
			field = "input"
		}
		return nil, nil, nil, apierror.BadRequest(field + ": web search needs a user message (or search_prompt) to search for")
	}
	return out, plan, deprecated, nil
}

// family is the native search family of model: its first provider's
// search_family when set, else anthropic for an Anthropic-style provider,
// else the id's vendor prefix.
func (ws *WebSearch) family(model string) string {
	if ws.gw == nil {
		return searchFamily(model)
	}
	if m, ok := ws.gw.Catalog().Lookup(model); ok && len(m.Providers) > 0 {
		switch f := m.Providers[0].SearchFamily; {
		case f == "none":
			return ""
		case f == "" && m.Providers[0].D().SearchFamily() != "":
			return m.Providers[0].D().SearchFamily()
		case f == "":
		default:
			return f
		}
	}
	return searchFamily(model)
}

// searchMarkers are the bytes every form of web search request contains.
var searchMarkers = [][]byte{[]byte("web_search"), []byte(`"plugins"`), []byte(":online"), []byte("x_search_filter")}

// mentionsSearch is a quick test that lets requests without web search
// skip the JSON rewrite.
func mentionsSearch(body []byte) bool {
	for _, m := range searchMarkers {
		if bytes.Contains(body, m) {
			return true
		}
	}
	return false
}

// removeServerTool drops the server tool Normalize put last in tools, and
// tools itself when nothing else is left.
func removeServerTool(body []byte) []byte {
	n := gjson.GetBytes(body, "tools.#").Int()
	if n <= 1 {
		out, _ := sjson.DeleteBytes(body, "tools")
		return out
	}
	out, _ := sjson.DeleteBytes(body, "tools."+strconv.FormatInt(n-1, 10))
	return out
}

// Bounds of the text one result adds to the prompt, so that the hold can
// cover the injected tokens.
const (
	maxSnippetRunes = 1000
	maxTitleRunes   = 200
	maxURLBytes     = 2048
	// per result: title, URL, date, snippet (up to 4 bytes a rune) and labels
	maxResultBytes   = 4*(maxSnippetRunes+maxTitleRunes) + maxURLBytes + 64
	searchHeaderSize = 1024
)

// injectedTokens bounds the prompt tokens the search results add.
func (p *searchPlan) injectedTokens() int64 {
	if p.engine == "native" {
		return 0
	}
	// A token per byte, as the prompt's bound (promptBound).
	return int64(searchHeaderSize + 2*len(p.query) + (p.spec.MaxResults+1)*maxResultBytes)
}

// xItemPrices are the prices of X search items fetched.
var xPostPrice, xProfilePrice = mustAmount(XSearchPostPrice), mustAmount(XSearchProfilePrice)

func mustAmount(s string) money.Amount {
	a, err := money.ParseAmount(s)
	if err != nil {
		panic(err)
	}
	return a
}

// holdExtra is the worst-case cost the search adds on the costliest
// attempt: max_results results, the injected prompt tokens, and for X
// search max_results posts and profiles. credits is the part a BYOK
// request still pays in credits: a gateway-side engine's results, which
// the platform pays for (native searches bill the caller's own key).
func (p *searchPlan) holdExtra(route *upstream.Route) (hold, credits money.Amount, err error) {
	for _, a := range route.Attempts {
		price := a.Model.Pricing.WebSearch
		if price == 0 {
			price = p.price
		}
		results, err := billing.Cost(billing.Pricing{WebSearch: price}, billing.Usage{SearchResults: int64(p.spec.MaxResults)})
		if err != nil {
			return 0, 0, err
		}
		injected, err := billing.TokenCost(route.HoldPricing(&a), p.injectedTokens(), 0)
		if err != nil {
			return 0, 0, err
		}
		h, err := addCost(results, injected)
		if err != nil {
			return 0, 0, err
		}
		hold = max(hold, h)
		if p.engine != "native" {
			credits = max(credits, results)
		}
	}
	if p.spec.XSearch != nil {
		x, err := xItemsCost(int64(p.spec.MaxResults), int64(p.spec.MaxResults))
		if err != nil {
			return 0, 0, err
		}
		if hold, err = addCost(hold, x); err != nil {
			return 0, 0, err
		}
	}
	return hold, credits, nil
}

// xItemsCost prices X search posts and profiles fetched.
func xItemsCost(posts, profiles int64) (money.Amount, error) {
	a, ok1 := money.MulAmount(xPostPrice, posts)
	b, ok2 := money.MulAmount(xProfilePrice, profiles)
	if !ok1 || !ok2 {
		return 0, billing.ErrCostRange
	}
	return addCost(a, b)
}

// run performs a gateway-side search after admission and hands the
// results to the model by rewriting the route's body (every fallback
// attempt replays it). Native searches have nothing to do here. The
// returned error is the client's answer: nothing is charged.
func (p *searchPlan) run(ctx context.Context, route *upstream.Route) *apierror.Error {
	if p.engine == "native" || p.ran {
		return nil
	}
	p.ran = true
	results, err := p.eng.Search(ctx, engines.Query{
		Text: p.query, MaxResults: p.spec.MaxResults,
		IncludeDomains: p.spec.IncludeDomains, ExcludeDomains: p.spec.ExcludeDomains,
	})
	// A search the client abandoned is not the engine's failure.
	telemetry.WebSearch(p.eng.Name(), len(results), err != nil && ctx.Err() == nil)
	if err != nil {
		if ctx.Err() != nil {
			return apierror.New(499, "Client closed the request")
		}
		status, msg := http.StatusBadGateway, "Web search failed"
		var ee *engines.Error
		if errors.As(err, &ee) {
			msg = "Web search engine " + ee.Engine + " failed"
			if ee.StatusCode != 0 {
				msg += " with HTTP " + strconv.Itoa(ee.StatusCode)
			}
			if ee.Timeout() {
				msg = "Web search engine " + ee.Engine + " timed out"
			}
		}
		return &apierror.Error{Status: status, Message: msg, Metadata: map[string]any{"engine": p.engine}}
	}
	p.sources = make([]search.Source, len(results))
	for i, res := range results {
		p.sources[i] = search.Source{
			Title:         cutRunes(res.Title, maxTitleRunes),
			URL:           cutBytes(res.URL, maxURLBytes),
			Snippet:       cutRunes(res.Snippet, maxSnippetRunes),
			PublishedDate: cutRunes(res.PublishedDate, 40),
		}
	}
	for i := range p.sources {
		if p.filter == nil {
			break
		}
		if h := p.filter.Filter(&p.sources[i].Title, &p.sources[i].Snippet); h != nil {
			return p.filter.Refusal(h)
		}
	}
	msg := search.SystemMessage(p.sources, time.Now(), p.query)
	if route.Kind != dialect.Messages {
		// A Messages body has no system messages; its providers get the
		// chat body below.
		body, ferr := search.Insert(route.Body, msg)
		if ferr != nil {
			return apierror.BadRequest(ferr.Error())
		}
		route.Body = body
	}
	// A chat-only provider gets the translated chat body (handlers/translate,
	// messages): the results go into it too.
	if route.ChatBody != nil {
		cb, ferr := search.InsertIntoMessages(route.ChatBody, msg)
		if ferr != nil {
			return apierror.BadRequest(ferr.Error())
		}
		route.ChatBody = cb
	}
	for i, a := range route.Attempts {
		if a.Provider == route.Provider && a.Model == route.Model {
			if err := route.Prepare(i); err != nil {
				return apierror.BadRequest("Request body is not valid JSON")
			}
			break
		}
	}
	route.InputTokens = billing.EstimateTokens(len(route.Sent))
	return nil
}

// charge adds the search to the request's pricing and usage; upstreamUsage
// is the provider's usage object (for the X search counters). It returns
// the cost of a gateway-side engine's results, which a BYOK request pays
// in credits.
//
// Provider-reported X counts too large to price are billing.ErrCostRange.
//
// counted: the provider reports how many searches it ran
// (usage.server_tool_use.web_search_requests, Anthropic's Messages API);
// a native search is then billed per search run, at most max_results.
func (p *searchPlan) charge(pricing *billing.Pricing, usage *billing.Usage, upstreamUsage string, counted bool) (credits money.Amount, err error) {
	if pricing.WebSearch == 0 {
		pricing.WebSearch = p.price
	}
	p.results = int64(len(p.sources))
	if p.engine == "native" {
		// Providers do not report a result count: a native search is billed
		// as the max_results results it may return, or per search run
		// when the provider counts them (within the hold's max_results).
		p.results = int64(p.spec.MaxResults)
		if n := gjson.Get(upstreamUsage, "server_tool_use.web_search_requests"); counted && n.Type == gjson.Number {
			p.results = min(max(n.Int(), 0), p.results)
		}
	}
	usage.SearchResults = p.results
	if p.spec.XSearch != nil && upstreamUsage != "" {
		c := gjson.GetMany(upstreamUsage, "x_search_usage.posts_fetched", "x_search_usage.profiles_fetched")
		p.xPosts, p.xProfil = max(c[0].Int(), 0), max(c[1].Int(), 0)
		x, err := xItemsCost(p.xPosts, p.xProfil)
		if err == nil {
			usage.Extra, err = addCost(usage.Extra, x)
		}
		if err != nil {
			return 0, err
		}
	}
	p.charged = true
	if p.engine == "native" {
		return 0, nil
	}
	return billing.Cost(billing.Pricing{WebSearch: pricing.WebSearch}, billing.Usage{SearchResults: p.results})
}

// serverToolUse is the usage.server_tool_use_details object of the
// answer: the public ServerToolUseDetails, plus the result and X item
// counts.
func (p *searchPlan) serverToolUse() string {
	s := `{"web_search_requests":1,"web_search_results":` + strconv.FormatInt(p.results, 10)
	if p.spec.XSearch != nil {
		s += `,"x_search_posts":` + strconv.FormatInt(p.xPosts, 10) + `,"x_search_profiles":` + strconv.FormatInt(p.xProfil, 10)
	}
	return s + "}"
}

// Sources are the results handed to the model (citations.Citer).
func (p *searchPlan) Sources() []search.Source { return p.sources }

// NumbersSources implements citations.NumberedCiter: the model was told
// the results by number.
func (p *searchPlan) NumbersSources() {}

// ToolUse is the search's usage once charged (citations.Citer).
func (p *searchPlan) ToolUse() (details, anthropic string) {
	if !p.charged {
		return "", ""
	}
	s := p.serverToolUse()
	return s[1 : len(s)-1], `"web_search_requests":1`
}

// ProviderCites reports whether the provider annotates its own answer
// on route (nil: before any attempt) (citations.ProviderCiter): a native
// search by OpenAI, or by xAI on the Responses route.
func (p *searchPlan) ProviderCites(route *upstream.Route) bool {
	if p.engine != "native" {
		return false
	}
	switch {
	case route != nil && route.ViaChat:
		// Anthropic's native search cites its sources itself; the
		// translation made them url_citation annotations.
		return p.family == "anthropic"
	case route != nil && route.Translate:
		// A chat-only provider answered a Responses request: it
		// annotates its own answer as in chat completions.
		return p.family == "openai"
	}
	return p.family == "openai" || p.family == "x" && p.kind == dialect.Responses
}

// HoldFor implements plugin.RouteCoster (holdExtra).
func (p *searchPlan) HoldFor(route *upstream.Route) (hold, credits money.Amount, err error) {
	return p.holdExtra(route)
}

// PrepareAttempts implements plugin.AttemptPreparer: only an admitted
// request searches, once, before any attempt (run).
func (p *searchPlan) PrepareAttempts(ctx context.Context, route *upstream.Route) *apierror.Error {
	return p.run(ctx, route)
}

// Settle implements plugin.Settler: the search's charge (charge), a
// gateway-side engine's results paid in credits under BYOK.
func (p *searchPlan) Settle(s *plugin.Settlement) error {
	c, err := p.charge(&s.Pricing, &s.Usage, s.UsageRaw, s.Route.MessagesAPI)
	if err == nil {
		s.Credits, err = addCost(s.Credits, c)
	}
	return err
}

// PromptExtra implements plugin.PromptExtender: a gateway-side engine's
// results (injectedTokens); a native search's no count bounds.
func (p *searchPlan) PromptExtra() (tokens int64, unbounded bool) {
	return p.injectedTokens(), p.engine == "native"
}

// ObserveCharge implements plugin.ChargeObserver: a native search's
// results, which no engine of the gateway counted.
func (p *searchPlan) ObserveCharge() {
	if p.engine == "native" && p.results > 0 {
		telemetry.WebSearch("native", int(p.results), false)
	}
}

// AdaptRoute implements plugin.RouteAdapter: a native search's chat
// form for the chat-only attempts (chatSearch).
func (p *searchPlan) AdaptRoute(route *upstream.Route) *apierror.Error {
	return chatSearch(route, p)
}

// addCost sums two costs; a sum beyond any amount is
// billing.ErrCostRange.
func addCost(a, b money.Amount) (money.Amount, error) {
	s, ok := money.AddAmounts(a, b)
	if !ok {
		return 0, billing.ErrCostRange
	}
	return s, nil
}

func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Interface guards
var (
	_ caddy.Provisioner       = (*WebSearch)(nil)
	_ caddyfile.Unmarshaler   = (*WebSearch)(nil)
	_ plugin.Plugin           = (*WebSearch)(nil)
	_ plugin.Prerouter        = (*WebSearch)(nil)
	_ plugin.RouteCoster      = (*searchPlan)(nil)
	_ plugin.AttemptPreparer  = (*searchPlan)(nil)
	_ plugin.Settler          = (*searchPlan)(nil)
	_ plugin.PromptExtender   = (*searchPlan)(nil)
	_ plugin.ChargeObserver   = (*searchPlan)(nil)
	_ plugin.RouteAdapter     = (*searchPlan)(nil)
	_ citations.NumberedCiter = (*searchPlan)(nil)
	_ citations.ProviderCiter = (*searchPlan)(nil)
)
