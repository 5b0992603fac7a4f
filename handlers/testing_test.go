package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// fakeGateway is the tollgate app as the handlers see it, over an in-memory
// store.
type fakeGateway struct {
	store    *storage.Store
	brand    string
	limits   gateway.FreeModelLimits
	catalog  *catalog.Catalog
	inFlight billing.InFlightPolicy
	sealer   *storage.Sealer
	egress   *egress.Policy
}

func (g *fakeGateway) Store() (*storage.Store, error)           { return g.store, nil }
func (g *fakeGateway) Brand() string                            { return g.brand }
func (g *fakeGateway) FreeModelLimits() gateway.FreeModelLimits { return g.limits }
func (g *fakeGateway) Catalog() *catalog.Catalog                { return g.catalog }
func (g *fakeGateway) InFlightPolicy() billing.InFlightPolicy   { return g.inFlight }
func (g *fakeGateway) BYOKSealer() *storage.Sealer              { return g.sealer }
func (g *fakeGateway) EgressPolicy() *egress.Policy             { return g.egress }

var _ gateway.Gateway = (*fakeGateway)(nil)

func newFakeGateway(t *testing.T) *fakeGateway {
	t.Helper()
	s, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing store: %v", err)
		}
	})
	// Fixture upstreams are httptest servers on loopback.
	loopback := egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	return &fakeGateway{store: s, brand: "service", limits: gateway.FreeModelLimits{}.WithDefaults(), catalog: testCatalog("/v1"), egress: loopback}
}

// The fixture catalog: model "m", priced per token, served by provider
// "up" under another model id.
const (
	testUpstreamName  = "up"
	testUpstreamHost  = "upstream.test:8080"
	testUpstreamModel = "m-upstream"
	testUpstreamKey   = "sk-upstream"
)

// testPricing is model "m"'s price: 0.000001 per prompt token, 0.000002 per
// completion token.
var testPricing = billing.Pricing{Prompt: mustPrice("0.000001"), Completion: mustPrice("0.000002")}

func mustPrice(s string) billing.Price {
	p, err := billing.ParsePrice(s)
	if err != nil {
		panic(err)
	}
	return p
}

// pricedModel is a catalog model with the given pricing, its public object
// showing that pricing.
func pricedModel(id string, pricing billing.Pricing, providers ...*catalog.Provider) *catalog.Model {
	m := testModel(id, pricing.Prompt, providers...)
	m.Pricing = pricing
	pub, err := sjson.SetBytes(m.Public, "pricing.completion", pricing.Completion.String())
	if err != nil {
		panic(err)
	}
	m.Public = pub
	return m
}

// testUpstream is the fixture's provider, under basePath.
func testUpstream(basePath string) *catalog.Provider {
	return testProvider(testUpstreamName, "http", testUpstreamHost, testUpstreamHost, basePath, testUpstreamModel, testUpstreamKey)
}

// testCatalog holds model "m" on the fixture's provider under basePath,
// then extra.
func testCatalog(basePath string, extra ...*catalog.Model) *catalog.Catalog {
	return catalog.New(append([]*catalog.Model{pricedModel("m", testPricing, testUpstream(basePath))}, extra...))
}

// forUpstream is an inference body as the router forwards it to the
// fixture's provider: model "m" renamed to the provider's id.
func forUpstream(body string) string {
	out, err := sjson.Set(body, "model", testUpstreamModel)
	if err != nil {
		panic(err)
	}
	return out
}

