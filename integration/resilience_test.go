package integration

// Resilience: a transient failure is retried on the same endpoint before
// the next is tried, never after the first byte reached the client and
// never charged twice; an endpoint that keeps failing is taken out of
// routing and probed back in; each endpoint's uptime is reported and
// ranks it.

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// faultyProvider stands in front of the mock provider: each POST, in
// order from 1, gets the status fail returns (0: the mock answers).
type faultyProvider struct {
	srv   *httptest.Server
	posts atomic.Int64
	fail  atomic.Pointer[func(n int64) int]
}

func newFaultyProvider(t *testing.T, fail func(n int64) int) *faultyProvider {
	t.Helper()
	u, err := url.Parse("http://" + mockAddr)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	p := &faultyProvider{}
	p.setFail(fail)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if status := (*p.fail.Load())(p.posts.Add(1)); status != 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write([]byte(`{"error":{"message":"injected","type":"server_error","code":"injected"}}`))
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultyProvider) setFail(fail func(n int64) int) { p.fail.Store(&fail) }

func (p *faultyProvider) base() string { return p.srv.URL + "/v1" }

// failFirst fails the first n POSTs with status.
func failFirst(n int64, status int) func(int64) int {
	return func(i int64) int {
		if i <= n {
			return status
		}
		return 0
	}
}

