package integration

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// expect402 checks a credit refusal exactly: the body is
// {"error":{"code":402,"message":...,"metadata":{"limit_source":...,
// "remedy_hint":...[,"reason":...]}}} and nothing else; Retry-After is
// there only for the in-flight budget; the request got no generation.
func expect402(t *testing.T, r response, source, reason string, retryAfter bool) {
	t.Helper()
	r.expectError(t, 402, "")
	keys := func(v gjson.Result) map[string]bool {
		m := map[string]bool{}
		v.ForEach(func(k, _ gjson.Result) bool { m[k.Str] = true; return true })
		return m
	}
	if k := keys(r.JSON); len(k) != 1 || !k["error"] {
		t.Fatalf("402 body has fields %v: %s", k, r.Body)
	}
	e := r.JSON.Get("error")
	if k := keys(e); len(k) != 3 || !k["code"] || !k["message"] || !k["metadata"] {
		t.Fatalf("402 error has fields %v: %s", k, r.Body)
	}
	if e.Get("code").Raw != "402" || e.Get("message").Type != gjson.String || e.Get("message").Str == "" {
		t.Fatalf("402 code/message: %s", r.Body)
	}
	md := e.Get("metadata")
	want := map[string]bool{"limit_source": true, "remedy_hint": true}
	if reason != "" {
		want["reason"] = true
	}
	if k := keys(md); len(k) != len(want) || !k["limit_source"] || !k["remedy_hint"] || (reason != "") != k["reason"] {
		t.Fatalf("402 metadata has fields %v, want %v: %s", k, want, r.Body)
	}
	if md.Get("limit_source").Str != source || md.Get("reason").Str != reason ||
		md.Get("remedy_hint").Type != gjson.String || md.Get("remedy_hint").Str == "" {
		t.Fatalf("402 metadata %s, want limit_source %q reason %q", md.Raw, source, reason)
	}
	ra := r.Header.Get("Retry-After")
	if retryAfter {
		n, err := strconv.Atoi(ra)
		if err != nil || n < 1 || n > 10 {
			t.Fatalf("Retry-After %q, want whole seconds within the settlement window", ra)
		}
	} else if ra != "" {
		t.Fatalf("Retry-After %q on a refusal that retrying does not fix", ra)
	}
	if g := r.Header.Get("X-Generation-Id"); g != "" {
		t.Fatalf("a refused request has a generation %q", g)
	}
}

// refused sends a request that must be refused with 402 and checks that it
// reached no provider and charged nothing.
func refused(t *testing.T, c *client, p *countingProxy, tn tenant, key, path, body, source, reason string, retryAfter bool) {
	t.Helper()
	before := c.snapshot(key, tn.MgmtKey)
	calls := p.calls.Load()
	expect402(t, c.mustPost(path, key, body, nil), source, reason, retryAfter)
	if n := p.calls.Load() - calls; n != 0 {
		t.Fatalf("a refused request reached the provider (%d calls)", n)
	}
	expectCharged(t, before, c.snapshot(key, tn.MgmtKey), 0, "refused "+source+"/"+reason)
}

func chatBody(model string, extra string) string {
	return fmt.Sprintf(`{"model":%q%s,"messages":[{"role":"user","content":"what will this cost"}]}`, model, extra)
}

