package integration

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// meterCase is one inference request and what the mock must report for it
// (one token per word; prompt: words + 4 per message).
type meterCase struct {
	name           string
	path, body     string
	stream         bool
	responses      bool
	prompt, answer string // the user text, and the mock's answer text
	free           bool
	finish         string // chat finish_reason / Responses status expected
}

func words(s string) int64 { return int64(len(strings.Fields(s))) }

// runMetered sends the case and returns the cost the answer states, after
// checking tokens, the cost arithmetic, the text and X-Generation-Id.
func runMetered(t *testing.T, c *client, key string, tc meterCase) (money.Amount, string) {
	t.Helper()
	res, err := c.send(tc.path, key, tc.body, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s: status %d: %s", tc.name, res.StatusCode, b)
	}
	genID := res.Header.Get("X-Generation-Id")
	if genID == "" {
		t.Fatalf("%s: no X-Generation-Id header", tc.name)
	}
	var usage gjson.Result
	var text, finish string
	if tc.stream {
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("%s: Content-Type %q", tc.name, ct)
		}
		evs, err := readStream(res.Body)
		if err != nil {
			t.Fatalf("%s: reading stream: %v", tc.name, err)
		}
		s := parseStream(t, evs)
		if !s.done {
			t.Fatalf("%s: stream did not end with [DONE]", tc.name)
		}
		usage, text = s.usage, s.text
		if tc.responses {
			finish = strings.TrimPrefix(s.finalEvent, "response.")
		} else {
			for _, ev := range evs {
				if f := gjson.Get(ev.Data, "choices.0.finish_reason").Str; f != "" {
					finish = f
				}
			}
		}
	} else {
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		j := gjson.ParseBytes(b)
		usage = j.Get("usage")
		if tc.responses {
			text, finish = j.Get("output.0.content.0.text").Str, j.Get("status").Str
		} else {
			text, finish = j.Get("choices.0.message.content").Str, j.Get("choices.0.finish_reason").Str
		}
	}
	if !usage.IsObject() {
		t.Fatalf("%s: no usage in the answer", tc.name)
	}
	pField, cField := "prompt_tokens", "completion_tokens"
	if tc.responses {
		pField, cField = "input_tokens", "output_tokens"
	}
	p, cmp := usage.Get(pField).Int(), usage.Get(cField).Int()
	if p != words(tc.prompt)+4 || cmp != words(tc.answer) {
		t.Fatalf("%s: usage %s, want %d prompt and %d completion tokens", tc.name, usage.Raw, words(tc.prompt)+4, words(tc.answer))
	}
	if text != tc.answer || finish != tc.finish {
		t.Fatalf("%s: answer %q (%s), want %q (%s)", tc.name, text, finish, tc.answer, tc.finish)
	}
	cost := creditAmount(t, usage.Get("cost"))
	want := tokenCost(p, cmp)
	if tc.free {
		want = 0
	}
	if cost != want {
		t.Fatalf("%s: usage.cost %s, want %d×0.000001 + %d×0.000002 = %s", tc.name, cost, p, cmp, want)
	}
	return cost, genID
}

