package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// meterFixture is Auth → Router → Meter in front of a fake provider, over
// the fake gateway's store, with one account and one regular key.
type meterFixture struct {
	gw      *testgw.Gateway
	acct    storage.Account
	key     string
	keyHash string
	h       caddyhttp.Handler
	meter   *metering.Meter // replaced by one with another logger before a request

	// provider answers the requests that reach the upstream.
	provider caddyhttp.HandlerFunc
	calls    atomic.Int32
	mu       sync.Mutex
	bodies   []string // bodies received upstream
}

// defaultPolicy never applies the in-flight budget (every balance is at or
// above the threshold) and caps an estimate at one credit.
var defaultPolicy = billing.InFlightPolicy{
	FractionPPM: 1_000_000, Ceiling: money.AmountScale, PerRequestCap: money.AmountScale,
	SettlementWindow: time.Minute,
}

// newMeterFixture creates an account holding credits (a decimal; "" for
// none) and a key described by n.
func newMeterFixture(t *testing.T, credits string, n storage.NewAPIKey) *meterFixture {
	t.Helper()
	gw := testgw.New(t)
	gw.ModelCatalog = testgw.Catalog("/v1", testgw.PricedModel("m:free", billing.Pricing{}, testgw.UpstreamProvider("/v1")))
	gw.InFlight = defaultPolicy
	f := &meterFixture{gw: gw, acct: gw.Account(t, storage.AccountPersonal)}
	if credits != "" {
		amt, err := money.ParseAmount(credits)
		if err != nil {
			t.Fatal(err)
		}
		if _, f.acct, err = gw.Storage.RecordPurchase(f.acct.ID, amt, "test"); err != nil {
			t.Fatal(err)
		}
	}
	k, secret := gw.APIKey(t, f.acct, n)
	f.key, f.keyHash = secret, k.Hash
	auth := &Auth{gw: gw, logger: zap.NewNop()}
	router := &routing.Router{Gateway: gw}
	if err := router.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	meter := metering.New(gw, zap.NewNop())
	f.meter = &meter
	up := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		f.calls.Add(1)
		r = asSent(r)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		if auth := r.Header.Get("Authorization"); auth != "Bearer "+testgw.UpstreamKey {
			t.Errorf("upstream Authorization = %q", auth)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()
		return f.provider(w, r)
	})
	f.h = errorRoute(handlerOf(auth, handlerOf(routerMW{router}, handlerOf(meterMW{f.meter, gw}, up))))
	return f
}

// do sends an inference request with the fixture's key.
func (f *meterFixture) do(t *testing.T, path, body string) testgw.Response {
	t.Helper()
	r, repl := testgw.NewRequest("POST", path, body, "Authorization", "Bearer "+f.key)
	return testgw.Serve(t, f.h, r, repl)
}

func (f *meterFixture) store() *storage.Store { return f.gw.Storage }

// ledger is the account's and key's current holds.
func (f *meterFixture) ledger(t *testing.T) storage.LedgerView {
	t.Helper()
	var snap storage.Snapshot
	if err := f.store().Snapshot(&snap, f.acct.ID, f.keyHash, 0); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	f.store().Abandon(&snap)
	return snap.View
}

// wantCharged checks the key's and the account's usage, and that nothing is
// held for running requests.
func (f *meterFixture) wantCharged(t *testing.T, cost money.Amount) {
	t.Helper()
	k, _ := f.store().APIKey(f.keyHash)
	a, _ := f.store().Account(f.acct.ID)
	if k.Usage.Total != cost || k.Usage.In(money.IntervalDaily, time.Now()) != cost || a.Usage != cost {
		t.Errorf("charged key %s (daily %s), account %s; want %s", k.Usage.Total, k.Usage.In(money.IntervalDaily, time.Now()), a.Usage, cost)
	}
	if k.BYOKUsage.Total != 0 || a.BYOKUsage != 0 {
		t.Errorf("BYOK usage key %s account %s", k.BYOKUsage.Total, a.BYOKUsage)
	}
	if v := f.ledger(t); v.AccountHeld != 0 || v.KeyHeld != 0 {
		t.Errorf("still held: account %s key %s", v.AccountHeld, v.KeyHeld)
	}
}

