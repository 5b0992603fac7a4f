package integration

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// startModeration starts Caddy with a moderation provider at base (the
// strict mock's /v1/moderations, or a dead address) and two models behind
// a counting tap: mod/required, whose switch requires moderation, and
// mod/plain, moderated only when a request asks with the plugin.
func startModeration(t *testing.T, base string, failOpen bool) (*client, tenant, string, *atomic.Int64) {
	t.Helper()
	return startModerationPriced(t, base, failOpen, "")
}

// startModerationPriced is startModeration with the operator's price per
// moderation call ("": none).
func startModerationPriced(t *testing.T, base string, failOpen bool, price string) (*client, tenant, string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	tap := startTap(t, mockAddr, func(string, []byte) { calls.Add(1) }, nil)
	fo := ""
	if failOpen {
		fo = "\t\t\tfail_open\n"
	}
	if price != "" {
		fo += "\t\t\tprice " + price + "\n"
	}
	model := func(id, sw string) string {
		return fmt.Sprintf("\t\tmodel %s {\n%s\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
			"\t\t\tprovider p http://%s/v1 {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key k\n\t\t\t}\n\t\t}\n", id, sw, tap.Listener.Addr())
	}
	block := fmt.Sprintf("\t\tmoderation {\n\t\t\tbase_url %s\n\t\t\tapi_key mod-key\n\t\t\tmodel omni-moderation-latest\n\t\t\tname OpenAI\n%s\t\t}\n", base, fo) +
		model("mod/required", "\t\t\tmoderation\n") + model("mod/plain", "")
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"moderated"}`)
	return c, org, key, &calls
}

func moderationBody(model, text, extra string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello"},{"role":"user","content":"` + text + `"}]` + extra + `}`
}

// Moderation through Caddy against the strict mock's moderation endpoint:
// a flagged input is a 403 with the reasons, the flagged input, the
// provider and the model, and nothing reaches the model's provider or is
// charged; clean input is served; the model's switch and the plugin each
// ask for it; a provider that is down refuses (503) unless fail_open.
func TestModeration(t *testing.T) {
	t.Run("flagged and clean", func(t *testing.T) {
		c, org, key, calls := startModeration(t, "http://"+mockAddr+"/v1", false)
		usage := func() string {
			return c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.total_usage").Raw
		}
		before := usage()
		r := c.mustPost("/chat/completions", key, moderationBody("mod/required", "I will kill "+strings.Repeat("x", 200), ""), nil)
		r.expectError(t, 403, "mod/required requires moderation on OpenAI")
		md := r.JSON.Get("error.metadata")
		if md.Get("reasons").Raw != `["violence"]` || md.Get("provider_name").Str != "OpenAI" || md.Get("model_slug").Str != "mod/required" ||
			!strings.HasPrefix(md.Get("flagged_input").Str, "I will kill") || len(md.Get("flagged_input").Str) > 110 {
			t.Errorf("metadata %s", md.Raw)
		}
		if calls.Load() != 0 || usage() != before {
			t.Fatalf("a flagged request reached the provider (%d calls) or was charged", calls.Load())
		}
		// Streamed: refused before the stream starts.
		c.mustPost("/chat/completions", key, moderationBody("mod/required", "kill", `,"stream":true`), nil).expectError(t, 403, "requires moderation")
		c.mustPost("/responses", key, `{"model":"mod/required","input":[{"role":"user","content":"kill"}]}`, nil).expectError(t, 403, "requires moderation")
		c.mustPost("/messages", key, `{"model":"mod/required","max_tokens":20,"system":"be hateful","messages":[{"role":"user","content":"hi"}]}`, nil).expectError(t, 403, "")
		if calls.Load() != 0 {
			t.Fatalf("%d provider calls", calls.Load())
		}
		c.mustPost("/chat/completions", key, moderationBody("mod/required", "a kind word", ""), nil).expect(t, 200)
		if calls.Load() != 1 {
			t.Fatalf("clean request: %d provider calls", calls.Load())
		}
		// mod/plain is moderated only with the plugin.
		c.mustPost("/chat/completions", key, moderationBody("mod/plain", "kill", ""), nil).expect(t, 200)
		c.mustPost("/chat/completions", key, moderationBody("mod/plain", "kill", `,"plugins":[{"id":"moderation"}]`), nil).expectError(t, 403, "mod/plain requires moderation")
		c.mustPost("/chat/completions", key, moderationBody("mod/plain", "kill", `,"plugins":[{"id":"moderation","enabled":false}]`), nil).expect(t, 200)
		c.mustPost("/chat/completions", key, moderationBody("mod/plain", "hi", `,"plugins":[{"id":"moderation","level":3}]`), nil).expectError(t, 400, "plugins[0].level")
		if calls.Load() != 3 {
			t.Fatalf("%d provider calls, want 3", calls.Load())
		}
	})
	t.Run("provider down", func(t *testing.T) {
		dead := "http://" + freeport.Addr(t) + "/v1"
		c, _, key, calls := startModeration(t, dead, false)
		c.mustPost("/chat/completions", key, moderationBody("mod/required", "hello", ""), nil).expectError(t, 503, "moderation provider is unavailable")
		c.mustPost("/chat/completions", key, moderationBody("mod/plain", "hello", `,"plugins":[{"id":"moderation"}]`), nil).expectError(t, 503, "")
		if calls.Load() != 0 {
			t.Fatalf("%d provider calls while moderation was down", calls.Load())
		}
		c.mustPost("/chat/completions", key, moderationBody("mod/plain", "hello", ""), nil).expect(t, 200)
	})
	t.Run("provider down, fail open", func(t *testing.T) {
		dead := "http://" + freeport.Addr(t) + "/v1"
		c, _, key, calls := startModeration(t, dead, true)
		c.mustPost("/chat/completions", key, moderationBody("mod/required", "hello", ""), nil).expect(t, 200)
		if calls.Load() != 1 {
			t.Fatalf("%d provider calls", calls.Load())
		}
	})
}

