package integration

// Provider fallback: a catalog model's providers are tried in
// order, then those of the request's `models` fallbacks; the `provider`
// preferences reorder and trim them; failed attempts are never charged.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// recordingProxy stands in front of the mock provider and records the body
// of every POST reaching it, in order; it can add headers to every answer
// (a provider's own X-RateLimit-*, which the gateway must not pass on).
type recordingProxy struct {
	srv *httptest.Server

	mu     sync.Mutex
	bodies [][]byte
}

func newRecordingProxy(t *testing.T, target string, extra http.Header) *recordingProxy {
	t.Helper()
	p := &recordingProxy{}
	p.srv = startTap(t, target, func(_ string, body []byte) {
		p.mu.Lock()
		p.bodies = append(p.bodies, body)
		p.mu.Unlock()
	}, func(res *http.Response) error {
		for k, vs := range extra {
			res.Header[k] = vs
		}
		return nil
	})
	return p
}

func (p *recordingProxy) addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// take returns the bodies recorded since the last take.
func (p *recordingProxy) take() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.bodies
	p.bodies = nil
	return b
}

// upstreamModels is the `model` of each body.
func upstreamModels(bodies [][]byte) []string {
	out := make([]string, len(bodies))
	for i, b := range bodies {
		out[i] = gjson.GetBytes(b, "model").Str
	}
	return out
}

// testProvider is one provider line of a catalog model.
type testProvider struct {
	name, baseURL, model, apiKey string
}

// modelBlock is a catalog model for the tollgate global option; prices in
// credits per token.
func modelBlock(id, prompt, completion string, providers ...testProvider) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt %s\n\t\t\t\tcompletion %s\n\t\t\t}\n", id, prompt, completion)
	for _, p := range providers {
		fmt.Fprintf(&b, "\t\t\tprovider %s %s {\n", p.name, p.baseURL)
		if p.model != "" {
			fmt.Fprintf(&b, "\t\t\t\tmodel %s\n", p.model)
		}
		if p.apiKey != "" {
			fmt.Fprintf(&b, "\t\t\t\tapi_key %s\n", p.apiKey)
		}
		b.WriteString("\t\t\t}\n")
	}
	b.WriteString("\t\t}\n")
	return b.String()
}

// withModels adds catalog models (modelBlock) after the harness's own.
func withModels(t *testing.T, blocks ...string) func(string) string {
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", strings.Join(blocks, "")+"\t\tmodel tollgate-mock:free {\n")
	}
}

// withResponseHeaderTimeout bounds the wait for a provider's answer headers.
func withResponseHeaderTimeout(t *testing.T, d string) func(string) string {
	return func(cfg string) string {
		return withTollgateOptions(t, "transport http {\n\t\t\tresponse_header_timeout "+d+"\n\t\t}")(cfg)
	}
}

func chain(edits ...func(string) string) func(string) string {
	return func(cfg string) string {
		for _, e := range edits {
			cfg = e(cfg)
		}
		return cfg
	}
}

// expectNoRateLimitHeaders fails if the answer carries any X-RateLimit-*.
func expectNoRateLimitHeaders(t *testing.T, r response, what string) {
	t.Helper()
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-ratelimit-") {
			t.Fatalf("%s: answer carries %s: %v", what, k, r.Header[k])
		}
	}
}

