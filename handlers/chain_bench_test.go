package handlers

// Benchmarks of the gateway's own per-request work: the tollgate handler
// (its whole pipeline: auth, routing, metering) around an in-process fake
// upstream, over an in-memory store. They leave out Caddy's server and reverse_proxy (see bench/ for the
// end-to-end comparison against bare Caddy) and the disk: metering durably
// on disk is covered by storage's BenchmarkReserveSettleParallel.
//
// Read the chain numbers against BenchmarkChainBaseline*, which builds the
// same request and runs the same fake upstream without any tollgate handler:
// the difference is the chain's cost per request.
//
//	go test ./handlers -run '^$' -bench 'Auth|Router|Chain' -benchmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// benchGateway is the tollgate app as the handlers see it, for benchmarks:
// unlike testgw.Gateway, with the app's default in-flight policy and no
// egress policy, as a gateway without customer egress runs. The embedded
// nil Gateway keeps it compiling when the interface grows; a benchmark that
// reaches a method not defined here panics, naming it.
type benchGateway struct {
	gateway.Gateway
	store   *storage.Store
	catalog *catalog.Catalog
}

func (g *benchGateway) Store() (*storage.Store, error) { return g.store, nil }
func (g *benchGateway) Brand() string                  { return "service" }
func (g *benchGateway) FreeModelLimits() gateway.FreeModelLimits {
	return gateway.FreeModelLimits{}.WithDefaults()
}
func (g *benchGateway) Catalog() *catalog.Catalog              { return g.catalog }
func (g *benchGateway) BYOKSealer() *storage.Sealer            { return nil } // no BYOK configured
func (g *benchGateway) DefaultRateLimits() *storage.RateLimits { return nil }

// InFlightPolicy is the tollgate app's default policy.
func (g *benchGateway) InFlightPolicy() billing.InFlightPolicy {
	return billing.InFlightPolicy{
		FractionPPM:      500_000,
		Ceiling:          50 * money.AmountScale,
		PerRequestCap:    money.AmountScale / 4,
		SettlementWindow: 10 * time.Second,
		BalanceThreshold: 100 * money.AmountScale,
	}
}

var _ gateway.Gateway = (*benchGateway)(nil)

// benchCommits counts the benchmarks' group commits: the Parallel
// variants report commits/op, how many requests share one commit (each
// costs a journal write and wakes its waiters).
var benchCommits atomic.Int64

// benchChatBody is a typical small chat completion request.
const benchChatBody = `{"model":"bench-model","messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Write one sentence about the sea."}],"max_tokens":256,"temperature":0.7}`

// benchStreamBody is the same request, streamed.
const benchStreamBody = `{"model":"bench-model","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Write one sentence about the sea."}],"max_tokens":256,"temperature":0.7}`

// benchJSONAnswer is the fake upstream's chat completion, with usage.
var benchJSONAnswer = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1735689600,"model":"bench-upstream",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"The sea keeps every secret the shore forgets, and gives back only salt and light."},` +
	`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":27,"completion_tokens":18,"total_tokens":45}}`)

