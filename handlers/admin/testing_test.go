package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// fakeGateway is the tollgate app as the resources see it, over an
// in-memory store.
type fakeGateway struct {
	store   *storage.Store
	limits  gateway.FreeModelLimits
	catalog *catalog.Catalog
	sealer  *storage.Sealer
	egress  *egress.Policy
}

func (g *fakeGateway) Store() (*storage.Store, error)           { return g.store, nil }
func (g *fakeGateway) Brand() string                            { return "service" }
func (g *fakeGateway) FreeModelLimits() gateway.FreeModelLimits { return g.limits }
func (g *fakeGateway) Catalog() *catalog.Catalog                { return g.catalog }
func (g *fakeGateway) InFlightPolicy() billing.InFlightPolicy   { return billing.InFlightPolicy{} }
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
	// Fixture endpoints are httptest servers on loopback.
	loopback := egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	return &fakeGateway{store: s, limits: gateway.FreeModelLimits{}.WithDefaults(), catalog: testCatalog(), egress: loopback}
}

// testModel is a catalog model served by providers, each named
// name and reached at host.
func testModel(id string, providers ...*catalog.Provider) *catalog.Model {
	return &catalog.Model{ID: id, Name: id, ContextLength: 8192, Providers: providers, Public: []byte(`{"id":"` + id + `"}`)}
}

func testProvider(name, scheme, host, model, key string) *catalog.Provider {
	return &catalog.Provider{Name: name, BaseURL: scheme + "://" + host + "/v1", Model: model, APIKey: key, Style: "openai",
		Scheme: scheme, Dial: host, Host: host, BasePath: "/v1"}
}

// testCatalog holds model "m" on provider "up".
func testCatalog() *catalog.Catalog {
	return catalog.New([]*catalog.Model{testModel("m", testProvider("up", "http", "upstream.test:8080", "m-upstream", "sk-upstream"))})
}

// routedCatalog holds models on the providers BYOK credentials name.
func routedCatalog() *catalog.Catalog {
	return catalog.New([]*catalog.Model{
		testModel("paid", testProvider("openai", "https", "api.openai.test:443", "gpt-x-2025", "sk-openai")),
		testModel("mock", testProvider("mock", "http", "127.0.0.1:8081", "mock", "mock-key")),
		testModel("keyless", testProvider("byok-only", "https", "byok.test:443", "keyless", "")),
		testModel("bare"),
		testModel("second",
			testProvider("first", "https", "one.test:443", "second", ""),
			testProvider("fallback", "http", "two.test:8000", "second-up", "key-2")),
	})
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

// setNow replaces the resources' clock for the rest of the test.
func setNow(t *testing.T, at time.Time) {
	t.Helper()
	prev := now
	now = func() time.Time { return at }
	t.Cleanup(func() { now = prev })
}

// upstreamRequest is what a request the administrative stage does not
// serve carried on to the stage after it.
type upstreamRequest struct {
	method, path string
}

// chain serves requests as the pipeline does for the administrative
// routes: classified by the route table, the caller looked up by its key
// (authentication's own checks are package handlers' tests), then Admin.
// A request of another kind goes on: got records it.
type chain struct {
	gw    *fakeGateway
	admin *Admin
	got   *upstreamRequest // nil until a request went past Admin
}

func newChain(t *testing.T) *chain {
	t.Helper()
	gw := newFakeGateway(t)
	return &chain{gw: gw, admin: New(gw, zap.NewNop(), nil)}
}

func (c *chain) serveHTTP(w http.ResponseWriter, r *http.Request) error {
	kind, sub, _ := ClassifyRoute(r.URL.Path)
	if kind != RouteManagement && kind != RouteAnyKey {
		c.got = &upstreamRequest{method: r.Method, path: r.URL.Path}
		w.WriteHeader(http.StatusTeapot)
		return nil
	}
	secret, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p, err := c.gw.store.Authenticate(secret)
	if err != nil {
		return apierror.Fail(r, apierror.New(http.StatusUnauthorized, msgInvalidKey))
	}
	acct, _ := c.gw.store.AccountSnapshot(p.AccountID)
	return c.admin.Serve(w, r, &gateway.Identity{Principal: p, Account: acct}, kind, sub)
}

// response is one answer of the chain.
type response struct {
	status int
	header http.Header
	body   string
	json   gjson.Result
}

// newRequest builds a request with a Caddy replacer in its context, as the
// Caddy server does. headers are name/value pairs.
func newRequest(method, target, body string, headers ...string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
}

// do sends a request through the chain; key may be empty for no
// Authorization header.
func (c *chain) do(t *testing.T, method, target, key, body string, headers ...string) response {
	t.Helper()
	c.got = nil
	if key != "" {
		headers = append(headers, "Authorization", "Bearer "+key)
	}
	w := httptest.NewRecorder()
	if err := c.serveHTTP(w, newRequest(method, target, body, headers...)); err != nil {
		// As the tollgate directive's error route does.
		var apiErr *apierror.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("ServeHTTP: %v", err)
		}
		apierror.Write(w, apiErr)
	}
	res := response{status: w.Code, header: w.Header(), body: w.Body.String()}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		if !gjson.Valid(res.body) {
			t.Fatalf("invalid JSON body: %q", res.body)
		}
		res.json = gjson.Parse(res.body)
	}
	return res
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
