// Package plugintest is the conformance suite of the plugin seam: every
// plugin's tests run it, so the handler can rely on what package plugin
// promises of a plugin.
package plugintest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// Case is what a plugin's suite needs of the plugin under test.
type Case struct {
	// Plugin is the plugin, as its module's New makes it and provisioned
	// as a test needs it.
	Plugin plugin.Plugin
	// Kind is a route kind the plugin serves, and Asks a body of that kind
	// that asks for the plugin and for which Plan returns a Run; "" for a
	// plugin whose Plan returns none (it rewrites the body).
	Kind dialect.Kind
	Asks string
	// Applies is a request that does not name the plugin but to which it
	// applies (a model of its route requires it), for which Plan returns
	// a Run; nil for a plugin that applies only when named.
	Applies *plugin.Request
	// Fits is, for a PromptFitter, a body of Kind that asks for the
	// plugin and whose prompt FitPrompt changes to fit a window of
	// FitWindow tokens (FitRequest); "" for other plugins.
	Fits string
	// Preroutes is, for a Prerouter, a body of Kind that asks for the
	// plugin and for which Preroute returns a Run without reaching the
	// network (a server tool the model may call); "" for other plugins.
	Preroutes string
	// Unasked is a body of Kind that does not ask for the plugin, which
	// Plan, FitPrompt and Preroute pass over without an allocation; ""
	// is one with a long prompt that names another plugin (web), for a
	// plugin that a plugins array alone does not wake.
	Unasked string
}

// unasked is c's body that does not ask for the plugin.
func (c Case) unasked() string {
	if c.Unasked != "" {
		return c.Unasked
	}
	return `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("hello ", 100) + `"}],"plugins":[{"id":"web"}]}`
}

