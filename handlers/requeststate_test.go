package handlers

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// countingGateway counts the store look-ups, and fails them when down.
type countingGateway struct {
	*testgw.Gateway
	calls atomic.Int64
	down  bool
}

func (g *countingGateway) Store() (*storage.Store, error) {
	g.calls.Add(1)
	if g.down {
		return nil, storage.ErrUnavailable
	}
	return g.Storage, nil
}

// storeFixture is a tollgate handler over a counting gateway with a funded
// account, its regular and management keys, and an upstream answering a
// chat completion.
type storeFixture struct {
	gw              *countingGateway
	tg              *Tollgate
	regular, mgmt   string
	upstreamReached bool
}

func newStoreFixture(t *testing.T) *storeFixture {
	t.Helper()
	f := &storeFixture{gw: &countingGateway{Gateway: testgw.New(t)}}
	acct := f.gw.Account(t, storage.AccountOrganization)
	if _, _, err := f.gw.Storage.RecordPurchase(acct.ID, 100*money.AmountScale, ""); err != nil {
		t.Fatal(err)
	}
	_, f.regular = f.gw.APIKey(t, acct, storage.NewAPIKey{})
	_, f.mgmt = f.gw.ManagementKey(t, acct, nil)
	f.tg = newTestTollgate(t, f.gw)
	f.tg.proxies = oneUpstream{caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		f.upstreamReached = true
		return benchUpstreamJSON(w, r)
	})}
	return f
}

func (f *storeFixture) send(t *testing.T, method, target, key, body string) testgw.Response {
	t.Helper()
	f.gw.calls.Store(0)
	return testgw.Send(t, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return f.tg.ServeHTTP(w, r, notReached)
	}), method, target, key, body)
}

// storeRequests are requests of each kind of route the pipeline serves.
func storeRequests(f *storeFixture) []struct{ name, method, target, key, body string } {
	return []struct{ name, method, target, key, body string }{
		{"inference", "POST", "/api/v1/chat/completions", f.regular, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"count tokens", "POST", "/api/v1/messages/count_tokens", f.regular, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"per-user models", "GET", "/api/v1/models/user", f.regular, ""},
		{"public models", "GET", "/api/v1/models", "", ""},
		{"current key", "GET", "/api/v1/key", f.regular, ""},
		{"management", "GET", "/api/v1/keys", f.mgmt, ""},
	}
}

// Every request looks the store up once, at its start, whatever stages
// it goes through (auth, guardrails, routing, admission, settlement).
func TestStoreResolvedOncePerRequest(t *testing.T) {
	f := newStoreFixture(t)
	for _, c := range storeRequests(f) {
		t.Run(c.name, func(t *testing.T) {
			res := f.send(t, c.method, c.target, c.key, c.body)
			if res.Status != http.StatusOK {
				t.Fatalf("status %d: %s", res.Status, res.Body)
			}
			if n := f.gw.calls.Load(); n != 1 {
				t.Fatalf("store looked up %d times, want 1", n)
			}
		})
	}
	if !f.upstreamReached {
		t.Fatal("the inference request reached no provider")
	}
}

// A store that cannot be had refuses every request with the one 503, before
// any stage runs: no key is taken as unknown (401), no guardrail as absent,
// and nothing reaches a provider.
func TestStoreUnavailableRefusesOnce(t *testing.T) {
	f := newStoreFixture(t)
	f.gw.down = true
	for _, c := range storeRequests(f) {
		t.Run(c.name, func(t *testing.T) {
			f.send(t, c.method, c.target, c.key, c.body).WantError(t, http.StatusServiceUnavailable, pipeline.MsgStoreUnavailable)
			if n := f.gw.calls.Load(); n != 1 {
				t.Fatalf("store looked up %d times, want 1", n)
			}
		})
	}
	if f.upstreamReached {
		t.Fatal("a request reached a provider without a store")
	}
}

// The guardrails fail closed: a stage that finds no store for a regular
// key refuses the request (503) instead of serving it as if the key had
// no guardrail, whether it routes, counts tokens or lists models.
func TestRulesFailClosed(t *testing.T) {
	gw := testgw.New(t)
	acct := gw.Account(t, storage.AccountOrganization)
	key, _ := gw.APIKey(t, acct, storage.NewAPIKey{})
	id := &gateway.Identity{Principal: storage.Principal{AccountID: acct.ID, Hash: key.Hash, Key: &key}, Account: &acct}
	rt := &routing.Router{Gateway: gw}
	if err := rt.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	f, apiErr := routing.ValidateInference("/chat/completions", body)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	noStore := &pipeline.State{API: chatRoute, ID: id}
	if rules, apiErr := routing.RulesFor(noStore); rules != nil || apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("rulesFor without a store: %v, %v; want the 503", rules, apiErr)
	}
	if route, apiErr := rt.Route(noStore, body, f); route != nil || apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("routed without a store: %v", apiErr)
	}
	if _, apiErr := rt.CountedModel(noStore, "m"); apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("counted without a store: %v", apiErr)
	}
	if ms, apiErr := rt.ModelsFor(noStore); ms != nil || apiErr == nil || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("listed %d models without a store: %v", len(ms), apiErr)
	}
	// With the store, the same request routes.
	withStore := &pipeline.State{API: chatRoute, ID: id, Store: gw.Storage}
	if _, apiErr := rt.Route(withStore, body, f); apiErr != nil {
		t.Fatalf("with the store: %v", apiErr)
	}
}
