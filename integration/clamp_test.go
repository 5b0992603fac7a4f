package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// bodyTap records the bodies of the generation requests reaching the mock.
type bodyTap struct {
	mu     sync.Mutex
	bodies []string
	addr   string
}

func newBodyTap(t *testing.T) *bodyTap {
	tap := &bodyTap{}
	srv := startTap(t, mockAddr, func(_ string, b []byte) {
		tap.mu.Lock()
		tap.bodies = append(tap.bodies, string(b))
		tap.mu.Unlock()
	}, nil)
	tap.addr = strings.TrimPrefix(srv.URL, "http://")
	return tap
}

// take returns the bodies recorded since the last call.
func (tap *bodyTap) take() []string {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	b := tap.bodies
	tap.bodies = nil
	return b
}

// last is the one body recorded since the last take.
func (tap *bodyTap) last(t *testing.T) gjson.Result {
	t.Helper()
	b := tap.take()
	if len(b) != 1 {
		t.Fatalf("%d upstream requests, want 1", len(b))
	}
	return gjson.Parse(b[0])
}

// through sends every catalog model's traffic through the tap.
func (tap *bodyTap) through(cfg string) string {
	return strings.ReplaceAll(cfg, "provider mock http://"+mockAddr+"/v1", "provider mock http://"+tap.addr+"/v1")
}

// tollgate-mock's context window, and what it holds for a request without
// max_tokens: the prompt bound and the rest of the window.
const mockContext = 8192

func fullHold(body string) money.Amount { return holdOf(body, mockContext-promptBound(body)) }

// affordable is the most output tokens room pays for after body's prompt.
func affordable(body string, room money.Amount) int64 {
	return int64((room - tokenCost(promptBound(body), 0)) / completionPrice)
}

// A key limit below a request's full estimate: requests without an output
// limit are served with the limit the key affords (and end with
// finish_reason "length" when the answer reaches it), in each dialect; a
// client's own max_tokens that does not fit is refused with the numbers.
func TestOutputClampKeyLimit(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, tap.through)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")

	t.Run("limit 0.01", func(t *testing.T) {
		body := chatBody("tollgate-mock", "")
		key, _ := c.newKey(org.MgmtKey, `{"name":"small","limit":0.01}`)
		before := c.snapshot(key, org.MgmtKey)
		if *before.remaining != 10_000_000 || fullHold(body) <= 10_000_000 {
			t.Fatalf("limit_remaining %s, full hold %s", *before.remaining, fullHold(body))
		}
		r := c.mustPost("/chat/completions", key, body, nil).expect(t, 200)
		if got, want := tap.last(t).Get("max_tokens").Int(), affordable(body, 10_000_000); got != want {
			t.Fatalf("upstream max_tokens %d, want %d", got, want)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), creditAmount(t, r.JSON.Get("usage.cost")), "clamped")
		// The client's own max_tokens is the client's: refused, with numbers.
		refusal := c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":8000`), nil)
		expect402(t, refusal, "service_key_limit", "", false)
		left := 10_000_000 - creditAmount(t, r.JSON.Get("usage.cost"))
		want := fmt.Sprintf("This request requires more credits, or fewer max_tokens. You requested up to 8000 tokens, but can only afford %d",
			affordable(chatBody("tollgate-mock", `,"max_tokens":8000`), left))
		if msg := refusal.JSON.Get("error.message").Str; msg != want {
			t.Fatalf("message %q, want %q", msg, want)
		}
		if b := tap.take(); len(b) != 0 {
			t.Fatalf("a refused request reached the provider: %v", b)
		}
	})

	// An answer longer than the fitted limit is cut there.
	words := strings.TrimSpace(strings.Repeat("word ", 40))
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"chat", "/chat/completions", `{"model":"tollgate-mock","messages":[{"role":"user","content":"` + words + `"}]}`, "max_tokens"},
		{"chat streamed", "/chat/completions", `{"model":"tollgate-mock","stream":true,"messages":[{"role":"user","content":"` + words + `"}]}`, "max_tokens"},
		{"responses", "/responses", `{"model":"tollgate-mock","input":"` + words + `"}`, "max_output_tokens"},
		{"responses streamed", "/responses", `{"model":"tollgate-mock","stream":true,"input":"` + words + `"}`, "max_output_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := holdOf(tc.body, 20) // fits 20 output tokens exactly
			key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"twenty","limit":%s}`, limit))
			before := c.snapshot(key, org.MgmtKey)
			r := c.mustPost(tc.path, key, tc.body, nil).expect(t, 200)
			if got := tap.last(t).Get(tc.field); got.Raw != "20" {
				t.Fatalf("upstream %s = %s", tc.field, got.Raw)
			}
			var cost money.Amount
			switch tc.name {
			case "chat":
				if fr := r.JSON.Get("choices.0.finish_reason").Str; fr != "length" || r.JSON.Get("usage.completion_tokens").Int() != 20 {
					t.Fatalf("finish_reason %q: %s", fr, r.Body)
				}
				cost = creditAmount(t, r.JSON.Get("usage.cost"))
			case "responses":
				if r.JSON.Get("status").Str != "incomplete" || r.JSON.Get("incomplete_details.reason").Str != "max_output_tokens" ||
					r.JSON.Get("usage.output_tokens").Int() != 20 {
					t.Fatalf("answer: %s", r.Body)
				}
				cost = creditAmount(t, r.JSON.Get("usage.cost"))
			case "chat streamed":
				if !strings.Contains(string(r.Body), `"finish_reason":"length"`) {
					t.Fatalf("stream: %s", r.Body)
				}
			case "responses streamed":
				if !strings.Contains(string(r.Body), `"reason":"max_output_tokens"`) {
					t.Fatalf("stream: %s", r.Body)
				}
			}
			after := c.snapshot(key, org.MgmtKey)
			if tc.name == "chat" || tc.name == "responses" {
				expectCharged(t, before, after, cost, tc.name)
			}
			if after.usage > limit || after.usage == 0 {
				t.Fatalf("usage %s, limit %s", after.usage, limit)
			}
		})
	}

	t.Run("prompt and a minimal completion do not fit", func(t *testing.T) {
		body := chatBody("tollgate-mock", "")
		key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"tiny","limit":%s}`, holdOf(body, 15)))
		r := c.mustPost("/chat/completions", key, body, nil)
		expect402(t, r, "service_key_limit", "", false)
		if msg := r.JSON.Get("error.message").Str; !strings.HasPrefix(msg, "This request requires more credits, or a shorter prompt.") ||
			!strings.Contains(msg, "a minimal completion of 16 tokens") {
			t.Fatalf("message %q", msg)
		}
		if b := tap.take(); len(b) != 0 {
			t.Fatal("a refused request reached the provider")
		}
	})
}