// Plain and streamed Chat Completions and Responses requests are charged
// exactly what the provider's usage costs at the catalog prices, to the key
// (all periods, limit_remaining) and the account; the answer states the
// cost; the free model costs nothing.
func TestMeteringChargesExactly(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"metered","limit":5}`)

	chat := func(model, text string, stream bool, extra string) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t%s,"messages":[{"role":"user","content":%q}]}`, model, stream, extra, text)
	}
	resp := func(model, text string, stream bool, extra string) string {
		return fmt.Sprintf(`{"model":%q,"stream":%t%s,"input":%q}`, model, stream, extra, text)
	}
	const q = "hello metering world, how much does this cost"
	const longQ = q + ", and what would a few more words add to it"
	ans := "Mock answer from tollgate-mock: " + q
	cases := []meterCase{
		{name: "plain chat", path: "/chat/completions", body: chat("tollgate-mock", q, false, ""), prompt: q, answer: ans, finish: "stop"},
		{name: "streamed chat", path: "/chat/completions", body: chat("tollgate-mock", q, true, ""), stream: true, prompt: q, answer: ans, finish: "stop"},
		{name: "plain responses", path: "/responses", body: resp("tollgate-mock", q, false, ""), responses: true, prompt: q, answer: ans, finish: "completed"},
		{name: "streamed responses", path: "/responses", body: resp("tollgate-mock", q, true, ""), stream: true, responses: true, prompt: q, answer: ans, finish: "completed"},
		{name: "plain chat, max_tokens", path: "/chat/completions", body: chat("tollgate-mock", q, false, `,"max_tokens":3`),
			prompt: q, answer: "Mock answer from", finish: "length"},
		// Sixteen: the least max_output_tokens OpenAI's Responses API takes.
		{name: "streamed responses, max_output_tokens", path: "/responses", body: resp("tollgate-mock", longQ, true, `,"max_output_tokens":16`),
			stream: true, responses: true, prompt: longQ, answer: "Mock answer from tollgate-mock: " + strings.Join(strings.Fields(longQ)[:12], " "), finish: "incomplete"},
		{name: "streamed chat, mock/echo", path: "/chat/completions", body: chat("mock/echo", "echo me", true, ""), stream: true,
			prompt: "echo me", answer: "Mock answer from mock/echo: echo me", finish: "stop"},
		{name: "plain chat, free", path: "/chat/completions", body: chat("tollgate-mock:free", q, false, ""), prompt: q, answer: ans, free: true, finish: "stop"},
		{name: "streamed chat, free", path: "/chat/completions", body: chat("tollgate-mock:free", q, true, ""), stream: true, prompt: q, answer: ans, free: true, finish: "stop"},
		{name: "streamed responses, free", path: "/responses", body: resp("tollgate-mock:free", q, true, ""), stream: true, responses: true, prompt: q, answer: ans, free: true, finish: "completed"},
	}
	start := c.snapshot(key, org.MgmtKey)
	if start.usage != 0 || start.totalUsage != 0 || *start.remaining != 5*money.AmountScale {
		t.Fatalf("fresh key: usage %s, remaining %s, account usage %s", start.usage, *start.remaining, start.totalUsage)
	}
	before := start
	var total money.Amount
	ids := map[string]bool{}
	for _, tc := range cases {
		cost, id := runMetered(t, c, key, tc)
		if ids[id] {
			t.Fatalf("%s: X-Generation-Id %s reused", tc.name, id)
		}
		ids[id] = true
		after := c.snapshot(key, org.MgmtKey)
		expectCharged(t, before, after, cost, tc.name)
		if !tc.free && cost == 0 {
			t.Fatalf("%s: a paid model charged 0", tc.name)
		}
		total += cost
		before = after
	}
	if before.usage != total || before.totalUsage != total || *before.remaining != 5*money.AmountScale-total {
		t.Fatalf("after all: usage %s, account usage %s, remaining %s; sum of answers %s", before.usage, before.totalUsage, *before.remaining, total)
	}
}

// longPrompt is a user text of n distinct words.
func longPrompt(n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("word%d", i)
	}
	return strings.Join(w, " ")
}

