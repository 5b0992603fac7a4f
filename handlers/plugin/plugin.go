// Package plugin is the seam between the gateway's request pipeline and
// the plugins a request asks for in its plugins array
// ({"plugins":[{"id":"response-healing"}]}).
//
// A plugin is a Caddy module in the tollgate.plugins namespace, one
// package each, loaded by the tollgate handler with ctx.LoadModule (as
// reverse_proxy loads its transport): the built-in ones register
// themselves, and a third party adds one with xcaddy build --with. The
// handler calls a plugin at fixed points of every request that names it:
//
//  1. CheckEntry, when the request's body is checked: the entry's
//     members, each error a 400 naming its place;
//  2. an optional plan before routing (Prerouter), once the guardrails
//     have filtered the body: its rewrite of the body and a Run; the
//     Run's optional AttemptFilter keeps, once routed, the attempts that
//     can serve it, and RouteAdapter adapts the route as it is planned;
//  3. an optional body rewrite (BodyRewriter), once the route's models
//     are known, before the prompt is counted;
//  4. an optional prompt fit (PromptFitter), once the route's attempts
//     and output limit are final, just before the prompt is counted
//     against their context windows;
//  5. Plan, once every request is routed, whether or not it names the
//     plugin (a model may require one: Plan sees the route's models):
//     what the plugin does for this request, a Run, or nil when nothing;
//  6. the Run's optional parts: Coster adds to the hold admission takes
//     and to the charge settlement makes (RouteCoster adds a hold that
//     depends on the route, Settler corrects the charge), AnswerHeader
//     sets headers of the answer before any attempt is sent, Admitter
//     acts once the request is admitted, before any attempt, and may
//     refuse it (a refusal is charged what the run's Charge then is),
//     AttemptPreparer acts after them, before any attempt (a search),
//     AttemptWrapper wraps each attempt's provider call, AnswerWrapper
//     rewrites the answer on its way to the client, PromptExtender says
//     what the run adds to the prompt that settlement bounds, and
//     ChargeObserver counts the durable charge in the metrics.
//
// A plugin holds no per-request state: Plan's Run does.
package plugin

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// Namespace is the Caddy module namespace of the plugins.
const Namespace = "tollgate.plugins"

// Plugin is a plugin a request may ask for by its Name.
type Plugin interface {
	caddy.Module
	// Name is the plugin's id in a request's plugins array
	// ("response-healing").
	Name() string
	// CheckEntry checks an entry of the plugins array that asks for the
	// plugin (not disabled); path is its place ("plugins[2]"), which the
	// error's message starts with.
	CheckEntry(path string, entry gjson.Result) *apierror.Error
	// Plan is what the plugin does for a routed request: nil when the
	// request does not ask for it (nor its models require it) or it has
	// nothing to do. A request to which it does not apply must cost no
	// allocation.
	Plan(req *Request) (Run, *apierror.Error)
}

// Request is what a plugin sees of a request.
type Request struct {
	// Kind is the dialect of the route: the client's API.
	Kind dialect.Kind
	// Body is the client's body as the gateway's stages left it. Plan
	// and Preroute see it with its plugins array (Preroute before it is
	// checked: it reads its own entries); RewriteBody without.
	Body []byte
	// Plugins is the request's plugins array, checked; its zero value
	// when the request has none. Not seen by Preroute.
	Plugins gjson.Result
	// Models are the catalog models the route may try. Not seen by
	// Preroute: nil before routing.
	Models Models
	// API is the body's API as the content filters read it. Seen by
	// Plan only.
	API contentfilter.API
	// Rewritten is the body as the BodyRewriters left it (the file
	// parser's PDFs as text), less the gateway's own fields; nil when
	// none changed it. Seen by Plan only.
	Rewritten []byte
	// Transforms is the request's transforms array, the public API's
	// older way to ask for a plugin (["middle-out"]); its zero value when
	// the request has none. Seen by FitPrompt only.
	Transforms gjson.Result
	// MaxTokens is the request's output limit (max_tokens or its
	// like); 0 unset. Seen by FitPrompt only.
	MaxTokens int64
	// Tokens counts prompts as admission counts them. Seen by FitPrompt
	// only.
	Tokens PromptCounter
	// Ctx is the request's context: work on its behalf (a fetch, a
	// search) stops when it ends. Seen by Preroute only.
	Ctx context.Context
	// Header is the answer's header, for what it says of the request
	// before any stage may refuse it (Deprecation). Seen by Preroute
	// only.
	Header http.Header
	// Filters gives the caller's guardrails' filter of text the gateway
	// brings in for the model. Seen by Preroute only.
	Filters Guardrails
}