// Run runs the conformance tests on c.
func Run(t *testing.T, c Case) {
	t.Helper()
	p := c.Plugin
	name := p.Name()
	info := p.CaddyModule()
	t.Run("module", func(t *testing.T) {
		if info.ID.Namespace() != plugin.Namespace {
			t.Errorf("module %s: namespace %q, want %q", info.ID, info.ID.Namespace(), plugin.Namespace)
		}
		if info.ID.Name() != strings.ReplaceAll(name, "-", "_") {
			t.Errorf("module %s: its name is not the plugin's %q with underscores", info.ID, name)
		}
		if info.New == nil {
			t.Fatalf("module %s: no New", info.ID)
		}
		fresh := info.New()
		if reflect.TypeOf(fresh) != reflect.TypeOf(p) {
			t.Errorf("module %s: New makes a %T, the plugin is a %T", info.ID, fresh, p)
		}
		if reflect.TypeOf(fresh).Kind() != reflect.Pointer {
			t.Errorf("module %s: New makes a %T, not a pointer", info.ID, fresh)
		}
		if got, ok := fresh.(plugin.Plugin); !ok || got.Name() != name {
			t.Errorf("module %s: New's plugin is not named %q", info.ID, name)
		}
		// Its JSON configuration reads back as it was written.
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("module %s: marshal: %v", info.ID, err)
		}
		back := info.New()
		if err := caddy.StrictUnmarshalJSON(raw, &back); err != nil {
			t.Fatalf("module %s: its own JSON %s does not load: %v", info.ID, raw, err)
		}
	})
	t.Run("caddyfile", func(t *testing.T) {
		u, ok := info.New().(caddyfile.Unmarshaler)
		if !ok {
			t.Fatalf("module %s: no UnmarshalCaddyfile", info.ID)
		}
		if err := u.UnmarshalCaddyfile(caddyfile.NewTestDispenser(info.ID.Name())); err != nil {
			t.Errorf("module %s: the bare directive: %v", info.ID, err)
		}
		if err := u.UnmarshalCaddyfile(caddyfile.NewTestDispenser(info.ID.Name() + " {\n\tno_such_option\n}")); err == nil {
			t.Errorf("module %s: an unknown option is accepted", info.ID)
		}
	})
	t.Run("entry", func(t *testing.T) {
		for _, entry := range []string{`{"id":"` + name + `"}`, `{"id":"` + name + `","enabled":true}`} {
			if apiErr := p.CheckEntry("plugins[0]", gjson.Parse(entry)); apiErr != nil {
				t.Errorf("CheckEntry(%s) = %v", entry, apiErr)
			}
		}
		for entry, want := range map[string]string{
			`{"id":"` + name + `","enabled":1}`:           "plugins[3].enabled: ",
			`{"id":"` + name + `","no_such_member":true}`: "plugins[3].no_such_member: ",
		} {
			apiErr := p.CheckEntry("plugins[3]", gjson.Parse(entry))
			if apiErr == nil || apiErr.Status != 400 || !strings.HasPrefix(apiErr.Message, want) {
				t.Errorf("CheckEntry(%s) = %v, want a 400 starting %q", entry, apiErr, want)
			}
		}
	})
	t.Run("plan", func(t *testing.T) {
		if c.Asks != "" {
			run, apiErr := p.Plan(Request(c.Kind, c.Asks))
			if apiErr != nil || run == nil {
				t.Fatalf("Plan(%s) = %v, %v; want a run", c.Asks, run, apiErr)
			}
			if w, ok := run.(plugin.Coster); ok && w.Charge() > w.Hold() {
				t.Errorf("Plan(%s): charges %v, above its hold %v", c.Asks, w.Charge(), w.Hold())
			}
			if aw, ok := run.(plugin.AnswerWrapper); ok {
				wantErrorPassed(t, aw)
			}
			if ah, ok := run.(plugin.AnswerHeader); ok {
				wantHeaderAdded(t, ah)
			}
			if a, ok := run.(plugin.Admitter); ok {
				wantAdmitted(t, run, a)
			}
		}
		if c.Applies != nil {
			if _, named := plugin.Entry(c.Applies.Plugins, name); named >= 0 {
				t.Fatalf("Applies names the plugin: %s", c.Applies.Plugins.Raw)
			}
			if run, apiErr := p.Plan(c.Applies); apiErr != nil || run == nil {
				t.Errorf("Plan of a request it applies to unnamed (%s) = %v, %v; want a run", c.Applies.Body, run, apiErr)
			}
		}
		for _, body := range []string{
			`{"model":"m","messages":[{"role":"user","content":"hello"}]}`,
			`{"model":"m","plugins":[{"id":"` + name + `","enabled":false}]}`,
		} {
			if run, apiErr := p.Plan(Request(c.Kind, body)); run != nil || apiErr != nil {
				t.Errorf("Plan(%s) = %v, %v; want nothing", body, run, apiErr)
			}
		}
	})
	t.Run("plan allocates nothing unasked", func(t *testing.T) {
		req := Request(c.Kind, c.unasked())
		if n := testing.AllocsPerRun(100, func() { _, _ = p.Plan(req) }); n != 0 {
			t.Errorf("Plan of a body not naming the plugin: %v allocations", n)
		}
	})
	if pf, ok := p.(plugin.PromptFitter); ok {
		t.Run("fit leaves a body not asking alone", func(t *testing.T) {
			req := FitRequest(c.Kind, c.unasked())
			body, run, apiErr := pf.FitPrompt(req)
			if apiErr != nil || run != nil || &body[0] != &req.Body[0] || len(body) != len(req.Body) {
				t.Fatalf("FitPrompt of a body not asking = %s, %v, %v; want it as it came", body, run, apiErr)
			}
			if n := testing.AllocsPerRun(100, func() { _, _, _ = pf.FitPrompt(req) }); n != 0 {
				t.Errorf("FitPrompt of a body not asking: %v allocations", n)
			}
		})
		t.Run("fit", func(t *testing.T) {
			if c.Fits == "" {
				t.Fatal("a PromptFitter's case names no body it fits (Fits)")
			}
			req := FitRequest(c.Kind, c.Fits)
			body, run, apiErr := pf.FitPrompt(req)
			if apiErr != nil || run == nil || string(body) == c.Fits {
				t.Fatalf("FitPrompt(%s) = %s, %v, %v; want the body changed and a run", c.Fits, body, run, apiErr)
			}
			if n, _ := req.Tokens.ChatPrompt(req.Models.At(0).Tokenizer, body); n > FitWindow {
				t.Errorf("FitPrompt(%s): %d tokens left, more than the window of %d", c.Fits, n, FitWindow)
			}
			if ah, ok := run.(plugin.AnswerHeader); ok {
				wantHeaderAdded(t, ah)
			}
		})
	}
	if pr, ok := p.(plugin.Prerouter); ok {
		t.Run("preroute leaves a body not asking alone", func(t *testing.T) {
			req := PrerouteRequest(c.Kind, c.unasked())
			body, run, apiErr := pr.Preroute(req)
			if apiErr != nil || run != nil || &body[0] != &req.Body[0] || len(body) != len(req.Body) {
				t.Fatalf("Preroute of a body not asking = %s, %v, %v; want it as it came", body, run, apiErr)
			}
			if n := testing.AllocsPerRun(100, func() { _, _, _ = pr.Preroute(req) }); n != 0 {
				t.Errorf("Preroute of a body not asking: %v allocations", n)
			}
		})
		t.Run("preroute", func(t *testing.T) {
			if c.Preroutes == "" {
				t.Fatal("a Prerouter's case names no body it plans (Preroutes)")
			}
			body, run, apiErr := pr.Preroute(PrerouteRequest(c.Kind, c.Preroutes))
			if apiErr != nil || run == nil || !gjson.ValidBytes(body) {
				t.Fatalf("Preroute(%s) = %s, %v, %v; want a JSON body and a run", c.Preroutes, body, run, apiErr)
			}
			wantRouteParts(t, c.Kind, run)
		})
	}
	if bw, ok := p.(plugin.BodyRewriter); ok {
		t.Run("rewrite leaves a plain body alone", func(t *testing.T) {
			req := Request(c.Kind, `{"model":"m","messages":[{"role":"user","content":"`+strings.Repeat("hello ", 100)+`"}]}`)
			body, rewritten, apiErr := bw.RewriteBody(context.Background(), req)
			if apiErr != nil || rewritten || &body[0] != &req.Body[0] || len(body) != len(req.Body) {
				t.Fatalf("RewriteBody of a plain body = %s, %v, %v; want it as it came", body, rewritten, apiErr)
			}
			if n := testing.AllocsPerRun(100, func() { _, _, _ = bw.RewriteBody(context.Background(), req) }); n != 0 {
				t.Errorf("RewriteBody of a plain body: %v allocations", n)
			}
		})
	}
}