// generations counts the stored generation records.
func (f *meterFixture) generations(t *testing.T) int {
	t.Helper()
	n := 0
	if err := f.store().Generations(func(storage.Generation) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	return n
}

// estimate is admission's estimate for body as the client sends it (no
// gateway fields, no media parts): a token per byte plus the per-request
// overhead.
func (f *meterFixture) estimate(body string, maxTokens int64) billing.Estimate {
	e, err := billing.EstimateRequest(billing.RequestFacts{
		Pricing: testgw.Pricing, InputTokens: int64(len(body)) + prompt.PromptOverheadTokens,
		MaxTokens: maxTokens, ContextLength: 8192,
	}, f.gw.InFlight)
	if err != nil {
		panic(err)
	}
	return e
}

// testCost prices usage at the test prices, which never overflow.
func testCost(u billing.Usage) money.Amount {
	c, err := billing.Cost(testgw.Pricing, u)
	if err != nil {
		panic(err)
	}
	return c
}

// billed is the usage members the gateway adds for u charged at cost.
func billed(u billing.Usage) string {
	return answer.NewUsageBill(testCost(u), testgw.Pricing, u, false).Members()
}

// billedResponses is billed for a Responses usage object.
func billedResponses(u billing.Usage) string {
	b := answer.NewUsageBill(testCost(u), testgw.Pricing, u, false)
	b.Responses = true
	return b.Members()
}

// asGateway is a provider's chat answer or chunk as the client gets it: with
// the generation id, the catalog model and the provider.
func asGateway(doc, genID string) string {
	var id answer.Identity
	id.SetIn(nil, genID, &upstream.Route{Model: &catalog.Model{ID: "m"}, Provider: &catalog.Provider{Name: testgw.UpstreamName}})
	return string(id.Rewrite([]byte(doc)))
}

// asGatewaySSE is asGateway for every chat chunk of a stream.
func asGatewaySSE(events []string, genID string) string {
	var b strings.Builder
	for _, ev := range events {
		data, ok := strings.CutPrefix(ev, "data: ")
		if ok && !strings.HasPrefix(data, "[DONE]") {
			ev = "data: " + asGateway(strings.TrimSuffix(data, "\n\n"), genID) + "\n\n"
		}
		b.WriteString(ev)
	}
	return b.String()
}

func chatAnswer(content, finish string, prompt, completion int64) string {
	c, _ := json.Marshal(content)
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"` + testgw.UpstreamModel + `",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + string(c) + `},"finish_reason":"` + finish + `"}],` +
		`"usage":{"prompt_tokens":` + strconv.FormatInt(prompt, 10) + `,"completion_tokens":` + strconv.FormatInt(completion, 10) +
		`,"total_tokens":` + strconv.FormatInt(prompt+completion, 10) + `}}`
}

// answerJSON is a provider answering with body and status.
func answerJSON(status int, body string) caddyhttp.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, err := w.Write([]byte(body))
		return err
	}
}

// answerSSE is a provider streaming events, flushing after each.
func answerSSE(events ...string) caddyhttp.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			if _, err := w.Write([]byte(ev)); err != nil {
				return err
			}
			if err := http.NewResponseController(w).Flush(); err != nil {
				return err
			}
		}
		return nil
	}
}

const chatBody = `{"model":"m","messages":[{"role":"user","content":"Say hello"}],"max_tokens":100,"user":"u-9"}`

