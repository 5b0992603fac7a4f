package integration

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// withTokenizedModels makes the mock bill prompt tokens as an OpenAI
// model of o200k_base does, the in-flight budget the whole balance, and
// adds openai/ models (counted with o200k_base by default) priced as
// tollgate-mock: openai/mock (context 8192), openai/tiny (context 40) and
// openai/small (context 300).
func withTokenizedModels(t *testing.T) func(string) string {
	return func(cfg string) string {
		cfg = replaceOnce(t, cfg, "\t\tlatency 1ms\n", "\t\tlatency 1ms\n\t\tprompt_tokens o200k_base\n")
		cfg = replaceOnce(t, cfg, "\t\tbrand service\n", "\t\tbrand service\n\t\tin_flight {\n\t\t\tfraction 1\n\t\t}\n")
		var blocks string
		for _, m := range []struct {
			id      string
			context int
		}{{"openai/mock", 8192}, {"openai/tiny", 40}, {"openai/small", 300}} {
			blocks += fmt.Sprintf("\t\tmodel %s {\n\t\t\tcontext_length %d\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
				"\t\t\tprovider mock http://%s/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t}\n\t\t}\n", m.id, m.context, mockAddr)
		}
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", blocks+"\t\tmodel tollgate-mock:free {\n")
	}
}

const shortQuestion = `What is the capital of France? Answer in one word.`

func questionBody(model, extra string) string {
	return fmt.Sprintf(`{"model":%q%s,"messages":[{"role":"user","content":%q}]}`, model, extra, shortQuestion)
}

// A key capped at three real requests' cost serves them (the byte bound
// held about five times a request's cost and refused the first); a key
// capped at 0.0001 serves a short prompt with the output clamped to what
// remains after the counted prompt.
func TestTokenCountSmallCaps(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, func(cfg string) string { return tap.through(withTokenizedModels(t)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	free, _ := c.newKey(org.MgmtKey, `{"name":"unlimited"}`)

	body := questionBody("openai/mock", `,"max_tokens":10`)
	probe := c.mustPost("/chat/completions", free, body, nil).expect(t, 200)
	tap.take()
	prompt := probe.JSON.Get("usage.prompt_tokens").Int()
	cost := creditAmount(t, probe.JSON.Get("usage.cost"))
	if prompt < 10 || prompt > 30 {
		t.Fatalf("the mock billed %d prompt tokens: %s", prompt, probe.Body)
	}
	if old := holdOf(body, 10); old <= 3*cost {
		t.Fatalf("the byte bound's hold %s would fit the cap %s", old, 3*cost)
	}

	t.Run("three requests", func(t *testing.T) {
		key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"three","limit":%s}`, 3*cost))
		served := 0
		for range 3 {
			r := c.mustPost("/chat/completions", key, body, nil)
			switch r.Status {
			case 200:
				served++
			case 402:
				expect402(t, r, "service_key_limit", "", false)
			default:
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
		}
		if served < 2 {
			t.Fatalf("%d of 3 served under a cap of three requests' cost", served)
		}
		s := c.snapshot(key, org.MgmtKey)
		if s.usage > 3*cost {
			t.Fatalf("usage %s past the cap %s", s.usage, 3*cost)
		}
		tap.take()
	})

	t.Run("cap 0.0001", func(t *testing.T) {
		key, _ := c.newKey(org.MgmtKey, `{"name":"tiny","limit":0.0001}`)
		r := c.mustPost("/chat/completions", key, questionBody("openai/mock", ""), nil).expect(t, 200)
		// The prompt as counted (the mock bills the same), the rest of
		// 0.0001 for the output.
		p := r.JSON.Get("usage.prompt_tokens").Int()
		want := int64((100_000 - money.Amount(p)*promptPrice) / completionPrice)
		if got := tap.last(t).Get("max_tokens").Int(); got != want {
			t.Fatalf("upstream max_tokens %d, want %d (prompt %d)", got, want, p)
		}
		if s := c.snapshot(key, org.MgmtKey); s.usage > 100_000 {
			t.Fatalf("usage %s past the cap", s.usage)
		}
	})
}

// Concurrent requests on a small prepaid balance: the in-flight holds are
// the counted prompts, so the balance admits all the requests it pays
// for at once (the byte bound admitted one), and never more.
func TestTokenCountConcurrentBalance(t *testing.T) {
	startInProcessWith(t, withTokenizedModels(t))
	c := newClient(t, gatewayAddr, adminAddr)
	body := questionBody("openai/mock", `,"max_tokens":10`)
	probeOrg := c.newTenant("organization", "10")
	probeKey, _ := c.newKey(probeOrg.MgmtKey, `{"name":"probe"}`)
	prompt := c.mustPost("/chat/completions", probeKey, body, nil).expect(t, 200).JSON.Get("usage.prompt_tokens").Int()
	hold := tokenCost(prompt, 10)

	const n, fit = 8, 6
	balance := hold*fit + hold/2
	if old := holdOf(body, 10); balance >= 2*old {
		t.Fatalf("the byte bound's hold %s fits the balance %s twice", old, balance)
	}
	tn := c.newTenant("personal", balance.String())
	key, _ := c.newKey(tn.MgmtKey, `{"name":"burst"}`)
	results, errs, _ := postAtOnce(t, c, n, func(int) string { return key }, body)
	ok, refused, charged := tallyCharges(t, results, errs, "service_credits")
	if ok+refused != n {
		t.Fatalf("%d served and %d refused of %d", ok, refused, n)
	}
	checkFit(t, results, ok, fit)
	s := c.snapshot(key, tn.MgmtKey)
	if s.totalUsage != charged || s.totalUsage > s.totalCredits {
		t.Fatalf("account usage %s, answers %s, credits %s", s.totalUsage, charged, s.totalCredits)
	}
}

// A prompt longer than the model's context window is refused with the
// count and the limit, and no provider sees it; a fallback model whose
// window holds it serves it.
func TestTokenCountContextOverflow(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, func(cfg string) string { return tap.through(withTokenizedModels(t)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"k"}`)
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 5)

	body := fmt.Sprintf(`{"model":"openai/tiny","max_tokens":5,"messages":[{"role":"user","content":%q}]}`, long)
	r := c.mustPost("/chat/completions", key, body, nil)
	r.expectError(t, 400, "messages: the prompt has 58 tokens, more than the 40 of model openai/tiny's context_length")
	if b := tap.take(); len(b) != 0 {
		t.Fatalf("an overflowing prompt reached the provider: %v", b)
	}
	// The same in the Responses dialect names input.
	r = c.mustPost("/responses", key, fmt.Sprintf(`{"model":"openai/tiny","input":%q}`, long), nil)
	if r.Status != 400 || !strings.HasPrefix(r.JSON.Get("error.message").Str, "input: the prompt has ") {
		t.Fatalf("responses: %d %s", r.Status, r.Body)
	}
	// A fallback whose window holds the prompt serves it.
	r = c.mustPost("/chat/completions", key, fmt.Sprintf(`{"model":"openai/tiny","models":["openai/mock"],"max_tokens":5,"messages":[{"role":"user","content":%q}]}`, long), nil).expect(t, 200)
	if m := r.JSON.Get("model").Str; m != "openai/mock" {
		t.Fatalf("served by %q", m)
	}
	tap.take()
	// A short prompt fits the tiny window.
	c.mustPost("/chat/completions", key, questionBody("openai/tiny", `,"max_tokens":5`), nil).expect(t, 200)
}

// POST /messages/count_tokens answers {input_tokens} for a catalog model,
// equal to the prompt_tokens the provider then bills for the same
// messages, without charging; it takes the key as Bearer or X-Api-Key and
// refuses a body that is not a Messages body with a 400 naming the field.
func TestCountTokensRoute(t *testing.T) {
	startInProcessWith(t, withTokenizedModels(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"k"}`)

	msgs := `"system":"You are terse.","messages":[{"role":"user","content":"Bonjour, comment ça va ? 東京は晴れ 🎉"},` +
		`{"role":"assistant","content":[{"type":"text","text":"Bien, merci."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18°C, sunny"},{"type":"text","text":"And tomorrow?"}]}],` +
		`"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string","description":"The city"}}}}]`
	before := c.snapshot(key, org.MgmtKey)
	counted := c.mustPost("/messages/count_tokens", key, `{"model":"openai/mock",`+msgs+`}`, nil).expect(t, 200)
	n := counted.JSON.Get("input_tokens").Int()
	if n <= 0 || len(counted.JSON.Map()) != 1 {
		t.Fatalf("count_tokens: %s", counted.Body)
	}
	// Anthropic's clients send the key as X-Api-Key.
	viaHeader := c.mustPost("/messages/count_tokens", "", `{"model":"openai/mock",`+msgs+`}`, map[string]string{"X-Api-Key": key, "anthropic-version": "2023-06-01"}).expect(t, 200)
	if viaHeader.JSON.Get("input_tokens").Int() != n {
		t.Fatalf("X-Api-Key: %s", viaHeader.Body)
	}
	if after := c.snapshot(key, org.MgmtKey); after.usage != before.usage {
		t.Fatalf("count_tokens charged: usage %s -> %s", before.usage, after.usage)
	}
	sent := c.mustPost("/messages", key, `{"model":"openai/mock","max_tokens":16,`+msgs+`}`, nil).expect(t, 200)
	if billed := sent.JSON.Get("usage.input_tokens").Int(); billed != n {
		t.Fatalf("count_tokens said %d, the provider billed %d: %s", n, billed, sent.Body)
	}

	for _, tc := range []struct{ body, field string }{
		{`{"messages":[]}`, "model"},
		{`{"model":"openai/mock"}`, "messages"},
		{`{"model":"openai/mock","messages":"hi"}`, "messages"},
		{`{"model":"openai/mock","messages":[{"role":"user","content":[{"type":"bogus"}]}]}`, "messages[0].content[0]"},
		{`{"model":"nope/none","messages":[]}`, "model"},
	} {
		r := c.mustPost("/messages/count_tokens", key, tc.body, nil)
		if r.Status != 400 || !strings.HasPrefix(r.JSON.Get("error.message").Str, tc.field) {
			t.Errorf("%s: %d %s, want a 400 naming %s", tc.body, r.Status, r.Body, tc.field)
		}
	}
	if r := c.mustPost("/messages/count_tokens", "", `{"model":"openai/mock","messages":[]}`, nil); r.Status != 401 {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	if r := c.mustPost("/messages/count_tokens", org.MgmtKey, `{"model":"openai/mock","messages":[]}`, nil); r.Status != 403 {
		t.Fatalf("management key: %d %s", r.Status, r.Body)
	}
}

// Middle-out, asked by transforms or by the context-compression plugin,
// removes middle messages (a tool call with its result together) until
// the prompt fits the window with room for max_tokens, keeps the system
// prompt, the first and the last message, and says what it removed; the
// provider bills what was sent.
func TestMiddleOutThroughGateway(t *testing.T) {
	tap := newBodyTap(t)
	startInProcessWith(t, func(cfg string) string { return tap.through(withTokenizedModels(t)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"k"}`)

	filler := strings.Repeat("A long turn about the tides and the moon. ", 5)
	msgs := []string{`{"role":"system","content":"Be terse."}`, `{"role":"user","content":"FIRST"}`}
	for i := range 6 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"%d %s"}`, i, filler), fmt.Sprintf(`{"role":"user","content":"%d %s"}`, i, filler))
		if i == 3 {
			msgs = append(msgs, `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`,
				`{"role":"tool","tool_call_id":"c1","content":"`+filler+`"}`)
		}
	}
	msgs = append(msgs, `{"role":"user","content":"LAST"}`)
	conv := `"messages":[` + strings.Join(msgs, ",") + `]`

	// Without compression: the overflow's 400, and no provider call.
	r := c.mustPost("/chat/completions", key, `{"model":"openai/small","max_tokens":20,`+conv+`}`, nil)
	if r.Status != 400 || !strings.Contains(r.JSON.Get("error.message").Str, "more than the 300 of model openai/small's context_length") {
		t.Fatalf("uncompressed: %d %s", r.Status, r.Body)
	}
	if b := tap.take(); len(b) != 0 {
		t.Fatalf("an overflowing prompt reached the provider")
	}
	for _, ask := range []string{`"transforms":["middle-out"]`, `"plugins":[{"id":"context-compression","engine":"middle-out"}]`} {
		r := c.mustPost("/chat/completions", key, `{"model":"openai/small","max_tokens":20,`+ask+`,`+conv+`}`, nil).expect(t, 200)
		header := r.Header.Get("X-Context-Compression")
		if !strings.HasPrefix(header, "middle-out; removed_messages=") {
			t.Fatalf("%s: header %q", ask, header)
		}
		sent := tap.last(t).Get("messages").Array()
		if len(sent) >= len(msgs) || sent[0].Get("content").Str != "Be terse." || sent[1].Get("content").Str != "FIRST" || sent[len(sent)-1].Get("content").Str != "LAST" {
			t.Fatalf("%s: sent %d messages", ask, len(sent))
		}
		if want := fmt.Sprintf("middle-out; removed_messages=%d;", len(msgs)-len(sent)); !strings.HasPrefix(header, want) {
			t.Fatalf("%s: header %q, want %q", ask, header, want)
		}
		for i, m := range sent {
			if m.Get("role").Str == "tool" && !sent[i-1].Get("tool_calls").Exists() {
				t.Fatalf("%s: the tool result lost its call", ask)
			}
			if m.Get("tool_calls").Exists() && sent[i+1].Get("role").Str != "tool" {
				t.Fatalf("%s: the tool call lost its result", ask)
			}
		}
		if p := r.JSON.Get("usage.prompt_tokens").Int(); p+20 > 300 {
			t.Fatalf("%s: the provider billed %d prompt tokens, no room for 20 in 300", ask, p)
		}
	}
	// Only chat completions compress: elsewhere the field is refused.
	r = c.mustPost("/responses", key, `{"model":"openai/small","transforms":["middle-out"],"input":"hi"}`, nil)
	if r.Status != 400 || !strings.HasPrefix(r.JSON.Get("error.message").Str, "transforms:") {
		t.Fatalf("responses: %d %s", r.Status, r.Body)
	}
}

// `caddy validate` accepts the known tokenizers and refuses an unknown one,
// naming the model.
func TestTokenizerOptionValidates(t *testing.T) {
	dir := t.TempDir()
	cfg := withTokenizedModels(t)(gatewayCaddyfile(freeport.Addr(t), dir, freeport.Addr(t), freeport.Addr(t), "1ms"))
	cfg = replaceOnce(t, cfg, "\t\tmodel openai/tiny {\n", "\t\tmodel openai/tiny {\n\t\t\ttokenizer cl100k_base\n")
	path := dir + "/Caddyfile"
	validate := func(cfg string) (string, error) {
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(caddyBinary, "validate", "--config", path, "--adapter", "caddyfile").CombinedOutput()
		return strings.ReplaceAll(string(out), `\"`, `"`), err // the log line's JSON escapes
	}
	if out, err := validate(cfg); err != nil || !strings.Contains(out, "Valid configuration") {
		t.Fatalf("caddy validate: %v\n%s", err, out)
	}
	bad := strings.Replace(cfg, "tokenizer cl100k_base", "tokenizer llama3", 1)
	if out, err := validate(bad); err == nil || !strings.Contains(out, `model "openai/tiny": tokenizer: unknown tokenizer "llama3"`) {
		t.Fatalf("caddy validate accepted tokenizer llama3: %v\n%s", err, out)
	}
}

// POST /responses/input_tokens answers OpenAI's {object, input_tokens},
// equal to the input_tokens the provider then bills for the same
// request, without charging; what it cannot count is a 400.
func TestResponsesInputTokensRoute(t *testing.T) {
	startInProcessWith(t, withTokenizedModels(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"k"}`)
	req := `"instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Wie spät ist es in 東京? 🕰"}]},` +
		`{"type":"function_call","call_id":"c1","name":"clock","arguments":"{\"city\":\"Tokyo\"}"},{"type":"function_call_output","call_id":"c1","output":"14:05"}],` +
		`"tools":[{"type":"function","name":"clock","description":"The time in a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`
	before := c.snapshot(key, org.MgmtKey)
	r := c.mustPost("/responses/input_tokens", key, `{"model":"openai/mock",`+req+`}`, nil).expect(t, 200)
	n := r.JSON.Get("input_tokens").Int()
	if r.JSON.Get("object").Str != "response.input_tokens" || n <= 0 {
		t.Fatalf("input_tokens: %s", r.Body)
	}
	if after := c.snapshot(key, org.MgmtKey); after.usage != before.usage {
		t.Fatalf("input_tokens charged")
	}
	sent := c.mustPost("/responses", key, `{"model":"openai/mock","max_output_tokens":16,`+req+`}`, nil).expect(t, 200)
	if billed := sent.JSON.Get("usage.input_tokens").Int(); billed != n {
		t.Fatalf("input_tokens said %d, the provider billed %d", n, billed)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"input":"hi"}`, "model"},
		{`{"model":"openai/mock","input":5}`, "input"},
		{`{"model":"openai/mock","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"nope/none","input":"hi"}`, "model"},
	} {
		r := c.mustPost("/responses/input_tokens", key, tc.body, nil)
		if r.Status != 400 || !strings.HasPrefix(r.JSON.Get("error.message").Str, tc.field) {
			t.Errorf("%s: %d %s, want a 400 naming %s", tc.body, r.Status, r.Body, tc.field)
		}
	}
}
