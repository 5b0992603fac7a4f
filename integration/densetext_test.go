package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// withBytePrompts makes the mock count prompt tokens as the worst
// byte-level tokenizer would (a token per UTF-8 byte of text), and the
// in-flight budget the whole balance, so that the balance is what binds.
func withBytePrompts(t *testing.T) func(string) string {
	return func(cfg string) string {
		cfg = replaceOnce(t, cfg, "\t\tlatency 1ms\n", "\t\tlatency 1ms\n\t\tprompt_tokens bytes\n")
		return replaceOnce(t, cfg, "\t\tbrand service\n", "\t\tbrand service\n\t\tin_flight {\n\t\t\tfraction 1\n\t\t}\n")
	}
}

// denseTexts are 3,000 bytes of text that tokenize about a token per byte
// or more densely than /3 assumed: one-letter words, digits, CJK, emoji.
var denseTexts = map[string]string{
	"letters": strings.Repeat("a ", 1500),
	"digits":  strings.Repeat("7 ", 1500),
	"cjk":     strings.Repeat("漢", 1000),
	"emoji":   strings.Repeat("🎉", 750),
}

// TestDenseTextNeverExceedsCaps: concurrent requests with max_tokens whose
// prompts cost a token per byte never spend past a key's cap, a workspace
// budget or an account's balance; each admitted request is charged once,
// at its own exact cost. (With the old estimate of a token per three bytes
// of body, three times as many requests passed and spent past each.)
func TestDenseTextNeverExceedsCaps(t *testing.T) {
	startInProcessWith(t, withBytePrompts(t))
	c := newClient(t, gatewayAddr, adminAddr)
	const n, fit = 12, 3
	for name, text := range denseTexts {
		body := fmt.Sprintf(`{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":%q}]}`, text)
		// What the mock bills: the text's bytes, 4 for the message, 3
		// priming, and the answer's words ("Mock answer from
		// tollgate-mock:" and the echo) cut to max_tokens.
		cost := tokenCost(int64(len(text))+4+3, min(4+words(text), 20))
		hold := holdOf(body, 20)
		if hold < cost {
			t.Fatalf("%s: hold %s below the cost %s", name, hold, cost)
		}
		// Room for fit holds and most of another; the old estimate held a
		// third of the cost, so about 3*fit would have passed.
		limit := hold*fit + hold*3/4

		t.Run(name+"/key cap", func(t *testing.T) {
			org := c.newTenant("organization", "1000")
			key, hash := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"dense","limit":%s}`, limit))
			charged := denseBurst(t, c, []string{key}, n, fit, body, cost, "service_key_limit")
			s := c.snapshot(key, org.MgmtKey)
			if s.usage != charged || s.totalUsage != charged || s.usage > limit {
				t.Fatalf("key %s usage %s, account usage %s, answers %s, limit %s", hash, s.usage, s.totalUsage, charged, limit)
			}
		})
		t.Run(name+"/workspace budget", func(t *testing.T) {
			org := c.newOrg("1000")
			c.api("POST", "/workspaces", org.Mgmt, `{"name":"Dense","slug":"dense"}`).expect(t, 201)
			k1, h1 := c.newKey(org.Mgmt, `{"name":"one","workspace_id":"dense"}`)
			k2, h2 := c.newKey(org.Mgmt, `{"name":"two","workspace_id":"dense"}`)
			c.api("PUT", "/workspaces/dense/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, limit)).expect(t, 200)
			charged := denseBurst(t, c, []string{k1, k2}, n, fit, body, cost, "service_workspace_budget")
			var usage money.Amount
			for _, h := range []string{h1, h2} {
				usage += creditAmount(t, c.api("GET", "/keys/"+h+"?workspace_id=dense", org.Mgmt, nil).expect(t, 200).JSON.Get("data.usage_daily"))
			}
			if usage != charged || usage > limit {
				t.Fatalf("workspace usage %s, answers %s, budget %s", usage, charged, limit)
			}
		})
		t.Run(name+"/balance", func(t *testing.T) {
			tn := c.newTenant("personal", limit.String())
			key, _ := c.newKey(tn.MgmtKey, `{"name":"dense"}`)
			charged := denseBurst(t, c, []string{key}, n, fit, body, cost, "service_credits", "service_in_flight_budget")
			s := c.snapshot(key, tn.MgmtKey)
			if s.totalUsage != charged || s.totalUsage > s.totalCredits {
				t.Fatalf("account usage %s, answers %s, credits %s", s.totalUsage, charged, s.totalCredits)
			}
		})
	}
}

// denseBurst sends n requests at once over keys and checks that exactly
// fit passed, each charged cost, the rest refused by one of sources; it
// returns the sum charged.
func denseBurst(t *testing.T, c *client, keys []string, n, fit int, body string, cost money.Amount, sources ...string) money.Amount {
	t.Helper()
	results, errs, _ := postAtOnce(t, c, n, func(i int) string { return keys[i%len(keys)] }, body)
	var ok int
	var charged money.Amount
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch r := results[i]; r.Status {
		case 200:
			ok++
			got := creditAmount(t, r.JSON.Get("usage.cost"))
			if got != cost {
				t.Fatalf("request %d charged %s, want %s: %s", i, got, cost, r.Body)
			}
			charged += got
		case 402:
			source := r.JSON.Get("error.metadata.limit_source").Str
			found := false
			for _, s := range sources {
				found = found || source == s
			}
			if !found {
				t.Fatalf("request %d: 402 from %q, want one of %v: %s", i, source, sources, r.Body)
			}
		default:
			t.Fatalf("request %d: status %d: %s", i, r.Status, r.Body)
		}
	}
	checkFit(t, results, ok, fit)
	return charged
}
