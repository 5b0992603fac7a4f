package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// A max-tokens field so large that its cost wrapped once held nothing and
// passed every cap (issue 17). Now it is refused before anything is held:
// above the model's output limit (tollgate-mock: its 8192-token window), or
// priced beyond any amount (mock/echo, whose limits are unknown). Nothing
// reaches the provider and nothing is charged, under concurrency.
func TestHugeMaxTokensRefused(t *testing.T) {
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, withCountingProxy(proxy))
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("organization", "0.001")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"capped","limit":0.00035}`)
	const huge = "9007199254740991"
	cases := []struct{ path, body, message string }{
		{"/chat/completions", chatBody("tollgate-mock", `,"max_tokens":`+huge), "max_tokens: must be at most 8192 for model tollgate-mock"},
		{"/chat/completions", chatBody("tollgate-mock", `,"stream":true,"max_completion_tokens":`+huge), "max_completion_tokens: must be at most 8192"},
		{"/chat/completions", chatBody("mock/echo", `,"max_tokens":`+huge), "max_tokens: the request's cost at the model's prices is beyond"},
		{"/responses", `{"model":"tollgate-mock","input":"what will this cost","max_output_tokens":` + huge + `}`,
			"max_output_tokens: must be at most 8192 for model tollgate-mock"},
		{"/responses", `{"model":"mock/echo","input":"what will this cost","stream":true,"max_output_tokens":` + huge + `}`,
			"max_output_tokens: the request's cost at the model's prices is beyond"},
		{"/chat/completions", chatBody("mock/echo", `,"max_tokens":9223372036854775808`), "max_tokens: expected a positive integer"},
		{"/responses", `{"model":"tollgate-mock","input":"x","max_output_tokens":9223372036854775808}`, "max_output_tokens: expected a positive integer"},
	}
	before := c.snapshot(key, tn.MgmtKey)
	calls := proxy.calls.Load()
	var wg sync.WaitGroup
	for i := range 60 {
		tc := cases[i%len(cases)]
		wg.Go(func() {
			r, err := c.post(tc.path, key, tc.body, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Status != 400 || !strings.HasPrefix(r.JSON.Get("error.message").Str, tc.message) || r.JSON.Get("error.code").Int() != 400 {
				t.Errorf("%s %s: %d %s", tc.path, tc.body, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := proxy.calls.Load() - calls; n != 0 {
		t.Fatalf("%d refused requests reached the provider", n)
	}
	after := c.snapshot(key, tn.MgmtKey)
	expectCharged(t, before, after, 0, "huge max_tokens")
	if after.totalCredits != money.Amount(1_000_000) || after.totalUsage != 0 {
		t.Fatalf("credits %s, usage %s: want 0.001 and 0", after.totalCredits, after.totalUsage)
	}
	// The key still serves a request within its cap: the refusals held
	// nothing.
	c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":20`), nil).expect(t, 200)
}

// Each purchase fits an amount, but the account's total must too: the
// second of two 5,000,000,000-credit purchases is refused, with the total
// unchanged.
func TestPurchaseTotalOverflowRefused(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("organization", "5000000000")
	path := "/accounts/" + tn.AccountID + "/credits"
	c.operator("POST", path, `{"amount":5000000000}`).expectError(t, 400, "amount: ")
	list := c.operator("GET", path, nil).expect(t, 200)
	if got := list.JSON.Get("total_credits").Raw; got != "5000000000" || list.JSON.Get("data.#").Int() != 1 {
		t.Fatalf("after a refused purchase: %s", list.Body)
	}
	// Up to the largest amount exactly is accepted.
	rest := money.MaxAmount - 5_000_000_000*money.AmountScale
	c.operator("POST", path, fmt.Sprintf(`{"amount":%s}`, rest)).expect(t, 201)
	list = c.operator("GET", path, nil).expect(t, 200)
	if got := list.JSON.Get("total_credits").Raw; got != money.MaxAmount.String() {
		t.Fatalf("total_credits %s, want %s", got, money.MaxAmount)
	}
	cr := c.api("GET", "/credits", tn.MgmtKey, nil).expect(t, 200)
	if got := cr.JSON.Get("data.total_credits").Raw; got != money.MaxAmount.String() {
		t.Fatalf("GET /credits total_credits %s", got)
	}
}
