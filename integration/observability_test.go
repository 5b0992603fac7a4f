package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-dev/caddy-tollgate/export"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// webhookSink is a webhook receiver that fails its first `failures`
// deliveries with 503, then accepts, checking each signature.
type webhookSink struct {
	t        *testing.T
	secret   string
	srv      *httptest.Server
	mu       sync.Mutex
	failures int
	attempts int
	accepted map[string][]gjson.Result // by path: the records accepted
}

func newWebhookSink(t *testing.T, secret string, failures int) *webhookSink {
	s := &webhookSink{t: t, secret: secret, failures: failures, accepted: map[string][]gjson.Result{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.attempts++
		mac := hmac.New(sha256.New, []byte(s.secret))
		mac.Write(body)
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); r.Header.Get(export.SignatureHeader) != want {
			t.Errorf("signature %q, want %q", r.Header.Get(export.SignatureHeader), want)
		}
		if r.Header.Get(export.DeliveryHeader) == "" {
			t.Errorf("no %s header", export.DeliveryHeader)
		}
		if s.failures > 0 {
			s.failures--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if gjson.GetBytes(body, "type").Str != "generations" {
			t.Errorf("webhook body type: %s", body)
		}
		s.accepted[r.URL.Path] = append(s.accepted[r.URL.Path], gjson.GetBytes(body, "data").Array()...)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// ids returns the generation ids accepted on path, in arrival order.
func (s *webhookSink) ids(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.accepted[path] {
		out = append(out, r.Get("id").Str)
	}
	return out
}

func (s *webhookSink) record(path, id string) gjson.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.accepted[path] {
		if r.Get("id").Str == id {
			return r
		}
	}
	return gjson.Result{}
}

// waitIDs waits until path received exactly want (in any order).
func waitIDs(t *testing.T, got func() []string, want []string, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		g := got()
		if sameSet(g, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: received %v, want %v", what, g, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		if m[x] != 1 {
			return false
		}
		m[x]--
	}
	return true
}

func chatOnce(t *testing.T, c *client, key, model, text string) (id string, r response) {
	t.Helper()
	r = c.api("POST", "/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"`+text+`"}]}`).expect(t, 200)
	id = r.Header.Get("X-Generation-Id")
	if id == "" {
		t.Fatal("no X-Generation-Id")
	}
	return id, r
}

// TestObservabilityWebhookExport: metered requests reach a signed webhook,
// after it recovers from failures, each generation exactly once in what it
// accepted, with the fields the broadcast flags select.
func TestObservabilityWebhookExport(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"exported"}`)
	sink := newWebhookSink(t, "whsec-test-secret-0123456789", 3)

	d := c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"webhook","name":"hook",
		"config":{"url":"`+sink.srv.URL+`/hook","secret":"whsec-test-secret-0123456789","headers":{"X-Custom":"custom-header-value-123"}},
		"broadcast_generation_cost":true,"broadcast_generation_identity":true}`).expect(t, 201)
	if strings.Contains(string(d.Body), "whsec-test-secret-0123456789") || strings.Contains(string(d.Body), "custom-header-value-123") {
		t.Fatalf("create answer shows a secret: %s", d.Body)
	}
	if got := d.JSON.Get("data.config.secret").Str; got != "whse...6789" {
		t.Errorf("masked secret %q", got)
	}

	var ids []string
	costs := map[string]string{}
	var charged money.Amount
	before := c.snapshot(key, org.MgmtKey)
	for i := 0; i < 3; i++ {
		id, r := chatOnce(t, c, key, "tollgate-mock", "export me please")
		ids = append(ids, id)
		costs[id] = r.JSON.Get("usage.cost").Raw
		charged += creditAmount(t, r.JSON.Get("usage.cost"))
	}
	// the failing destination did not hold up or lose a charge
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), charged, "requests exported to a failing webhook")
	waitIDs(t, func() []string { return sink.ids("/hook") }, ids, "webhook")
	if sink.attempts < 4 {
		t.Errorf("%d delivery attempts; the 3 failures were not retried", sink.attempts)
	}
	for _, id := range ids {
		rec := sink.record("/hook", id)
		if rec.Get("model").Str != "tollgate-mock" || rec.Get("provider").Str != "mock" || rec.Get("status").Str != "completed" {
			t.Errorf("record %s", rec.Raw)
		}
		if rec.Get("usage.prompt_tokens").Int() <= 0 || rec.Get("usage.total_tokens").Int() != rec.Get("usage.prompt_tokens").Int()+rec.Get("usage.completion_tokens").Int() {
			t.Errorf("usage %s", rec.Get("usage").Raw)
		}
		if rec.Get("cost").Raw != costs[id] {
			t.Errorf("exported cost %s, charged %s", rec.Get("cost").Raw, costs[id])
		}
		if rec.Get("api_key_hash").Str != hash || rec.Get("api_key_name").Str != "exported" {
			t.Errorf("identity fields %s", rec.Raw)
		}
	}

	// disabled: nothing more is exported
	destID := d.JSON.Get("data.id").Str
	c.api("PATCH", "/observability/destinations/"+destID, org.MgmtKey, `{"enabled":false}`).expect(t, 200)
	chatOnce(t, c, key, "tollgate-mock", "not exported")
	time.Sleep(500 * time.Millisecond)
	if got := sink.ids("/hook"); len(got) != 3 {
		t.Errorf("a disabled destination received %v", got)
	}
}