func TestMeterChargesJSON(t *testing.T) {
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	answer := chatAnswer("Hello there!", "stop", 20, 7)
	f.provider = answerJSON(http.StatusOK, answer)
	res := f.do(t, "/api/v1/chat/completions", chatBody).Must(t, http.StatusOK)

	cost := testCost(billing.Usage{PromptTokens: 20, CompletionTokens: 7})
	if cost != 34_000 { // 20 × 0.000001 + 7 × 0.000002
		t.Fatalf("billing.Cost = %s", cost)
	}
	want := strings.Replace(answer, `"total_tokens":27}`, `"total_tokens":27,`+billed(billing.Usage{PromptTokens: 20, CompletionTokens: 7})+`}`, 1)
	if !strings.Contains(want, `"cost":0.000034,"is_byok":false,"cost_details":{"upstream_inference_cost":null,"upstream_inference_prompt_cost":0.00002,"upstream_inference_completions_cost":0.000014}`) {
		t.Errorf("usage members %s", want)
	}
	want = asGateway(want, res.Header.Get("X-Generation-Id"))
	if res.Body != want {
		t.Errorf("body = %s\nwant %s", res.Body, want)
	}
	if cl := res.Header.Get("Content-Length"); cl != strconv.Itoa(len(res.Body)) {
		t.Errorf("Content-Length = %s, body %d bytes", cl, len(res.Body))
	}
	if f.calls.Load() != 1 || f.bodies[0] != forUpstream(chatBody) {
		t.Errorf("upstream calls %d, bodies %q", f.calls.Load(), f.bodies)
	}
	f.wantCharged(t, cost)

	id := res.Header.Get("X-Generation-Id")
	if !strings.HasPrefix(id, "gen-") {
		t.Fatalf("X-Generation-Id = %q", id)
	}
	g, err := f.store().Generation(id)
	if err != nil {
		t.Fatalf("generation %s: %v", id, err)
	}
	if g.ID != id || g.AccountID != f.acct.ID || g.KeyHash != f.keyHash || g.WorkspaceID != f.acct.DefaultWorkspaceID ||
		g.Model != "m" || g.Provider != testgw.UpstreamName || g.UpstreamModel != testgw.UpstreamModel ||
		g.PromptTokens != 20 || g.CompletionTokens != 7 || g.Cost != cost || g.Status != "completed" ||
		g.Streamed || g.FinishReason != "stop" || g.UsageEstimated || g.User != "u-9" || g.BYOK || g.CreatedAt.IsZero() ||
		g.UpstreamID != "chatcmpl-1" {
		t.Errorf("generation = %+v", g)
	}
	// the cost stays in the in-flight budget for the settlement window
	if v := f.ledger(t); v.InFlightHeld != cost || v.NextRelease <= 0 || v.NextRelease > time.Minute {
		t.Errorf("in flight %s, next release %v", v.InFlightHeld, v.NextRelease)
	}

	// a second request adds up exactly
	f.provider = answerJSON(http.StatusOK, chatAnswer("x", "length", 3, 100))
	res = f.do(t, "/api/v1/chat/completions", chatBody).Must(t, http.StatusOK)
	cost2 := testCost(billing.Usage{PromptTokens: 3, CompletionTokens: 100})
	if res.JSON.Get("usage.cost").Raw != cost2.String() {
		t.Errorf("usage.cost = %s, want %s", res.JSON.Get("usage.cost").Raw, cost2)
	}
	f.wantCharged(t, cost+cost2)
	if g, _ := f.store().Generation(res.Header.Get("X-Generation-Id")); g.Status != "incomplete" || g.FinishReason != "length" {
		t.Errorf("finish_reason length: status %q finish %q", g.Status, g.FinishReason)
	}
}

func TestMeterChargesJSONWithoutUsage(t *testing.T) {
	// an answer without usage is charged at the estimates
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	f.provider = answerJSON(http.StatusOK, `{"choices":[{"message":{"content":"abcdefghi"},"finish_reason":"stop"}]}`)
	res := f.do(t, "/api/v1/chat/completions", chatBody).Must(t, http.StatusOK)
	usage := billing.Usage{PromptTokens: billing.EstimateTokens(len(forUpstream(chatBody))), CompletionTokens: 3}
	cost := testCost(usage)
	f.wantCharged(t, cost)
	g, err := f.store().Generation(res.Header.Get("X-Generation-Id"))
	if err != nil || !g.UsageEstimated || g.PromptTokens != usage.PromptTokens || g.CompletionTokens != 3 || g.Cost != cost {
		t.Errorf("generation = %+v, %v", g, err)
	}
}

func TestMeterChargesStream(t *testing.T) {
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	events := []string{
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"}}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}` + "\n\n",
		"data: [DONE]\n\n",
	}
	f.provider = answerSSE(events...)
	res := f.do(t, "/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":50}`).Must(t, http.StatusOK)
	cost := testCost(billing.Usage{PromptTokens: 11, CompletionTokens: 2})
	want := asGatewaySSE(append(events[:4:4],
		`data: {"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13,`+billed(billing.Usage{PromptTokens: 11, CompletionTokens: 2})+"}}\n\n",
		"data: [DONE]\n\n"), res.Header.Get("X-Generation-Id"))
	if res.Body != want {
		t.Errorf("body = %q\nwant %q", res.Body, want)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	f.wantCharged(t, cost)
	g, err := f.store().Generation(res.Header.Get("X-Generation-Id"))
	if err != nil || g.PromptTokens != 11 || g.CompletionTokens != 2 || g.Cost != cost || !g.Streamed ||
		g.Status != "completed" || g.FinishReason != "stop" || g.UsageEstimated {
		t.Errorf("generation = %+v, %v", g, err)
	}
}

