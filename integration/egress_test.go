package integration

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// egressAllow is the harness's customer_egress block (gatewayCaddyfile).
const egressAllow = `		customer_egress {
			allow 127.0.0.1/32
		}
`

// withoutEgressAllow is the harness Caddyfile on the default policy:
// customer URLs reach public addresses only.
func withoutEgressAllow(t *testing.T) func(string) string {
	return func(cfg string) string { return replaceOnce(t, cfg, egressAllow, "") }
}

// TestEgressRefusedAtCreate: on the default policy, customer URLs on
// loopback, link-local (cloud metadata), mapped or private addresses, or a
// name resolving to loopback, are refused with a 400 naming the field,
// for private endpoints and observability destinations, at create and
// update; nothing is stored.
func TestEgressRefusedAtCreate(t *testing.T) {
	startInProcessWith(t, withoutEgressAllow(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	port := strings.TrimPrefix(portOnly(mockAddr), ":")

	for _, base := range []string{
		"http://" + mockAddr + "/v1",
		"http://localhost:" + port + "/v1",
		"http://169.254.169.254/v1",
		"http://[::ffff:127.0.0.1]:" + port + "/v1",
		"http://[::1]:" + port + "/v1",
		"https://10.1.2.3/v1",
		"http://0.0.0.0:" + port + "/v1",
	} {
		c.api("POST", peBase, org.MgmtKey, `{"name":"x","model":"acme/x","base_url":"`+base+`"}`).
			expectError(t, 400, "base_url: refused by the gateway's customer_egress policy")
	}
	if n := c.api("GET", peBase, org.MgmtKey, nil).expect(t, 200).JSON.Get("total_count").Int(); n != 0 {
		t.Fatalf("%d private endpoints stored after refusals", n)
	}
	// A public address is accepted; changing it to loopback is refused.
	id := c.api("POST", peBase, org.MgmtKey, `{"name":"pub","model":"acme/pub","base_url":"http://93.184.215.14/v1"}`).
		expect(t, 201).JSON.Get("data.id").Str
	c.api("PATCH", peBase+"/"+id, org.MgmtKey, `{"base_url":"http://localhost:`+port+`/v1"}`).
		expectError(t, 400, "base_url: refused by the gateway's customer_egress policy: localhost resolves to")
	if got := c.api("GET", peBase+"/"+id, org.MgmtKey, nil).expect(t, 200).JSON.Get("data.base_url").Str; got != "http://93.184.215.14/v1" {
		t.Fatalf("base_url after a refused update: %s", got)
	}

	const dests = "/observability/destinations"
	for _, tc := range []struct{ body, field string }{
		{`{"type":"webhook","name":"w","config":{"url":"http://127.0.0.1:9/hook"}}`, "config.url"},
		{`{"type":"webhook","name":"w","config":{"url":"http://localhost:9/hook"}}`, "config.url"},
		{`{"type":"otel-collector","name":"o","config":{"endpoint":"http://169.254.169.254:4318"}}`, "config.endpoint"},
		{`{"type":"langfuse","name":"l","config":{"baseUrl":"http://[fd00::1]","publicKey":"pk","secretKey":"sk"}}`, "config.baseUrl"},
		{`{"type":"grafana","name":"g","config":{"baseUrl":"http://192.168.1.1","instanceId":"1","apiKey":"k"}}`, "config.baseUrl"},
	} {
		c.api("POST", dests, org.MgmtKey, tc.body).expectError(t, 400, tc.field+": refused by the gateway's customer_egress policy")
	}
	if n := c.api("GET", dests, org.MgmtKey, nil).expect(t, 200).JSON.Get("total_count").Int(); n != 0 {
		t.Fatalf("%d destinations stored after refusals", n)
	}
	did := c.api("POST", dests, org.MgmtKey, `{"type":"webhook","name":"pub","config":{"url":"http://93.184.215.14/hook"}}`).
		expect(t, 201).JSON.Get("data.id").Str
	c.api("PATCH", dests+"/"+did, org.MgmtKey, `{"config":{"url":"http://127.0.0.1:9/hook"}}`).
		expectError(t, 400, "config.url: refused by the gateway's customer_egress policy")
}

// TestEgressTightenedByReload: URLs stored while the policy allowed
// loopback are refused when connected to after a reload removes the
// allow entry: the probe records the refusal, requests routed to the
// private endpoint get a 403 naming the policy and are not charged (also
// concurrently), and the export of records holds back until the policy
// allows the destination again, then delivers them once.
func TestEgressTightenedByReload(t *testing.T) {
	dir := startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"egress"}`)
	port := strings.TrimPrefix(portOnly(mockAddr), ":")
	sink := newWebhookSink(t, "egress-secret-0123456789", 0)
	c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"webhook","name":"hook",
		"config":{"url":"`+sink.srv.URL+`/hook","secret":"egress-secret-0123456789"}}`).expect(t, 201)

	// Allowed: a name resolving to loopback validates and routes (the
	// router dials the checked address).
	pe := c.api("POST", peBase, org.MgmtKey, `{"name":"mine","model":"acme/egress","base_url":"http://localhost:`+port+`/v1",
		"upstream_model":"tollgate-mock","pricing":{"prompt":"0.00001","completion":"0.00003"}}`).expect(t, 201).JSON.Get("data.id").Str
	if s := c.api("POST", peBase+"/"+pe+"/validate", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.status").Str; s != "validated" {
		t.Fatalf("validation under the allowing policy: %s", s)
	}
	c.api("POST", peBase+"/"+pe+"/activate", org.MgmtKey, nil).expect(t, 200)
	draft := c.api("POST", peBase, org.MgmtKey, `{"name":"draft","model":"acme/draft","base_url":"http://`+mockAddr+`/v1",
		"upstream_model":"tollgate-mock"}`).expect(t, 201).JSON.Get("data.id").Str
	const body = `{"model":"acme/egress","messages":[{"role":"user","content":"hello"}]}`
	r := c.api("POST", "/chat/completions", key, body).expect(t, 200)
	if p := r.JSON.Get("provider").Str; p != "" && p != "private:"+pe {
		t.Fatalf("served by %s", p)
	}
	first, _ := chatOnce(t, c, key, "tollgate-mock", "before tightening")
	waitIDs(t, func() []string { return sink.ids("/hook") }, []string{r.Header.Get("X-Generation-Id"), first}, "export before tightening")

	// Tightened: the same data directory without the allow entry.
	newTester(t).InitServer(withoutEgressAllow(t)(gatewayCaddyfile(adminAddr, dir, gatewayAddr, mockAddr, "1ms")), "caddyfile")
	// A reload closes idle keep-alive connections from the server's side; a
	// request sent on one at that moment would read EOF.
	c.http.CloseIdleConnections()

	v := c.api("POST", peBase+"/"+draft+"/validate", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if v.Get("status").Str != "draft" || !strings.Contains(v.Get("last_validation.error").Str, "customer_egress policy") {
		t.Fatalf("probe under the tightened policy: %s", v.Raw)
	}
	before := c.snapshot(key, org.MgmtKey)
	c.api("POST", "/chat/completions", key, body).
		expectError(t, 403, "Private endpoint "+pe+" is refused by the gateway's customer_egress policy: localhost resolves to 127.0.0.1")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.post("/chat/completions", key, body, nil)
			if err != nil || res.Status != 403 {
				t.Errorf("concurrent request: %v %d %s", err, res.Status, res.Body)
			}
		}()
	}
	wg.Wait()
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, "requests refused by the egress policy")

	held, _ := chatOnce(t, c, key, "tollgate-mock", "after tightening")
	time.Sleep(time.Second) // the exporter retries, refused at every dial
	if got := sink.ids("/hook"); len(got) != 2 {
		t.Fatalf("the destination received %v under the tightened policy", got)
	}
	sink.mu.Lock()
	attempts := sink.attempts
	sink.mu.Unlock()
	if attempts != 2 {
		t.Fatalf("the destination was connected to: %d deliveries, want 2", attempts)
	}

	// Allowed again: the held record arrives, once; routing works again.
	newTester(t).InitServer(gatewayCaddyfile(adminAddr, dir, gatewayAddr, mockAddr, "1ms"), "caddyfile")
	c.http.CloseIdleConnections()
	waitIDs(t, func() []string { return sink.ids("/hook") }, []string{r.Header.Get("X-Generation-Id"), first, held}, "export after re-allowing")
	c.api("POST", "/chat/completions", key, body).expect(t, 200)
}
