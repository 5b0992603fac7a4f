package integration

// Helpers of the metering, limits, concurrency and crash tests: exact money
// arithmetic, config variants, SSE reading and usage snapshots.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Prices of tollgate-mock and mock/echo in nano-credits (money.Amount
// units): 0.000001 and 0.000002 credits per token.
const (
	promptPrice     money.Amount = 1_000
	completionPrice money.Amount = 2_000
)

// tokenCost is the exact cost of a request's tokens at the test prices.
func tokenCost(prompt, completion int64) money.Amount {
	return money.Amount(prompt)*promptPrice + money.Amount(completion)*completionPrice
}

// promptEstimate is the prompt tokens charged when the provider reports no
// usage: one token per three bytes of body, rounded up.
func promptEstimate(body string) int64 { return int64(len(upstreamBody(body))+2) / 3 }

// upstreamBody is a chat completion body as the provider receives it: a
// stream asks for usage (the model id aside, which the tests keep).
func upstreamBody(body string) string {
	if !gjson.Get(body, "stream").Bool() || !gjson.Get(body, "messages").Exists() ||
		gjson.Get(body, "stream_options").Exists() {
		return body
	}
	trimmed := strings.TrimRight(body, " \n")
	return trimmed[:len(trimmed)-1] + `,"stream_options":{"include_usage":true}}` + body[len(trimmed):]
}

// promptBound is the gateway's admission estimate of the prompt tokens of a
// body without media parts, tools or gateway fields: a token per byte of
// the body the provider receives, plus 64 for the request.
func promptBound(body string) int64 { return int64(len(upstreamBody(body))) + 64 }

// textEstimate is the abort rule's completion estimate: one token per four
// bytes of delivered text, rounded up.
func textEstimate(n int) int64 { return int64(n+3) / 4 }

// holdOf is what admission holds for a request with max_tokens set: the
// prompt bound and max_tokens at the token prices.
func holdOf(body string, maxTokens int64) money.Amount {
	return tokenCost(promptBound(body), maxTokens)
}

// creditAmount parses a JSON number holding credits exactly.
func creditAmount(t *testing.T, v gjson.Result) money.Amount {
	t.Helper()
	if v.Type != gjson.Number {
		t.Fatalf("amount %q is not a JSON number", v.Raw)
	}
	a, err := money.ParseAmount(v.Raw)
	if err != nil {
		t.Fatalf("amount %q: %v", v.Raw, err)
	}
	return a
}

// startInProcessWith is startInProcess with the gateway Caddyfile changed
// by edit.
func startInProcessWith(t *testing.T, edit func(cfg string) string) string {
	t.Helper()
	dir := t.TempDir()
	loadInProcess(t, edit(gatewayCaddyfile(adminAddr, dir, gatewayAddr, mockAddr, "1ms")), "caddyfile")
	return dir
}

// loadInProcess loads cfg, in the adapter's format, into the test binary's
// Caddy, and unloads it when the test ends.
func loadInProcess(t *testing.T, cfg, adapter string) {
	t.Helper()
	newTester(t).InitServer(cfg, adapter)
	// Unload the gateway (closing its database) before the data directory
	// is removed; cleanups run last-registered first.
	t.Cleanup(func() {
		res, err := http.Post("http://"+adminAddr+"/load", "application/json",
			strings.NewReader(`{"admin":{"listen":"`+adminAddr+`"}}`))
		if err != nil {
			t.Errorf("unloading config: %v", err)
			return
		}
		res.Body.Close()
	})
}

// replaceOnce replaces old by new in s and fails if old is missing, so that
// a change of the harness's Caddyfile cannot silently void a variant.
func replaceOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("config variant: %q not found in the gateway Caddyfile", old)
	}
	return strings.Replace(s, old, new, 1)
}

// withChunkDelay makes the mock wait d between two streamed text chunks.
func withChunkDelay(t *testing.T, d string) func(string) string {
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tlatency 1ms\n", "\t\tlatency 1ms\n\t\tchunk_delay "+d+"\n")
	}
}

