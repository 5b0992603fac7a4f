package dashboard

import (
	"net/http"
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