// TestObservabilityOTLPExport: an otel-collector destination receives OTLP
// traces with GenAI attributes once its collector comes up.
func TestObservabilityOTLPExport(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"otlp"}`)

	// The collector's port is closed at first: exports are refused.
	addr := freeport.Addr(t) // nothing listens there

	c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"otel-collector","name":"collector",
		"config":{"endpoint":"http://`+addr+`","headers":{"X-Collector-Token":"collector-token-abcdef"}}}`).expect(t, 201)
	id, r := chatOnce(t, c, key, "tollgate-mock", "trace this request")
	time.Sleep(300 * time.Millisecond) // at least one refused attempt

	var mu sync.Mutex
	spans := map[string]map[string]any{} // gen_ai.response.id -> attributes
	var names []string
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Collector-Token") != "collector-token-abcdef" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("collector headers %v", r.Header)
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decoding OTLP: %v", err)
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					attrs := map[string]any{}
					for _, kv := range sp.Attributes {
						if sv := kv.Value.GetStringValue(); sv != "" {
							attrs[kv.Key] = sv
						} else {
							attrs[kv.Key] = kv.Value.GetIntValue()
						}
					}
					spans[kv(attrs, "gen_ai.response.id")] = attrs
					names = append(names, sp.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(b)
	})
	var ln2 net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may be briefly unavailable
		if ln2, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln2)
	t.Cleanup(func() { srv.Close() })

	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		attrs, ok := spans[id]
		mu.Unlock()
		if ok {
			if attrs["gen_ai.request.model"] != "tollgate-mock" || attrs["gen_ai.provider.name"] != "mock" ||
				attrs["gen_ai.operation.name"] != "chat" {
				t.Errorf("span attributes %v", attrs)
			}
			if attrs["gen_ai.usage.input_tokens"] != r.JSON.Get("usage.prompt_tokens").Int() ||
				attrs["gen_ai.usage.output_tokens"] != r.JSON.Get("usage.completion_tokens").Int() {
				t.Errorf("token attributes %v, usage %s", attrs, r.JSON.Get("usage").Raw)
			}
			mu.Lock()
			if len(names) != 1 || names[0] != "chat tollgate-mock" {
				t.Errorf("spans %v", names)
			}
			mu.Unlock()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span for %s; got %v", id, spans)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func kv(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// TestObservabilityFiltersSamplingKeys: api_key_hashes, filter rules and
// sampling decide which generations each destination receives.
func TestObservabilityFiltersSamplingKeys(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key1, hash1 := c.newKey(org.MgmtKey, `{"name":"first"}`)
	key2, _ := c.newKey(org.MgmtKey, `{"name":"second"}`)
	sink := newWebhookSink(t, "shared-secret-for-all-hooks", 0)
	create := func(path, extra string) string {
		r := c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"webhook","name":"`+path+`",
			"config":{"url":"`+sink.srv.URL+path+`","secret":"shared-secret-for-all-hooks"}`+extra+`}`).expect(t, 201)
		return r.JSON.Get("data.id").Str
	}
	create("/keyed", `,"api_key_hashes":["`+hash1+`"]`)
	create("/filtered", `,"filter_rules":{"groups":[{"logic":"or","rules":[
		{"field":"model","operator":"equals","value":"mock/echo"},
		{"field":"api_key_name","operator":"starts_with","value":"sec"}]},
		{"rules":[{"field":"prompt_tokens","operator":"gt","value":0}]}]}`)
	sampledID := create("/sampled", `,"sampling_rate":0.5`)

	type gen struct{ id, key string }
	var all []gen
	for i := 0; i < 4; i++ {
		id, _ := chatOnce(t, c, key1, "tollgate-mock", "one")
		all = append(all, gen{id, "1"})
		id, _ = chatOnce(t, c, key1, "mock/echo", "two")
		all = append(all, gen{id + "#echo", "1"})
		id, _ = chatOnce(t, c, key2, "tollgate-mock", "three")
		all = append(all, gen{id, "2"})
	}
	var keyed, filtered, sampled, every []string
	for _, g := range all {
		id, echo := strings.CutSuffix(g.id, "#echo")
		every = append(every, id)
		if g.key == "1" {
			keyed = append(keyed, id)
		}
		if echo || g.key == "2" {
			filtered = append(filtered, id)
		}
		if export.Sampled(0.5, sampledID, id) {
			sampled = append(sampled, id)
		}
	}
	if len(sampled) == 0 || len(sampled) == len(every) {
		t.Logf("sampling kept %d of %d", len(sampled), len(every))
	}
	waitIDs(t, func() []string { return sink.ids("/keyed") }, keyed, "api_key_hashes")
	waitIDs(t, func() []string { return sink.ids("/filtered") }, filtered, "filter_rules")
	waitIDs(t, func() []string { return sink.ids("/sampled") }, sampled, "sampling_rate")
}

// TestObservabilityDestinationsAPI: validation and ownership of the CRUD routes.
func TestObservabilityDestinationsAPI(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	other := c.newTenant("organization", "10")
	const base = "/observability/destinations"
	c.api("POST", base, org.MgmtKey, `{"type":"datadog","name":"dd","config":{"apiKey":"x"}}`).
		expectError(t, 400, "supported types: grafana, langfuse, otel-collector, webhook")
	c.api("POST", base, org.MgmtKey, `{"type":"nope","name":"x","config":{}}`).expectError(t, 400, "type: expected one of")
	c.api("POST", base, org.MgmtKey, `{"type":"webhook","name":"x","config":{}}`).expectError(t, 400, "config.url")
	c.api("POST", base, org.MgmtKey, `{"type":"langfuse","name":"x","config":{"publicKey":"pk"}}`).expectError(t, 400, "config.secretKey")
	c.api("POST", base, org.MgmtKey, `{"type":"webhook","name":"x","config":{"url":"http://127.0.0.1:1/"},"sampling_rate":2}`).
		expectError(t, 400, "sampling_rate")
	c.api("POST", base, org.MgmtKey, `{"type":"webhook","name":"x","config":{"url":"http://127.0.0.1:1/"},
		"filter_rules":{"groups":[{"rules":[{"field":"total_cost","operator":"regex","value":"x"}]}]}}`).
		expectError(t, 400, "filter_rules.groups[0].rules[0].operator")
	c.api("POST", base, org.MgmtKey, `{"type":"webhook","name":"x","config":{"url":"http://127.0.0.1:1/"},"api_key_hashes":["`+strings.Repeat("a", 64)+`"]}`).
		expectError(t, 400, "api_key_hashes")

	// a generated webhook secret is shown once
	r := c.api("POST", base, org.MgmtKey, `{"type":"webhook","name":"gen","config":{"url":"http://127.0.0.1:1/"}}`).expect(t, 201)
	secret := r.JSON.Get("data.config.secret").Str
	if !strings.HasPrefix(secret, "whsec_") || len(secret) < 40 {
		t.Fatalf("generated secret %q", secret)
	}
	id := r.JSON.Get("data.id").Str
	g := c.api("GET", base+"/"+id, org.MgmtKey, nil).expect(t, 200)
	if strings.Contains(string(g.Body), secret) {
		t.Fatalf("GET shows the secret: %s", g.Body)
	}
	// another account's destination does not exist for this one
	c.api("GET", base+"/"+id, other.MgmtKey, nil).expectError(t, 404, "")
	c.api("DELETE", base+"/"+id, other.MgmtKey, nil).expectError(t, 404, "")
	// a config update without a secret keeps the secret
	u := c.api("PATCH", base+"/"+id, org.MgmtKey, `{"config":{"url":"http://127.0.0.1:2/"},"name":"renamed"}`).expect(t, 200)
	if u.JSON.Get("data.config.secret").Str != export.Mask(secret) || u.JSON.Get("data.name").Str != "renamed" {
		t.Fatalf("update %s", u.Body)
	}
	// at most 5 per type
	for i := 0; i < 4; i++ {
		c.api("POST", base, org.MgmtKey, `{"type":"webhook","name":"more","config":{"url":"http://127.0.0.1:1/"}}`).expect(t, 201)
	}
	c.api("POST", base, org.MgmtKey, `{"type":"webhook","name":"sixth","config":{"url":"http://127.0.0.1:1/"}}`).expectError(t, 409, "at most 5")
	l := c.api("GET", base+"?limit=2", org.MgmtKey, nil).expect(t, 200)
	if l.JSON.Get("total_count").Int() != 5 || len(l.JSON.Get("data").Array()) != 2 {
		t.Fatalf("list %s", l.Body)
	}
	c.api("DELETE", base+"/"+id, org.MgmtKey, nil).expect(t, 200)
	c.api("GET", base+"/"+id, org.MgmtKey, nil).expectError(t, 404, "")
}

// TestOpenRouterSDKObservability runs every observability.* method of the
// public SDK with its strict response validation.
func TestOpenRouterSDKObservability(t *testing.T) {
	node := requireNode(t)

	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"sdk-observability"}`)

	runSDKScript(t, node, "observability.mjs",
		"TOLLGATE_MGMT_KEY="+org.MgmtKey,
		"TOLLGATE_API_KEY="+key,
		"TOLLGATE_KEY_HASH="+hash,
		"TOLLGATE_HOOK_URL=http://127.0.0.1:1/hook",
	)
}

