package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Prompt-cache prices through a real Caddy, against the strict
// Anthropic-style mock: each token class (plain input, cache read, cache
// write for 5 minutes and for an hour, output) is charged at its own
// price on chat completions, Messages and Responses, whole and streamed;
// a price override takes effect above its threshold; GET /generation's
// cache_discount is what the cache saved; a top-level cache_control
// (automatic caching) reaches the provider.

// The model's prices in nano-credits a token, each exact.
const (
	nanoPrompt     = 3000  // 0.000003
	nanoCompletion = 15000 // 0.000015
	nanoRead       = 300   // 0.0000003
	nanoWrite5m    = 3750  // 0.00000375
	nanoWrite1h    = 6000  // 0.000006
	// Above 120 prompt tokens (the override).
	nanoLongPrompt     = 6000  // 0.000006
	nanoLongCompletion = 22500 // 0.0000225
	cacheThreshold     = 120
)

func withCachePricedModel(t *testing.T) func(string) string {
	block := fmt.Sprintf(`		model anthropic/claude-cache {
			context_length 8192
			max_completion_tokens 1000
			pricing {
				prompt 0.000003
				completion 0.000015
				input_cache_read 0.0000003
				input_cache_write 0.00000375
				input_cache_write_1h 0.000006
				override {
					min_prompt_tokens %d
					prompt 0.000006
					completion 0.0000225
				}
			}
			provider anthropic http://%s {
				model claude-mock
				api_key sk-ant-operator
				style anthropic
			}
		}
`, cacheThreshold, mockAddr)
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// cacheCharge is a request's token classes.
type cacheCharge struct {
	prompt, read, write, write1h, completion int64
}

// cost prices c by hand at the model's prices (the override's above the
// threshold).
func (c cacheCharge) cost() money.Amount {
	in, out := int64(nanoPrompt), int64(nanoCompletion)
	if c.prompt > cacheThreshold {
		in, out = nanoLongPrompt, nanoLongCompletion
	}
	plain := c.prompt - c.read - c.write
	return money.Amount(plain*in + c.read*nanoRead + (c.write-c.write1h)*nanoWrite5m + c.write1h*nanoWrite1h + c.completion*out)
}

// discount is what the cache saved at the base prompt price.
func (c cacheCharge) discount() money.Amount {
	in := int64(nanoPrompt)
	if c.prompt > cacheThreshold {
		in = nanoLongPrompt
	}
	return money.Amount((c.read+c.write)*in - c.read*nanoRead - (c.write-c.write1h)*nanoWrite5m - c.write1h*nanoWrite1h)
}

// chargeOf reads the token classes of an answer's usage (chat,
// Responses or Messages) given the tokens written for an hour.
func chargeOf(u gjson.Result, write1h int64) cacheCharge {
	switch {
	case u.Get("prompt_tokens").Exists():
		return cacheCharge{prompt: u.Get("prompt_tokens").Int(), read: u.Get("prompt_tokens_details.cached_tokens").Int(),
			write: u.Get("prompt_tokens_details.cache_write_tokens").Int(), write1h: write1h, completion: u.Get("completion_tokens").Int()}
	case u.Get("input_tokens_details").Exists():
		return cacheCharge{prompt: u.Get("input_tokens").Int(), read: u.Get("input_tokens_details.cached_tokens").Int(),
			write: u.Get("input_tokens_details.cache_write_tokens").Int(), write1h: write1h, completion: u.Get("output_tokens").Int()}
	}
	read, write := u.Get("cache_read_input_tokens").Int(), u.Get("cache_creation_input_tokens").Int()
	return cacheCharge{prompt: u.Get("input_tokens").Int() + read + write, read: read, write: write,
		write1h: u.Get("cache_creation.ephemeral_1h_input_tokens").Int(), completion: u.Get("output_tokens").Int()}
}

func TestCacheTokenClassesChargedAtTheirPrices(t *testing.T) {
	startInProcessWith(t, withCachePricedModel(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"cache"}`)

	// Two system blocks: the first (its words + 4 tokens) cached for an
	// hour, the second for 5 minutes. words makes the prompt long.
	chatBody := func(tag, words string, stream bool) (string, int64) {
		first := "hour context of " + tag + " one two three"
		return fmt.Sprintf(`{"model":"anthropic/claude-cache","stream":%v,"messages":[{"role":"system","content":[`+
			`{"type":"text","text":%q,"cache_control":{"type":"ephemeral","ttl":"1h"}},`+
			`{"type":"text","text":"five minute context %s","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"question %s"}]}`,
			stream, first, words, tag), int64(len(strings.Fields(first)) + 4)
	}
	messagesBody := func(tag string, stream bool) (string, int64) {
		first := "hour context of " + tag + " one two three"
		return fmt.Sprintf(`{"model":"anthropic/claude-cache","max_tokens":200,"stream":%v,"system":[`+
			`{"type":"text","text":%q,"cache_control":{"type":"ephemeral","ttl":"1h"}},`+
			`{"type":"text","text":"five minute context","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"question %s"}]}`,
			stream, first, tag), int64(len(strings.Fields(first)) + 4)
	}
	responsesBody := func(tag string, stream bool) (string, int64) {
		first := "hour context of " + tag + " one two three"
		return fmt.Sprintf(`{"model":"anthropic/claude-cache","stream":%v,"input":[{"role":"system","content":[`+
			`{"type":"input_text","text":%q,"cache_control":{"type":"ephemeral","ttl":"1h"}},`+
			`{"type":"input_text","text":"five minute context","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"question %s"}]}`,
			stream, first, tag), int64(len(strings.Fields(first)) + 4)
	}

	// send posts body (a stream or not) and returns the usage the client
	// saw and the amount charged to the key.
	send := func(t *testing.T, path, body string, stream bool) (gjson.Result, money.Amount, string) {
		t.Helper()
		before := c.snapshot(key, org.MgmtKey)
		var u gjson.Result
		var genID string
		switch {
		case stream && path == "/messages":
			// message_start's usage has the prompt's classes, the
			// closing message_delta's the output.
			start := "{}"
			for _, ev := range c.streamOf(t, path, key, body) {
				d := gjson.Parse(ev.Data)
				switch d.Get("type").Str {
				case "message_start":
					start = d.Get("message.usage").Raw
				case "message_delta":
					start, _ = sjson.Set(start, "output_tokens", d.Get("usage.output_tokens").Int())
				}
			}
			u = gjson.Parse(start)
		case stream:
			s := parseStream(t, c.streamOf(t, path, key, body))
			u = s.usage
		default:
			r := c.mustPost(path, key, body, nil).expect(t, 200)
			u, genID = r.JSON.Get("usage"), r.Header.Get("X-Generation-Id")
		}
		after := c.snapshot(key, org.MgmtKey)
		return u, after.usage - before.usage, genID
	}

	for _, tc := range []struct {
		name, path string
		body       func(tag string, stream bool) (string, int64)
	}{
		{"chat", "/chat/completions", func(tag string, stream bool) (string, int64) { return chatBody(tag, "", stream) }},
		{"messages", "/messages", messagesBody},
		{"responses", "/responses", responsesBody},
	} {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s stream=%v", tc.name, stream)
			t.Run(name, func(t *testing.T) {
				body, hour := tc.body(strings.ReplaceAll(name, " ", "-"), stream)
				// First sight: both prefixes written, at their two prices.
				u, charged, genID := send(t, tc.path, body, stream)
				first := chargeOf(u, hour)
				if first.write <= hour || first.write1h != hour || first.read != 0 {
					t.Fatalf("first usage %s (hour %d)", u.Raw, hour)
				}
				if charged != first.cost() {
					t.Errorf("charged %s, want %s for %+v (%s)", charged, first.cost(), first, u.Raw)
				}
				if genID != "" {
					g := c.api("GET", "/generation?id="+genID, key, nil).expect(t, 200).JSON.Get("data")
					if creditAmount(t, g.Get("cache_discount")) != first.discount() || creditAmount(t, g.Get("total_cost")) != charged {
						t.Errorf("generation %s: cache_discount, want %s", g.Raw, first.discount())
					}
				}
				// Again: the prefix is read.
				u, charged, _ = send(t, tc.path, body, stream)
				again := chargeOf(u, 0)
				if again.read == 0 || again.write != 0 {
					t.Fatalf("second usage %s", u.Raw)
				}
				if charged != again.cost() {
					t.Errorf("charged %s, want %s for %+v (%s)", charged, again.cost(), again, u.Raw)
				}
			})
		}
	}

	t.Run("override above its threshold", func(t *testing.T) {
		long := strings.Repeat("word ", cacheThreshold)
		body, hour := chatBody("long", long, false)
		u, charged, genID := send(t, "/chat/completions", body, false)
		ch := chargeOf(u, hour)
		if ch.prompt <= cacheThreshold {
			t.Fatalf("prompt of %d tokens, not above %d", ch.prompt, cacheThreshold)
		}
		if charged != ch.cost() {
			t.Errorf("charged %s, want %s at the override's prices for %+v", charged, ch.cost(), ch)
		}
		g := c.api("GET", "/generation?id="+genID, key, nil).expect(t, 200).JSON.Get("data")
		if creditAmount(t, g.Get("cache_discount")) != ch.discount() {
			t.Errorf("cache_discount %s, want %s", g.Get("cache_discount").Raw, ch.discount())
		}
		// Below it, the base prices (the test cases above), and no
		// discount without cache tokens.
		r := c.mustPost("/chat/completions", key, `{"model":"anthropic/claude-cache","messages":[{"role":"user","content":"plain"}]}`, nil).expect(t, 200)
		g = c.api("GET", "/generation?id="+r.Header.Get("X-Generation-Id"), key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("cache_discount").Type != gjson.Null {
			t.Errorf("cache_discount without cache tokens: %s", g.Get("cache_discount").Raw)
		}
	})

	t.Run("automatic caching", func(t *testing.T) {
		body := `{"model":"anthropic/claude-cache","cache_control":{"type":"ephemeral","ttl":"1h"},"messages":[{"role":"user","content":"cache all of this automatically"}]}`
		u, charged, _ := send(t, "/chat/completions", body, false)
		ch := chargeOf(u, u.Get("prompt_tokens").Int())
		if ch.write != ch.prompt || charged != ch.cost() {
			t.Errorf("usage %s charged %s, want the whole prompt written for an hour: %s", u.Raw, charged, ch.cost())
		}
		// An OpenAI-style provider never sees it.
		c.mustPost("/chat/completions", key, `{"model":"tollgate-mock","cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"hi"}]}`, nil).expect(t, 200)
	})

	t.Run("catalog", func(t *testing.T) {
		p := c.do("GET", c.gateway+"/api/v1/models/anthropic/claude-cache/endpoints", key, nil).expect(t, 200).JSON.Get("data.endpoints.0.pricing")
		if p.Get("input_cache_write_1h").Str != "0.000006" || p.Get("overrides").Raw != `[{"prompt":"0.000006","completion":"0.0000225","min_prompt_tokens":120}]` {
			t.Errorf("endpoint pricing %s", p.Raw)
		}
	})
}
