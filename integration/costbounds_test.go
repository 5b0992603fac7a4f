package integration

import (
	"strings"
	"testing"
	"time"
)

// Through the guardrails API and the gateway: a pattern too costly to
// scan is refused when written, with the pattern named; a prompt too long
// for the costliest accepted patterns is refused with a 413 naming the
// content filters, at once and before any provider call; the same
// guardrail serves a prompt within the budget.
func TestContentFilterCostBounds(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, tap.through)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	c.api("POST", "/guardrails", org.Mgmt, `{"name":"slow","content_filters":[{"pattern":"ok","action":"flag"},{"pattern":"[a-z]{1,1000}x","action":"block"}]}`).
		expectError(t, 400, "content_filters[1].pattern: pattern too costly to scan")
	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"costly","content_filters":[{"pattern":"[a-z]{1,30}x","action":"block"}]}`).
		expect(t, 201).JSON.Get("data.id").Str
	key, hash := c.newKey(org.Mgmt, `{"name":"filtered"}`)
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)

	long := `{"model":"tollgate-mock","messages":[{"role":"user","content":"` + strings.Repeat("abcdefghij ", 4<<20/11) + `"}]}`
	start := time.Now()
	c.mustPost("/chat/completions", key, long, nil).expectError(t, 413, "content_filters: the request's text is too long for the custom patterns")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("refused after %v", d)
	}
	if b := tap.take(); len(b) != 0 {
		t.Fatalf("the provider was called %d times", len(b))
	}
	c.mustPost("/chat/completions", key, `{"model":"tollgate-mock","messages":[{"role":"user","content":"short and fine"}]}`, nil).expect(t, 200)
}
