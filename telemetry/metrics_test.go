package telemetry

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tollgate-dev/caddy-tollgate/telemetry/telemetrytest"
)

// runs numbers the tests' label values: the collectors are the
// process's, so a second run (-count=2) must not find the first one's.
var runs atomic.Int64

// uniq is name made unique to this call.
func uniq(name string) string { return name + "-" + strconv.FormatInt(runs.Add(1), 10) }

// registry is a fresh registry with the gateway's collectors, as a
// config's would be.
func registry(t *testing.T, perKey bool) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg, perKey); err != nil {
		t.Fatal(err)
	}
	return reg
}

// value is the value of the metric name whose labels include want; a
// histogram's is its sample count. It fails when no series matches.
func value(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := telemetrytest.Lookup(t, reg, name, want)
	if !ok {
		t.Fatalf("%s%v: no such series", name, want)
	}
	return v
}

func TestRegisterEveryConfigRegistry(t *testing.T) {
	// A reload provisions a new config, with a new registry, while the old
	// one serves: both hold the same collectors, and a second app in one
	// config registers nothing twice.
	old, cur := registry(t, false), registry(t, true)
	if err := Register(cur, true); err != nil {
		t.Fatalf("registering twice in one registry: %v", err)
	}
	if err := Register(nil, true); err != nil {
		t.Fatal(err)
	}
	model := uniq("reg/model")
	For("chat", model, "p").Request(200)
	for _, reg := range []*prometheus.Registry{old, cur} {
		if v := value(t, reg, "tollgate_requests_total", map[string]string{"model": model, "status_class": "2xx"}); v != 1 {
			t.Fatalf("requests_total = %v, want 1 in every registry", v)
		}
	}
	KeyCharged("acct", "hash", 1, 0)
	if _, ok := telemetrytest.Lookup(t, old, "tollgate_key_requests_total", nil); ok {
		t.Fatal("per-key metrics registered without metrics_per_key")
	}
}

func TestRegisterRefusesAnotherCollectorOfTheSameName(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_requests_total", Help: "x"}))
	if err := Register(reg, false); err == nil {
		t.Fatal("Register took a name another collector has")
	}
}

// everyFamily is a registry in which every family has a series, so that
// gathering sees them all.
func everyFamily(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := registry(t, true)
	s := For("chat", "lint/model", "p")
	s.Request(200)
	s.Attempt(200, time.Millisecond)
	s.Fallback()
	s.Retry()
	s.FirstToken(time.Millisecond)
	s.Charged(1, 1, 1, 1)
	Refused("service_key_limit")
	RateLimited("provider")
	UsageAnomaly("p", "completion_above_limit")
	BreakerTransition("lint/model", "p", 2, "open")
	WebSearch("lint", 1, true)
	WebSearch("lint", 1, false)
	SetKeyBound(10)
	t.Cleanup(func() { SetKeyBound(0) })
	KeyCharged("lint-acct", "lint-key", 1, 1)
	return reg
}

func TestNamesFollowConventions(t *testing.T) {
	reg := everyFamily(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	fams, _ := reg.Gather()
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "tollgate_") {
			t.Errorf("%s: not in the tollgate_ namespace", f.GetName())
		}
	}
	if len(fams) != len(std.collectors(true)) {
		var names []string
		for _, f := range fams {
			names = append(names, f.GetName())
		}
		t.Errorf("%d families gathered, want %d: %v", len(fams), len(std.collectors(true)), names)
	}
}

func TestSeriesCountsByClassAndOutcome(t *testing.T) {
	reg := registry(t, false)
	model := uniq("count/model")
	s := For("responses", model, "p1")
	if For("responses", model, "p1") != s {
		t.Fatal("For resolved the same labels twice")
	}
	s.Request(200)
	s.Request(402)
	s.Request(499)
	s.Request(502)
	s.Attempt(0, 2*time.Second)
	s.Attempt(429, time.Second)
	s.Attempt(200, time.Second)
	s.Fallback()
	s.Retry()
	s.Fallback()
	s.Retry()
	s.FirstToken(300 * time.Millisecond)
	labels := func(kv ...string) map[string]string {
		m := map[string]string{"kind": "responses", "model": model, "provider": "p1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name string
		l    map[string]string
		want float64
	}{
		{"tollgate_requests_total", labels("status_class", "2xx"), 1},
		{"tollgate_requests_total", labels("status_class", "4xx"), 2},
		{"tollgate_requests_total", labels("status_class", "5xx"), 1},
		{"tollgate_upstream_attempts_total", labels("outcome", "transport_error"), 1},
		{"tollgate_upstream_attempts_total", labels("outcome", "4xx"), 1},
		{"tollgate_upstream_attempts_total", labels("outcome", "2xx"), 1},
		{"tollgate_fallbacks_total", labels(), 2},
		{"tollgate_upstream_duration_seconds", labels(), 3},
		{"tollgate_time_to_first_token_seconds", labels(), 1},
	} {
		if v := value(t, reg, c.name, c.l); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.l, v, c.want)
		}
	}
}