// A provider that reports no usage in a stream: the client still gets a
// usage chunk, of what was charged, before [DONE].
func TestMeterStreamWithoutUsageEndsWithUsage(t *testing.T) {
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	events := []string{chunk("Hello"), chunk(" there"), "data: [DONE]\n\n"}
	f.provider = answerSSE(events...)
	res := f.do(t, "/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"max_tokens":50}`).Must(t, http.StatusOK)
	genID := res.Header.Get("X-Generation-Id")
	g, err := f.store().Generation(genID)
	if err != nil || !g.UsageEstimated {
		t.Fatalf("generation = %+v, %v", g, err)
	}
	u := billing.Usage{PromptTokens: g.PromptTokens, CompletionTokens: g.CompletionTokens}
	usage := `{"prompt_tokens":` + strconv.FormatInt(u.PromptTokens, 10) + `,"completion_tokens":` + strconv.FormatInt(u.CompletionTokens, 10) +
		`,"total_tokens":` + strconv.FormatInt(u.PromptTokens+u.CompletionTokens, 10) + `,` + billed(u) + `}`
	if !strings.HasSuffix(res.Body, `"choices":[],"usage":`+usage+"}\n\ndata: [DONE]\n\n") ||
		!strings.HasPrefix(res.Body, asGatewaySSE(events[:2], genID)) {
		t.Errorf("body = %s", res.Body)
	}
}

func TestMeterChargesResponsesStream(t *testing.T) {
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	completed := `{"type":"response.completed","response":{"id":"resp_1","status":"completed","usage":{"input_tokens":5,"output_tokens":4,"total_tokens":9}}}`
	events := []string{
		"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n",
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\"}}\n\n",
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi!\"}\n\n",
		"event: response.completed\ndata: " + completed + "\n\n",
		"data: [DONE]\n\n",
	}
	f.provider = answerSSE(events...)
	res := f.do(t, "/api/v1/responses", `{"model":"m","input":"hi","stream":true}`).Must(t, http.StatusOK)
	cost := testCost(billing.Usage{PromptTokens: 5, CompletionTokens: 4})
	want := strings.Join(events[:3], "") + "event: response.completed\ndata: " +
		strings.Replace(completed, `"total_tokens":9}`, `"total_tokens":9,`+billedResponses(billing.Usage{PromptTokens: 5, CompletionTokens: 4})+"}", 1) + "\n\n" + "data: [DONE]\n\n"
	if res.Body != want {
		t.Errorf("body = %q\nwant %q", res.Body, want)
	}
	f.wantCharged(t, cost)
	if g, err := f.store().Generation(res.Header.Get("X-Generation-Id")); err != nil || g.Cost != cost || !g.Streamed || g.Status != "completed" {
		t.Errorf("generation = %+v, %v", g, err)
	}
}

func TestMeterFreeModel(t *testing.T) {
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	f.provider = answerJSON(http.StatusOK, chatAnswer("free", "stop", 10, 10))
	res := f.do(t, "/api/v1/chat/completions", `{"model":"m:free","messages":[]}`).Must(t, http.StatusOK)
	if res.JSON.Get("usage.cost").Raw != "0" {
		t.Errorf("usage.cost = %s", res.JSON.Get("usage.cost").Raw)
	}
	f.wantCharged(t, 0)
	if g, err := f.store().Generation(res.Header.Get("X-Generation-Id")); err != nil || g.Cost != 0 || g.Model != "m:free" {
		t.Errorf("generation = %+v, %v", g, err)
	}
}

// wantNothingCharged checks that a failed request left no trace.
func (f *meterFixture) wantNothingCharged(t *testing.T) {
	t.Helper()
	f.wantCharged(t, 0)
	if v := f.ledger(t); v.InFlightHeld != 0 {
		t.Errorf("in flight held %s", v.InFlightHeld)
	}
	if n := f.generations(t); n != 0 {
		t.Errorf("%d generation records", n)
	}
}

// errorBody is the gateway's error body.
func errorBody(status int, message string, metadata map[string]any) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": message, "metadata": metadata}})
	return string(b) + "\n"
}