// A client that closes a stream midway is charged the abort rule: the
// prompt at the admission estimate (request body bytes / 3, rounded up) and
// the completion at the delivered text's bytes / 4, rounded up. The gateway
// counts the text it wrote to the client, which can be a few events more
// than the client read before closing (they were in flight or in buffers),
// so the completion part is bounded below by the text read and above by the
// whole answer; the prompt part is exactly the estimate (the mock's own
// prompt count is far lower and would break the bounds). The hold is
// released: a request needing the rest of the key's limit passes.
func TestMeteringClientAbortMidStream(t *testing.T) {
	startInProcessWith(t, withChunkDelay(t, "40ms"))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")

	for _, kind := range []string{"chat", "responses"} {
		t.Run(kind, func(t *testing.T) {
			c := newClient(t, gatewayAddr, adminAddr)
			prompt := longPrompt(100)
			path, body := "/chat/completions",
				fmt.Sprintf(`{"model":"tollgate-mock","stream":true,"max_tokens":500,"messages":[{"role":"user","content":%q}]}`, prompt)
			if kind == "responses" {
				path, body = "/responses", fmt.Sprintf(`{"model":"tollgate-mock","stream":true,"max_output_tokens":500,"input":%q}`, prompt)
			}
			full := "Mock answer from tollgate-mock: " + prompt
			pEst := promptEstimate(body)
			follow := `{"model":"tollgate-mock","max_tokens":10,"messages":[{"role":"user","content":"after"}]}`
			// The limit fits the aborted request's hold, and then its charge
			// (less than its hold) plus the follow-up's hold, but not a
			// leaked hold of the aborted request on top of those.
			limit := holdOf(body, 500) + holdOf(follow, 10)
			if tokenCost(pEst, textEstimate(len(full))) >= holdOf(body, 500) {
				t.Fatal("test setup: the worst charge must be below the hold")
			}
			key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"abort-%s","limit":%s}`, kind, limit))
			before := c.snapshot(key, org.MgmtKey)

			res, err := c.send(path, key, body, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 200 || res.Header.Get("X-Generation-Id") == "" {
				t.Fatalf("status %d, X-Generation-Id %q", res.StatusCode, res.Header.Get("X-Generation-Id"))
			}
			r := bufio.NewReader(res.Body)
			var read strings.Builder
			deltas := 0
			for deltas < 4 {
				ev, err := readEvent(r)
				if err != nil {
					t.Fatalf("stream ended early: %v", err)
				}
				if ev.Data == "[DONE]" {
					t.Fatal("stream finished before the abort")
				}
				if d := deltaText(ev); d != "" {
					read.WriteString(d)
					deltas++
				}
			}
			res.Body.Close() // the abort

			after := c.waitUsage(key, org.MgmtKey, before, 3*time.Second, 300*time.Millisecond)
			charged := after.usage - before.usage
			expectCharged(t, before, after, charged, "aborted stream")
			completionPart := charged - tokenCost(pEst, 0)
			lo, hi := tokenCost(0, textEstimate(read.Len())), tokenCost(0, textEstimate(len(full)))
			if completionPart%completionPrice != 0 || completionPart < lo || completionPart > hi {
				t.Fatalf("charged %s: want the prompt estimate %d tokens (%s) plus a completion of %s..%s in whole tokens (read %d bytes of %d)",
					charged, pEst, tokenCost(pEst, 0), lo, hi, read.Len(), len(full))
			}
			t.Logf("aborted after %d bytes read: charged %s = %d prompt tokens + %d completion tokens",
				read.Len(), charged, pEst, completionPart/completionPrice)

			// The hold is gone: the follow-up fits only if it is.
			r2 := c.mustPost("/chat/completions", key, follow, nil)
			r2.expect(t, 200)
			expectCharged(t, after, c.snapshot(key, org.MgmtKey), creditAmount(t, r2.JSON.Get("usage.cost")), "follow-up")
		})
	}
}

// A provider stream that breaks (no usage, no [DONE]) after some text is
// charged the same rule; the client received every event the gateway sent
// before the break, so the charge is exact. The client learns of the break
// from an error event (chat chunk with error and finish_reason
// "error"; Responses: response.failed), then [DONE].
func TestMeteringStreamBreak(t *testing.T) {
	startInProcessWith(t, withModel(t, "tollgate-mock-stream-break"))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"broken","limit":1}`)

	for _, kind := range []string{"chat", "responses"} {
		path, body := "/chat/completions",
			`{"model":"tollgate-mock-stream-break","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"break this stream please"}]}`
		if kind == "responses" {
			path, body = "/responses", `{"model":"tollgate-mock-stream-break","stream":true,"max_output_tokens":50,"input":"break this stream please"}`
		}
		before := c.snapshot(key, org.MgmtKey)
		res, err := c.send(path, key, body, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 || res.Header.Get("X-Generation-Id") == "" {
			t.Fatalf("%s: status %d, X-Generation-Id %q", kind, res.StatusCode, res.Header.Get("X-Generation-Id"))
		}
		evs, streamErr := readStream(res.Body)
		res.Body.Close()
		var text strings.Builder
		for _, ev := range evs {
			if gjson.Get(ev.Data, "usage").Exists() || gjson.Get(ev.Data, "response.usage").IsObject() {
				t.Fatalf("%s: a broken stream reported usage: %s", kind, ev.Data)
			}
			text.WriteString(deltaText(ev))
		}
		if text.String() != "Mock answer from" {
			t.Fatalf("%s: received %q before the break", kind, text.String())
		}
		after := c.waitUsage(key, org.MgmtKey, before, 3*time.Second, 200*time.Millisecond)
		want := tokenCost(promptEstimate(body), textEstimate(text.Len()))
		expectCharged(t, before, after, want, kind+" stream-break")

		// The end of the stream: an error event, then [DONE].
		n := len(evs)
		if streamErr != nil || n < 2 || evs[n-1].Data != "[DONE]" {
			t.Fatalf("%s: broken stream ended with %v (read error %v), want an error event and [DONE]", kind, evs[max(n-2, 0):], streamErr)
		}
		last := gjson.Parse(evs[n-2].Data)
		if kind == "chat" {
			if last.Get("error.code").Int() != 502 || last.Get("error.message").Str == "" ||
				last.Get("choices.0.finish_reason").Str != "error" || last.Get("object").Str != "chat.completion.chunk" ||
				last.Get("provider").Str == "" || last.Get("model").Str != "tollgate-mock-stream-break" {
				t.Fatalf("chat error event: %s", evs[n-2].Data)
			}
		} else if last.Get("type").Str != "response.failed" || last.Get("response.status").Str != "failed" {
			t.Fatalf("responses error event: %s", evs[n-2].Data)
		}
	}

	// A plain answer cut in half is unusable: the gateway's own 502,
	// nothing charged.
	before := c.snapshot(key, org.MgmtKey)
	plain := `{"model":"tollgate-mock-stream-break","max_tokens":50,"messages":[{"role":"user","content":"break this answer"}]}`
	r, err := c.post("/chat/completions", key, plain, nil)
	if err != nil {
		t.Errorf("plain stream-break: no answer from the gateway: %v", err)
	} else {
		r.expectError(t, 502, "")
	}
	expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, "plain stream-break")

	// Every hold was released: a request needing exactly the rest of the
	// key's limit passes.
	expectNoHolds(t, c, org.MgmtKey, key, hash)
}

// expectNoHolds sets the key's limit to its usage plus one small request's
// hold and checks that the request passes, which it does only when nothing
// else is held against the key.
func expectNoHolds(t *testing.T, c *client, mgmt, key, hash string) {
	t.Helper()
	follow := `{"model":"tollgate-mock","max_tokens":10,"messages":[{"role":"user","content":"anything held?"}]}`
	s := c.snapshot(key, mgmt)
	c.api("PATCH", "/keys/"+hash, mgmt, fmt.Sprintf(`{"limit":%s}`, s.usage+holdOf(follow, 10))).expect(t, 200)
	r := c.mustPost("/chat/completions", key, follow, nil)
	if r.Status != 200 {
		t.Fatalf("a request fitting the key's remaining limit exactly: status %d: %s (a hold was not released)", r.Status, r.Body)
	}
	expectCharged(t, s, c.snapshot(key, mgmt), creditAmount(t, r.JSON.Get("usage.cost")), "exact-fit request")
}