// Request is the request of a route of kind with body, its plugins
// array read from it, tried on one model that reads text only.
func Request(kind dialect.Kind, body string) *plugin.Request {
	return &plugin.Request{Kind: kind, Body: []byte(body), Plugins: gjson.Get(body, "plugins"), Models: Models{textOnly}}
}

// PrerouteRequest is Request as Preroute sees it: with a context, the
// answer's header and no guardrail in force.
func PrerouteRequest(kind dialect.Kind, body string) *plugin.Request {
	return &plugin.Request{Kind: kind, Body: []byte(body), Ctx: context.Background(), Header: http.Header{}, Filters: noGuardrails{}}
}

// noGuardrails is a request under no guardrail.
type noGuardrails struct{}

// FetchedFilter implements plugin.Guardrails.
func (noGuardrails) FetchedFilter() (plugin.TextFilter, *apierror.Error) { return nil, nil }

// Route is a routed request of kind with body, tried on one model of
// the given context window and prices at an OpenAI-style provider.
func Route(kind dialect.Kind, body string, window int64, pricing billing.Pricing) *upstream.Route {
	m := &catalog.Model{ID: "plugintest/priced", ContextLength: window, Pricing: pricing}
	a := upstream.Attempt{Model: m, Provider: &catalog.Provider{Name: "plugintest"}}
	return &upstream.Route{Kind: kind, Body: []byte(body), Attempts: []upstream.Attempt{a}, Model: a.Model, Provider: a.Provider, Choices: 1}
}