// A provider's 429 is the public API's rate-limit error with the provider's own
// code, and Retry-After when the provider gave one.
func TestMeterProviderRateLimit(t *testing.T) {
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	f.provider = func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("X-Ratelimit-Remaining", "0")
		w.WriteHeader(429)
		_, _ = w.Write([]byte(`{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`))
		return nil
	}
	res := f.do(t, "/api/v1/chat/completions", chatBody)
	want := errorBody(429, "Rate limit exceeded", map[string]any{
		"provider_name": testgw.UpstreamName, "error_type": "rate_limit_exceeded", "provider_code": "rate_limit_exceeded",
		"raw": `{"error":{"code":"rate_limit_exceeded","message":"slow down"}}`,
	})
	if res.Status != 429 || res.Body != want {
		t.Fatalf("got %d %s\nwant %s", res.Status, res.Body, want)
	}
	if res.Header.Get("Retry-After") != "7" || res.Header.Get("X-Ratelimit-Remaining") != "" {
		t.Fatalf("headers %v", res.Header)
	}
	f.wantCharged(t, 0)
}

func TestMeterUpstreamFailures(t *testing.T) {
	upErr := `{"error":{"message":"boom","type":"server_error"}}`
	tests := []struct {
		name     string
		provider caddyhttp.HandlerFunc
		status   int
		message  string
		raw      string // metadata.raw; "" for none
	}{
		{"upstream 500", answerJSON(500, upErr), 500, "boom", upErr},
		{"upstream 503 without body", func(w http.ResponseWriter, _ *http.Request) error {
			w.WriteHeader(503)
			return nil
		}, 503, "Service Unavailable", ""},
		{"upstream error as a stream", func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(500)
			_, err := w.Write([]byte("data: oops\n\n"))
			return err
		}, 500, "Internal Server Error", "data: oops\n\n"},
		{"garbage 200", func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "text/html")
			_, err := w.Write([]byte("<html>not json</html>"))
			return err
		}, 502, "Provider returned an invalid response", ""},
		{"truncated JSON", func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"choices":[{"message":`))
			return caddyhttp.Error(502, io.ErrUnexpectedEOF)
		}, 502, "Provider returned an invalid response", ""},
		{"no answer", func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(502, errors.New("dial tcp 10.0.0.1:443: connect: connection refused"))
		}, 502, "Provider is unavailable", ""},
		{"timeout", func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(504, errors.New("i/o timeout"))
		}, 408, "Provider timed out", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMeterFixture(t, "1", storage.NewAPIKey{})
			f.provider = tt.provider
			res := f.do(t, "/api/v1/chat/completions", chatBody)
			md := map[string]any{"provider_name": testgw.UpstreamName}
			if tt.raw != "" {
				md["raw"] = tt.raw
			}
			if want := errorBody(tt.status, tt.message, md); res.Status != tt.status || res.Body != want {
				t.Errorf("got %d %s\nwant %d %s", res.Status, res.Body, tt.status, want)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if f.calls.Load() != 1 {
				t.Errorf("upstream calls = %d", f.calls.Load())
			}
			f.wantNothingCharged(t)
		})
	}
}

// want402 checks a credit refusal's exact body and that the provider was
// not called.
func (f *meterFixture) want402(t *testing.T, res testgw.Response, message string, metadata map[string]any) {
	t.Helper()
	if want := errorBody(402, message, metadata); res.Status != 402 || res.Body != want {
		t.Errorf("got %d %s\nwant 402 %s", res.Status, res.Body, want)
	}
	if f.calls.Load() != 0 {
		t.Errorf("a refused request reached the provider (%d calls)", f.calls.Load())
	}
}

var (
	keyLimitMeta = func(hint string) map[string]any {
		return map[string]any{"limit_source": "service_key_limit", "remedy_hint": hint}
	}
	creditsMeta = map[string]any{"limit_source": "service_credits", "remedy_hint": "Add credits to the account, or lower max_tokens."}
	weightMeta  = map[string]any{"limit_source": "service_credits", "reason": "weight_exceeds_budget",
		"remedy_hint": "Lower max_tokens or the prompt size, or add credits."}
	budgetMeta = map[string]any{"limit_source": "service_in_flight_budget", "reason": "in_flight_budget_exhausted",
		"remedy_hint": "Wait for Retry-After and retry."}
)

const (
	msgKeyLimit = "This API key's credit limit is exhausted"
	msgCredits  = "Insufficient credits: the balance cannot cover this request"
	msgWeight   = "This request's estimated cost exceeds the whole in-flight budget"
	msgBudget   = "Running and recently completed requests fill the in-flight budget"
)

func amountPtr(a money.Amount) *money.Amount { return &a }

func TestMeterKeyLimit(t *testing.T) {
	t.Run("exhausted", func(t *testing.T) {
		f := newMeterFixture(t, "1", storage.NewAPIKey{Limit: amountPtr(0), LimitReset: money.IntervalDaily})
		f.provider = answerJSON(200, chatAnswer("x", "stop", 1, 1))
		for _, body := range []string{chatBody, `{"model":"m:free","messages":[]}`} {
			res := f.do(t, "/api/v1/chat/completions", body)
			f.want402(t, res, msgKeyLimit, keyLimitMeta("Raise the key's limit or wait for its limit_reset."))
			if ra := res.Header.Get("Retry-After"); ra != "" {
				t.Errorf("Retry-After = %q", ra)
			}
		}
		f.wantNothingCharged(t)
	})
	t.Run("spent", func(t *testing.T) {
		// the cap fits one request's estimate; once one is charged, the
		// next does not fit
		hold := (&meterFixture{gw: &testgw.Gateway{InFlight: defaultPolicy}}).estimate(chatBody, 100).Hold
		f := newMeterFixture(t, "1", storage.NewAPIKey{Limit: amountPtr(hold)})
		f.provider = answerJSON(200, chatAnswer("x", "stop", 20, 7))
		f.do(t, "/api/v1/chat/completions", chatBody).Must(t, 200)
		f.calls.Store(0)
		res := f.do(t, "/api/v1/chat/completions", chatBody)
		// Not exhausted: what is left does not cover max_tokens.
		f.want402(t, res, msgAfford(chatBody, 100, hold-testCost(billing.Usage{PromptTokens: 20, CompletionTokens: 7})), keyLimitMeta("Raise the key's limit."))
		f.wantCharged(t, testCost(billing.Usage{PromptTokens: 20, CompletionTokens: 7}))
	})
}

func TestMeterBalance(t *testing.T) {
	for _, model := range []string{"m", "m:free"} {
		t.Run("zero balance "+model, func(t *testing.T) {
			f := newMeterFixture(t, "", storage.NewAPIKey{})
			f.provider = answerJSON(200, chatAnswer("x", "stop", 1, 1))
			res := f.do(t, "/api/v1/chat/completions", `{"model":"`+model+`","messages":[],"max_tokens":10}`)
			f.want402(t, res, msgCredits, creditsMeta)
			f.wantNothingCharged(t)
		})
		t.Run("negative balance "+model, func(t *testing.T) {
			// a charge above the balance (a request without an output
			// limit whose hold per_request_cap bounds) takes it below
			// zero: every model is refused, free ones too
			f := newMeterFixture(t, "0.001", storage.NewAPIKey{})
			r, err := f.store().Reserve(f.acct.ID, f.keyHash, storage.Holds{})
			if err != nil {
				t.Fatal(err)
			}
			cost := money.Amount(3_000_000)
			if err := f.store().Settle(r, storage.Charge{Cost: cost}); err != nil {
				t.Fatal(err)
			}
			if a, _ := f.store().Account(f.acct.ID); a.Balance() != 1_000_000-cost || a.Balance() >= 0 {
				t.Fatalf("balance %s", a.Balance())
			}
			f.calls.Store(0)
			res := f.do(t, "/api/v1/chat/completions", `{"model":"`+model+`","messages":[]}`)
			f.want402(t, res, msgCredits, creditsMeta)
		})
	}
	t.Run("estimate above the balance", func(t *testing.T) {
		f := newMeterFixture(t, "0.0001", storage.NewAPIKey{})
		if est := f.estimate(chatBody, 100); est.Hold <= 100_000 {
			t.Fatalf("estimate %+v fits the balance", est)
		}
		f.want402(t, f.do(t, "/api/v1/chat/completions", chatBody), msgCredits, creditsMeta)
	})
}

// budgetPolicy applies the in-flight budget to every account below 10
// credits: half the balance, at most ceiling.
func budgetPolicy(ceiling money.Amount) billing.InFlightPolicy {
	return billing.InFlightPolicy{FractionPPM: 500_000, Ceiling: ceiling, PerRequestCap: money.AmountScale,
		SettlementWindow: 90 * time.Second, BalanceThreshold: 10 * money.AmountScale}
}

func TestMeterWeightExceedsBudget(t *testing.T) {
	f := newMeterFixture(t, "0.0004", storage.NewAPIKey{})
	f.gw.InFlight = budgetPolicy(money.AmountScale)
	est := f.estimate(chatBody, 100)
	// the budget is 0.0002; the estimate is above it but within the balance
	if est.InFlight <= 200_000 || est.Hold > 400_000 {
		t.Fatalf("estimate %+v does not exercise the budget", est)
	}
	res := f.do(t, "/api/v1/chat/completions", chatBody)
	f.want402(t, res, msgWeight, weightMeta)
	if ra, ok := res.Header["Retry-After"]; ok {
		t.Errorf("Retry-After = %q: a retry will not help", ra)
	}
	// a smaller max_tokens fits
	f.provider = answerJSON(200, chatAnswer("x", "stop", 1, 1))
	f.do(t, "/api/v1/chat/completions", strings.Replace(chatBody, `"max_tokens":100`, `"max_tokens":10`, 1)).Must(t, 200)
}

// blockingProvider answers after release is closed, signalling entered
// first; it gives up when the request's context ends.
func blockingProvider(entered chan<- struct{}, release <-chan struct{}, answer string) caddyhttp.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return caddyhttp.Error(499, r.Context().Err())
		}
		return answerJSON(200, answer)(w, r)
	}
}

func TestMeterInFlightBudget(t *testing.T) {
	f := newMeterFixture(t, "1", storage.NewAPIKey{})
	// balance 1: the ceiling binds; one request fits, two do not, and the
	// first's settling cost leaves no room for another
	const ceiling = 400_000
	f.gw.InFlight = budgetPolicy(ceiling)
	est := f.estimate(chatBody, 100)
	if est.InFlight > ceiling || 2*est.InFlight <= ceiling {
		t.Fatalf("estimate %+v: want one request to fit and two not", est)
	}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	f.provider = blockingProvider(entered, release, chatAnswer("x", "stop", 10, 50))
	first := make(chan testgw.Response, 1)
	go func() {
		r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", chatBody, "Authorization", "Bearer "+f.key)
		w := httptest.NewRecorder()
		if err := f.h.ServeHTTP(w, r); err != nil {
			t.Errorf("first request: %v", err)
		}
		first <- testgw.Response{Status: w.Code, Body: w.Body.String(), Header: w.Header(), Repl: repl}
	}()
	<-entered

	// one request running fills the budget: the next waits for it
	res := f.do(t, "/api/v1/chat/completions", chatBody)
	if want := errorBody(402, msgBudget, budgetMeta); res.Status != 402 || res.Body != want {
		t.Errorf("got %d %s\nwant %s", res.Status, res.Body, want)
	}
	if ra := res.Header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1 (nothing is settling yet)", ra)
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("upstream calls = %d, want only the running request", n)
	}

	close(release)
	if r := <-first; r.Status != 200 {
		t.Fatalf("first request: %d %s", r.Status, r.Body)
	}
	cost := testCost(billing.Usage{PromptTokens: 10, CompletionTokens: 50})
	f.wantCharged(t, cost)

	// with nothing running, the settling cost still fills the budget until
	// its window ends
	if cost+est.InFlight <= ceiling {
		t.Fatalf("cost %s does not fill the budget", cost)
	}
	res = f.do(t, "/api/v1/chat/completions", chatBody)
	if want := errorBody(402, msgBudget, budgetMeta); res.Status != 402 || res.Body != want {
		t.Errorf("got %d %s\nwant %s", res.Status, res.Body, want)
	}
	if ra := res.Header.Get("Retry-After"); ra != "90" {
		t.Errorf("Retry-After = %q, want 90 (the settlement window)", ra)
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("upstream calls = %d", n)
	}
	// a request the budget has room for still runs
	small := `{"model":"m","messages":[],"max_tokens":1}`
	if e := f.estimate(small, 1); cost+e.InFlight > ceiling {
		t.Fatalf("small estimate %+v", e)
	}
	f.provider = answerJSON(200, chatAnswer("x", "stop", 1, 1))
	f.do(t, "/api/v1/chat/completions", small).Must(t, 200)
}

func TestMeterClientAbort(t *testing.T) {
	deltas := []string{"Hello", " wonderful", " wörld"}
	delivered := 0
	for _, d := range deltas {
		delivered += len(d)
	}
	for _, how := range []string{"returns an error", "writes 499"} {
		t.Run(how, func(t *testing.T) {
			f := newMeterFixture(t, "1", storage.NewAPIKey{})
			body := `{"model":"m","messages":[{"role":"user","content":"tell me"}],"stream":true,"max_tokens":200}`
			r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", body, "Authorization", "Bearer "+f.key)
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			var sent []string
			f.provider = func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				for _, d := range deltas {
					ev := chunk(d)
					sent = append(sent, ev)
					if _, err := w.Write([]byte(ev)); err != nil {
						return err
					}
					_ = http.NewResponseController(w).Flush()
				}
				cancel() // the client goes away
				<-r.Context().Done()
				if how == "writes 499" {
					w.WriteHeader(499) // what reverse_proxy does on context.Canceled
					return nil
				}
				return caddyhttp.Error(499, r.Context().Err())
			}
			res := testgw.Serve(t, f.h, r.WithContext(ctx), repl)
			if res.Body != asGatewaySSE(sent, res.Header.Get("X-Generation-Id")) {
				t.Errorf("client got %q", res.Body)
			}
			// Estimated on the body the provider received, which asks for usage.
			upstream, _ := sjson.Set(forUpstream(body), "stream_options.include_usage", true)
			usage := billing.Usage{PromptTokens: billing.EstimateTokens(len(upstream)), CompletionTokens: int64((delivered + 3) / 4)}
			if usage.CompletionTokens != 6 {
				t.Fatalf("completion estimate %d", usage.CompletionTokens)
			}
			cost := testCost(usage)
			f.wantCharged(t, cost)
			g, err := f.store().Generation(res.Header.Get("X-Generation-Id"))
			if err != nil || g.Status != "aborted" || !g.Streamed || !g.UsageEstimated ||
				g.PromptTokens != usage.PromptTokens || g.CompletionTokens != usage.CompletionTokens || g.Cost != cost {
				t.Errorf("generation = %+v, %v", g, err)
			}
		})
	}
}

func TestMeterConcurrentKeyLimit(t *testing.T) {
	const n, fit = 50, 5
	hold := (&meterFixture{gw: &testgw.Gateway{InFlight: defaultPolicy}}).estimate(chatBody, 100).Hold
	limit := fit*hold + hold/2
	f := newMeterFixture(t, "10", storage.NewAPIKey{Limit: &limit})

	entered, release := make(chan struct{}, n), make(chan struct{})
	var running atomic.Int32
	f.provider = func(w http.ResponseWriter, r *http.Request) error {
		if running.Add(1) <= fit {
			// only the requests that fit block, so that a failure cannot hang
			entered <- struct{}{}
			<-release
		}
		return answerJSON(200, chatAnswer("ok", "stop", 20, 90))(w, r)
	}
	type result struct {
		status int
		body   string
	}
	results := make(chan result, n)
	for range n {
		go func() {
			r, _ := testgw.NewRequest("POST", "/api/v1/chat/completions", chatBody, "Authorization", "Bearer "+f.key)
			w := httptest.NewRecorder()
			if err := f.h.ServeHTTP(w, r); err != nil {
				t.Errorf("ServeHTTP: %v", err)
			}
			results <- result{w.Code, w.Body.String()}
		}()
	}
	refused := 0
	want402 := errorBody(402, msgAfford(chatBody, 100, hold/2), keyLimitMeta("Raise the key's limit."))
	timeout := time.After(30 * time.Second)
	for refused < n-fit {
		select {
		case r := <-results:
			if r.status != 402 || r.body != want402 {
				t.Fatalf("while %d run: got %d %s", fit, r.status, r.body)
			}
			refused++
		case <-timeout:
			t.Fatalf("only %d refusals", refused)
		}
	}
	if got := f.calls.Load(); got != fit {
		t.Errorf("%d requests reached the provider, want %d", got, fit)
	}
	if v := f.ledger(t); v.KeyHeld != fit*hold {
		t.Errorf("key holds %s, want %s", v.KeyHeld, fit*hold)
	}
	close(release)
	for range fit {
		if r := <-results; r.status != 200 {
			t.Errorf("admitted request: %d %s", r.status, r.body)
		}
	}
	cost := testCost(billing.Usage{PromptTokens: 20, CompletionTokens: 90})
	f.wantCharged(t, fit*cost)
	if k, _ := f.store().APIKey(f.keyHash); k.Usage.Total > limit {
		t.Errorf("usage %s above the cap %s", k.Usage.Total, limit)
	}
	if got := f.generations(t); got != fit {
		t.Errorf("%d generation records", got)
	}
}

// chunk is a chat-completion stream event carrying content.
func chunk(content string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":` +
		strconv.Quote(content) + `}}]}` + "\n\n"
}
