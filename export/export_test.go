package export

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func TestFilter(t *testing.T) {
	rec := Record{Generation: storage.Generation{Model: "openai/gpt-4o", Provider: "openai", PromptTokens: 10,
		CompletionTokens: 5, Cost: 2_000_000, FinishReason: "stop"}, KeyName: "prod-key"}
	for _, tc := range []struct {
		rules string
		want  bool
	}{
		{`null`, true},
		{`{"enabled":false,"groups":[{"rules":[{"field":"model","operator":"equals","value":"x"}]}]}`, true},
		{`{"groups":[{"rules":[{"field":"model","operator":"equals","value":"openai/gpt-4o"}]}]}`, true},
		{`{"groups":[{"rules":[{"field":"model","operator":"starts_with","value":"openai/"},{"field":"total_tokens","operator":"gte","value":16}]}]}`, false},
		{`{"groups":[{"logic":"or","rules":[{"field":"model","operator":"ends_with","value":"mini"},{"field":"total_tokens","operator":"lte","value":15}]}]}`, true},
		{`{"groups":[{"rules":[{"field":"total_cost","operator":"gt","value":"0.001"}]}]}`, true},
		{`{"groups":[{"rules":[{"field":"total_cost","operator":"lt","value":0.001}]}]}`, false},
		{`{"groups":[{"rules":[{"field":"api_key_name","operator":"regex","value":"^prod-"}]}]}`, true},
		{`{"groups":[{"rules":[{"field":"user_id","operator":"exists"}]}]}`, false},
		{`{"groups":[{"rules":[{"field":"session_id","operator":"not_exists"}]}]}`, true},
		{`{"groups":[{"rules":[{"field":"finish_reason","operator":"not_equals","value":"length"}]}]}`, true},
		{`{"groups":[{"rules":[{"field":"provider","operator":"contains","value":"pen"}]},{"rules":[{"field":"provider","operator":"not_contains","value":"pen"}]}]}`, false},
	} {
		f, err := CompileFilter(json.RawMessage(tc.rules))
		if err != nil {
			t.Fatalf("%s: %v", tc.rules, err)
		}
		if got := f.Match(rec); got != tc.want {
			t.Errorf("%s: Match = %v, want %v", tc.rules, got, tc.want)
		}
	}
	// A generation with a session id: the field filters on it.
	rec.SessionID = "conv-42"
	for rules, want := range map[string]bool{
		`{"groups":[{"rules":[{"field":"session_id","operator":"equals","value":"conv-42"}]}]}`:     true,
		`{"groups":[{"rules":[{"field":"session_id","operator":"starts_with","value":"conv-"}]}]}`:  true,
		`{"groups":[{"rules":[{"field":"session_id","operator":"not_equals","value":"conv-42"}]}]}`: false,
		`{"groups":[{"rules":[{"field":"session_id","operator":"not_exists"}]}]}`:                   false,
	} {
		f, err := CompileFilter(json.RawMessage(rules))
		if err != nil {
			t.Fatalf("%s: %v", rules, err)
		}
		if got := f.Match(rec); got != want {
			t.Errorf("%s with a session id: Match = %v, want %v", rules, got, want)
		}
	}
	for _, bad := range []string{
		`{"groups":[{"rules":[{"field":"nope","operator":"equals","value":"x"}]}]}`,
		`{"groups":[{"rules":[{"field":"prompt_tokens","operator":"contains","value":"x"}]}]}`,
		`{"groups":[{"rules":[{"field":"model","operator":"equals"}]}]}`,
		`{"groups":[{"rules":[{"field":"model","operator":"regex","value":"("}]}]}`,
		`{"groups":[{"rules":[{"field":"prompt_tokens","operator":"gt","value":"many"}]}]}`,
		`{"groups":[{"logic":"xor","rules":[]}]}`,
		`{"enabled":true}`,
	} {
		if _, err := CompileFilter(json.RawMessage(bad)); err == nil || !strings.HasPrefix(err.Error(), "filter_rules") {
			t.Errorf("%s: error %v, want one naming filter_rules", bad, err)
		}
	}
}

func TestSampledIsDeterministicAndProportional(t *testing.T) {
	kept := 0
	for i := 0; i < 10000; i++ {
		id := "gen-" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoaInt(i)
		a, b := Sampled(0.3, "dest", id), Sampled(0.3, "dest", id)
		if a != b {
			t.Fatal("sampling is not deterministic")
		}
		if a {
			kept++
		}
	}
	if kept < 2700 || kept > 3300 {
		t.Fatalf("kept %d of 10000 at rate 0.3", kept)
	}
	if !Sampled(1, "d", "g") {
		t.Fatal("rate 1 dropped a record")
	}
}

