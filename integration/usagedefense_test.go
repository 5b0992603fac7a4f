package integration

// A provider's usage report the gateway cannot defend: counts above the
// bounds it sent, negative, or not numbers. The charge stays within the
// gateway's own bounds, so that no cap is exceeded because of a report,
// a report of nothing for an answer does not make it free, and each
// correction is counted as a provider anomaly.

import (
	"fmt"
	"testing"

	"github.com/tidwall/gjson"
)

func TestUsageReportsAreBounded(t *testing.T) {
	models := []string{"mock-usage-over", "mock-usage-negative", "mock-usage-nonnumeric", "mock-usage-zero"}
	startInProcessWith(t, withMockModels(t, models...))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "100")
	metricsURL := "http://" + adminAddr + "/metrics"

	const maxTokens = 40
	for _, model := range models {
		for _, route := range []string{"chat", "responses"} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/stream=%v", model, route, stream)
				t.Run(name, func(t *testing.T) {
					path, body := "/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":%d,"messages":[{"role":"user","content":"report usage"}]}`, model, stream, maxTokens)
					if route == "responses" {
						path, body = "/responses", fmt.Sprintf(`{"model":%q,"stream":%v,"max_output_tokens":%d,"input":"report usage"}`, model, stream, maxTokens)
					}
					// The key's limit is exactly the request's hold: a report
					// above it must not push the key past its limit.
					key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":%q,"limit":%s}`, name, holdOf(body, maxTokens)))
					before, mBefore := c.snapshot(key, org.MgmtKey), scrapeMetrics(t, metricsURL)
					var text string
					var g servedGeneration
					var answerUsage gjson.Result
					if stream {
						res, err := c.send(path, key, body, nil)
						if err != nil {
							t.Fatal(err)
						}
						evs, err := readStream(res.Body)
						res.Body.Close()
						if err != nil || res.StatusCode != 200 {
							t.Fatalf("status %d, %v", res.StatusCode, err)
						}
						ps := parseStream(t, evs)
						text, answerUsage = ps.text, ps.usage
						g = c.generationOf(t, key, res.Header)
					} else {
						r := c.mustPost(path, key, body, nil).expect(t, 200)
						text, answerUsage = r.JSON.Get("choices.0.message.content").Str, r.JSON.Get("usage")
						if route == "responses" {
							text = r.JSON.Get("output.0.content.0.text").Str
						}
						g = c.generationOf(t, key, r.Header)
					}
					after := c.snapshot(key, org.MgmtKey)
					if text == "" {
						t.Fatal("no answer text")
					}
					var wantPrompt, wantCompletion int64
					var anomalies []string
					switch model {
					case "mock-usage-over":
						// The prompt bound admission held, the output limit sent.
						wantPrompt, wantCompletion = promptBound(body), maxTokens
						anomalies = []string{"prompt_above_bound", "completion_above_limit"}
					case "mock-usage-zero":
						// Below what was visibly sent and produced: not free,
						// but charged the estimates.
						wantPrompt, wantCompletion = promptEstimate(body), textEstimate(len(text))
						anomalies = []string{"prompt_below_visible", "completion_below_visible"}
					default:
						// Replaced by the estimates of an answer without usage.
						wantPrompt, wantCompletion = promptEstimate(body), textEstimate(len(text))
						anomalies = []string{"prompt_invalid", "completion_invalid"}
					}
					if g.prompt != wantPrompt || g.completion != wantCompletion {
						t.Fatalf("charged %d prompt and %d completion tokens, want %d and %d", g.prompt, g.completion, wantPrompt, wantCompletion)
					}
					if want := tokenCost(wantPrompt, wantCompletion); g.cost != want {
						t.Fatalf("cost %s, want %s", g.cost, want)
					}
					expectCharged(t, before, after, g.cost, name)
					// A chat answer reports the usage charged, and its cost.
					if route == "chat" && (answerUsage.Get("prompt_tokens").Int() != wantPrompt ||
						answerUsage.Get("completion_tokens").Int() != wantCompletion || creditAmount(t, answerUsage.Get("cost")) != g.cost) {
						t.Fatalf("the answer's usage %s, want %d prompt and %d completion tokens costing %s", answerUsage.Raw, wantPrompt, wantCompletion, g.cost)
					}
					if after.usage > *after.limit {
						t.Fatalf("usage %s above the key's limit %s", after.usage, *after.limit)
					}
					mAfter := scrapeMetrics(t, metricsURL)
					for _, a := range anomalies {
						expectDelta(t, mBefore, mAfter, 1, "tollgate_provider_usage_anomalies_total", "provider", "mock", "anomaly", a)
					}
				})
			}
		}
	}
}
