package integration

// Prometheus metrics (the docs' "Metrics" page): after a known mix of traffic, the
// counters that Caddy's admin endpoint and its `metrics` handler serve equal
// what the gateway answered and charged.

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is a /metrics answer.
type scrape []sample

// scrapeMetrics fetches and parses a /metrics endpoint.
func scrapeMetrics(t *testing.T, url string) scrape {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, b)
	}
	var out scrape
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			t.Fatalf("%s: %q: %v", url, line, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// parseSample parses `name{a="x",b="y"} value`; label values here never
// hold quotes or commas.
func parseSample(line string) (sample, error) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return sample{}, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return sample{}, err
	}
	s := sample{name: line[:sp], labels: map[string]string{}, value: v}
	if i := strings.IndexByte(s.name, '{'); i >= 0 {
		body := strings.TrimSuffix(s.name[i+1:], "}")
		s.name = s.name[:i]
		for _, kv := range strings.Split(body, ",") {
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return sample{}, fmt.Errorf("label %q", kv)
			}
			s.labels[k] = strings.Trim(v, `"`)
		}
	}
	return s, nil
}

// sum adds the samples of name whose labels include want (label=value
// pairs); exists tells whether any matched.
func (sc scrape) sum(name string, want ...string) (total float64, exists bool) {
	for _, s := range sc {
		if s.name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			if v, has := s.labels[want[i]]; !has || v != want[i+1] {
				ok = false
				break
			}
		}
		if ok {
			total += s.value
			exists = true
		}
	}
	return total, exists
}

// delta is how much name (with the labels) grew from before to after.
func delta(before, after scrape, name string, labels ...string) float64 {
	b, _ := before.sum(name, labels...)
	a, _ := after.sum(name, labels...)
	return a - b
}

// expectDelta fails unless name grew by exactly want.
func expectDelta(t *testing.T, before, after scrape, want float64, name string, labels ...string) {
	t.Helper()
	if d := delta(before, after, name, labels...); d != want {
		t.Errorf("%s%v grew by %v, want %v", name, labels, d, want)
	}
}

// expectCreditsDelta fails unless a credits counter grew by the amount:
// the counter is kept in nano-credits, so only the float64 rounding of
// the two readings can part them.
func expectCreditsDelta(t *testing.T, before, after scrape, want money.Amount, name string, labels ...string) {
	t.Helper()
	d := delta(before, after, name, labels...)
	a, _ := after.sum(name, labels...)
	if math.Abs(d-float64(want)/1e9) > 1e-12*math.Max(1, a) {
		t.Errorf("%s%v grew by %v credits, want %s", name, labels, d, want)
	}
}

// servedGeneration is what the gateway recorded for an answer.
type servedGeneration struct {
	model, provider    string
	prompt, completion int64
	searchResults      int64
	cost               money.Amount
}

// generationOf reads the generation record of an answer's X-Generation-Id.
func (c *client) generationOf(t *testing.T, key string, h http.Header) servedGeneration {
	t.Helper()
	id := h.Get("X-Generation-Id")
	if id == "" {
		t.Fatal("answer without X-Generation-Id")
	}
	g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON.Get("data")
	cost, err := money.ParseAmount(g.Get("total_cost").Raw)
	if err != nil {
		t.Fatalf("total_cost %s: %v", g.Get("total_cost").Raw, err)
	}
	return servedGeneration{
		model: g.Get("model").Str, provider: g.Get("provider_name").Str,
		prompt: g.Get("tokens_prompt").Int(), completion: g.Get("tokens_completion").Int(),
		searchResults: g.Get("num_search_results").Int(), cost: cost,
	}
}

// withGlobalOptions adds lines to Caddy's global options and to the
// tollgate global option.
func withGlobalOptions(t *testing.T, caddyLine, tollgateLine string) func(string) string {
	return func(cfg string) string {
		cfg = replaceOnce(t, cfg, "\tskip_install_trust\n", "\tskip_install_trust\n\t"+caddyLine+"\n")
		return replaceOnce(t, cfg, "\t\tbrand service\n", "\t\tbrand service\n\t\t"+tollgateLine+"\n")
	}
}

// withMetricsSite adds a site that serves the metrics with Caddy's
// `metrics` handler.
func withMetricsSite(addr string) func(string) string {
	return func(cfg string) string {
		return cfg + "\nhttp://" + addr + " {\n\tbind 127.0.0.1\n\tmetrics\n}\n"
	}
}