// Guardrails gives a request's content filter of fetched text.
type Guardrails interface {
	// FetchedFilter is the filter of the caller's guardrails for text the
	// gateway brings in for the model (pages, search results); nil when
	// none is in force.
	FetchedFilter() (TextFilter, *apierror.Error)
}

// TextFilter filters text the gateway brings in for the model as the
// prompt was filtered. It is not the user's own text: a guardrail that
// scans the user's text only leaves it alone.
type TextFilter interface {
	// Filter filters each text in place; the flags are recorded with the
	// generation. A block comes back, the texts then not to be used; so
	// does a scan that stopped before a text's end: text the filters did
	// not see whole does not reach the model.
	Filter(texts ...*string) *contentfilter.Hit
	// Refusal is the client's answer to a request refused for a block
	// Filter returned: the guardrail and the filter's label, never the
	// text it matched.
	Refusal(block *contentfilter.Hit) *apierror.Error
	// FilterQuery filters text the gateway sends out on the user's behalf
	// (a search query) as the user's own text, in place; its error (a
	// block, a scan that stopped) is the request's answer.
	FilterQuery(q *string) *apierror.Error
}

// PromptCounter counts a chat body's prompt tokens as the gateway's
// admission counts them.
type PromptCounter interface {
	// ChatPrompt counts a chat completions body with enc; unbounded: it
	// holds parts whose tokens no count bounds.
	ChatPrompt(enc *tokenizer.Encoding, body []byte) (tokens int64, unbounded bool)
	// ChatMessage counts one message of a chat body, as ChatPrompt
	// counts it there.
	ChatMessage(enc *tokenizer.Encoding, msg gjson.Result) int64
}

// Models are the catalog models a route may try, in its order; a model
// may be nil (a private endpoint's).
type Models interface {
	Len() int
	At(i int) *catalog.Model
}

// BodyRewriter is a Plugin that rewrites what the providers receive of
// every request, whether or not it names the plugin: once the route's
// models are known and the gateway's own fields are out of the body,
// before its prompt is counted and filtered. rewritten is false when body
// is returned as it came.
type BodyRewriter interface {
	RewriteBody(ctx context.Context, req *Request) (body []byte, rewritten bool, apiErr *apierror.Error)
}

// PromptFitter is a Plugin that fits every routed request's prompt to
// its route's context windows (context-compression), whether or not its
// plugins array names the plugin (transforms may ask for it): once the
// route's attempts and output limit are final, before the prompt is
// counted against the windows. It returns the body every attempt is sent
// (req.Body when unchanged) and a Run for the rest of the request, nil
// when it did nothing. A request that does not ask for it must cost no
// allocation.
type PromptFitter interface {
	FitPrompt(req *Request) (body []byte, run Run, apiErr *apierror.Error)
}

// Prerouter is a Plugin that plans its part before the request is
// routed (web-fetch): once the guardrails have filtered the body, it may
// rewrite the body (what routing, admission and every attempt then see)
// and returns a Run for the rest of the request, nil when the request
// does not ask for it. Prerouters run in the order of the gateway's
// plugins, and their runs come first in the request's. A request that
// does not ask must cost no allocation.
type Prerouter interface {
	Preroute(req *Request) (body []byte, run Run, apiErr *apierror.Error)
}

// Run is a plugin's part in one request; its optional interfaces say
// what it adds: AttemptFilter, RouteAdapter, Coster, RouteCoster,
// AnswerHeader, Admitter, AttemptPreparer, AttemptWrapper, AnswerWrapper,
// Settler, PromptExtender and ChargeObserver.
type Run any

// AttemptFilter is a Run that keeps the route's attempts that can serve
// it, once routed, before the plugins plan (Plan): a server tool whose
// loop reads one dialect. It may change the attempts and what they are
// sent; none left is its error.
type AttemptFilter interface {
	FilterAttempts(route *upstream.Route) *apierror.Error
}

// RouteCoster is a Run whose hold depends on the route: the worst case
// it adds on the route's costliest attempt (a server tool's further
// rounds at the model's prices).
type RouteCoster interface {
	// HoldFor is the most the run may add to the charge on route, held at
	// admission; credits is the part of it that a request paying its
	// provider with its own key pays in credits (the gateway's own work).
	HoldFor(route *upstream.Route) (hold, credits money.Amount, err error)
}

// AttemptWrapper is a Run that wraps each attempt's provider call: a
// server tool's loop, which calls the provider in rounds.
type AttemptWrapper interface {
	// WrapAttempt is the handler the attempt on route is sent to; next is
	// the provider's reverse_proxy, the request's URL already the
	// provider's, which aborts with panic(http.ErrAbortHandler) when
	// copying an answer fails.
	WrapAttempt(next caddyhttp.Handler, route *upstream.Route) caddyhttp.Handler
}

