package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// authRecorder is a reverse proxy in front of the mock provider that
// counts the Authorization header of every generation request reaching it:
// which key the gateway called the provider with.
type authRecorder struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]int
}

func newAuthRecorder(t *testing.T, target string) *authRecorder {
	t.Helper()
	a := &authRecorder{got: map[string]int{}}
	// The request a response answers is the one sent upstream, with the
	// Authorization header the gateway set.
	a.srv = startTap(t, target, func(string, []byte) {}, func(res *http.Response) error {
		if res.Request.Method == http.MethodPost {
			a.mu.Lock()
			a.got[res.Request.Header.Get("Authorization")]++
			a.mu.Unlock()
		}
		return nil
	})
	return a
}

// take returns the counts by Authorization header since the last call.
func (a *authRecorder) take() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	got := a.got
	a.got = map[string]int{}
	return got
}

func (a *authRecorder) config(cfg string) string {
	return strings.ReplaceAll(cfg, "provider mock http://"+mockAddr+"/v1", "provider mock "+a.srv.URL+"/v1")
}

// BYOK credentials belong to a workspace: two workspaces with their own
// credential for the same provider each call the provider with their own
// key, a workspace without one uses the operator's key and pays in
// credits, every charge lands in the right key's counters (concurrent
// requests of the three workspaces, nothing lost or doubled), and a
// workspace budget counting BYOK stops only its own workspace.
func TestBYOKPerWorkspaceRouting(t *testing.T) {
	rec := &authRecorder{}
	startInProcessWith(t, func(cfg string) string {
		rec = newAuthRecorder(t, mockAddr)
		return rec.config(cfg)
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	alpha := c.api("POST", "/workspaces", org.Mgmt, `{"name":"Alpha","slug":"alpha"}`).expect(t, 201).JSON.Get("data.id").Str
	beta := c.api("POST", "/workspaces", org.Mgmt, `{"name":"Beta","slug":"beta"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/workspaces", org.Mgmt, `{"name":"Gamma","slug":"gamma"}`).expect(t, 201)
	for _, ws := range []string{"alpha", "beta", "gamma"} {
		c.api("POST", "/workspaces/"+ws+"/members/add", org.Mgmt, `{"user_ids":["`+org.Admin+`"]}`).expect(t, 200)
	}
	keyA, hashA := c.newKey(org.Mgmt, `{"name":"a","workspace_id":"alpha","creator_user_id":"`+org.Admin+`"}`)
	keyB, hashB := c.newKey(org.Mgmt, `{"name":"b","workspace_id":"`+beta+`","creator_user_id":"`+org.Admin+`"}`)
	keyC, hashC := c.newKey(org.Mgmt, `{"name":"c","workspace_id":"gamma","creator_user_id":"`+org.Admin+`"}`)

	const secretA, secretB = "sk-alpha-own-key-0000000001", "sk-beta-own-key-00000000002"
	credA := c.api("POST", "/byok", org.Mgmt, `{"provider":"mock","key":"`+secretA+`","workspace_id":"alpha"}`).expect(t, 201).JSON.Get("data")
	credB := c.api("POST", "/byok", org.Mgmt, `{"provider":"mock","key":"`+secretB+`","workspace_id":"`+beta+`"}`).expect(t, 201).JSON.Get("data")
	if credA.Get("workspace_id").Str != alpha || credB.Get("workspace_id").Str != beta {
		t.Fatalf("credentials answered workspaces %s and %s, want %s and %s", credA.Get("workspace_id").Raw, credB.Get("workspace_id").Raw, alpha, beta)
	}
	if l := c.api("GET", "/byok?workspace_id=beta", org.Mgmt, nil).expect(t, 200).JSON; l.Get("total_count").Int() != 1 || l.Get("data.0.id").Str != credB.Get("id").Str {
		t.Fatalf("beta's list: %s", l.Raw)
	}
	if l := c.api("GET", "/byok", org.Mgmt, nil).expect(t, 200).JSON; l.Get("total_count").Int() != 0 {
		t.Fatalf("the default workspace lists other workspaces' credentials: %s", l.Raw)
	}
	c.api("POST", "/byok", org.Mgmt, `{"provider":"mock","key":"k-nowhere-123","workspace_id":"delta"}`).
		expectError(t, 400, `workspace_id: "delta" is not a workspace of this account`)
	creditsBefore := creditAmount(t, c.api("GET", "/credits", org.Mgmt, nil).expect(t, 200).JSON.Get("data.total_usage"))
	rec.take()

	// concurrent requests of the three workspaces
	const perKey = 8
	keys := []string{keyA, keyB, keyC}
	var (
		mu    sync.Mutex
		costs = map[string]money.Amount{}
		wg    sync.WaitGroup
		errs  = make(chan error, 3*perKey)
	)
	for _, k := range keys {
		for range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.post("/chat/completions", k, guardBody, nil)
				if err == nil && r.Status != 200 {
					err = fmt.Errorf("status %d: %s", r.Status, r.Body)
				}
				if err != nil {
					errs <- err
					return
				}
				a, err := money.ParseAmount(r.JSON.Get("usage.cost").Raw)
				if err != nil || a <= 0 {
					errs <- fmt.Errorf("usage.cost %s: %v", r.JSON.Get("usage.cost").Raw, err)
					return
				}
				mu.Lock()
				costs[k] += a
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	got := rec.take()
	want := map[string]int{"Bearer " + secretA: perKey, "Bearer " + secretB: perKey, "Bearer mock": perKey}
	if len(got) != len(want) {
		t.Fatalf("provider was called with %v, want %v", got, want)
	}
	for h, n := range want {
		if got[h] != n {
			t.Fatalf("provider was called with %v, want %v", got, want)
		}
	}

	type counters struct{ usage, byok money.Amount }
	keyCounters := func(hash string) counters {
		k := c.api("GET", "/keys/"+hash, org.Mgmt, nil).expect(t, 200).JSON.Get("data")
		return counters{creditAmount(t, k.Get("usage")), creditAmount(t, k.Get("byok_usage"))}
	}
	if got := keyCounters(hashA); got != (counters{0, costs[keyA]}) {
		t.Errorf("alpha key: usage %s byok_usage %s, want 0 and %s", got.usage, got.byok, costs[keyA])
	}
	if got := keyCounters(hashB); got != (counters{0, costs[keyB]}) {
		t.Errorf("beta key: usage %s byok_usage %s, want 0 and %s", got.usage, got.byok, costs[keyB])
	}
	if got := keyCounters(hashC); got != (counters{costs[keyC], 0}) {
		t.Errorf("gamma key: usage %s byok_usage %s, want %s and 0", got.usage, got.byok, costs[keyC])
	}
	if got := creditAmount(t, c.api("GET", "/credits", org.Mgmt, nil).expect(t, 200).JSON.Get("data.total_usage")); got != creditsBefore+costs[keyC] {
		t.Errorf("total_usage %s, want %s + gamma's %s (BYOK requests spend no credits)", got, creditsBefore, costs[keyC])
	}

	// A zero budget counting BYOK stops beta's key only; alpha's zero
	// budget without BYOK lets its BYOK traffic pass.
	c.api("PUT", "/workspaces/beta/budgets/monthly", org.Mgmt, `{"limit_usd":0,"include_byok_in_budgets":true}`).expect(t, 200)
	c.api("PUT", "/workspaces/alpha/budgets/monthly", org.Mgmt, `{"limit_usd":0}`).expect(t, 200)
	expect402(t, c.mustPost("/chat/completions", keyB, guardBody, nil), "service_workspace_budget", "", false)
	c.mustPost("/chat/completions", keyA, guardBody, nil).expect(t, 200)
	c.mustPost("/chat/completions", keyC, guardBody, nil).expect(t, 200)
	c.api("PUT", "/workspaces/alpha/budgets/monthly", org.Mgmt, `{"limit_usd":0,"include_byok_in_budgets":true}`).expect(t, 200)
	expect402(t, c.mustPost("/chat/completions", keyA, guardBody, nil), "service_workspace_budget", "", false)
	c.api("DELETE", "/workspaces/alpha/budgets/monthly", org.Mgmt, nil).expect(t, 200)

	// a workspace holding a credential cannot be deleted; the rule is the
	// one for keys (400 naming what it holds)
	c.api("DELETE", "/keys/"+hashB, org.Mgmt, nil).expect(t, 200)
	c.api("DELETE", "/workspaces/beta", org.Mgmt, nil).
		expectError(t, 400, `workspace "beta" still holds 1 BYOK credential(s); delete them first`)
	c.api("GET", "/workspaces/beta", org.Mgmt, nil).expect(t, 200)
	c.api("GET", "/byok/"+credB.Get("id").Str, org.Mgmt, nil).expect(t, 200)
	c.api("DELETE", "/byok/"+credB.Get("id").Str, org.Mgmt, nil).expect(t, 200)
	c.api("DELETE", "/workspaces/beta", org.Mgmt, nil).expect(t, 200)
}