// 200 requests without max_tokens at once on a cap that fits three and a
// half of their full holds: three are served as sent, one is fitted to
// the half left, the others are refused; together they never pass the
// cap, and once they are settled a request that fits is admitted.
func TestOutputClampConcurrent(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, tap.through)
	c := newClient(t, gatewayAddr, adminAddr)
	const n = 200
	body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"one of many concurrent requests"}]}`
	full := fullHold(body)
	cap := 3*full + full/2

	check := func(t *testing.T, keys []string, source string, usage func() money.Amount) {
		t.Helper()
		tap.take()
		charged := burst(t, c, keys, n, 4, body, source)
		var fitted []int64
		for _, b := range tap.take() {
			if v := gjson.Get(b, "max_tokens"); v.Exists() {
				fitted = append(fitted, v.Int())
			}
		}
		if len(fitted) != 1 || fitted[0] != affordable(body, cap-3*full) {
			t.Fatalf("fitted limits %v, want one of %d", fitted, affordable(body, cap-3*full))
		}
		if u := usage(); u != charged || charged > cap {
			t.Fatalf("usage %s, sum of answers %s, cap %s", u, charged, cap)
		}
		// Settled: the holds are gone, the small charges leave room.
		c.mustPost("/chat/completions", keys[0], body, nil).expect(t, 200)
	}

	t.Run("key limit", func(t *testing.T) {
		org := c.newTenant("organization", "1000")
		key, hash := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"few","limit":%s}`, cap))
		check(t, []string{key}, "service_key_limit", func() money.Amount {
			return creditAmount(t, c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data.usage"))
		})
	})
	t.Run("workspace budget", func(t *testing.T) {
		org := c.newOrg("1000")
		c.api("POST", "/workspaces", org.Mgmt, `{"name":"Capped","slug":"capped"}`).expect(t, 201)
		k1, h1 := c.newKey(org.Mgmt, `{"name":"one","workspace_id":"capped"}`)
		k2, h2 := c.newKey(org.Mgmt, `{"name":"two","workspace_id":"capped"}`)
		c.api("PUT", "/workspaces/capped/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, cap)).expect(t, 200)
		check(t, []string{k1, k2}, "service_workspace_budget", func() money.Amount {
			var u money.Amount
			for _, h := range []string{h1, h2} {
				u += creditAmount(t, c.api("GET", "/keys/"+h+"?workspace_id=capped", org.Mgmt, nil).expect(t, 200).JSON.Get("data.usage_daily"))
			}
			return u
		})
	})
}
