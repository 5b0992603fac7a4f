package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A key's rate limits are shown and edited on its page: a bad one comes
// back next to its field, an empty one removes the limit.
func TestKeyRateLimitsEdited(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID})
	w := c.created(c.do("POST", "/dashboard/keys", c.form("name", "rl")))
	p, err := st.Authenticate(keyString.FindString(w.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	hash := p.Hash
	page := "/dashboard/keys/" + hash
	w = c.do("POST", page, c.form("name", "rl", "rate_limits.requests_per_minute", "60", "rate_limits.concurrent_requests", "1.5"))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `id="e-rl-concurrent_requests" name="rate_limits.concurrent_requests" inputmode="numeric" value="1.5" aria-invalid="true"`) {
		t.Fatalf("a fractional limit: %d %s", w.Code, w.Body)
	}
	w = c.do("POST", page, c.form("name", "rl", "rate_limits.requests_per_minute", "60", "rate_limits.concurrent_requests", "2",
		"rate_limits.requests_per_day", "", "rate_limits.prompt_tokens_per_minute", "", "rate_limits.completion_tokens_per_minute", ""))
	if w.Code != http.StatusSeeOther {
		t.Fatalf("update: %d %s", w.Code, w.Body)
	}
	k, _ := st.APIKey(hash)
	if k.RateLimits == nil || k.RateLimits.RequestsPerMinute != 60 || k.RateLimits.ConcurrentRequests != 2 || k.RateLimits.RequestsPerDay != 0 {
		t.Fatalf("rate limits: %+v", k.RateLimits)
	}
	if body := c.do("GET", page, nil).Body.String(); !strings.Contains(body, `name="rate_limits.requests_per_minute" inputmode="numeric" value="60"`) {
		t.Fatalf("the page does not show the limit: %s", body)
	}
	w = c.do("POST", page, c.form("name", "rl", "rate_limits.requests_per_minute", "", "rate_limits.concurrent_requests", ""))
	if k, _ := st.APIKey(hash); w.Code != http.StatusSeeOther || k.RateLimits != nil {
		t.Fatalf("cleared: %d %+v", w.Code, k.RateLimits)
	}
}

// A workspace's rate limits are shown and set in the settings, by an
// organization admin only: a bad one comes back next to its field, empty
// fields remove the limits.
func TestWorkspaceRateLimitsSetByAnAdmin(t *testing.T) {
	d, st := testDashboard(t)
	a, admin, member := org(t, st)
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID})
	if w := c.do("POST", "/dashboard/settings/workspaces", c.form("name", "Research", "slug", "research")); w.Code != http.StatusSeeOther {
		t.Fatalf("workspace: %d %s", w.Code, w.Body)
	}
	ws, _ := st.Workspace(a.ID, "research")
	path := "/dashboard/settings/workspaces/" + ws.ID + "/rate-limits"
	all := func(kv ...string) url.Values {
		f := c.form("rate_limits.requests_per_minute", "", "rate_limits.requests_per_day", "", "rate_limits.prompt_tokens_per_minute", "",
			"rate_limits.completion_tokens_per_minute", "", "rate_limits.concurrent_requests", "")
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	w := c.do("POST", path, all("rate_limits.requests_per_minute", "30", "rate_limits.requests_per_day", "-2"))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `name="rate_limits.requests_per_day" inputmode="numeric" value="-2" aria-invalid="true"`) ||
		!strings.Contains(w.Body.String(), `<details id="ws-`+ws.ID+`" open>`) {
		t.Fatalf("a negative limit: %d %s", w.Code, w.Body)
	}
	if ws, _ := st.Workspace(a.ID, ws.ID); ws.RateLimits != nil {
		t.Fatalf("a refused form set %+v", ws.RateLimits)
	}
	if w := c.do("POST", path, all("rate_limits.requests_per_minute", "30", "rate_limits.concurrent_requests", "4")); w.Code != http.StatusSeeOther {
		t.Fatalf("set: %d %s", w.Code, w.Body)
	}
	if ws, _ := st.Workspace(a.ID, ws.ID); ws.RateLimits == nil || ws.RateLimits.RequestsPerMinute != 30 || ws.RateLimits.ConcurrentRequests != 4 || ws.RateLimits.RequestsPerDay != 0 {
		t.Fatalf("rate limits: %+v", ws.RateLimits)
	}
	if body := c.do("GET", "/dashboard/settings", nil).Body.String(); !strings.Contains(body, `id="rl-`+ws.ID+`-requests_per_minute" name="rate_limits.requests_per_minute" inputmode="numeric" value="30"`) {
		t.Fatalf("the settings do not show the limit: %s", body)
	}

	m := &client{t: t, d: d}
	m.signIn(st, Principal{AccountID: a.ID, MemberID: member.ID})
	if w := m.do("POST", path, all()); w.Code != http.StatusForbidden {
		t.Fatalf("a member set a workspace's rate limits: %d", w.Code)
	}
	if ws, _ := st.Workspace(a.ID, ws.ID); ws.RateLimits == nil || ws.RateLimits.RequestsPerMinute != 30 {
		t.Fatalf("after a member's try: %+v", ws.RateLimits)
	}

	if w := c.do("POST", path, all()); w.Code != http.StatusSeeOther {
		t.Fatalf("cleared: %d %s", w.Code, w.Body)
	}
	if ws, _ := st.Workspace(a.ID, ws.ID); ws.RateLimits != nil {
		t.Fatalf("cleared, still %+v", ws.RateLimits)
	}
}
