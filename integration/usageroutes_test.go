package integration

// One charge for one answer, whatever the route: the usage a provider
// reported is charged on the Messages and Responses routes translated to a
// chat provider as on chat completions, even when the stream broke after
// the report; and a report of nothing for an answer with output is an
// anomaly charged the gateway's estimate, on every route.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The usage the break-after-usage provider reports, and its answer.
const (
	reportedPrompt     = 37
	reportedCompletion = 21
	reportedText       = "Hello there friend"
)

// usageReportingUpstream is a chat-only provider whose streams send the
// answer, its finish, then its usage: for a model containing "break"
// (reportedPrompt and reportedCompletion), the connection is cut right
// after the usage, before [DONE]; for one containing "zero" the usage is
// 0 and 0 and the stream ends cleanly. A request that is not a stream gets
// the answer whole, with that usage.
func usageReportingUpstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		model := gjson.GetBytes(body, "model").Str
		p, c := reportedPrompt, reportedCompletion
		if strings.Contains(model, "zero") {
			p, c = 0, 0
		}
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, p, c, p+c)
		if !gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"chatcmpl-u","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":%s}`,
				model, reportedText, usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish, extra string) {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-u\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]%s}\n\n", model, delta, finish, extra)
		}
		chunk(`{"role":"assistant","content":""}`, "null", "")
		for _, word := range strings.SplitAfter(reportedText, " ") {
			chunk(fmt.Sprintf(`{"content":%q}`, word), "null", "")
		}
		chunk(`{}`, `"stop"`, "")
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-u\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":%s}\n\n", model, usage)
		_ = http.NewResponseController(w).Flush()
		if strings.Contains(model, "break") {
			panic(http.ErrAbortHandler) // cut: the usage came, [DONE] never does
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// routeBody is a request of route to model; prompt is the user's text.
func routeBody(route, model, prompt string, stream bool) (path, body string) {
	switch route {
	case "responses":
		return "/responses", fmt.Sprintf(`{"model":%q,"stream":%t,"max_output_tokens":100,"input":%q}`, model, stream, prompt)
	case "messages":
		return "/messages", fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":100,"messages":[{"role":"user","content":%q}]}`, model, stream, prompt)
	}
	return "/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":100,"messages":[{"role":"user","content":%q}]}`, model, stream, prompt)
}

func TestReportedUsageChargedOnEveryRoute(t *testing.T) {
	up := "http://" + usageReportingUpstream(t) + "/v1"
	// A provider that speaks chat completions only: the Responses and
	// Messages routes reach it translated.
	chatOnly := func(id, upstream string) string {
		return strings.Replace(modelBlock(id, "0.000001", "0.000002", testProvider{name: "chatonly", baseURL: up, model: upstream, apiKey: "sk-usage-routes-key"}),
			"\t\t\t\tmodel "+upstream+"\n", "\t\t\t\tmodel "+upstream+"\n\t\t\t\tapi chat\n", 1)
	}
	startInProcessWith(t, withModels(t, chatOnly("usage/break", "usage-break"), chatOnly("usage/zero", "usage-zero")))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"usage routes"}`)
	metricsURL := "http://" + adminAddr + "/metrics"
	// Long enough that the gateway's estimate is far from the report.
	prompt := strings.Repeat("a prompt long enough to tell an estimate from a report; ", 6)

	for _, route := range []string{"chat", "responses", "messages"} {
		t.Run("break after usage/"+route, func(t *testing.T) {
			path, body := routeBody(route, "usage/break", prompt, true)
			before := c.snapshot(key, org.MgmtKey)
			res, err := c.send(path, key, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := readStream(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("status %d, %v", res.StatusCode, err)
			}
			var text strings.Builder
			for _, ev := range evs {
				text.WriteString(deltaText(ev))
				if ev.Event == "content_block_delta" {
					text.WriteString(gjson.Get(ev.Data, "delta.text").Str)
				}
			}
			if text.String() != reportedText {
				t.Fatalf("text %q, want %q (events %v)", text.String(), reportedText, evs)
			}
			g := c.generationOf(t, key, res.Header)
			if g.prompt != reportedPrompt || g.completion != reportedCompletion {
				t.Fatalf("charged %d prompt and %d completion tokens, want the reported %d and %d", g.prompt, g.completion, reportedPrompt, reportedCompletion)
			}
			want := tokenCost(reportedPrompt, reportedCompletion)
			if g.cost != want {
				t.Fatalf("cost %s, want %s", g.cost, want)
			}
			expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, route)
		})
	}

	for _, route := range []string{"chat", "responses", "messages"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("zero usage/%s/stream=%v", route, stream), func(t *testing.T) {
				path, body := routeBody(route, "usage/zero", prompt, stream)
				before, mBefore := c.snapshot(key, org.MgmtKey), scrapeMetrics(t, metricsURL)
				res, err := c.send(path, key, body, nil)
				if err != nil {
					t.Fatal(err)
				}
				raw, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					t.Fatalf("status %d: %s", res.StatusCode, raw)
				}
				g := c.generationOf(t, key, res.Header)
				// The prompt's estimate is at least one token per three bytes
				// of the user's text; the answer's, one per four bytes of it.
				if g.prompt < int64(len(prompt))/3 || g.completion != textEstimate(len(reportedText)) {
					t.Fatalf("charged %d prompt and %d completion tokens for a report of 0 and 0, want at least %d and %d",
						g.prompt, g.completion, len(prompt)/3, textEstimate(len(reportedText)))
				}
				if want := tokenCost(g.prompt, g.completion); g.cost != want || want == 0 {
					t.Fatalf("cost %s, want %s", g.cost, want)
				}
				expectCharged(t, before, c.snapshot(key, org.MgmtKey), g.cost, route)
				mAfter := scrapeMetrics(t, metricsURL)
				for _, a := range []string{"prompt_below_visible", "completion_below_visible"} {
					expectDelta(t, mBefore, mAfter, 1, "tollgate_provider_usage_anomalies_total", "provider", "chatonly", "anomaly", a)
				}
			})
		}
	}
}