func itoaInt(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestPrepareConfigAndMask(t *testing.T) {
	c, gen, err := PrepareConfig("webhook", json.RawMessage(`{"url":"https://example.com/h","headers":{"Authorization":"Bearer 0123456789abcdef"}}`), nil)
	if err != nil || !gen || !strings.HasPrefix(c["secret"].(string), "whsec_") || c["method"] != "POST" {
		t.Fatalf("webhook config %v %v %v", c, gen, err)
	}
	pub := Public("webhook", c)
	if pub["secret"] == c["secret"] || pub["headers"].(map[string]any)["Authorization"] != "Bear...cdef" {
		t.Fatalf("public config %v", pub)
	}
	// an update without a secret keeps the old one
	c2, gen, err := PrepareConfig("webhook", json.RawMessage(`{"url":"https://example.com/other"}`), c)
	if err != nil || gen || c2["secret"] != c["secret"] {
		t.Fatalf("update kept secret? %v %v", gen, err)
	}
	if _, _, err := PrepareConfig("s3", json.RawMessage(`{}`), nil); err == nil || !strings.Contains(err.Error(), "supported types: grafana, langfuse, otel-collector, webhook") {
		t.Fatalf("unsupported type: %v", err)
	}
	lf, _, err := PrepareConfig("langfuse", json.RawMessage(`{"publicKey":"pk","secretKey":"sk"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ep, h := otlpTarget("langfuse", lf)
	if ep != "https://us.cloud.langfuse.com/api/public/otel/v1/traces" || h["Authorization"] != "Basic cGs6c2s=" {
		t.Fatalf("langfuse target %s %v", ep, h)
	}
	ep, _ = otlpTarget("otel-collector", Config{"endpoint": "http://127.0.0.1:4318"})
	if ep != "http://127.0.0.1:4318/v1/traces" {
		t.Fatalf("collector target %s", ep)
	}
	ep, _ = otlpTarget("otel-collector", Config{"endpoint": "http://127.0.0.1:4318/custom/traces"})
	if ep != "http://127.0.0.1:4318/custom/traces" {
		t.Fatalf("collector target with path %s", ep)
	}
}

// TestExporterQueueBoundAndIsolation: a destination that hangs never
// blocks the request path (records past its queue are dropped and
// counted) nor another destination.
func TestExporterQueueBoundAndIsolation(t *testing.T) {
	s, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sealer, _ := storage.NewSealer([]byte(strings.Repeat("k", 32)))
	acct, _ := s.CreateAccount(storage.NewAccount{Name: "A", Kind: storage.AccountOrganization})
	key, _, _ := s.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "k"})

	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer hung.Close()
	defer close(release)
	var mu sync.Mutex
	var got int
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Data []json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got += len(body.Data)
		mu.Unlock()
	}))
	defer ok.Close()
	addDestination := func(u string) {
		d := storage.Destination{ID: storage.NewEndpointID(), AccountID: acct.ID, Type: "webhook", Enabled: true, SamplingRate: 1}
		d.SealConfig(sealer, []byte(`{"url":"`+u+`","method":"POST","secret":"s"}`))
		if _, err := s.CreateDestination(d); err != nil {
			t.Fatal(err)
		}
	}
	const queue = 4
	e := New(s, Options{QueueSize: queue, BatchSize: 1, HTTPClient: &http.Client{Timeout: time.Minute}})
	e.SetSealer(sealer)
	defer e.Close()
	seq := 0
	settle := func(n int) {
		t.Helper()
		start := time.Now()
		for i := 0; i < n; i++ {
			res, err := s.Reserve(acct.ID, key.Hash, storage.Holds{Hold: 1})
			if err != nil {
				t.Fatal(err)
			}
			seq++
			g := &storage.Generation{ID: "gen-" + itoaInt(seq), AccountID: acct.ID, KeyHash: key.Hash, CreatedAt: time.Now()}
			if err := s.Settle(res, storage.Charge{Cost: 1, Generation: g}); err != nil {
				t.Fatal(err)
			}
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("settling took %s: export slowed the request path", d)
		}
	}

	// A hanging destination: one record in flight, `queue` queued, the
	// rest dropped, and nothing waits for it.
	addDestination(hung.URL)
	const n = 50
	settle(n)
	if d := e.Dropped(); d < n-queue-1 {
		t.Fatalf("dropped %d of %d records for a hanging destination with a queue of %d", d, n, queue)
	}
	if q := e.QueueDepth(); q != queue {
		t.Fatalf("QueueDepth() = %d with a full queue of %d", q, queue)
	}
	// A healthy destination next to it receives everything sent to it.
	addDestination(ok.URL)
	settle(queue)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		g := got
		mu.Unlock()
		if g == queue {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthy destination got %d of %d records", g, queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e.Delivered() != queue {
		t.Fatalf("Delivered() = %d, want %d", e.Delivered(), queue)
	}
	// A destination that refuses for good: its record is dropped, not retried.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer refusing.Close()
	addDestination(refusing.URL)
	settle(1)
	deadline = time.Now().Add(10 * time.Second)
	for e.Refused() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Refused() = %d, want 1", e.Refused())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