// Settler is a Run that corrects the charge of the answer at settlement,
// before the Costers' charges are added.
type Settler interface {
	// Settle corrects s for the run's part; an error (a sum beyond any
	// amount) has the request charged what admission held.
	Settle(s *Settlement) error
}

// Settlement is the charge of an answer as settlement computes it.
type Settlement struct {
	Route *upstream.Route
	// Pricing is the answering model's and Usage what the answer used,
	// as the meter charges them; a run may change both (its price, its
	// tokens, Usage.Extra).
	Pricing billing.Pricing
	Usage   billing.Usage
	// UsageRaw is the provider's usage object as it came.
	UsageRaw string
	// Credits is the part paid in credits when the request pays its
	// provider with its own key: a run adds its own work's.
	Credits money.Amount
	// Corrected: the usage is not the provider's report (the answer then
	// reports the usage charged).
	Corrected bool
}

// RouteAdapter is a Run that adapts the route while it is planned,
// before its prompt is bounded and counted: a native web search's chat
// form for the route's chat-only attempts.
type RouteAdapter interface {
	AdaptRoute(route *upstream.Route) *apierror.Error
}

// AttemptPreparer is a Run that acts once the request is admitted and
// its output limit applied (after the Admitters), before any attempt is
// sent: work the hold paid for whose result every attempt carries (a
// gateway-side search writes its results into the route's bodies). Its
// error is the client's answer: the hold is released, nothing charged.
type AttemptPreparer interface {
	PrepareAttempts(ctx context.Context, route *upstream.Route) *apierror.Error
}

// PromptExtender is a Run that adds to the prompt after admission
// counted it (a gateway-side search's results) or has the provider add
// to it (a provider's own search): settlement bounds the provider's
// reported prompt tokens with the route's count plus this.
type PromptExtender interface {
	// PromptExtra bounds the tokens the run adds to the prompt;
	// unbounded: nothing does (the context window then bounds the
	// prompt).
	PromptExtra() (tokens int64, unbounded bool)
}

// ChargeObserver is a Run that counts its part of the request's durable
// charge in the metrics (a native search's results).
type ChargeObserver interface {
	ObserveCharge()
}

// AnswerHeader is a Run that sets headers of the answer: once routed,
// before any attempt is sent, so that every attempt's answer carries
// them.
type AnswerHeader interface {
	SetAnswerHeader(h http.Header)
}

// Coster is a Run that costs: the gateway's own work, paid in credits
// even by a request that pays its provider with its own key.
type Coster interface {
	// Hold is the most the run may add to the charge, held at admission.
	Hold() money.Amount
	// Charge is what it adds to the charge, at settlement (at most Hold).
	Charge() money.Amount
}

// Admitter is a Run that acts once the request is admitted (its cost and
// the runs' holds placed), before any search or attempt: a provider the
// gateway asks about the request (moderation). nil lets the request on.
type Admitter interface {
	Admit(ctx context.Context) *Refusal
}

// Refusal is an Admitter's refusal of the request: Err is the client's
// answer. When the run is a Coster whose Charge is then above zero (its
// work was done), the request is charged that alone and recorded as a
// generation of Model at Provider, an error whose finish reason is
// content_filter; else nothing is charged.
type Refusal struct {
	Err             *apierror.Error
	Model, Provider string
}

// AnswerWrapper is a Run that rewrites the answer.
type AnswerWrapper interface {
	// WrapAnswer is the writer the answer goes through on its way to w.
	WrapAnswer(w http.ResponseWriter) http.ResponseWriter
	// FinishAnswer sends what the wrapper held back, once the answer is
	// complete.
	FinishAnswer()
}

// ModelChooser is a Plugin that serves model ids of its own (the auto
// router's): the routing stage asks it which catalog model serves a
// request naming one, before that model is looked up, so that the answer,
// the hold and the generation name the model chosen.
type ModelChooser interface {
	// Chooses reports whether id is one of the plugin's model ids.
	Chooses(id string) bool
	// ChooseModel is the catalog id of the model that serves req (its
	// Kind, Body and Plugins), among what cands says the calling key may
	// use; its error is the request's answer.
	ChooseModel(req *Request, cands Candidates) (string, *apierror.Error)
}

// Candidates is what the routing stage knows of the catalog's models for
// one request.
type Candidates interface {
	// Usable is the catalog model of id when the calling key may use it
	// (the guardrails allow it and one of its endpoints is the key's to
	// call); nil otherwise.
	Usable(id string) *catalog.Model
	// PromptTokens is the request's prompt counted with m's tokenizer
	// as admission counts it, else bounded by the body's bytes.
	PromptTokens(m *catalog.Model) int64
}

