package integration

import (
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// Prices of the test's private endpoint in nano-credits: 0.00001 and
// 0.00003 credits per token, 0.001 per request.
const (
	pePrompt     money.Amount = 10_000
	peCompletion money.Amount = 30_000
	peRequest    money.Amount = 1_000_000
)

const peBase = "/private-endpoints"

// TestPrivateEndpointStateMachine walks every allowed transition and
// checks that every other one is refused with 409 naming the state.
func TestPrivateEndpointStateMachine(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	other := c.newTenant("organization", "10")

	const secret = "sk-private-endpoint-key-0123456789"
	r := c.api("POST", peBase, org.MgmtKey, `{"name":"mine","model":"acme/private","base_url":"http://`+mockAddr+`/v1/",
		"upstream_model":"tollgate-mock","api_key":"`+secret+`"}`).expect(t, 201)
	if strings.Contains(string(r.Body), secret) {
		t.Fatalf("create answer shows the key: %s", r.Body)
	}
	d := r.JSON.Get("data")
	id := d.Get("id").Str
	if d.Get("status").Str != "draft" || d.Get("base_url").Str != "http://"+mockAddr+"/v1" ||
		d.Get("api_key_label").Str != "sk-...6789" || d.Get("pricing.prompt").Str != "0" || d.Get("last_validation").Type != 0 && d.Get("last_validation").Raw != "null" {
		t.Fatalf("created %s", d.Raw)
	}
	c.api("GET", peBase+"/"+id, other.MgmtKey, nil).expectError(t, 404, "")
	c.api("POST", peBase+"/"+id+"/activate", other.MgmtKey, nil).expectError(t, 404, "")

	post := func(action string) response { return c.api("POST", peBase+"/"+id+"/"+action, org.MgmtKey, nil) }
	refused := func(action, state string) {
		t.Helper()
		var res response
		if action == "update" {
			res = c.api("PATCH", peBase+"/"+id, org.MgmtKey, `{"name":"x"}`)
		} else {
			res = post(action)
		}
		res.expectError(t, 409, "its status is "+state)
	}
	status := func(res response, want string) {
		t.Helper()
		res.expect(t, 200)
		if got := res.JSON.Get("data.status").Str; got != want {
			t.Fatalf("status %q, want %q: %s", got, want, res.Body)
		}
	}

	// draft: only update and validate
	refused("activate", "draft")
	refused("disable", "draft")
	refused("enable", "draft")
	status(c.api("PATCH", peBase+"/"+id, org.MgmtKey, `{"name":"renamed"}`), "draft")
	status(c.api("PUT", peBase+"/"+id+"/pricing", org.MgmtKey, `{"prompt":"0.00001","completion":"0.00003","request":"0.001"}`), "draft")
	v := post("validate")
	status(v, "validated")
	if !v.JSON.Get("data.last_validation.succeeded").Bool() || v.JSON.Get("data.last_validation.error").Raw != "null" {
		t.Fatalf("validation %s", v.JSON.Get("data.last_validation").Raw)
	}
	// validated: only activate (and pricing)
	refused("update", "validated")
	refused("validate", "validated")
	refused("disable", "validated")
	refused("enable", "validated")
	status(c.api("PUT", peBase+"/"+id+"/pricing", org.MgmtKey, `{"prompt":"0.00001","completion":"0.00003","request":"0.001"}`), "validated")
	status(post("activate"), "enabled")
	// enabled: only disable
	refused("update", "enabled")
	refused("validate", "enabled")
	refused("activate", "enabled")
	refused("enable", "enabled")
	status(post("disable"), "disabled")
	// disabled: only enable
	refused("update", "disabled")
	refused("validate", "disabled")
	refused("activate", "disabled")
	refused("disable", "disabled")
	status(post("enable"), "enabled")

	l := c.api("GET", peBase, org.MgmtKey, nil).expect(t, 200)
	if l.JSON.Get("total_count").Int() != 1 || l.JSON.Get("data.0.id").Str != id || strings.Contains(string(l.Body), secret) {
		t.Fatalf("list %s", l.Body)
	}
	c.api("DELETE", peBase+"/"+id, org.MgmtKey, nil).expect(t, 200)
	c.api("GET", peBase+"/"+id, org.MgmtKey, nil).expectError(t, 404, "")

	// bad input names the field
	c.api("POST", peBase, org.MgmtKey, `{"name":"x","model":"m"}`).expectError(t, 400, "base_url: required")
	c.api("POST", peBase, org.MgmtKey, `{"name":"x","model":"m","base_url":"ftp://h/v1"}`).expectError(t, 400, "base_url:")
	c.api("POST", peBase, org.MgmtKey, `{"name":"x","model":"m","base_url":"http://h/v1","pricing":{"prompt":"-1"}}`).expectError(t, 400, "pricing.prompt")
}

// TestPrivateEndpointValidationDeadEndpoint: a probe of a closed port keeps
// the endpoint a draft with the error recorded.
func TestPrivateEndpointValidationDeadEndpoint(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	dead := freeport.Addr(t) // nothing listens there
	id := c.api("POST", peBase, org.MgmtKey, `{"name":"dead","model":"acme/dead","base_url":"http://`+dead+`/v1"}`).
		expect(t, 201).JSON.Get("data.id").Str
	v := c.api("POST", peBase+"/"+id+"/validate", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if v.Get("status").Str != "draft" || v.Get("last_validation.succeeded").Bool() ||
		!strings.Contains(v.Get("last_validation.error").Str, "unreachable") {
		t.Fatalf("after a failed probe: %s", v.Raw)
	}
	c.api("POST", peBase+"/"+id+"/activate", org.MgmtKey, nil).expectError(t, 409, "its status is draft")
	// an upstream that answers an error status fails too: the mock's 500 fault
	id2 := c.api("POST", peBase, org.MgmtKey, `{"name":"err","model":"acme/err","base_url":"http://`+mockAddr+`/v1","upstream_model":"error-500"}`).
		expect(t, 201).JSON.Get("data.id").Str
	v = c.api("POST", peBase+"/"+id2+"/validate", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if v.Get("status").Str != "draft" || !strings.Contains(v.Get("last_validation.error").Str, "answered 500") {
		t.Fatalf("after a 500 probe: %s", v.Raw)
	}
	// fixed while a draft, it validates
	c.api("PATCH", peBase+"/"+id2, org.MgmtKey, `{"upstream_model":"tollgate-mock"}`).expect(t, 200)
	v = c.api("POST", peBase+"/"+id2+"/validate", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if v.Get("status").Str != "validated" {
		t.Fatalf("after fixing: %s", v.Raw)
	}
}

// TestPrivateEndpointRoutingAndPricing: an enabled endpoint serves the
// account's requests for its model at its own prices, charged exactly,
// also under concurrency; other accounts and a disabled endpoint do not
// route to it.
func TestPrivateEndpointRoutingAndPricing(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	other := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"pe"}`)
	otherKey, _ := c.newKey(other.MgmtKey, `{"name":"other"}`)
	const body = `{"model":"acme/private","messages":[{"role":"user","content":"hello private deployment"}]}`

	id := c.api("POST", peBase, org.MgmtKey, `{"name":"mine","model":"acme/private","base_url":"http://`+mockAddr+`/v1",
		"upstream_model":"tollgate-mock","api_key":"sk-private-endpoint-key-0123456789",
		"pricing":{"prompt":"0.00001","completion":"0.00003","request":"0.001"}}`).expect(t, 201).JSON.Get("data.id").Str
	// not routed before it is enabled
	c.api("POST", "/chat/completions", key, body).expectError(t, 400, `unknown model "acme/private"`)
	c.api("POST", peBase+"/"+id+"/validate", org.MgmtKey, nil).expect(t, 200)
	c.api("POST", "/chat/completions", key, body).expectError(t, 400, `unknown model "acme/private"`)
	c.api("POST", peBase+"/"+id+"/activate", org.MgmtKey, nil).expect(t, 200)

	before := c.snapshot(key, org.MgmtKey)
	r := c.api("POST", "/chat/completions", key, body).expect(t, 200)
	pt, ct := r.JSON.Get("usage.prompt_tokens").Int(), r.JSON.Get("usage.completion_tokens").Int()
	want := money.Amount(pt)*pePrompt + money.Amount(ct)*peCompletion + peRequest
	if got := creditAmount(t, r.JSON.Get("usage.cost")); got != want || pt == 0 {
		t.Fatalf("usage.cost %s, want %s (%d+%d tokens)", got, want, pt, ct)
	}
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "private endpoint request")

	// concurrent requests: each charged exactly once
	before = c.snapshot(key, org.MgmtKey)
	const n = 16
	var wg sync.WaitGroup
	costs := make([]money.Amount, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := c.post("/chat/completions", key, body, nil)
			if err != nil || res.Status != 200 {
				t.Errorf("request %d: %v %d %s", i, err, res.Status, res.Body)
				return
			}
			costs[i] = creditAmount(t, res.JSON.Get("usage.cost"))
		}(i)
	}
	wg.Wait()
	var sum money.Amount
	for _, x := range costs {
		if x != want {
			t.Fatalf("a concurrent request cost %s, want %s", x, want)
		}
		sum += x
	}
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), sum, "concurrent private endpoint requests")

	// a stream through the private endpoint, charged at its prices
	before = c.snapshot(key, org.MgmtKey)
	res, err := c.send("/chat/completions", key, strings.Replace(body, `"messages"`, `"stream":true,"messages"`, 1), nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, res)
	}
	evs, err := readStream(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	st := parseStream(t, evs)
	pt, ct = st.usage.Get("prompt_tokens").Int(), st.usage.Get("completion_tokens").Int()
	want = money.Amount(pt)*pePrompt + money.Amount(ct)*peCompletion + peRequest
	if got := creditAmount(t, st.usage.Get("cost")); got != want || !st.done {
		t.Fatalf("stream usage.cost %s, want %s (done %v)", got, want, st.done)
	}
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, "streamed private endpoint request")

	// another account does not see it
	c.api("POST", "/chat/completions", otherKey, body).expectError(t, 400, `unknown model "acme/private"`)

	// a private endpoint for a catalog model comes first, at its prices
	id2 := c.api("POST", peBase, org.MgmtKey, `{"name":"own mock","model":"tollgate-mock","base_url":"http://`+mockAddr+`/v1",
		"pricing":{"prompt":"0.00001","completion":"0.00003","request":"0.001"}}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", peBase+"/"+id2+"/validate", org.MgmtKey, nil).expect(t, 200)
	c.api("POST", peBase+"/"+id2+"/activate", org.MgmtKey, nil).expect(t, 200)
	catBody := strings.Replace(body, "acme/private", "tollgate-mock", 1)
	r = c.api("POST", "/chat/completions", key, catBody).expect(t, 200)
	pt, ct = r.JSON.Get("usage.prompt_tokens").Int(), r.JSON.Get("usage.completion_tokens").Int()
	if got, want := creditAmount(t, r.JSON.Get("usage.cost")), money.Amount(pt)*pePrompt+money.Amount(ct)*peCompletion+peRequest; got != want {
		t.Fatalf("catalog model through the private endpoint cost %s, want %s", got, want)
	}
	c.api("POST", peBase+"/"+id2+"/disable", org.MgmtKey, nil).expect(t, 200)
	r = c.api("POST", "/chat/completions", key, catBody).expect(t, 200)
	pt, ct = r.JSON.Get("usage.prompt_tokens").Int(), r.JSON.Get("usage.completion_tokens").Int()
	if got := creditAmount(t, r.JSON.Get("usage.cost")); got != tokenCost(pt, ct) {
		t.Fatalf("after disabling, cost %s, want the catalog's %s", got, tokenCost(pt, ct))
	}

	// disabled: no longer routed
	c.api("POST", peBase+"/"+id+"/disable", org.MgmtKey, nil).expect(t, 200)
	c.api("POST", "/chat/completions", key, body).expectError(t, 400, `unknown model "acme/private"`)
	c.api("POST", peBase+"/"+id+"/enable", org.MgmtKey, nil).expect(t, 200)
	c.api("POST", "/chat/completions", key, body).expect(t, 200)
}
