package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// msgAfford is the refusal of a request whose max_tokens does not fit in
// room, on model "m".
func msgAfford(body string, requested int64, room money.Amount) string {
	n := billing.AffordableOutput(billing.RequestFacts{Pricing: testgw.Pricing, InputTokens: int64(len(body)) + prompt.PromptOverheadTokens}, room)
	return fmt.Sprintf("This request requires more credits, or fewer max_tokens. You requested up to %d tokens, but can only afford %d", requested, max(n, 0))
}

// promptCost is what model "m" costs for body's prompt bound and out
// output tokens.
func promptCost(body string, out int64) money.Amount {
	c, err := billing.TokenCost(testgw.Pricing, int64(len(body))+prompt.PromptOverheadTokens, out)
	if err != nil {
		panic(err)
	}
	return c
}

// A key limit below a request's full estimate: the request without
// max_tokens is sent with the output limit the limit affords, in its
// dialect's field, and held for that.
func TestMeterClampsOutputToKeyLimit(t *testing.T) {
	for _, tc := range []struct {
		path, body, field, answer string
	}{
		{"/api/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`, "max_tokens", chatAnswer("x", "length", 20, 50)},
		{"/api/v1/responses", `{"model":"m","input":"Say hello"}`, "max_output_tokens", responsesAnswer(20, 50)},
	} {
		t.Run(tc.field, func(t *testing.T) {
			limit := promptCost(tc.body, 50)
			f := newMeterFixture(t, "10", storage.NewAPIKey{Limit: &limit})
			var held money.Amount
			f.provider = func(w http.ResponseWriter, r *http.Request) error {
				held = f.ledger(t).KeyHeld
				return answerJSON(200, tc.answer)(w, r)
			}
			f.do(t, tc.path, tc.body).Must(t, 200)
			if got := gjson.Get(f.bodies[0], tc.field); got.Raw != "50" {
				t.Fatalf("upstream %s = %s: %s", tc.field, got.Raw, f.bodies[0])
			}
			if held != limit {
				t.Errorf("held %s, want the limit %s", held, limit)
			}
			f.wantCharged(t, testCost(billing.Usage{PromptTokens: 20, CompletionTokens: 50}))
		})
	}
	t.Run("with max_tokens: refused with the numbers", func(t *testing.T) {
		limit := promptCost(chatBody, 50)
		f := newMeterFixture(t, "10", storage.NewAPIKey{Limit: &limit})
		f.want402(t, f.do(t, "/api/v1/chat/completions", chatBody), msgAfford(chatBody, 100, limit), keyLimitMeta("Raise the key's limit."))
	})
	t.Run("prompt and a minimal completion do not fit", func(t *testing.T) {
		body := `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`
		limit := promptCost(body, billing.MinCompletionTokens) - 1
		f := newMeterFixture(t, "10", storage.NewAPIKey{Limit: &limit})
		res := f.do(t, "/api/v1/chat/completions", body)
		if msg := gjson.Get(res.Body, "error.message").Str; res.Status != 402 ||
			!strings.HasPrefix(msg, "This request requires more credits, or a shorter prompt.") {
			t.Fatalf("%d %s", res.Status, res.Body)
		}
		limit++
		f = newMeterFixture(t, "10", storage.NewAPIKey{Limit: &limit})
		f.provider = answerJSON(200, chatAnswer("x", "length", 1, 16))
		f.do(t, "/api/v1/chat/completions", body).Must(t, 200)
		if got := gjson.Get(f.bodies[0], "max_tokens").Int(); got != billing.MinCompletionTokens {
			t.Fatalf("max_tokens %d", got)
		}
	})
	t.Run("a limit that covers the estimate changes nothing", func(t *testing.T) {
		body := `{"model":"m","messages":[{"role":"user","content":"Say hello"}]}`
		limit := money.Amount(money.AmountScale)
		f := newMeterFixture(t, "10", storage.NewAPIKey{Limit: &limit})
		f.provider = answerJSON(200, chatAnswer("x", "stop", 1, 1))
		f.do(t, "/api/v1/chat/completions", body).Must(t, 200)
		if f.bodies[0] != forUpstream(body) {
			t.Fatalf("upstream body %s", f.bodies[0])
		}
	})
}

func responsesAnswer(prompt, completion int64) string {
	return fmt.Sprintf(`{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"model":"m-upstream",`+
		`"output":[{"type":"message","id":"msg_1","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[]}]}],`+
		`"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}`, prompt, completion, prompt+completion)
}