// benchSSEEvents is the fake upstream's streamed answer: 50 events, the
// role chunk, 46 text chunks, the finish chunk, the usage chunk and [DONE].
var benchSSEEvents = func() [][]byte {
	chunk := func(delta, finish string) []byte {
		fin := "null"
		if finish != "" {
			fin = strconv.Quote(finish)
		}
		return []byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1735689600,"model":"bench-upstream",` +
			`"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + fin + `}]}` + "\n\n")
	}
	evs := [][]byte{chunk(`{"role":"assistant","content":""}`, "")}
	for i := range 46 {
		evs = append(evs, chunk(`{"content":`+strconv.Quote(fmt.Sprintf(" word%d", i))+`}`, ""))
	}
	evs = append(evs, chunk(`{}`, "stop"),
		[]byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1735689600,"model":"bench-upstream",`+
			`"choices":[],"usage":{"prompt_tokens":27,"completion_tokens":46,"total_tokens":73}}`+"\n\n"),
		[]byte("data: [DONE]\n\n"))
	return evs
}()

// benchSetup is a gateway with one funded account and its regular key.
type benchSetup struct {
	gw       *benchGateway
	secret   string
	auth     *Auth
	router   *routing.Router
	tollgate *Tollgate
}

func newBenchSetup(b *testing.B) *benchSetup { return newBenchSetupAt(b, "127.0.0.1:9") }

// newBenchSetupAt is newBenchSetup with the provider at dial (plain HTTP).
func newBenchSetupAt(b *testing.B, dial string) *benchSetup {
	b.Helper()
	// On disk, as a gateway runs: commits go through the journal.
	s, err := storage.Open(storage.Options{Dir: b.TempDir(), OnCommit: func(time.Duration, error) { benchCommits.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	acct, err := s.CreateAccount(storage.NewAccount{Name: "bench", Kind: storage.AccountOrganization})
	if err != nil {
		b.Fatal(err)
	}
	// Far above the in-flight budget's balance threshold, as a real
	// customer under load would be; no key limit.
	if _, _, err := s.RecordPurchase(acct.ID, 1_000_000_000*money.AmountScale, ""); err != nil {
		b.Fatal(err)
	}
	_, secret, err := s.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	p := &catalog.Provider{Name: "mock", BaseURL: "http://" + dial + "/v1", Model: "bench-upstream", APIKey: "upstream-key",
		Style: "openai", Scheme: "http", Dial: dial, Host: dial, BasePath: "/v1"}
	m := &catalog.Model{ID: "bench-model", Name: "Bench", ContextLength: 8192,
		Pricing:   billing.Pricing{Prompt: 1_000_000_000, Completion: 2_000_000_000}, // 0.000001, 0.000002 per token
		Providers: []*catalog.Provider{p}, Public: []byte(`{"id":"bench-model"}`)}
	gw := &benchGateway{store: s, catalog: catalog.New([]*catalog.Model{m})}
	rt := &routing.Router{Gateway: gw}
	if err := rt.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	return &benchSetup{gw: gw, secret: secret, router: rt,
		auth: &Auth{gw: gw, logger: zap.NewNop()}, tollgate: newTestTollgate(b, gw)}
}

// benchWriter is a cheap client connection: it counts bytes and flushes.
type benchWriter struct {
	h      http.Header
	status int
	n      int
	body   []byte // kept only when keep is set
	keep   bool
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	if w.keep {
		w.body = append(w.body, p...)
	}
	return len(p), nil
}
func (w *benchWriter) Flush() {}

func (w *benchWriter) reset() {
	clear(w.h)
	w.status, w.n, w.body = 0, 0, w.body[:0]
}

func newBenchWriter() *benchWriter { return &benchWriter{h: make(http.Header, 8)} }

// newBenchRequest is what Caddy's server hands the first handler: a
// request with a replacer in its context.
func newBenchRequest(body, secret string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://gateway.test/api/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+secret)
	r.RemoteAddr = "127.0.0.1:40000"
	return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
}

// benchUpstreamJSON stands in for reverse_proxy and a provider answering
// benchJSONAnswer.
var benchUpstreamJSON = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	_, _ = io.Copy(io.Discard, r.Body)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(benchJSONAnswer)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(benchJSONAnswer)
	return err
})

// benchUpstreamSSE answers benchSSEEvents, writing and flushing each event
// as reverse_proxy does for an event stream.
var benchUpstreamSSE = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for _, ev := range benchSSEEvents {
		if _, err := w.Write(ev); err != nil {
			return err
		}
		_ = rc.Flush()
	}
	return nil
})

// chain is the tollgate handler sending its attempts to upstream, as to
// its reverse_proxy.
func (s *benchSetup) chain(upstream caddyhttp.Handler) caddyhttp.Handler {
	s.tollgate.proxies = oneUpstream{upstream}
	return caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return s.tollgate.ServeHTTP(w, r, notReached)
	})
}

// notReached is the next handler of a tollgate handler under test: every
// request it gets is under /api/v1, which the handler answers.
var notReached = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error {
	return errors.New("next handler reached")
})

// checkOnce runs one request and checks that it was served and, through
// the chain, charged (usage.cost in the answer).
func checkOnce(b *testing.B, h caddyhttp.Handler, body, secret string, charged bool) {
	b.Helper()
	w := newBenchWriter()
	w.keep = true
	if err := h.ServeHTTP(w, newBenchRequest(body, secret)); err != nil {
		b.Fatal(err)
	}
	if w.status != http.StatusOK {
		b.Fatalf("status %d: %s", w.status, w.body)
	}
	if charged && !bytes.Contains(w.body, []byte(`"cost":`)) {
		b.Fatalf("answer carries no usage.cost: %s", w.body)
	}
}

// runServe serves one fresh request per iteration, serially.
func runServe(b *testing.B, h caddyhttp.Handler, body, secret string) {
	w := newBenchWriter()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.reset()
		if err := h.ServeHTTP(w, newBenchRequest(body, secret)); err != nil || w.status != http.StatusOK {
			b.Fatalf("status %d, err %v", w.status, err)
		}
	}
}

// runServeParallel serves from many goroutines, as under load: they share
// the store (and, here, one account and key, the most contended case).
func runServeParallel(b *testing.B, h caddyhttp.Handler, body, secret string) {
	c0 := benchCommits.Load()
	defer func() { b.ReportMetric(float64(benchCommits.Load()-c0)/float64(b.N), "commits/op") }()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := newBenchWriter()
		for pb.Next() {
			w.reset()
			if err := h.ServeHTTP(w, newBenchRequest(body, secret)); err != nil || w.status != http.StatusOK {
				b.Errorf("status %d, err %v", w.status, err)
				return
			}
		}
	})
}

// BenchmarkAuth is the authentication stage alone on a valid regular key.
func BenchmarkAuth(b *testing.B) {
	s := newBenchSetup(b)
	r := newBenchRequest(benchChatBody, s.secret)
	auth := "Bearer " + s.secret
	b.ReportAllocs()
	for b.Loop() {
		r.Header.Set("Authorization", auth) // Auth removes it
		st := pipeline.State{API: chatRoute, Store: s.gw.store}
		if apiErr := s.auth.authenticate(r, &st); apiErr != nil {
			b.Fatal(apiErr)
		}
	}
}

// BenchmarkAuthParallel is the same from many goroutines.
func BenchmarkAuthParallel(b *testing.B) {
	s := newBenchSetup(b)
	auth := "Bearer " + s.secret
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		r := newBenchRequest(benchChatBody, s.secret)
		for pb.Next() {
			r.Header.Set("Authorization", auth)
			st := pipeline.State{API: chatRoute, Store: s.gw.store}
			if apiErr := s.auth.authenticate(r, &st); apiErr != nil {
				b.Error(apiErr)
				return
			}
		}
	})
}

// BenchmarkRouter is the routing stage alone on a chat completion body:
// read, validate, look up the model, rewrite the model id, set the
// placeholders.
func BenchmarkRouter(b *testing.B) {
	s := newBenchSetup(b)
	r := newBenchRequest(benchChatBody, s.secret)
	body := []byte(benchChatBody)
	rd := bytes.NewReader(body)
	w := newBenchWriter()
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		r.Body = io.NopCloser(rd)
		st := pipeline.State{API: chatRoute}
		body, apiErr := reqbody.Read(w, r, s.router.MaxBodyBytes)
		if apiErr == nil {
			apiErr = s.router.Plan(r, &st, body)
		}
		if apiErr != nil {
			b.Fatal(apiErr)
		}
	}
}

// BenchmarkChainBaselineJSON is the fake upstream alone with the request
// building the chain benchmarks do: subtract it from BenchmarkChainJSON.
func BenchmarkChainBaselineJSON(b *testing.B) {
	runServe(b, benchUpstreamJSON, benchChatBody, "sk-none")
}

// BenchmarkChainJSON is the whole chain on a non-streamed chat completion:
// auth, routing, admission hold, usage read, charge, usage.cost written.
func BenchmarkChainJSON(b *testing.B) {
	s := newBenchSetup(b)
	h := s.chain(benchUpstreamJSON)
	checkOnce(b, h, benchChatBody, s.secret, true)
	runServe(b, h, benchChatBody, s.secret)
}

// BenchmarkChainJSONParallel is BenchmarkChainJSON from many goroutines on
// one key: the ledger's and the store's contention.
func BenchmarkChainJSONParallel(b *testing.B) {
	s := newBenchSetup(b)
	h := s.chain(benchUpstreamJSON)
	checkOnce(b, h, benchChatBody, s.secret, true)
	runServeParallel(b, h, benchChatBody, s.secret)
}

// BenchmarkChainBaselineSSE is the 50-event fake stream alone.
func BenchmarkChainBaselineSSE(b *testing.B) {
	runServe(b, benchUpstreamSSE, benchStreamBody, "sk-none")
}

// BenchmarkChainSSE is the whole chain on a 50-event stream: every event is
// parsed for text and usage, the usage event and [DONE] held until the
// charge is made.
func BenchmarkChainSSE(b *testing.B) {
	s := newBenchSetup(b)
	h := s.chain(benchUpstreamSSE)
	checkOnce(b, h, benchStreamBody, s.secret, true)
	runServe(b, h, benchStreamBody, s.secret)
}

// BenchmarkChainSSEParallel is BenchmarkChainSSE from many goroutines.
func BenchmarkChainSSEParallel(b *testing.B) {
	s := newBenchSetup(b)
	h := s.chain(benchUpstreamSSE)
	checkOnce(b, h, benchStreamBody, s.secret, true)
	runServeParallel(b, h, benchStreamBody, s.secret)
}