func TestFallback(t *testing.T) {
	rec := newRecordingProxy(t, mockAddr, http.Header{
		"X-Ratelimit-Limit": {"999"}, "X-Ratelimit-Remaining": {"998"}, "X-Ratelimit-Reset": {"1"},
	})
	via := "http://" + rec.addr() + "/v1"
	dead := "http://" + freeport.Addr(t) + "/v1" // nothing listens there
	p := func(name, base, model string) testProvider {
		return testProvider{name: name, baseURL: base, model: model, apiKey: "mock"}
	}
	startInProcessWith(t, chain(
		withResponseHeaderTimeout(t, "300ms"),
		// The order of fallbacks alone: no retry on the same endpoint
		// (TestRetrySameEndpoint has them).
		withTollgateOptions(t, "retries 0"),
		withModels(t,
			modelBlock("fb/three", "0.000001", "0.000002",
				p("a", via, "x-error-429"), p("b", via, "x-error-500"), p("c", via, "tollgate-mock")),
			modelBlock("fb/bad", "0.000001", "0.000002", p("bad", via, "fb-error-502")),
			// Dearer than fb/bad: a `models` fallback is charged at the
			// prices of the model that served.
			modelBlock("fb/good", "0.000003", "0.000005", p("good", via, "fb-good")),
			modelBlock("fb/limited", "0.000001", "0.000002", p("l1", via, "l1-error-429"), p("l2", via, "l2-error-429")),
			modelBlock("fb/mixed", "0.000001", "0.000002", p("m1", via, "m1-error-500"), p("m2", via, "m2-error-429")),
			modelBlock("fb/garbage", "0.000001", "0.000002", p("g1", via, "g1-error-garbage"), p("g2", via, "g2-error-garbage")),
			modelBlock("fb/down", "0.000001", "0.000002", p("dead", dead, "tollgate-mock"), p("alive", via, "tollgate-mock")),
			modelBlock("fb/downonly", "0.000001", "0.000002", p("dead", dead, "tollgate-mock")),
			modelBlock("fb/slow", "0.000001", "0.000002", p("slow", via, "tollgate-mock-slow"), p("quick", via, "tollgate-mock")),
			modelBlock("fb/slowonly", "0.000001", "0.000002", p("slow", via, "tollgate-mock-slow")),
		)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"fallback","limit":5}`)
	const prompt = `"messages":[{"role":"user","content":"fall back please"}]`

	// served sends a request that must succeed, checks that exactly the
	// upstream models in want were called in that order with the same body
	// apart from the model id, and that only the answer's cost was charged,
	// at the serving model's prices.
	served := func(t *testing.T, body string, prices [2]money.Amount, want ...string) response {
		t.Helper()
		rec.take()
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
		bodies := rec.take()
		if got := upstreamModels(bodies); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("upstream calls %v, want %v", got, want)
		}
		for i, b := range bodies {
			if gjson.GetBytes(b, "provider").Exists() || gjson.GetBytes(b, "models").Exists() {
				t.Fatalf("gateway fields reached the provider: %s", b)
			}
			same, _ := sjson.SetBytes(b, "model", "M")
			first, _ := sjson.SetBytes(bodies[0], "model", "M")
			if !bytes.Equal(same, first) {
				t.Fatalf("attempt %d body differs beyond the model id:\n%s\n%s", i, bodies[0], b)
			}
		}
		last := want[len(want)-1]
		if !strings.Contains(r.JSON.Get("choices.0.message.content").Str, "Mock answer from "+last+":") {
			t.Fatalf("answer not from %s: %s", last, r.Body)
		}
		u := r.JSON.Get("usage")
		cost := creditAmount(t, u.Get("cost"))
		if wantCost := money.Amount(u.Get("prompt_tokens").Int())*prices[0] + money.Amount(u.Get("completion_tokens").Int())*prices[1]; cost != wantCost || cost == 0 {
			t.Fatalf("usage.cost %s, want %s: %s", cost, wantCost, r.Body)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), cost, "served by "+last)
		expectNoRateLimitHeaders(t, r, "a served request")
		if ra := r.Header.Get("Retry-After"); ra != "" {
			t.Fatalf("a failed attempt's Retry-After %q leaked into the answer", ra)
		}
		return r
	}
	// failed sends a request that must fail, and checks that nothing was
	// charged and the calls went to want.
	failed := func(t *testing.T, body string, status int, message string, want ...string) response {
		t.Helper()
		rec.take()
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, body, nil).expectError(t, status, message)
		if got := upstreamModels(rec.take()); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("upstream calls %v, want %v", got, want)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, "failed request")
		if g := r.Header.Get("X-Generation-Id"); g != "" {
			t.Fatalf("a failed request has a generation %q", g)
		}
		expectNoRateLimitHeaders(t, r, "a failed request")
		return r
	}
	base := [2]money.Amount{promptPrice, completionPrice}

	t.Run("order of the catalog", func(t *testing.T) {
		served(t, `{"model":"fb/three","max_tokens":30,`+prompt+`}`, base, "x-error-429", "x-error-500", "tollgate-mock")
		// A stream falls back the same way.
		rec.take()
		res, err := c.send("/chat/completions", key, `{"model":"fb/three","stream":true,`+prompt+`}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := readStream(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("stream: status %d, %v", res.StatusCode, err)
		}
		s := parseStream(t, evs)
		if !s.done || !strings.HasPrefix(s.text, "Mock answer from tollgate-mock:") || !s.usage.Get("cost").Exists() {
			t.Fatalf("stream fallback: %+v", s)
		}
		if got := upstreamModels(rec.take()); strings.Join(got, ",") != "x-error-429,x-error-500,tollgate-mock" {
			t.Fatalf("stream upstream calls %v", got)
		}
	})

	t.Run("models fallbacks", func(t *testing.T) {
		good := [2]money.Amount{3_000, 5_000}
		served(t, `{"model":"fb/bad","models":["fb/good"],`+prompt+`}`, good, "fb-error-502", "fb-good")
		served(t, `{"models":["fb/bad","fb/good"],`+prompt+`}`, good, "fb-error-502", "fb-good")
		// The model's own providers come before the next model's.
		served(t, `{"model":"fb/limited","models":["fb/bad","fb/three"],`+prompt+`}`, base,
			"l1-error-429", "l2-error-429", "fb-error-502", "x-error-429", "x-error-500", "tollgate-mock")
		// Nothing left to try: the last attempt's error.
		failed(t, `{"model":"fb/bad","models":["fb/garbage"],`+prompt+`}`, 502, "Provider returned an invalid response",
			"fb-error-502", "g1-error-garbage", "g2-error-garbage")
		failed(t, `{"model":"fb/bad","models":["no/such"],`+prompt+`}`, 400, `models: unknown model "no/such"`)
	})

	t.Run("provider preferences", func(t *testing.T) {
		served(t, `{"model":"fb/three","provider":{"order":["c","a"]},`+prompt+`}`, base, "tollgate-mock")
		served(t, `{"model":"fb/three","provider":{"order":["B"]},`+prompt+`}`, base, "x-error-500", "x-error-429", "tollgate-mock")
		served(t, `{"model":"fb/three","provider":{"only":["c"]},`+prompt+`}`, base, "tollgate-mock")
		served(t, `{"model":"fb/three","provider":{"only":["b","c"]},`+prompt+`}`, base, "x-error-500", "tollgate-mock")
		served(t, `{"model":"fb/three","provider":{"ignore":["a","b"]},`+prompt+`}`, base, "tollgate-mock")
		served(t, `{"model":"fb/three","provider":{"order":["b","c"],"allow_fallbacks":false},`+prompt+`}`, base, "x-error-500", "tollgate-mock")
		// Without fallbacks only the first provider is tried.
		r := failed(t, `{"model":"fb/three","provider":{"allow_fallbacks":false},`+prompt+`}`, 429, "Rate limit exceeded", "x-error-429")
		if r.JSON.Get("error.metadata.provider_code").Str != "rate_limit_exceeded" {
			t.Fatalf("provider 429: %s", r.Body)
		}
		failed(t, `{"model":"fb/three","provider":{"order":["b"],"allow_fallbacks":false},`+prompt+`}`, 500, "The server had an error", "x-error-500")
		// Nothing satisfies the preferences: 503 before any provider call.
		for _, prefs := range []string{`{"only":["zzz"]}`, `{"ignore":["a","b","c"]}`, `{"only":["a"],"ignore":["a"]}`, `{"order":["zzz"],"allow_fallbacks":false}`} {
			failed(t, `{"model":"fb/three","provider":`+prefs+`,`+prompt+`}`, 503, "No provider satisfies the request's provider preferences")
		}
		failed(t, `{"model":"fb/three","provider":{"only":"c"},`+prompt+`}`, 400, "provider.only")
		failed(t, `{"model":"fb/three","provider":{"allow_fallbacks":"no"},`+prompt+`}`, 400, "provider.allow_fallbacks")
	})

	t.Run("every provider rate limited", func(t *testing.T) {
		r := failed(t, `{"model":"fb/limited",`+prompt+`}`, 429, "Rate limit exceeded", "l1-error-429", "l2-error-429")
		md := r.JSON.Get("error.metadata")
		if md.Get("error_type").Str != "rate_limit_exceeded" || md.Get("provider_code").Str != "rate_limit_exceeded" {
			t.Fatalf("provider 429 metadata: %s", r.Body)
		}
		if ra := r.Header.Get("Retry-After"); ra != "1" {
			t.Fatalf("Retry-After %q, want the providers' 1", ra)
		}
		if md.Get("provider_name").Str != "l2" {
			t.Fatalf("provider_name %q, want the last attempt's l2", md.Get("provider_name").Str)
		}
	})

	t.Run("rate limited after a provider without retry hint", func(t *testing.T) {
		// The last provider answers 429 with Retry-After, the first 500
		// without: not every attempted provider gave a hint, so no
		// Retry-After.
		r := failed(t, `{"model":"fb/mixed",`+prompt+`}`, 429, "Rate limit exceeded", "m1-error-500", "m2-error-429")
		if r.JSON.Get("error.metadata.provider_code").Str != "rate_limit_exceeded" {
			t.Fatalf("provider 429 metadata: %s", r.Body)
		}
		// m2's own Retry-After header must not leak through either.
		if ra := r.Header.Get("Retry-After"); ra != "" {
			t.Fatalf("Retry-After %q although provider m1 (500) gave no retry hint", ra)
		}
	})

	t.Run("invalid answers", func(t *testing.T) {
		failed(t, `{"model":"fb/garbage",`+prompt+`}`, 502, "Provider returned an invalid response", "g1-error-garbage", "g2-error-garbage")
		failed(t, `{"model":"fb/garbage","stream":true,`+prompt+`}`, 502, "Provider returned an invalid response", "g1-error-garbage", "g2-error-garbage")
	})

	t.Run("provider down", func(t *testing.T) {
		served(t, `{"model":"fb/down",`+prompt+`}`, base, "tollgate-mock")
		failed(t, `{"model":"fb/downonly",`+prompt+`}`, 502, "Provider is unavailable")
	})

	t.Run("timeout", func(t *testing.T) {
		served(t, `{"model":"fb/slow",`+prompt+`}`, base, "tollgate-mock-slow", "tollgate-mock")
		failed(t, `{"model":"fb/slowonly",`+prompt+`}`, 408, "Provider timed out", "tollgate-mock-slow")
	})

	// No failure left a hold behind: a request that needs exactly the rest
	// of the key's limit passes.
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}
