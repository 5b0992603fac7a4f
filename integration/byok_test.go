package integration

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// TestBYOKChargesBYOKUsage: with the account's own key for the provider, a
// request is served with that key and its exact cost lands in the key's
// byok_usage, never in usage or the account's credits.
func TestBYOKChargesBYOKUsage(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"byok"}`)
	const chatBody = `{"model":"tollgate-mock","messages":[{"role":"user","content":"hello from my own key"}]}`

	// a request on the operator's key: usage
	first := c.api("POST", "/chat/completions", key, chatBody).expect(t, 200)
	paid := creditAmount(t, first.JSON.Get("usage.cost"))
	if paid <= 0 {
		t.Fatalf("paid request cost %s", paid)
	}
	credits := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	usageBefore := creditAmount(t, credits.Get("total_usage"))
	if usageBefore != paid {
		t.Fatalf("total_usage %s, want %s", usageBefore, paid)
	}

	// the provider name is checked against the catalog
	c.api("POST", "/byok", org.MgmtKey, `{"provider":"openai","key":"sk-x"}`).
		expectError(t, 400, `provider: unknown provider "openai"; expected one of: mock`)
	const secret = "sk-own-mock-provider-key-123456"
	cred := c.api("POST", "/byok", org.MgmtKey, `{"provider":"mock","key":"`+secret+`","name":"mine"}`).expect(t, 201)
	if strings.Contains(string(cred.Body), secret) {
		t.Fatalf("create answer carries the key: %s", cred.Body)
	}
	id := cred.JSON.Get("data.id").String()

	chat := c.api("POST", "/chat/completions", key, chatBody).expect(t, 200)
	cost := creditAmount(t, chat.JSON.Get("usage.cost"))
	if cost <= 0 {
		t.Fatalf("BYOK request cost %s", cost)
	}
	k := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if got := creditAmount(t, k.Get("byok_usage")); got != cost {
		t.Errorf("byok_usage %s, want exactly %s", got, cost)
	}
	if got := creditAmount(t, k.Get("byok_usage_daily")); got != cost {
		t.Errorf("byok_usage_daily %s, want %s", got, cost)
	}
	if got := creditAmount(t, k.Get("usage")); got != paid {
		t.Errorf("usage %s, want %s (unchanged)", got, paid)
	}
	credits = c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if got := creditAmount(t, credits.Get("total_usage")); got != usageBefore {
		t.Errorf("total_usage %s after a BYOK request, want %s", got, usageBefore)
	}
	if got := creditAmount(t, credits.Get("total_credits")); got != 10*money.AmountScale {
		t.Errorf("total_credits %s", got)
	}

	// another account's management key cannot see or use the credential
	other := c.newTenant("organization", "")
	c.api("GET", "/byok/"+id, other.MgmtKey, nil).expectError(t, 404, "BYOK credential not found")
	c.api("DELETE", "/byok/"+id, other.MgmtKey, nil).expectError(t, 404, "BYOK credential not found")

	// BYOK requests spend no credits: an account without any is served
	// through its own key only
	okey, ohash := c.newKey(other.MgmtKey, `{"name":"no credits"}`)
	c.api("POST", "/chat/completions", okey, chatBody).expectError(t, 402, "")
	c.api("POST", "/byok", other.MgmtKey, `{"provider":"mock","key":"other-own-key-987654"}`).expect(t, 201)
	ochat := c.api("POST", "/chat/completions", okey, chatBody).expect(t, 200)
	ok := c.api("GET", "/keys/"+ohash, other.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if got, want := creditAmount(t, ok.Get("byok_usage")), creditAmount(t, ochat.JSON.Get("usage.cost")); got != want || creditAmount(t, ok.Get("usage")) != 0 {
		t.Errorf("no-credit account: byok_usage %s (want %s), usage %s", got, want, ok.Get("usage").Raw)
	}

	// deleting the credential switches back to the operator's key
	c.api("DELETE", "/byok/"+id, org.MgmtKey, nil).expect(t, 200)
	c.api("POST", "/chat/completions", key, chatBody).expect(t, 200)
	k = c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if got := creditAmount(t, k.Get("byok_usage")); got != cost {
		t.Errorf("byok_usage %s after deleting the credential, want %s", got, cost)
	}
	if got := creditAmount(t, k.Get("usage")); got <= paid {
		t.Errorf("usage %s did not grow on the operator's key", got)
	}
}

// TestOpenRouterSDKBYOK runs every byok.* method of the public SDK.
func TestOpenRouterSDKBYOK(t *testing.T) {
	node := requireNode(t)

	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"sdk-byok"}`)
	def := c.api("GET", "/workspaces/default", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.id").Str
	ws := c.api("POST", "/workspaces", org.MgmtKey, `{"name":"Research","slug":"research"}`).expect(t, 201).JSON.Get("data.id").Str

	runSDKScript(t, node, "byok.mjs",
		"TOLLGATE_MGMT_KEY="+org.MgmtKey,
		"TOLLGATE_API_KEY="+key,
		"TOLLGATE_KEY_HASH="+hash,
		"TOLLGATE_DEFAULT_WORKSPACE_ID="+def,
		"TOLLGATE_WORKSPACE_ID="+ws,
	)
}