// TestObservabilityExportSurvivesReload: records queued for a failing
// webhook before a config reload, and those made after it, all arrive
// once the webhook recovers, each exactly once (one exporter per database
// across reloads).
func TestObservabilityExportSurvivesReload(t *testing.T) {
	dir := startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"reload"}`)
	sink := newWebhookSink(t, "reload-secret-0123456789", 1<<30)
	c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"webhook","name":"hook",
		"config":{"url":"`+sink.srv.URL+`/hook","secret":"reload-secret-0123456789"}}`).expect(t, 201)

	var ids []string
	for i := 0; i < 3; i++ {
		id, _ := chatOnce(t, c, key, "tollgate-mock", "before the reload")
		ids = append(ids, id)
	}
	// Refused at least once before the reload.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		sink.mu.Lock()
		n := sink.attempts
		sink.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt before the reload")
		}
	}
	// A changed config (the mock's latency), same data directory.
	newTester(t).InitServer(gatewayCaddyfile(adminAddr, dir, gatewayAddr, mockAddr, "2ms"), "caddyfile")
	c.http.CloseIdleConnections() // the reload closed them server-side
	for i := 0; i < 2; i++ {
		id, _ := chatOnce(t, c, key, "tollgate-mock", "after the reload")
		ids = append(ids, id)
	}
	sink.mu.Lock()
	sink.failures = 0
	sink.mu.Unlock()
	waitIDs(t, func() []string { return sink.ids("/hook") }, ids, "webhook across a reload")
	time.Sleep(300 * time.Millisecond)
	if got := sink.ids("/hook"); !sameSet(got, ids) {
		t.Fatalf("after settling: %v, want %v", got, ids)
	}
}

// TestObservabilityLangfuseExport: a langfuse destination sends OTLP/HTTP
// traces to its baseUrl's OTLP path with Basic auth of its key pair.
func TestObservabilityLangfuseExport(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"langfuse"}`)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if r.URL.Path != "/api/public/otel/v1/traces" || !ok || user != "pk-lf-public-key" || pass != "sk-lf-secret-key-0123456789" {
			t.Errorf("langfuse request %s, basic auth %q %q %v", r.URL.Path, user, pass, ok)
			w.WriteHeader(401)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decoding OTLP: %v", err)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					for _, kv := range sp.Attributes {
						if kv.Key == "gen_ai.response.id" {
							got = append(got, kv.Value.GetStringValue())
						}
					}
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	c.api("POST", "/observability/destinations", org.MgmtKey, `{"type":"langfuse","name":"lf",
		"config":{"baseUrl":"`+srv.URL+`","publicKey":"pk-lf-public-key","secretKey":"sk-lf-secret-key-0123456789"}}`).expect(t, 201)
	id, _ := chatOnce(t, c, key, "tollgate-mock", "to langfuse")
	waitIDs(t, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }, []string{id}, "langfuse")
}