// Aliased is a Plugin a request may also name by other ids (the public
// API's older name for the same plugin).
type Aliased interface {
	Aliases() []string
}

// Set is the plugins a gateway offers.
type Set []Plugin

// Lookup is the plugin of the name (or one of its Aliases); nil: none.
func (s Set) Lookup(name string) Plugin {
	for _, p := range s {
		if p.Name() == name {
			return p
		}
		if a, ok := p.(Aliased); ok && slices.Contains(a.Aliases(), name) {
			return p
		}
	}
	return nil
}

// Validate refuses a set in which two plugins take the same name.
func (s Set) Validate() error {
	for i, p := range s {
		for _, q := range s[:i] {
			if p.Name() == q.Name() {
				return fmt.Errorf("plugins %s and %s both take the name %q", q.CaddyModule().ID, p.CaddyModule().ID, p.Name())
			}
		}
	}
	return nil
}

// Load loads every plugin module registered with Caddy: those
// configured (by module name, from the ModuleMap field of mod named
// field) with their configuration, the others with none; in the order of
// their module IDs.
func Load(ctx caddy.Context, mod any, field string, configured caddy.ModuleMap) (Set, error) {
	var set Set
	if len(configured) > 0 {
		loaded, err := ctx.LoadModule(mod, field)
		if err != nil {
			return nil, fmt.Errorf("loading plugins: %v", err)
		}
		for _, m := range loaded.(map[string]any) {
			set = append(set, m.(Plugin))
		}
	}
	for _, info := range caddy.GetModules(Namespace) {
		if _, ok := configured[info.ID.Name()]; ok {
			continue
		}
		m, err := ctx.LoadModuleByID(string(info.ID), nil)
		if err != nil {
			return nil, fmt.Errorf("loading plugin %s: %v", info.ID, err)
		}
		p, ok := m.(Plugin)
		if !ok {
			return nil, fmt.Errorf("module %s is not a plugin", info.ID)
		}
		set = append(set, p)
	}
	// In the order of their module IDs, as Registered: the order Plan is
	// called in and the answer wrapped in does not follow map order.
	slices.SortFunc(set, func(a, b Plugin) int { return strings.Compare(string(a.CaddyModule().ID), string(b.CaddyModule().ID)) })
	return set, set.Validate()
}

// Registered is every plugin module registered with Caddy, each as its
// New made it, not provisioned: for a handler that Caddy did not
// provision (unit tests), whose plugins only check entries.
var Registered = sync.OnceValue(func() Set {
	var set Set
	for _, info := range caddy.GetModules(Namespace) {
		if p, ok := info.New().(Plugin); ok {
			set = append(set, p)
		}
	}
	return set
})

// Entry is the first entry of a request's plugins array that asks for
// the plugin of the name (not disabled), and its index; -1: none. The
// entries were checked. An array that does not hold the name costs a
// byte search, no allocation.
func Entry(plugins gjson.Result, name string) (gjson.Result, int) {
	if !strings.Contains(plugins.Raw, name) {
		return gjson.Result{}, -1
	}
	at, i := gjson.Result{}, -1
	plugins.ForEach(func(k, p gjson.Result) bool {
		if p.Get("id").Str == name && p.Get("enabled").Type != gjson.False {
			at, i = p, int(k.Int())
			return false
		}
		return true
	})
	return at, i
}

// CheckMembers checks the members of an entry (at path) asking for the
// plugin of the name: id, a boolean enabled, and those member knows (it
// checks their values); any other member is a 400 naming it. member may
// be nil: the plugin takes no option.
func CheckMembers(path, name string, entry gjson.Result, member func(name string, v gjson.Result) (known bool, apiErr *apierror.Error)) *apierror.Error {
	var apiErr *apierror.Error
	entry.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
		case "enabled":
			if v.Type != gjson.True && v.Type != gjson.False {
				apiErr = apierror.BadRequest(path + ".enabled: expected a boolean")
			}
		default:
			known := false
			if member != nil {
				known, apiErr = member(k.Str, v)
			}
			if !known {
				apiErr = apierror.BadRequest(fmt.Sprintf("%s.%s: unknown field of the %s plugin", path, k.Str, name))
			}
		}
		return apiErr == nil
	})
	return apiErr
}

// NoOptions reads the directive of a plugin that takes no options, its
// name alone in the plugins block: an argument or an option is an error
// naming the plugin (its directive name, dname), with note after it.
func NoOptions(d *caddyfile.Dispenser, dname, note string) error {
	d.Next() // the plugin's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		return d.Errf("unknown option %q of the %s plugin%s", d.Val(), dname, note)
	}
	return nil
}