// moderatedTokenCost is the moderation models' token cost of a usage object, in
// nano-credits: 0.000001 per prompt token, 0.000002 per completion token.
func moderatedTokenCost(t *testing.T, usage gjson.Result) money.Amount {
	t.Helper()
	p, c := usage.Get("prompt_tokens").Int(), usage.Get("completion_tokens").Int()
	if p <= 0 || c <= 0 {
		t.Fatalf("usage without tokens: %s", usage.Raw)
	}
	return money.Amount(p*1000 + c*2000)
}

// A priced moderation provider through Caddy: each request a clean verdict
// lets through is charged the price on top of its tokens, exactly, in
// usage.cost, the generation record and the key's usage, streamed or not;
// a request that needs no moderation is not; a flagged request is charged
// the call alone; a request the caller cannot pay for makes no call; a
// request refused because the provider is down, or served unmoderated
// (fail_open), pays no moderation.
func TestModerationPrice(t *testing.T) {
	const price = money.Amount(125_000) // 0.000125 credits
	t.Run("charged", func(t *testing.T) {
		c, org, key, calls := startModerationPriced(t, "http://"+mockAddr+"/v1", false, "0.000125")
		check := func(what string, usage gjson.Result, id string, before usageSnapshot, moderated bool) {
			t.Helper()
			want := moderatedTokenCost(t, usage)
			if moderated {
				want += price
			}
			if got := creditAmount(t, usage.Get("cost")); got != want {
				t.Fatalf("%s: usage.cost %s, want %s", what, got, want)
			}
			g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON.Get("data")
			if got := creditAmount(t, g.Get("total_cost")); got != want {
				t.Fatalf("%s: generation total_cost %s, want %s", what, got, want)
			}
			expectCharged(t, before, c.snapshot(key, org.MgmtKey), want, what)
		}

		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, moderationBody("mod/required", "a kind word", ""), nil).expect(t, 200)
		check("required", r.JSON.Get("usage"), r.JSON.Get("id").Str, before, true)

		before = c.snapshot(key, org.MgmtKey)
		evs := c.streamOf(t, "/chat/completions", key, moderationBody("mod/required", "a kind word", `,"stream":true,"stream_options":{"include_usage":true}`))
		s := parseStream(t, evs)
		if !s.done || !s.usage.Exists() {
			t.Fatalf("stream: done %v usage %s", s.done, s.usage.Raw)
		}
		check("streamed", s.usage, gjson.Get(evs[0].Data, "id").Str, before, true)

		before = c.snapshot(key, org.MgmtKey)
		r = c.mustPost("/chat/completions", key, moderationBody("mod/plain", "hi", `,"plugins":[{"id":"moderation"}]`), nil).expect(t, 200)
		check("plugin", r.JSON.Get("usage"), r.JSON.Get("id").Str, before, true)

		before = c.snapshot(key, org.MgmtKey)
		r = c.mustPost("/chat/completions", key, moderationBody("mod/plain", "hi", ""), nil).expect(t, 200)
		check("not moderated", r.JSON.Get("usage"), r.JSON.Get("id").Str, before, false)

		// Flagged: refused before the model's provider, and charged the
		// moderation call alone, recorded against the moderation provider.
		served := calls.Load()
		before = c.snapshot(key, org.MgmtKey)
		c.mustPost("/chat/completions", key, moderationBody("mod/required", "kill", ""), nil).expectError(t, 403, "requires moderation")
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), price, "flagged")
		if calls.Load() != served {
			t.Fatal("a flagged request reached the provider")
		}
		var found bool
		for _, row := range c.api("GET", "/activity", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array() {
			if row.Get("provider_name").Str == "OpenAI" {
				found = true
				if row.Get("model").Str != "mod/required" || row.Get("requests").Int() != 1 || creditAmount(t, row.Get("usage")) != price {
					t.Errorf("the flagged request's activity: %s", row.Raw)
				}
			}
		}
		if !found {
			t.Error("the flagged request's charge is not in the activity")
		}
	})
	t.Run("admission first", func(t *testing.T) {
		// A key that cannot pay is refused (402) before any moderation call.
		var modCalls atomic.Int64
		modTap := startTap(t, mockAddr, func(string, []byte) { modCalls.Add(1) }, nil)
		c, org, _, _ := startModerationPriced(t, "http://"+modTap.Listener.Addr().String()+"/v1", false, "0.000125")
		broke, _ := c.newKey(org.MgmtKey, `{"name":"broke","limit":0.00001}`)
		c.mustPost("/chat/completions", broke, moderationBody("mod/required", "kill", ""), nil).expectError(t, 402, "")
		if modCalls.Load() != 0 {
			t.Fatalf("%d moderation calls for a request that could not pay", modCalls.Load())
		}
	})
	t.Run("held", func(t *testing.T) {
		// Admission holds the price: a key whose limit covers the tokens
		// but not a 1-credit moderation call is refused before the call.
		var modCalls atomic.Int64
		modTap := startTap(t, mockAddr, func(string, []byte) { modCalls.Add(1) }, nil)
		c, org, _, _ := startModerationPriced(t, "http://"+modTap.Listener.Addr().String()+"/v1", false, "1")
		capped, _ := c.newKey(org.MgmtKey, `{"name":"capped","limit":0.5}`)
		c.mustPost("/chat/completions", capped, moderationBody("mod/plain", "hi", `,"max_tokens":50`), nil).expect(t, 200)
		c.mustPost("/chat/completions", capped, moderationBody("mod/required", "hi", `,"max_tokens":50`), nil).expectError(t, 402, "")
		if modCalls.Load() != 0 {
			t.Fatalf("%d moderation calls for a request whose price was not held", modCalls.Load())
		}
	})
	t.Run("byok", func(t *testing.T) {
		// The caller's own provider key pays the tokens; the operator's
		// moderation call is paid in credits, served or flagged.
		c, org, _, _ := startModerationPriced(t, "http://"+mockAddr+"/v1", false, "0.000125")
		c.api("POST", "/byok", org.MgmtKey, `{"provider":"p","key":"sk-own-moderated-key-123456"}`).expect(t, 201)
		key, hash := c.newKey(org.MgmtKey, `{"name":"own key"}`)
		keyUsage := func() (credits, byok money.Amount) {
			k := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
			return creditAmount(t, k.Get("usage")), creditAmount(t, k.Get("byok_usage"))
		}
		r := c.mustPost("/chat/completions", key, moderationBody("mod/required", "a kind word", ""), nil).expect(t, 200)
		tokens := moderatedTokenCost(t, r.JSON.Get("usage"))
		if got := creditAmount(t, r.JSON.Get("usage.cost")); got != tokens+price || !r.JSON.Get("usage.is_byok").Bool() {
			t.Fatalf("usage %s, want cost %s", r.JSON.Get("usage").Raw, tokens+price)
		}
		if credits, byok := keyUsage(); credits != price || byok != tokens {
			t.Fatalf("served: usage %s byok_usage %s, want %s and %s", credits, byok, price, tokens)
		}
		c.mustPost("/chat/completions", key, moderationBody("mod/required", "kill", ""), nil).expectError(t, 403, "requires moderation")
		if credits, byok := keyUsage(); credits != 2*price || byok != tokens {
			t.Fatalf("flagged: usage %s byok_usage %s, want %s and %s", credits, byok, 2*price, tokens)
		}
	})
	t.Run("down", func(t *testing.T) {
		dead := "http://" + freeport.Addr(t) + "/v1"
		c, org, key, _ := startModerationPriced(t, dead, false, "0.000125")
		before := c.snapshot(key, org.MgmtKey)
		c.mustPost("/chat/completions", key, moderationBody("mod/required", "hello", ""), nil).expectError(t, 503, "moderation provider is unavailable")
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), 0, "refused while down")
	})
	t.Run("down, fail open", func(t *testing.T) {
		dead := "http://" + freeport.Addr(t) + "/v1"
		c, org, key, _ := startModerationPriced(t, dead, true, "0.000125")
		before := c.snapshot(key, org.MgmtKey)
		r := c.mustPost("/chat/completions", key, moderationBody("mod/required", "hello", ""), nil).expect(t, 200)
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), moderatedTokenCost(t, r.JSON.Get("usage")), "served unmoderated")
	})
}