func TestLimits402(t *testing.T) {
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, withCountingProxy(proxy))
	paid := chatBody("tollgate-mock", `,"max_tokens":20`)

	t.Run("key limit", func(t *testing.T) {
		c := newClient(t, gatewayAddr, adminAddr)
		org := c.newTenant("organization", "10")
		// The limit fits one request's hold, and after it no more.
		key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"capped","limit":%s,"limit_reset":"daily"}`, holdOf(paid, 20)+1))
		calls := proxy.calls.Load()
		c.mustPost("/chat/completions", key, paid, nil).expect(t, 200)
		if proxy.calls.Load() != calls+1 {
			t.Fatal("the counting proxy did not see the admitted request")
		}
		refused(t, c, proxy, org, key, "/chat/completions", paid, "service_key_limit", "", false)
		// (max_output_tokens 40: with 20, this shorter body's hold would
		// fit in what the first request's cost left of the limit.)
		refused(t, c, proxy, org, key, "/responses", `{"model":"tollgate-mock","max_output_tokens":40,"input":"what will this cost"}`,
			"service_key_limit", "", false)
		// A key whose limit is below any request's hold.
		tiny, _ := c.newKey(org.MgmtKey, `{"name":"tiny","limit":0.000001}`)
		refused(t, c, proxy, org, tiny, "/chat/completions", paid, "service_key_limit", "", false)
		refused(t, c, proxy, org, tiny, "/chat/completions", chatBody("mock/echo", `,"stream":true`), "service_key_limit", "", false)
	})

	t.Run("zero balance", func(t *testing.T) {
		c := newClient(t, gatewayAddr, adminAddr)
		for _, kind := range []string{"organization", "personal"} {
			tn := c.newTenant(kind, "")
			key, _ := c.newKey(tn.MgmtKey, `{"name":"broke"}`)
			refused(t, c, proxy, tn, key, "/chat/completions", paid, "service_credits", "", false)
			refused(t, c, proxy, tn, key, "/chat/completions", chatBody("tollgate-mock", `,"stream":true`), "service_credits", "", false)
			// A zero balance also blocks free models.
			refused(t, c, proxy, tn, key, "/chat/completions", chatBody("tollgate-mock:free", ""), "service_credits", "", false)
			refused(t, c, proxy, tn, key, "/responses", `{"model":"tollgate-mock:free","input":"free?"}`, "service_credits", "", false)
		}
	})

	t.Run("balance below the hold", func(t *testing.T) {
		c := newClient(t, gatewayAddr, adminAddr)
		tn := c.newTenant("organization", "0.001")
		key, _ := c.newKey(tn.MgmtKey, `{"name":"poor"}`)
		// 1000 max tokens hold 0.002 credits: more than the balance.
		refused(t, c, proxy, tn, key, "/chat/completions", chatBody("tollgate-mock", `,"max_tokens":1000`), "service_credits", "", false)
		c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":100`), nil).expect(t, 200)
	})

	t.Run("weight exceeds budget", func(t *testing.T) {
		c := newClient(t, gatewayAddr, adminAddr)
		// Balance 0.1: the in-flight budget is 0.05 credits.
		tn := c.newTenant("organization", "0.1")
		key, _ := c.newKey(tn.MgmtKey, `{"name":"small"}`)
		// max_tokens 40000 (on mock/echo: the same prices, no output
		// limit): a hold of 0.08 fits the balance but not the whole budget.
		big := chatBody("mock/echo", `,"max_tokens":40000`)
		if h := holdOf(big, 40000); h <= 50_000_000 || h > 100_000_000 {
			t.Fatalf("test setup: hold %s", h)
		}
		refused(t, c, proxy, tn, key, "/chat/completions", big, "service_credits", "weight_exceeds_budget", false)
		// Without max_tokens the in-flight estimate is the per-request cap
		// (0.25), above the budget as well.
		refused(t, c, proxy, tn, key, "/chat/completions", chatBody("tollgate-mock", ""), "service_credits", "weight_exceeds_budget", false)
		// A request within the budget passes; free models are not held.
		c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":1000`), nil).expect(t, 200)
		c.mustPost("/chat/completions", key, chatBody("tollgate-mock:free", ""), nil).expect(t, 200)
	})

	t.Run("in-flight budget", func(t *testing.T) {
		c := newClient(t, gatewayAddr, adminAddr)
		// Balance 1: the budget is 0.5, two requests without max_tokens
		// (0.25 each) fill it.
		tn := c.newTenant("organization", "1")
		key, _ := c.newKey(tn.MgmtKey, `{"name":"busy"}`)
		slow := map[string]string{"X-Mock-Latency": "1500ms"}
		body := chatBody("tollgate-mock", "")
		calls := proxy.calls.Load()
		var wg sync.WaitGroup
		results := make([]response, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() { results[i], errs[i] = c.post("/chat/completions", key, body, slow) })
		}
		deadline := time.Now().Add(5 * time.Second)
		for proxy.calls.Load() < calls+2 {
			if time.Now().After(deadline) {
				t.Fatal("the two slow requests did not reach the provider")
			}
			time.Sleep(5 * time.Millisecond)
		}
		// Both run at the provider: the budget is full, though the balance
		// covers many more requests.
		refused(t, c, proxy, tn, key, "/chat/completions", body, "service_in_flight_budget", "in_flight_budget_exhausted", true)
		refused(t, c, proxy, tn, key, "/chat/completions", chatBody("mock/echo", `,"stream":true,"max_tokens":100000`),
			"service_in_flight_budget", "in_flight_budget_exhausted", true)
		// A free model is not held by the budget.
		c.mustPost("/chat/completions", key, chatBody("tollgate-mock:free", ""), nil).expect(t, 200)
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			results[i].expect(t, 200)
		}
		// Finished requests keep only their actual (tiny) cost held: the
		// budget has room again.
		c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
	})

	t.Run("invoiced account", func(t *testing.T) {
		c := newClient(t, gatewayAddr, adminAddr)
		inv := c.newInvoicedTenant()
		if b := inv.Account.Get("billing").Str; b != "invoiced" {
			t.Fatalf("billing %q", b)
		}
		id, mk := inv.AccountID, inv.MgmtKey
		key, _ := c.newKey(mk, `{"name":"billed later"}`)
		before := c.snapshot(key, mk)
		if before.totalCredits != 0 {
			t.Fatalf("credits %s", before.totalCredits)
		}
		// No balance, no budget: billed after use, and charged exactly.
		r := c.mustPost("/chat/completions", key, chatBody("tollgate-mock", ""), nil).expect(t, 200)
		cost := creditAmount(t, r.JSON.Get("usage.cost"))
		if cost != tokenCost(r.JSON.Get("usage.prompt_tokens").Int(), r.JSON.Get("usage.completion_tokens").Int()) || cost == 0 {
			t.Fatalf("invoiced cost %s: %s", cost, r.Body)
		}
		after := c.snapshot(key, mk)
		expectCharged(t, before, after, cost, "invoiced")
		c.mustPost("/chat/completions", key, chatBody("tollgate-mock:free", ""), nil).expect(t, 200)
		c.mustPost("/chat/completions", key, chatBody("mock/echo", `,"max_tokens":40000`), nil).expect(t, 200)
		// The operator sees the negative balance.
		bal := c.operator("GET", "/accounts/"+id, nil).expect(t, 200).JSON.Get("data.balance")
		if creditAmount(t, bal) >= 0 {
			t.Fatalf("invoiced balance %s after spending", bal.Raw)
		}
		// A key cap still applies to an invoiced account.
		capped, _ := c.newKey(mk, `{"name":"capped","limit":0.000001}`)
		expect402(t, c.mustPost("/chat/completions", capped, paid, nil), "service_key_limit", "", false)
	})
}