func (g *fakeGateway) account(t *testing.T, kind storage.AccountKind) storage.Account {
	t.Helper()
	a, err := g.store.CreateAccount(storage.NewAccount{Name: "acct " + string(kind), Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// apiKey creates a regular key; n.AccountID is set from acct.
func (g *fakeGateway) apiKey(t *testing.T, acct storage.Account, n storage.NewAPIKey) (storage.APIKey, string) {
	t.Helper()
	n.AccountID = acct.ID
	if n.Name == "" {
		n.Name = "test key"
	}
	k, secret, err := g.store.CreateAPIKey(n)
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

func (g *fakeGateway) mgmtKey(t *testing.T, acct storage.Account, expires *time.Time) (storage.ManagementKey, string) {
	t.Helper()
	k, secret, err := g.store.CreateManagementKey(storage.NewManagementKey{AccountID: acct.ID, Name: "mgmt", ExpiresAt: expires})
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

// setNow replaces the handlers' clock for the rest of the test.
func setNow(t *testing.T, at time.Time) {
	t.Helper()
	prev := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = prev })
}

// upstreamRequest is what the handler after the chain received.
type upstreamRequest struct {
	method        string
	path          string
	rawQuery      string
	host          string
	header        http.Header
	body          []byte
	contentLength int64
	identity      *gateway.Identity
	route         *Route // nil when the router did not route the request
}

// chain is Auth, the administrative stage and Router in the order the Caddyfile directives put
// them, in front of a recording upstream that answers 418. The router routes
// by the gateway's catalog, testCatalog("/v1").
type chain struct {
	gw     *fakeGateway
	auth   *Auth
	admin  adminStage
	router *Router
	got    *upstreamRequest // nil until the upstream is reached
}

func newChain(t *testing.T) *chain {
	t.Helper()
	gw := newFakeGateway(t)
	rt := &Router{gw: gw}
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return &chain{
		gw:     gw,
		auth:   &Auth{gw: gw, logger: zap.NewNop()},
		admin:  adminStage{admin.New(gw, zap.NewNop(), nil)},
		router: rt,
	}
}

// upstream is the recording last handler.
func (c *chain) upstream(t *testing.T) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream reading body: %v", err)
		}
		id, _ := IdentityFrom(r)
		route, _ := RouteFrom(r)
		c.got = &upstreamRequest{
			method: r.Method, path: r.URL.Path, rawQuery: r.URL.RawQuery, host: r.Host,
			header: r.Header.Clone(), body: body, contentLength: r.ContentLength, identity: id, route: route,
		}
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
}

func (c *chain) handler(t *testing.T) caddyhttp.Handler {
	up := c.upstream(t)
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return c.auth.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return c.admin.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				return c.router.ServeHTTP(w, r, up)
			}))
		}))
	})
}

// response is one answer of the chain.
type response struct {
	status int
	header http.Header
	body   string
	json   gjson.Result
	repl   *caddy.Replacer
}

// newRequest builds a request with a Caddy replacer in its context, as the
// Caddy server does. headers are name/value pairs.
func newRequest(method, target, body string, headers ...string) (*http.Request, *caddy.Replacer) {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	repl := caddy.NewReplacer()
	return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl)), repl
}

// serve runs h on a request and returns the recorded answer.
func serve(t *testing.T, h caddyhttp.Handler, r *http.Request, repl *caddy.Replacer) response {
	t.Helper()
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r); err != nil {
		// As the tollgate directive's error route does.
		var apiErr *apierror.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("ServeHTTP: %v", err)
		}
		apierror.Write(w, apiErr)
	}
	body := w.Body.String()
	res := response{status: w.Code, header: w.Header(), body: body, repl: repl}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if !gjson.Valid(body) {
			t.Fatalf("invalid JSON body: %q", body)
		}
		res.json = gjson.Parse(body)
	}
	return res
}

// do sends a request through the chain; key may be empty for no
// Authorization header.
func (c *chain) do(t *testing.T, method, target, key, body string, headers ...string) response {
	t.Helper()
	c.got = nil
	if key != "" {
		headers = append(headers, "Authorization", "Bearer "+key)
	}
	r, repl := newRequest(method, target, body, headers...)
	return serve(t, c.handler(t), r, repl)
}

// must checks the status and returns the response.
func (r response) must(t *testing.T, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

// wantError checks that r is exactly the spec's JSON error body.
func (r response) wantError(t *testing.T, status int, message string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	msg, _ := json.Marshal(message)
	want := `{"error":{"code":` + strconv.Itoa(status) + `,"message":` + string(msg) + "}}\n"
	if r.body != want {
		t.Errorf("body = %s want %s", r.body, want)
	}
}

// handlerOf binds a middleware to the handler after it.
func handlerOf(m caddyhttp.MiddlewareHandler, next caddyhttp.Handler) caddyhttp.Handler {
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return m.ServeHTTP(w, r, next)
	})
}