func TestMetricsCountWhatTheGatewayAnsweredAndCharged(t *testing.T) {
	metricsAddr := freeport.Addr(t)
	e := startWebSearchWith(t, func(via string) string {
		p := func(name, model string) testProvider {
			return testProvider{name: name, baseURL: via, model: model, apiKey: "k"}
		}
		return modelBlock("met/plain", "0.000001", "0.000002", p("mock", "tollgate-mock")) +
			modelBlock("met/fb", "0.000001", "0.000002", p("bad", "x-error-500"), p("good", "tollgate-mock"))
	}, withAuthCeilings(t, "per_key 25 1m"), withGlobalOptions(t, "metrics", "metrics_per_key 10"), withMetricsSite(metricsAddr))
	c, key, mgmt := e.c, e.key, e.org.MgmtKey
	digest := sha256.Sum256([]byte(key))
	keyHash := hex.EncodeToString(digest[:])
	tiny, _ := c.newKey(mgmt, `{"name":"tiny","limit":0.000001}`)
	limited, _ := c.newKey(mgmt, `{"name":"limited"}`)
	for range 25 {
		c.api("GET", "/key", limited, nil).expect(t, 200)
	}
	adminURL := "http://" + adminAddr + "/metrics"

	before := scrapeMetrics(t, adminURL)
	usageBefore := c.snapshot(key, mgmt)

	const msgs = `"messages":[{"role":"user","content":"count me"}]`
	var served []servedGeneration
	// Served, plain and streamed.
	r := c.mustPost("/chat/completions", key, `{"model":"met/plain",`+msgs+`}`, nil).expect(t, 200)
	served = append(served, c.generationOf(t, key, r.Header))
	res, err := c.send("/chat/completions", key, `{"model":"met/plain","stream":true,`+msgs+`}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(stream), "data: [DONE]") {
		t.Fatalf("stream: %d %s", res.StatusCode, stream)
	}
	served = append(served, c.generationOf(t, key, res.Header))
	// Refused: the key's limit (402), the key's rate ceiling (429).
	c.mustPost("/chat/completions", tiny, `{"model":"met/plain","max_tokens":1000,`+msgs+`}`, nil).expect(t, 402)
	c.mustPost("/chat/completions", limited, `{"model":"met/plain",`+msgs+`}`, nil).expect(t, 429)
	// A fallback: provider bad answers 500, good serves.
	r = c.mustPost("/chat/completions", key, `{"model":"met/fb",`+msgs+`}`, nil).expect(t, 200)
	fb := c.generationOf(t, key, r.Header)
	if fb.provider != "good" {
		t.Fatalf("fallback served by %q", fb.provider)
	}
	served = append(served, fb)
	// A gateway-side web search.
	r = c.mustPost("/chat/completions", key, `{"model":"ws/plain",`+msgs+`,"tools":[{"type":"service:web_search","parameters":{"engine":"searxng","max_results":4}}]}`, nil).expect(t, 200)
	ws := c.generationOf(t, key, r.Header)
	if ws.searchResults == 0 {
		t.Fatalf("the search returned no results: %+v", ws)
	}
	served = append(served, ws)

	after := scrapeMetrics(t, adminURL)
	usageAfter := c.snapshot(key, mgmt)

	// Answers.
	expectDelta(t, before, after, 2, "tollgate_requests_total", "kind", "chat", "model", "met/plain", "provider", "mock", "status_class", "2xx")
	expectDelta(t, before, after, 1, "tollgate_requests_total", "kind", "chat", "model", "met/plain", "provider", "mock", "status_class", "4xx")
	expectDelta(t, before, after, 1, "tollgate_requests_total", "kind", "chat", "model", "", "provider", "", "status_class", "4xx")
	expectDelta(t, before, after, 1, "tollgate_requests_total", "kind", "chat", "model", "met/fb", "provider", "good", "status_class", "2xx")
	expectDelta(t, before, after, 1, "tollgate_requests_total", "kind", "chat", "model", "ws/plain", "provider", "p", "status_class", "2xx")
	expectDelta(t, before, after, 6, "tollgate_requests_total")
	expectDelta(t, before, after, 1, "tollgate_credit_refusals_total", "limit_source", "service_key_limit")
	expectDelta(t, before, after, 1, "tollgate_rate_limited_total", "origin", "abuse_per_key")
	expectDelta(t, before, after, 1, "tollgate_rate_limited_total")

	// Attempts: the fallback's failed one, then one per served answer.
	expectDelta(t, before, after, 1, "tollgate_upstream_attempts_total", "model", "met/fb", "provider", "bad", "outcome", "5xx")
	expectDelta(t, before, after, 1, "tollgate_fallbacks_total", "model", "met/fb", "provider", "bad")
	expectDelta(t, before, after, 1, "tollgate_fallbacks_total")
	expectDelta(t, before, after, 2, "tollgate_upstream_attempts_total", "model", "met/plain", "outcome", "2xx")
	expectDelta(t, before, after, 5, "tollgate_upstream_attempts_total")
	expectDelta(t, before, after, 5, "tollgate_upstream_duration_seconds_count")
	expectDelta(t, before, after, 1, "tollgate_time_to_first_token_seconds_count", "model", "met/plain")
	expectDelta(t, before, after, 1, "tollgate_time_to_first_token_seconds_count")

	// Tokens and credits: what the generation records say, and the ledger.
	var total money.Amount
	for _, g := range served {
		total += g.cost
	}
	for _, m := range []string{"met/plain", "met/fb", "ws/plain"} {
		var prompt, completion int64
		var cost money.Amount
		for _, g := range served {
			if g.model == m {
				prompt, completion, cost = prompt+g.prompt, completion+g.completion, cost+g.cost
			}
		}
		expectDelta(t, before, after, float64(prompt), "tollgate_tokens_total", "model", m, "type", "prompt")
		expectDelta(t, before, after, float64(completion), "tollgate_tokens_total", "model", m, "type", "completion")
		expectCreditsDelta(t, before, after, cost, "tollgate_credits_charged_total", "model", m)
	}
	if charged := usageAfter.totalUsage - usageBefore.totalUsage; charged != total {
		t.Fatalf("the ledger charged %s, the generation records say %s", charged, total)
	}
	expectCreditsDelta(t, before, after, total, "tollgate_credits_charged_total")
	expectCreditsDelta(t, before, after, 0, "tollgate_byok_usage_credits_total")
	// The key's own series (metrics_per_key) equal its usage.
	expectCreditsDelta(t, before, after, usageAfter.usage-usageBefore.usage, "tollgate_key_credits_total", "key", keyHash, "byok", "false")
	expectDelta(t, before, after, 4, "tollgate_key_requests_total", "key", keyHash)

	// Web search, holds, commits, export.
	expectDelta(t, before, after, 1, "tollgate_web_search_calls_total", "engine", "searxng")
	expectDelta(t, before, after, float64(ws.searchResults), "tollgate_web_search_results_total", "engine", "searxng")
	expectDelta(t, before, after, 0, "tollgate_web_search_failures_total")
	expectDelta(t, before, after, 0, "tollgate_holds_in_flight")
	expectDelta(t, before, after, 0, "tollgate_held_credits")
	if d := delta(before, after, "tollgate_commit_duration_seconds_count"); d < 1 {
		t.Errorf("commit_duration_seconds_count grew by %v over %d charges", d, len(served))
	}
	for _, name := range []string{"tollgate_export_queue_depth", "tollgate_export_delivered_total", "tollgate_export_dropped_total", "caddy_http_requests_total"} {
		if _, ok := after.sum(name); !ok {
			t.Errorf("%s missing from the admin endpoint's /metrics", name)
		}
	}

	// The `metrics` handler serves the same registry.
	site := scrapeMetrics(t, "http://"+metricsAddr+"/metrics")
	for _, name := range []string{"tollgate_requests_total", "tollgate_credits_charged_total", "tollgate_holds_in_flight"} {
		a, _ := after.sum(name)
		s, ok := site.sum(name)
		if !ok || s != a {
			t.Errorf("metrics handler: %s = %v (present %v), admin endpoint %v", name, s, ok, a)
		}
	}

	// A reload registers the collectors into the new config's registry;
	// the counters carry on.
	req, _ := http.NewRequest("PATCH", "http://"+adminAddr+"/config/apps/tollgate/metrics_per_key", strings.NewReader("11"))
	req.Header.Set("Content-Type", "application/json")
	pres, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(pres.Body)
	pres.Body.Close()
	if pres.StatusCode != 200 {
		t.Fatalf("reload: %d %s", pres.StatusCode, body)
	}
	reloaded := scrapeMetrics(t, adminURL)
	for _, name := range []string{"tollgate_requests_total", "tollgate_credits_charged_total", "tollgate_tokens_total"} {
		if d := delta(after, reloaded, name); d != 0 {
			t.Errorf("%s changed by %v across a reload", name, d)
		}
	}
	c.mustPost("/chat/completions", key, `{"model":"met/plain",`+msgs+`}`, nil).expect(t, 200)
	expectDelta(t, after, scrapeMetrics(t, adminURL), 1, "tollgate_requests_total", "model", "met/plain", "status_class", "2xx")
}

// TestMetricsConfigValidates: `caddy validate` provisions the config,
// metrics included, into a registry of its own while a server may run.
func TestMetricsConfigValidates(t *testing.T) {
	dir := t.TempDir()
	cfg := withGlobalOptions(t, "metrics", "metrics_per_key 10")(
		gatewayCaddyfile(freeport.Addr(t), dir, freeport.Addr(t), freeport.Addr(t), "1ms"))
	path := dir + "/Caddyfile"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(caddyBinary, "validate", "--config", path, "--adapter", "caddyfile").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("caddy validate: %v\n%s", err, out)
	}
	bad := strings.Replace(cfg, "metrics_per_key 10", "metrics_per_key 0", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(caddyBinary, "validate", "--config", path, "--adapter", "caddyfile").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "metrics_per_key: expected a positive integer") {
		t.Fatalf("caddy validate accepted metrics_per_key 0: %v\n%s", err, out)
	}
}