func TestChargedCreditsAreExact(t *testing.T) {
	reg := registry(t, false)
	model := uniq("exact/model")
	s := For("chat", model, "p")
	// 0.1 + 0.2 credits: as float64 sums, 0.30000000000000004.
	s.Charged(3, 4, 100_000_000, 0)
	s.Charged(5, 6, 200_000_000, 0)
	s.Charged(1, 1, 0, 700_000_000) // BYOK
	s.Charged(0, 0, -5, -5)         // never negative
	l := map[string]string{"model": model}
	if v := value(t, reg, "tollgate_credits_charged_total", l); v != 0.3 {
		t.Errorf("credits_charged_total = %v, want 0.3", v)
	}
	if v := value(t, reg, "tollgate_byok_usage_credits_total", l); v != 0.7 {
		t.Errorf("byok_usage_credits_total = %v, want 0.7", v)
	}
	for typ, want := range map[string]float64{"prompt": 9, "completion": 11} {
		if v := value(t, reg, "tollgate_tokens_total", map[string]string{"model": model, "type": typ}); v != want {
			t.Errorf("tokens_total{type=%s} = %v, want %v", typ, v, want)
		}
	}
}

func TestSeriesPastTheBoundCountAsOther(t *testing.T) {
	defer func(n int) { maxSeries = n }(maxSeries)
	reg := registry(t, false)
	other := map[string]string{"kind": "chat", "model": Other, "provider": Other}
	before, _ := telemetrytest.Lookup(t, reg, "tollgate_requests_total", other)
	maxSeries = 1
	if p := seriesMap.Load(); p != nil {
		maxSeries = len(*p) + 1
	}
	one, two, three := uniq("bound/one"), uniq("bound/two"), uniq("bound/three")
	For("chat", one, "p").Request(200)
	For("chat", two, "p").Request(200)
	For("chat", three, "p").Request(200)
	if v := value(t, reg, "tollgate_requests_total", other); v != before+2 {
		t.Fatalf("other = %v, want %v", v, before+2)
	}
	if _, ok := telemetrytest.Lookup(t, reg, "tollgate_requests_total", map[string]string{"model": two}); ok {
		t.Fatal("a series past the bound got its own labels")
	}
}

func TestKeySeriesBounded(t *testing.T) {
	reg := registry(t, true)
	SetKeyBound(0)
	off := uniq("key-off")
	KeyCharged("acct-0", off, 5, 0)
	if _, ok := telemetrytest.Lookup(t, reg, "tollgate_key_requests_total", map[string]string{"key": off}); ok {
		t.Fatal("a key counted with metrics_per_key off")
	}
	defer SetKeyBound(0)
	other := map[string]string{"account": Other, "key": Other}
	before, _ := telemetrytest.Lookup(t, reg, "tollgate_key_requests_total", other)
	SetKeyBound(len(keys()) + 2)
	a, b, c, d := uniq("key-a"), uniq("key-b"), uniq("key-c"), uniq("key-d")
	KeyCharged("acct-1", a, 1_500_000_000, 0)
	KeyCharged("acct-1", a, 500_000_000, 250_000_000)
	KeyCharged("acct-1", b, 1, 0)
	KeyCharged("acct-2", c, 3_000_000_000, 0) // past the bound
	KeyCharged("acct-2", d, 1_000_000_000, 0) // past the bound
	if v := value(t, reg, "tollgate_key_requests_total", map[string]string{"account": "acct-1", "key": a}); v != 2 {
		t.Errorf("key a requests = %v, want 2", v)
	}
	if v := value(t, reg, "tollgate_key_credits_total", map[string]string{"key": a, "byok": "false"}); v != 2 {
		t.Errorf("key a credits = %v, want 2", v)
	}
	if v := value(t, reg, "tollgate_key_credits_total", map[string]string{"key": a, "byok": "true"}); v != 0.25 {
		t.Errorf("key a byok = %v, want 0.25", v)
	}
	if v := value(t, reg, "tollgate_key_requests_total", other); v != before+2 {
		t.Errorf("other requests = %v, want %v", v, before+2)
	}
	if _, ok := telemetrytest.Lookup(t, reg, "tollgate_key_requests_total", map[string]string{"key": c}); ok {
		t.Error("a key past the bound got its own series")
	}
}

