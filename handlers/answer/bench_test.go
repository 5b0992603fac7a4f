package answer

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// discardClient is a client connection that takes every write.
type discardClient struct{ h http.Header }

func (d *discardClient) Header() http.Header         { return d.h }
func (d *discardClient) WriteHeader(int)             {}
func (d *discardClient) Write(p []byte) (int, error) { return len(p), nil }

// benchMockAnswer is the mock provider's chat answer as bench/run.sh gets
// it: system_fingerprint after usage.
var benchMockAnswer = []byte(`{"id":"chatcmpl-Q2ZKXB7LJ4C5GQ6ZT3W7N2HMUA","object":"chat.completion","created":1735689600,` +
	`"model":"tollgate-mock","choices":[{"index":0,"message":{"role":"assistant","content":"Mock answer from tollgate-mock: ` +
	`Write one sentence about the sea, please."},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":27,"completion_tokens":13,"total_tokens":40},"system_fingerprint":"fp_tollgate_mock"}`)

// benchLongAnswer is a chat answer with 2 KB of text, escapes (new lines,
// quotes) included, as a model's answer often is.
var benchLongAnswer = func() []byte {
	para := `The sea keeps every secret the shore forgets, and gives back only salt and light.\n\n` +
		`Sailors call it \"the long road\" (it has no milestones).\n`
	text := strings.Repeat(para, 14)
	return []byte(`{"id":"chatcmpl-Q2ZKXB7LJ4C5GQ6ZT3W7N2HMUA","object":"chat.completion","created":1735689600,` +
		`"model":"tollgate-mock","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `"},` +
		`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":27,"completion_tokens":480,"total_tokens":507},` +
		`"system_fingerprint":"fp_tollgate_mock"}`)
}()

// BenchmarkMeterAnswerJSON is the meter's work on a held chat answer, as
// settle does it less the store: read its usage, then send it with the
// bill added and the identity rewritten.
func BenchmarkMeterAnswerJSON(b *testing.B) {
	route := &upstream.Route{Model: &catalog.Model{ID: "tollgate-mock"}, Provider: &catalog.Provider{Name: "mock"}}
	pricing := billing.Pricing{Prompt: 1_000_000_000, Completion: 2_000_000_000}
	for _, c := range []struct {
		name string
		body []byte
	}{{"bench", benchJSONAnswer}, {"mock", benchMockAnswer}, {"long", benchLongAnswer}} {
		b.Run(c.name, func(b *testing.B) {
			client := &discardClient{h: http.Header{"Content-Type": {"application/json"}}}
			b.ReportAllocs()
			for b.Loop() {
				mw := NewWriter(client, "chat")
				mw.RewriteIdentity("gen-01JDX4Q3ZK8V7W2N5M6P9R0S1T", route)
				mw.WriteHeader(http.StatusOK)
				_, _ = mw.Write(c.body)
				if !mw.UsableJSON() {
					b.Fatal("not usable")
				}
				u := billing.Usage{PromptTokens: mw.Usage.Prompt, CompletionTokens: mw.Usage.Completion}
				cost, _ := billing.Cost(pricing, u)
				bill := NewUsageBill(cost, pricing, u, false)
				mw.Bill = &bill
				_ = mw.SendJSON(cost, "gen-01JDX4Q3ZK8V7W2N5M6P9R0S1T")
			}
		})
	}
}
