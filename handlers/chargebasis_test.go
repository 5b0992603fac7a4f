package handlers

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/metering"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// observeMeter makes the fixture's meter log to an observer.
func observeMeter(f *meterFixture) *observer.ObservedLogs {
	core, logs := observer.New(zap.DebugLevel)
	*f.meter = metering.New(f.gw, zap.New(core))
	return logs
}

// promptBoundOf is admission's prompt bound of a body (no media, no tools).
func promptBoundOf(body string) int64 { return int64(len(body)) + prompt.PromptOverheadTokens }

func TestDefendUsage(t *testing.T) {
	usage := func(members string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there"},"finish_reason":"stop"}],"usage":{` + members + `}}`
	}
	// The prompt estimate is of the body the provider received: upstreamPrompt.
	estimate := billing.Usage{PromptTokens: -1, CompletionTokens: billing.EstimateTextTokens(len("Hello there"))}
	for _, tc := range []struct {
		name      string
		body      string
		answer    string
		want      billing.Usage
		anomalies []string
	}{
		{"within bounds", chatBody, usage(`"prompt_tokens":20,"completion_tokens":7`),
			billing.Usage{PromptTokens: 20, CompletionTokens: 7}, nil},
		{"above the bounds", chatBody, usage(`"prompt_tokens":1000000,"completion_tokens":1000000`),
			billing.Usage{PromptTokens: promptBoundOf(chatBody), CompletionTokens: 100}, []string{"prompt_above_bound", "completion_above_limit"}},
		{"n choices", strings.Replace(chatBody, `"max_tokens":100`, `"max_tokens":100,"n":2`, 1), usage(`"prompt_tokens":20,"completion_tokens":180`),
			billing.Usage{PromptTokens: 20, CompletionTokens: 180}, nil},
		{"above n choices", strings.Replace(chatBody, `"max_tokens":100`, `"max_tokens":100,"n":2`, 1), usage(`"prompt_tokens":20,"completion_tokens":250`),
			billing.Usage{PromptTokens: 20, CompletionTokens: 200}, []string{"completion_above_limit"}},
		{"negative", chatBody, usage(`"prompt_tokens":-3,"completion_tokens":-7`), estimate, []string{"prompt_invalid", "completion_invalid"}},
		{"strings", chatBody, usage(`"prompt_tokens":"20","completion_tokens":"many"`), estimate, []string{"prompt_invalid", "completion_invalid"}},
		{"missing", chatBody, usage(`"total_tokens":9`), estimate, []string{"prompt_invalid", "completion_invalid"}},
		{"negative cache", chatBody, usage(`"prompt_tokens":20,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":-5}`),
			billing.Usage{PromptTokens: 20, CompletionTokens: 7}, []string{"cache_invalid"}},
		{"cache above the prompt", chatBody, usage(`"prompt_tokens":20,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":50}`),
			billing.Usage{PromptTokens: 20, CompletionTokens: 7, CacheReadTokens: 20}, []string{"cache_invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newMeterFixture(t, "1", storage.NewAPIKey{})
			logs := observeMeter(f)
			f.provider = answerJSON(200, tc.answer)
			res := f.do(t, "/api/v1/chat/completions", tc.body)
			res.Must(t, 200)
			if tc.want.PromptTokens == -1 {
				tc.want.PromptTokens = f.upstreamPrompt(t)
			}
			f.wantCharged(t, testCost(tc.want))
			// The answer reports the usage charged.
			if u := res.JSON.Get("usage"); u.Get("prompt_tokens").Int() != tc.want.PromptTokens ||
				u.Get("completion_tokens").Int() != tc.want.CompletionTokens || u.Get("cost").Type != gjson.Number {
				t.Errorf("answer usage %s, want %+v", u.Raw, tc.want)
			}
			var got []string
			for _, e := range logs.FilterMessage("provider usage anomaly; charged the gateway's bound").All() {
				got = append(got, e.ContextMap()["anomaly"].(string))
				if e.Level != zap.WarnLevel {
					t.Errorf("logged at %v", e.Level)
				}
				for _, secret := range []string{f.key, "Say hello", "Hello there"} {
					for k, v := range e.ContextMap() {
						if s, ok := v.(string); ok && strings.Contains(s, secret) {
							t.Errorf("the anomaly's %s holds %q", k, secret)
						}
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.anomalies, ",") {
				t.Errorf("anomalies %v, want %v", got, tc.anomalies)
			}
		})
	}
}

// TestEstimateWithoutUsage: a stream without usage is charged its prompt
// and all its output, of any kind; one without output is not.
func TestEstimateWithoutUsage(t *testing.T) {
	body := strings.Replace(chatBody, `"max_tokens":100`, `"max_tokens":100,"stream":true`, 1)
	const prompt = -1 // upstreamPrompt
	for _, tc := range []struct {
		name   string
		events []string
		want   billing.Usage // zero: not charged
	}{
		{"tool call cut", []string{
			`data: {"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]}}]}` + "\n\n",
			`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}}]}` + "\n\n",
		}, billing.Usage{PromptTokens: prompt, CompletionTokens: billing.EstimateTextTokens(len("get") + len(`{"city":"Paris"}`))}},
		{"reasoning and refusal ended without usage", []string{
			`data: {"choices":[{"index":0,"delta":{"reasoning":"let me think"}}]}` + "\n\n",
			`data: {"choices":[{"index":0,"delta":{"refusal":"I cannot"},"finish_reason":"stop"}]}` + "\n\n",
			"data: [DONE]\n\n",
		}, billing.Usage{PromptTokens: prompt, CompletionTokens: billing.EstimateTextTokens(len("let me think") + len("I cannot"))}},
		{"empty", []string{
			`data: {"choices":[]}` + "\n\n",
			"data: [DONE]\n\n",
		}, billing.Usage{}},
		{"cut before output", []string{
			`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}` + "\n\n",
		}, billing.Usage{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newMeterFixture(t, "1", storage.NewAPIKey{})
			f.provider = answerSSE(tc.events...)
			res := f.do(t, "/api/v1/chat/completions", body)
			if tc.want == (billing.Usage{}) {
				f.wantNothingCharged(t)
				if !strings.Contains(res.Body, `"code":502`) {
					t.Errorf("no 502 error event: %s", res.Body)
				}
				return
			}
			tc.want.PromptTokens = f.upstreamPrompt(t)
			f.wantCharged(t, testCost(tc.want))
		})
	}
}

// upstreamPrompt is the prompt estimate of the body the provider received:
// a token per three bytes.
func (f *meterFixture) upstreamPrompt(t *testing.T) int64 {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) != 1 {
		t.Fatalf("%d upstream calls", len(f.bodies))
	}
	return (int64(len(f.bodies[0])) + 2) / 3
}