// wantRouteParts checks the parts of a run that act on the route: its
// attempts filtered to a subset, the route adapted with its attempts, no
// negative prompt extra, a preparation that stops with its context, a
// hold whose credits are within it, a settlement within the hold, an
// attempt's error answer passed as it came.
func wantRouteParts(t *testing.T, kind dialect.Kind, run plugin.Run) {
	t.Helper()
	pricing := billing.Pricing{Prompt: 1000, Completion: 2000}
	route := Route(kind, `{"model":"m","messages":[{"role":"user","content":"hello"}]}`, 1000, pricing)
	if af, ok := run.(plugin.AttemptFilter); ok {
		apiErr := af.FilterAttempts(route)
		if apiErr == nil && len(route.Attempts) != 1 || apiErr != nil && apiErr.Status != http.StatusBadRequest {
			t.Errorf("FilterAttempts of one attempt that speaks every dialect = %v, %d attempts", apiErr, len(route.Attempts))
		}
	}
	if ra, ok := run.(plugin.RouteAdapter); ok {
		apiErr := ra.AdaptRoute(route)
		if apiErr == nil && len(route.Attempts) != 1 || apiErr != nil && apiErr.Status != http.StatusBadRequest {
			t.Errorf("AdaptRoute of one attempt that speaks every dialect = %v, %d attempts", apiErr, len(route.Attempts))
		}
	}
	if pe, ok := run.(plugin.PromptExtender); ok {
		if tokens, _ := pe.PromptExtra(); tokens < 0 {
			t.Errorf("PromptExtra = %d tokens, below zero", tokens)
		}
	}
	if ap, ok := run.(plugin.AttemptPreparer); ok {
		// A context already ended is an error or nothing to do, never
		// a panic, and leaves the route's attempts.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if apiErr := ap.PrepareAttempts(ctx, route); apiErr != nil && apiErr.Status < 400 || len(route.Attempts) != 1 {
			t.Errorf("PrepareAttempts with its context ended = %v, %d attempts", apiErr, len(route.Attempts))
		}
	}
	var hold money.Amount
	if rc, ok := run.(plugin.RouteCoster); ok {
		h, credits, err := rc.HoldFor(route)
		if err != nil || h < 0 || credits < 0 || credits > h {
			t.Errorf("HoldFor = %v, %v, %v; want credits within a hold", h, credits, err)
		}
		hold = h
	}
	if s, ok := run.(plugin.Settler); ok {
		set := plugin.Settlement{Route: route, Pricing: pricing, Usage: billing.Usage{PromptTokens: 10, CompletionTokens: 5}}
		if err := s.Settle(&set); err != nil || set.Credits < 0 || set.Credits > hold || set.Usage.Extra > hold {
			t.Errorf("Settle of an answer without the run's work = %v, credits %v, extra %v; want both within the hold %v", err, set.Credits, set.Usage.Extra, hold)
		}
	}
	if co, ok := run.(plugin.ChargeObserver); ok {
		co.ObserveCharge() // once settled: counts, never panics
	}
	if aw, ok := run.(plugin.AttemptWrapper); ok {
		const answer = `{"error":{"message":"rate limited","code":429}}`
		provider := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(answer))
			return nil
		})
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(route.Body)))
		err := aw.WrapAttempt(provider, route).ServeHTTP(rec, r)
		if err != nil || rec.Code != http.StatusTooManyRequests || rec.Body.String() != answer || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("a provider's error answer through the attempt's wrapper: %v, %d %v %s", err, rec.Code, rec.Header(), rec.Body)
		}
	}
}