// keys is the per-key map's keys.
func keys() map[string]*keySeries {
	if p := keyMap.Load(); p != nil {
		return *p
	}
	return nil
}

func TestHoldsReturnToZero(t *testing.T) {
	reg := registry(t, false)
	base := value(t, reg, "tollgate_holds_in_flight", nil)
	baseCredits := value(t, reg, "tollgate_held_credits", nil)
	HoldOpened(1_250_000_000)
	HoldOpened(100_000_000)
	if v := value(t, reg, "tollgate_holds_in_flight", nil) - base; v != 2 {
		t.Fatalf("holds_in_flight = +%v, want +2", v)
	}
	if v := value(t, reg, "tollgate_held_credits", nil) - baseCredits; v < 1.35-1e-9 || v > 1.35+1e-9 {
		t.Fatalf("held_credits = +%v, want +1.35", v)
	}
	HoldClosed(1_250_000_000)
	HoldClosed(100_000_000)
	if v := value(t, reg, "tollgate_holds_in_flight", nil); v != base {
		t.Fatalf("holds_in_flight = %v after closing, want %v", v, base)
	}
	if v := value(t, reg, "tollgate_held_credits", nil); v != baseCredits {
		t.Fatalf("held_credits = %v after closing, want %v", v, baseCredits)
	}
}

func TestCommitWebSearchAndExport(t *testing.T) {
	reg := registry(t, false)
	commits := value(t, reg, "tollgate_commit_duration_seconds", nil)
	failures := value(t, reg, "tollgate_commit_failures_total", nil)
	ObserveCommit(3*time.Millisecond, nil)
	ObserveCommit(time.Millisecond, errors.New("disk full"))
	if v := value(t, reg, "tollgate_commit_duration_seconds", nil); v != commits+1 {
		t.Errorf("commit_duration_seconds count = %v, want %v", v, commits+1)
	}
	if v := value(t, reg, "tollgate_commit_failures_total", nil); v != failures+1 {
		t.Errorf("commit_failures_total = %v, want %v", v, failures+1)
	}

	engine := uniq("unit-engine")
	WebSearch(engine, 4, false)
	WebSearch(engine, 0, true)
	e := map[string]string{"engine": engine}
	for name, want := range map[string]float64{"tollgate_web_search_calls_total": 2, "tollgate_web_search_results_total": 4, "tollgate_web_search_failures_total": 1} {
		if v := value(t, reg, name, e); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}

	defer exportSource.Store(exportSource.Load())
	SetExportSource(func() ExportStats { return ExportStats{QueueDepth: 7, Delivered: 11, Dropped: 2} })
	for name, want := range map[string]float64{"tollgate_export_queue_depth": 7, "tollgate_export_delivered_total": 11, "tollgate_export_dropped_total": 2} {
		if v := value(t, reg, name, nil); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]string{0: "transport_error", 200: "2xx", 402: "4xx", 429: "4xx", 499: "4xx", 503: "5xx", 600: "transport_error"} {
		if got := StatusClass(status); got != want {
			t.Errorf("StatusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

// TestDashboardQueriesExistingMetrics: the Grafana dashboard in the
// repository queries only metrics that exist, and shows every one.
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	raw, err := os.ReadFile("../grafana/tollgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	fams, err := everyFamily(t).Gather()
	if err != nil {
		t.Fatal(err)
	}
	known, unused := map[string]bool{}, map[string]bool{}
	for _, f := range fams {
		known[f.GetName()], unused[f.GetName()] = true, true
	}
	name := regexp.MustCompile(`tollgate_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, n := range name.FindAllString(tg.Expr, -1) {
				base := n
				if f := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum"); f != n {
					base = f
				}
				if !known[base] {
					t.Errorf("panel %q queries %s, which is not a metric", p.Title, n)
				}
				delete(unused, base)
			}
		}
	}
	for n := range unused {
		t.Errorf("the dashboard shows nothing of %s", n)
	}
}
