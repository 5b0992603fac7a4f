package integration

import (
	"fmt"
	"testing"
)

// A chat request's n choices may each run to max_tokens: admission holds
// for all of them, so neither a cap that covers one choice nor a provider
// that reports the most it may pushes a key past its limit.
func TestChoicesAreHeld(t *testing.T) {
	const model = "mock-usage-over"
	startInProcessWith(t, withMockModels(t, model))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	const maxTokens, n = 40, 3
	body := fmt.Sprintf(`{"model":%q,"n":%d,"max_tokens":%d,"messages":[{"role":"user","content":"report usage"}]}`, model, n, maxTokens)

	for _, bad := range []string{`0`, `129`, `1.5`, `"2"`} {
		b := fmt.Sprintf(`{"model":%q,"n":%s,"messages":[{"role":"user","content":"hi"}]}`, model, bad)
		key, _ := c.newKey(org.MgmtKey, `{"name":"bad-n"}`)
		r := c.mustPost("/chat/completions", key, b, nil).expect(t, 400)
		if msg := r.JSON.Get("error.message").Str; len(msg) < 2 || msg[:2] != "n:" {
			t.Errorf("n=%s: message %q does not name n", bad, msg)
		}
	}

	// A limit that covers one choice refuses three.
	one, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"one-choice","limit":%s}`, holdOf(body, maxTokens)))
	c.mustPost("/chat/completions", one, body, nil).expect(t, 402)
	if s := c.snapshot(one, org.MgmtKey); s.usage != 0 {
		t.Fatalf("a refused request charged %s", s.usage)
	}

	// A limit of exactly the three choices' hold serves the request, and
	// the provider's over-report is charged within it.
	all, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"all-choices","limit":%s}`, holdOf(body, maxTokens*n)))
	r := c.mustPost("/chat/completions", all, body, nil).expect(t, 200)
	if got := r.JSON.Get("usage.completion_tokens").Int(); got != maxTokens*n {
		t.Errorf("completion_tokens %d, want the bound %d (n × max_tokens)", got, maxTokens*n)
	}
	s := c.snapshot(all, org.MgmtKey)
	if s.usage == 0 || s.remaining == nil || *s.remaining < 0 {
		t.Fatalf("usage %s, remaining %v: the key passed its limit", s.usage, s.remaining)
	}
}