// FitWindow is the context window of FitRequest's model, in tokens.
const FitWindow = 64

// FitRequest is Request with its transforms read from the body, tried
// on one model of FitWindow tokens that counts with o200k_base, each
// message's tokens those of its JSON text.
func FitRequest(kind dialect.Kind, body string) *plugin.Request {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		panic(err)
	}
	req := Request(kind, body)
	req.Transforms = gjson.Get(body, "transforms")
	req.MaxTokens = 8
	req.Models = Models{{ID: "plugintest/window", ContextLength: FitWindow, Tokenizer: enc}}
	req.Tokens = jsonCounter{}
	return req
}

// jsonCounter counts a body's messages as the tokens of their JSON text.
type jsonCounter struct{}

// ChatPrompt implements plugin.PromptCounter.
func (jsonCounter) ChatPrompt(enc *tokenizer.Encoding, body []byte) (int64, bool) {
	var n int64
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		n += jsonCounter{}.ChatMessage(enc, m)
		return true
	})
	return n, false
}

// ChatMessage implements plugin.PromptCounter.
func (jsonCounter) ChatMessage(enc *tokenizer.Encoding, m gjson.Result) int64 {
	return int64(enc.Count(m.Raw))
}

// Models are a route's models, in order.
type Models []*catalog.Model

// Len implements plugin.Models.
func (m Models) Len() int { return len(m) }

// At implements plugin.Models.
func (m Models) At(i int) *catalog.Model { return m[i] }

// textOnly is a catalog model that reads text only.
var textOnly = &catalog.Model{ID: "plugintest/text", Public: json.RawMessage(`{"architecture":{"input_modalities":["text"]}}`)}

// wantAdmitted checks an Admitter's verdict on the suite's request: a
// refusal carries a client error and names the model and provider its
// generation record would name; the run's charge stays within its hold.
// A context already ended is a refusal or lets the request on, never a
// panic.
func wantAdmitted(t *testing.T, run plugin.Run, a plugin.Admitter) {
	t.Helper()
	if ref := a.Admit(context.Background()); ref != nil && (ref.Err == nil || ref.Err.Status < 400 || ref.Model == "" || ref.Provider == "") {
		t.Errorf("Admit = %+v; a refusal wants an error status, a model and a provider", ref)
	}
	if c, ok := run.(plugin.Coster); ok && c.Charge() > c.Hold() {
		t.Errorf("after Admit: charges %v, above its hold %v", c.Charge(), c.Hold())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ref := a.Admit(ctx); ref != nil && ref.Err == nil {
		t.Errorf("Admit with its context ended = %+v, a refusal without an error", ref)
	}
}

// wantHeaderAdded checks that a run's answer headers add to the header
// and leave what it held.
func wantHeaderAdded(t *testing.T, ah plugin.AnswerHeader) {
	t.Helper()
	h := http.Header{"Server": {"Caddy"}}
	ah.SetAnswerHeader(h)
	if len(h) < 2 || h.Get("Server") != "Caddy" {
		t.Errorf("a run's answer header: %v, want one added beside Server", h)
	}
}

// wantErrorPassed checks that a provider's error answer goes through the
// wrapper as it came: its status, type and body.
func wantErrorPassed(t *testing.T, aw plugin.AnswerWrapper) {
	t.Helper()
	const answer = `{"error":{"message":"rate limited","code":429}}`
	rec := httptest.NewRecorder()
	w := aw.WrapAnswer(rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write([]byte(answer))
	aw.FinishAnswer()
	if rec.Code != http.StatusTooManyRequests || rec.Body.String() != answer || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("an error answer through the wrapper: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}
