package integration

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// byokSearch is a BYOK request whose gateway-side search (4 results at the
// searxng price 0.004) the platform pays in credits.
const byokSearch = `{"model":"ws/plain","max_tokens":20,"messages":[{"role":"user","content":"own key, platform's search"}],"plugins":[{"id":"web","engine":"searxng","max_results":4}]}`

const byokSearchCredits storage.Amount = 16_000_000

// The credits a BYOK request spends on a gateway-side search are credits
// like any other: the key's cap, a workspace budget and a guardrail budget
// that do not count BYOK spending still cap them, hold them at admission
// (402 with the level's limit_source, no search) and count them once
// charged.
func TestBYOKSearchCreditsUnderLimits(t *testing.T) {
	e := startWebSearch(t)
	c := e.c
	c.api("POST", "/byok", e.org.MgmtKey, `{"provider":"p","key":"sk-own-key-for-seams-0123"}`).expect(t, 201)
	refused := func(key, source string) {
		t.Helper()
		e.search.Reset()
		expect402(t, c.mustPost("/chat/completions", key, byokSearch, nil), source, "", false)
		if n := len(e.search.Requests()); n != 0 {
			t.Fatalf("a refused request ran %d searches", n)
		}
	}
	admitted := func(key string) {
		t.Helper()
		r := c.mustPost("/chat/completions", key, byokSearch, nil).expect(t, 200)
		if r.JSON.Get("usage.server_tool_use_details.web_search_results").Int() != 4 {
			t.Fatalf("search results: %s", r.JSON.Get("usage").Raw)
		}
	}

	// BYOK credentials belong to the default workspace (storage.CreateBYOK):
	// the budgets are the default workspace's, spent by nothing else yet.
	t.Run("workspace budget", func(t *testing.T) {
		key, _ := c.newKey(e.org.MgmtKey, `{"name":"in workspace"}`)
		c.api("PUT", "/workspaces/default/budgets/daily", e.org.MgmtKey, `{"limit_usd":0.01}`).expect(t, 200)
		refused(key, "service_workspace_budget")
		c.api("PUT", "/workspaces/default/budgets/daily", e.org.MgmtKey, `{"limit_usd":0.02}`).expect(t, 200)
		admitted(key)
		// The workspace counted the search's credits.
		refused(key, "service_workspace_budget")
		c.api("DELETE", "/workspaces/default/budgets/daily", e.org.MgmtKey, nil).expect(t, 200)
	})
	t.Run("concurrent", func(t *testing.T) {
		key, _ := c.newKey(e.org.MgmtKey, `{"name":"burst","limit":1}`)
		const fit = 6
		// One search was spent in the workspace budget subtest.
		budget := byokSearchCredits*(fit+1) + byokSearchCredits/2
		c.api("PUT", "/workspaces/default/budgets/weekly", e.org.MgmtKey, fmt.Sprintf(`{"limit_usd":%s}`, budget)).expect(t, 200)
		defer func() { c.api("DELETE", "/workspaces/default/budgets/weekly", e.org.MgmtKey, nil).expect(t, 200) }()
		before := c.snapshot(key, e.org.MgmtKey)
		e.search.Reset()
		hc := &client{t: t, gateway: c.gateway, admin: c.admin,
			http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 40}}}
		const n = 40
		results := make([]response, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = hc.post("/chat/completions", key, byokSearch, map[string]string{"X-Mock-Latency": "1s"})
			})
		}
		wg.Wait()
		ok := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			switch r.Status {
			case 200:
				ok++
			case 402:
				expect402(t, r, "service_workspace_budget", "", false)
			default:
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
		}
		if ok != fit {
			t.Fatalf("%d admitted, want exactly %d", ok, fit)
		}
		if got := len(e.search.Requests()); got != ok {
			t.Fatalf("%d searches for %d admitted requests", got, ok)
		}
		expectCharged(t, before, c.snapshot(key, e.org.MgmtKey), byokSearchCredits*fit, "BYOK searches")
	})
	t.Run("key cap", func(t *testing.T) {
		key, _ := c.newKey(e.org.MgmtKey, `{"name":"capped","limit":0.02}`)
		admitted(key)
		// 0.016 spent of 0.02: another search does not fit.
		refused(key, "service_key_limit")
		s := c.snapshot(key, e.org.MgmtKey)
		if s.usage != byokSearchCredits || s.usage > *s.limit {
			t.Fatalf("key usage %s (limit %s), want %s", s.usage, *s.limit, byokSearchCredits)
		}
	})
	t.Run("guardrail budget", func(t *testing.T) {
		key, hash := c.newKey(e.org.MgmtKey, `{"name":"guarded"}`)
		g := c.api("POST", "/guardrails", e.org.MgmtKey, `{"name":"Search budget","limit_usd":0.02,"reset_interval":"daily"}`).
			expect(t, 201).JSON.Get("data.id").Str
		c.api("POST", "/guardrails/"+g+"/assignments/keys", e.org.MgmtKey, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
		admitted(key)
		refused(key, "service_guardrail_budget")
	})
}