// withModel adds a catalog model priced as tollgate-mock whose provider
// model is the same name (so the mock's fault injection applies).
func withModel(t *testing.T, name string) func(string) string {
	return func(cfg string) string {
		block := fmt.Sprintf("\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
			"\t\t\tprovider mock http://%s/v1 {\n\t\t\t\tapi_key mock\n\t\t\t}\n\t\t}\n", name, mockAddr)
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// countingProxy is a reverse proxy in front of the mock provider that
// counts the generation requests reaching it (every catalog model goes
// through it once withCountingProxy is applied).
type countingProxy struct {
	srv   *httptest.Server
	calls atomic.Int64
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	p := &countingProxy{}
	p.srv = startTap(t, target, func(string, []byte) { p.calls.Add(1) }, nil)
	return p
}

func (p *countingProxy) addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// withCountingProxy sends every catalog model's traffic through p.
func withCountingProxy(p *countingProxy) func(string) string {
	return func(cfg string) string {
		return strings.ReplaceAll(cfg, "provider mock http://"+mockAddr+"/v1", "provider mock http://"+p.addr()+"/v1")
	}
}

// send posts a body to an inference route with extra headers, and returns
// the open response for the caller to read and close.
func (c *client) send(path, key, body string, hdr map[string]string) (*http.Response, error) {
	req, err := http.NewRequest("POST", c.gateway+"/api/v1"+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return c.http.Do(req)
}

// post is send, reading the whole answer; off the test goroutine it returns
// the error rather than failing.
func (c *client) post(path, key, body string, hdr map[string]string) (response, error) {
	res, err := c.send(path, key, body, hdr)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("POST %s: reading body: %w", path, err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b, JSON: gjson.ParseBytes(b)}, nil
}

// mustPost is post failing the test on a transport error.
func (c *client) mustPost(path, key, body string, hdr map[string]string) response {
	c.t.Helper()
	r, err := c.post(path, key, body, hdr)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string
	Data  string
}

// readEvent reads the next event; io.EOF at the clean end of the stream.
func readEvent(r *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	seen := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line == "" && !seen {
				return ev, io.EOF
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if seen {
				return ev, nil
			}
			continue
		}
		seen = true
		if v, ok := strings.CutPrefix(line, "event:"); ok {
			ev.Event = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "data:"); ok {
			ev.Data = strings.TrimSpace(v)
		}
	}
}

// streamOf sends a streaming request and reads its whole event stream,
// failing the test on a transport or stream error; the status is not
// checked.
func (c *client) streamOf(t *testing.T, path, key, body string) []sseEvent {
	t.Helper()
	res, err := c.send(path, key, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	evs, err := readStream(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// readStream reads events until the stream ends; err is nil at a clean end.
func readStream(body io.Reader) ([]sseEvent, error) {
	r := bufio.NewReader(body)
	var evs []sseEvent
	for {
		ev, err := readEvent(r)
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// deltaText returns the generated text an event carries (chat or Responses).
func deltaText(ev sseEvent) string {
	d := gjson.Parse(ev.Data)
	if d.Get("type").Str == "response.output_text.delta" {
		return d.Get("delta").Str
	}
	return d.Get("choices.0.delta.content").Str
}

// streamResult is what a client made of a complete stream.
type streamResult struct {
	text       string
	usage      gjson.Result // chat: usage; Responses: response.usage
	done       bool         // ended with [DONE]
	finalEvent string       // Responses: type of the terminal event
}

func parseStream(t *testing.T, evs []sseEvent) streamResult {
	t.Helper()
	var s streamResult
	var text bytes.Buffer
	for i, ev := range evs {
		if ev.Data == "[DONE]" {
			if i != len(evs)-1 {
				t.Fatalf("[DONE] is not the last event")
			}
			s.done = true
			continue
		}
		text.WriteString(deltaText(ev))
		d := gjson.Parse(ev.Data)
		if u := d.Get("usage"); u.IsObject() {
			s.usage = u
		}
		switch typ := d.Get("type").Str; typ {
		case "response.completed", "response.incomplete", "response.failed":
			s.usage, s.finalEvent = d.Get("response.usage"), typ
		}
	}
	s.text = text.String()
	return s
}

// usageSnapshot is a key's and its account's charged figures.
type usageSnapshot struct {
	usage, daily, weekly, monthly money.Amount
	remaining                     *money.Amount // nil: no limit
	limit                         *money.Amount
	totalUsage, totalCredits      money.Amount
}

// snapshot reads GET /key with the regular key and GET /credits with the
// management key.
func (c *client) snapshot(key, mgmt string) usageSnapshot {
	c.t.Helper()
	t := c.t
	me := c.api("GET", "/key", key, nil).expect(t, 200).JSON.Get("data")
	cr := c.api("GET", "/credits", mgmt, nil).expect(t, 200).JSON.Get("data")
	s := usageSnapshot{
		usage: creditAmount(t, me.Get("usage")), daily: creditAmount(t, me.Get("usage_daily")),
		weekly: creditAmount(t, me.Get("usage_weekly")), monthly: creditAmount(t, me.Get("usage_monthly")),
		totalUsage: creditAmount(t, cr.Get("total_usage")), totalCredits: creditAmount(t, cr.Get("total_credits")),
	}
	if me.Get("limit").Type != gjson.Null {
		l, r := creditAmount(t, me.Get("limit")), creditAmount(t, me.Get("limit_remaining"))
		s.limit, s.remaining = &l, &r
	}
	return s
}

// expectCharged checks that exactly cost was charged between two snapshots,
// to the key (every period) and to the account, and that limit_remaining
// follows.
func expectCharged(t *testing.T, before, after usageSnapshot, cost money.Amount, what string) {
	t.Helper()
	for _, f := range []struct {
		name   string
		b, a   money.Amount
		wanted money.Amount
	}{
		{"usage", before.usage, after.usage, cost},
		{"usage_daily", before.daily, after.daily, cost},
		{"usage_weekly", before.weekly, after.weekly, cost},
		{"usage_monthly", before.monthly, after.monthly, cost},
		{"credits total_usage", before.totalUsage, after.totalUsage, cost},
		{"credits total_credits", before.totalCredits, after.totalCredits, 0},
	} {
		if got := f.a - f.b; got != f.wanted {
			t.Fatalf("%s: %s rose by %s, want %s", what, f.name, got, f.wanted)
		}
	}
	if after.limit != nil {
		if want := max(*after.limit-after.usage, 0); *after.remaining != want {
			t.Fatalf("%s: limit_remaining %s, want limit %s - usage %s", what, *after.remaining, *after.limit, after.usage)
		}
	}
}

// waitUsage polls the key's usage until it differs from before, and then
// until it stays the same for settle, and returns the snapshot.
func (c *client) waitUsage(key, mgmt string, before usageSnapshot, timeout, settle time.Duration) usageSnapshot {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := c.snapshot(key, mgmt)
		if s.usage != before.usage {
			time.Sleep(settle)
			again := c.snapshot(key, mgmt)
			if again.usage != s.usage || again.totalUsage != s.totalUsage {
				c.t.Fatalf("usage still changing: %s then %s", s.usage, again.usage)
			}
			return again
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("key usage did not change within %v (still %s)", timeout, s.usage)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
