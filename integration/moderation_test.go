package integration

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/internal/freeport"
)

// startModeration starts Caddy with a moderation provider at base (the
// strict mock's /v1/moderations, or a dead address) and two models behind
// a counting tap: mod/required, whose switch requires moderation, and
// mod/plain, moderated only when a request asks with the plugin.
func startModeration(t *testing.T, base string, failOpen bool) (*client, tenant, string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	tap := startTap(t, mockAddr, func(string, []byte) { calls.Add(1) }, nil)
	fo := ""
	if failOpen {
		fo = "\t\t\tfail_open\n"
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