func TestRetrySameEndpoint(t *testing.T) {
	flaky := newFaultyProvider(t, failFirst(2, http.StatusServiceUnavailable))
	down := newFaultyProvider(t, func(int64) int { return http.StatusBadGateway })
	broken := newRecordingProxy(t, mockAddr, nil)
	p := func(name, base, model string) testProvider {
		return testProvider{name: name, baseURL: base, model: model, apiKey: "mock"}
	}
	startInProcessWith(t, chain(
		withTollgateOptions(t, "retry_backoff 20ms", "circuit_breaker off"),
		withModels(t,
			modelBlock("rt/flaky", "0.000001", "0.000002", p("flaky", flaky.base(), "tollgate-mock")),
			modelBlock("rt/down", "0.000001", "0.000002", p("down", down.base(), "tollgate-mock"), p("up", "http://"+mockAddr+"/v1", "tollgate-mock")),
			modelBlock("rt/break", "0.000001", "0.000002", p("break", "http://"+broken.addr()+"/v1", "tollgate-mock-stream-break")),
		)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"retries","limit":5}`)
	const body = `{"model":"rt/flaky","max_tokens":20,"messages":[{"role":"user","content":"retry me"}]}`

	t.Run("fails twice then answers: one 200, one charge", func(t *testing.T) {
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
		if n := flaky.posts.Load(); n != 3 {
			t.Fatalf("provider called %d times, want 3 (two failures, then the answer)", n)
		}
		u := r.JSON.Get("usage")
		cost := creditAmount(t, u.Get("cost"))
		if want := tokenCost(u.Get("prompt_tokens").Int(), u.Get("completion_tokens").Int()); cost != want || cost == 0 {
			t.Fatalf("usage.cost %s, want %s", cost, want)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), cost, "a request retried twice")
		gen := c.api("GET", "/generation?id="+r.JSON.Get("id").Str, key, nil).expect(t, 200).JSON.Get("data")
		if got := creditAmount(t, gen.Get("total_cost")); got != cost {
			t.Fatalf("generation total_cost %s, want %s", got, cost)
		}
	})

	t.Run("streamed: fails twice then answers", func(t *testing.T) {
		flaky.posts.Store(0)
		before := c.snapshot(key, org.MgmtKey)
		res, err := c.send("/chat/completions", key, `{"model":"rt/flaky","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"retry me"}]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := readStream(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("status %d, %v", res.StatusCode, err)
		}
		s := parseStream(t, evs)
		if !s.done || !s.usage.Get("cost").Exists() {
			t.Fatalf("stream: %+v", s)
		}
		if n := flaky.posts.Load(); n != 3 {
			t.Fatalf("provider called %d times, want 3", n)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), creditAmount(t, s.usage.Get("cost")), "a stream retried twice")
	})

	t.Run("retries spent: the next endpoint", func(t *testing.T) {
		down.posts.Store(0)
		r := c.mustPost("/chat/completions", key, `{"model":"rt/down","messages":[{"role":"user","content":"x"}]}`, nil).expect(t, 200)
		if n := down.posts.Load(); n != 3 {
			t.Fatalf("failing endpoint called %d times, want 1 + 2 retries", n)
		}
		if got := r.JSON.Get("provider").Str; got != "up" {
			t.Fatalf("served by %q, want the next endpoint", got)
		}
	})

	t.Run("no retry after the first byte of a stream", func(t *testing.T) {
		broken.take()
		before := c.snapshot(key, org.MgmtKey)
		res, err := c.send("/chat/completions", key, `{"model":"rt/break","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"break"}]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := readStream(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		if n := len(broken.take()); n != 1 {
			t.Fatalf("provider called %d times after its stream broke, want 1", n)
		}
		s := parseStream(t, evs)
		sawError := false
		for _, ev := range evs {
			sawError = sawError || gjson.Get(ev.Data, "error").Exists()
		}
		if s.text == "" || !sawError {
			t.Fatalf("broken stream: text %q, error event %v", s.text, sawError)
		}
		// The partial output is charged once.
		after := c.snapshot(key, org.MgmtKey)
		if after.usage-before.usage <= 0 {
			t.Fatalf("partial stream not charged: %s", after.usage-before.usage)
		}
	})

	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

func TestCircuitBreaker(t *testing.T) {
	dead := newFaultyProvider(t, func(int64) int { return http.StatusServiceUnavailable })
	only := newFaultyProvider(t, func(int64) int { return http.StatusBadGateway })
	p := func(name, base string) testProvider {
		return testProvider{name: name, baseURL: base, model: "tollgate-mock", apiKey: "mock"}
	}
	startInProcessWith(t, chain(
		withTollgateOptions(t, "retries 0", "circuit_breaker 3 1s", "min_uptime 0"),
		withModels(t,
			modelBlock("cb/dead", "0.000001", "0.000002", p("deadp", dead.base()), p("alive", "http://"+mockAddr+"/v1")),
			modelBlock("cb/only", "0.000001", "0.000002", p("onlyp", only.base())),
		)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"breakers"}`)
	ask := func(model string) response {
		return c.mustPost("/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"up?"}]}`, nil)
	}
	breakerState := func(model, provider string) float64 {
		v, _ := scrapeMetrics(t, "http://"+adminAddr+"/metrics").sum("tollgate_circuit_breaker_state", "model", model, "provider", provider)
		return v
	}

	// Three failures in a row take the endpoint out of routing.
	for i := range 3 {
		if r := ask("cb/dead").expect(t, 200); r.JSON.Get("provider").Str != "alive" {
			t.Fatalf("request %d served by %s", i, r.JSON.Get("provider").Str)
		}
	}
	if n := dead.posts.Load(); n != 3 {
		t.Fatalf("dead endpoint called %d times, want 3", n)
	}
	for range 3 {
		ask("cb/dead").expect(t, 200)
	}
	if n := dead.posts.Load(); n != 3 {
		t.Fatalf("dead endpoint called %d times once open, want still 3", n)
	}
	if s := breakerState("cb/dead", "deadp"); s != 2 {
		t.Fatalf("breaker state gauge %v, want 2 (open)", s)
	}

	// Every endpoint open: the gateway's own 503 at once, no provider called.
	for range 3 {
		ask("cb/only").expect(t, http.StatusBadGateway)
	}
	r := ask("cb/only").expectError(t, http.StatusServiceUnavailable, "No provider is available for model cb/only")
	if only.posts.Load() != 3 || r.Header.Get("X-Generation-Id") != "" {
		t.Fatalf("calls %d with every endpoint open", only.posts.Load())
	}

	// It recovers: after the cooldown one probe reaches it, answers, and
	// it takes traffic again.
	dead.setFail(func(int64) int { return 0 })
	time.Sleep(1100 * time.Millisecond)
	if r := ask("cb/dead").expect(t, 200); r.JSON.Get("provider").Str != "deadp" {
		t.Fatalf("probe served by %s", r.JSON.Get("provider").Str)
	}
	if r := ask("cb/dead").expect(t, 200); r.JSON.Get("provider").Str != "deadp" {
		t.Fatalf("after the probe: served by %s", r.JSON.Get("provider").Str)
	}
	if n := dead.posts.Load(); n != 5 {
		t.Fatalf("recovered endpoint called %d times, want 5", n)
	}
	if s := breakerState("cb/dead", "deadp"); s != 0 {
		t.Fatalf("breaker state gauge %v, want 0 (closed)", s)
	}
	sc := scrapeMetrics(t, "http://"+adminAddr+"/metrics")
	for _, state := range []string{"open", "half_open", "closed"} {
		if v, _ := sc.sum("tollgate_circuit_breaker_transitions_total", "model", "cb/dead", "provider", "deadp", "state", state); v < 1 {
			t.Errorf("no transition to %s counted", state)
		}
	}
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

func TestUptime(t *testing.T) {
	// Every other call fails.
	half := newFaultyProvider(t, func(n int64) int {
		if n%2 == 0 {
			return http.StatusInternalServerError
		}
		return 0
	})
	down := newFaultyProvider(t, func(int64) int { return http.StatusInternalServerError })
	p := func(name, base string) testProvider {
		return testProvider{name: name, baseURL: base, model: "tollgate-mock", apiKey: "mock"}
	}
	startInProcessWith(t, chain(
		withTollgateOptions(t, "retries 0", "circuit_breaker off", "min_uptime 80"),
		withModels(t,
			modelBlock("up/half", "0.000001", "0.000002", p("halfp", half.base())),
			modelBlock("up/rank", "0.000001", "0.000002", p("downp", down.base()), p("steady", "http://"+mockAddr+"/v1")),
		)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"uptime"}`)
	ask := func(model string) response {
		return c.mustPost("/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"up?"}]}`, nil)
	}
	endpoints := func(model string) gjson.Result {
		return c.api("GET", "/models/"+model+"/endpoints", "", nil).expect(t, 200).JSON.Get("data.endpoints")
	}
	if u := endpoints("up/half").Get("0.uptime_last_30m"); u.Type != gjson.Null {
		t.Fatalf("uptime before any call: %s", u.Raw)
	}
	for range 10 {
		ask("up/half")
	}
	e := endpoints("up/half").Get("0")
	for _, f := range []string{"uptime_last_30m", "uptime_last_5m", "uptime_last_1d"} {
		if got := e.Get(f); got.Type != gjson.Number || got.Float() != 50 {
			t.Fatalf("%s %s after 5 of 10 calls failed, want 50", f, got.Raw)
		}
	}

	// The failing endpoint goes behind the healthy one of the same rank
	// once its uptime says it is down.
	for i := range 10 {
		if r := ask("up/rank").expect(t, 200); r.JSON.Get("provider").Str != "steady" {
			t.Fatalf("request %d served by %s", i, r.JSON.Get("provider").Str)
		}
	}
	if n := down.posts.Load(); n != 10 {
		t.Fatalf("failing endpoint called %d times, want 10", n)
	}
	for range 3 {
		ask("up/rank").expect(t, 200)
	}
	if n := down.posts.Load(); n != 10 {
		t.Fatalf("low-uptime endpoint still tried first: %d calls", n)
	}
	if u := endpoints("up/rank").Get(`#(provider_name=="downp").uptime_last_30m`); u.Float() != 0 || u.Type != gjson.Number {
		t.Fatalf("uptime of the failing endpoint %s", u.Raw)
	}
}

// TestReplicasShareBreakers: an endpoint one replica took out of routing
// is out at the other too, which never called it.
func TestReplicasShareBreakers(t *testing.T) {
	dead := newFaultyProvider(t, func(int64) int { return http.StatusServiceUnavailable })
	srv := redistest.Start(t)
	edit := chain(
		withTollgateOptions(t, "retries 0", "circuit_breaker 2 30s"),
		withModels(t, modelBlock("cbr/dead", "0.000001", "0.000002",
			testProvider{name: "deadp", baseURL: dead.base(), model: "tollgate-mock", apiKey: "mock"})))
	onRedis := func(cfg, _ string) string { return edit(cfg) }
	ps := []*process{startReplicaEdited(t, "address "+srv.Addr, onRedis), startReplicaEdited(t, "address "+srv.Addr, onRedis)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "10")
	key, _ := cs[0].newKey(org.MgmtKey, `{"name":"shared breakers"}`)
	within(t, feedBound, "the key reaches replica 1", func() bool {
		r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})
	body := `{"model":"cbr/dead","messages":[{"role":"user","content":"up?"}]}`
	for range 2 {
		cs[0].api("POST", "/chat/completions", key, body).expect(t, http.StatusServiceUnavailable)
	}
	if n := dead.posts.Load(); n != 2 {
		t.Fatalf("dead endpoint called %d times, want 2", n)
	}
	within(t, 5*time.Second, "replica 1 learns the endpoint is open", func() bool {
		v, _ := scrapeMetrics(t, "http://"+ps[1].admin+"/metrics").sum("tollgate_circuit_breaker_state", "model", "cbr/dead", "provider", "deadp")
		return v == 2
	})
	cs[1].api("POST", "/chat/completions", key, body).expectError(t, http.StatusServiceUnavailable, "No provider is available for model cbr/dead")
	if n := dead.posts.Load(); n != 2 {
		t.Fatalf("replica 1 called the open endpoint: %d calls", n)
	}
}
