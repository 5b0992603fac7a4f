package integration

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// Presets through Caddy: made with the management API, named as a model
// ("@preset/<slug>") or in the preset member on chat completions,
// Messages and Responses; the provider receives the merged request (the
// preset's system prompt first, its parameters where the request sets
// none), the guardrails filter the preset's system prompt like the
// user's text, the answer names the routed model, the generation record
// names the preset, and an unknown preset is a 400 that reaches no
// provider and charges nothing.
func TestPresets(t *testing.T) {
	e := startContentFilters(t)
	c := e.c
	mk := func(slug, route, body string) gjson.Result {
		t.Helper()
		return c.api("POST", "/presets/"+slug+route, e.org.Mgmt, body).expect(t, 200).JSON.Get("data")
	}
	p := mk("pirate", "/chat/completions", `{"model":"ws/plain","temperature":0.3,"max_tokens":40,"stream":true,`+
		`"messages":[{"role":"system","content":"Talk like a pirate about codename-falcon."},{"role":"user","content":"ignored"}]}`)
	if p.Get("designated_version.config").Raw != `{"model":"ws/plain","temperature":0.3,"max_tokens":40}` {
		t.Fatalf("preset: %s", p.Raw)
	}

	t.Run("chat", func(t *testing.T) {
		r, seen := e.send(t, "/chat/completions", `{"model":"@preset/pirate","messages":[{"role":"user","content":"hi"}]}`)
		r.expect(t, 200)
		if r.JSON.Get("model").Str != "ws/plain" {
			t.Errorf("answer model: %s", r.Body)
		}
		for _, want := range []string{`"temperature":0.3`, `"max_tokens":40`, `Talk like a pirate about [REDACTED]`} {
			if !strings.Contains(seen, want) {
				t.Errorf("the provider did not receive %s: %s", want, seen)
			}
		}
		if strings.Contains(seen, "codename-falcon") || strings.Contains(seen, "@preset") || strings.Contains(seen, `"preset"`) {
			t.Errorf("the provider received the preset's unfiltered text or its name: %s", seen)
		}
		g := c.api("GET", "/generation?id="+r.JSON.Get("id").Str, e.key, nil).expect(t, 200).JSON.Get("data")
		if g.Get("preset_id").Str != p.Get("id").Str || g.Get("model").Str != "ws/plain" {
			t.Errorf("generation: %s", g.Raw)
		}
	})

	t.Run("the request wins", func(t *testing.T) {
		r, seen := e.send(t, "/chat/completions", `{"model":"ws/priced","preset":"pirate","temperature":0.9,"messages":[{"role":"user","content":"hi"}]}`)
		r.expect(t, 200)
		if r.JSON.Get("model").Str != "ws/priced" || !strings.Contains(seen, `"temperature":0.9`) || strings.Contains(seen, `"temperature":0.3`) ||
			!strings.Contains(seen, "Talk like a pirate") {
			t.Errorf("answer %s; provider received %s", r.Body, seen)
		}
	})

	t.Run("messages", func(t *testing.T) {
		r, seen := e.send(t, "/messages", `{"model":"@preset/pirate","system":"Be brief.","messages":[{"role":"user","content":"hi"}]}`)
		r.expect(t, 200)
		if r.JSON.Get("model").Str != "ws/plain" || !strings.Contains(seen, `Talk like a pirate about [REDACTED].\n\nBe brief.`) ||
			!strings.Contains(seen, `"max_tokens":40`) {
			t.Errorf("answer %s; provider received %s", r.Body, seen)
		}
	})

	t.Run("responses", func(t *testing.T) {
		mk("french", "/responses", `{"model":"ws/plain","instructions":"Answer in French.","input":"x","max_output_tokens":30}`)
		direct, _ := e.send(t, "/responses", `{"model":"ws/plain","input":"hello"}`)
		r, seen := e.send(t, "/responses", `{"preset":"french","input":"hello"}`)
		r.expect(t, 200)
		// the answer names the model as a request naming the routed model gets it
		if r.JSON.Get("model").Str != direct.JSON.Get("model").Str || !strings.Contains(seen, "Answer in French.") || !strings.Contains(seen, "30") {
			t.Errorf("answer %s; provider received %s", r.Body, seen)
		}
	})

	t.Run("blocked by the preset's system prompt", func(t *testing.T) {
		mk("leaky", "/chat/completions", `{"model":"ws/plain","messages":[{"role":"system","content":"Report on PROJ-1234."}]}`)
		before := e.usage(t)
		r, seen := e.send(t, "/chat/completions", `{"model":"@preset/leaky","messages":[{"role":"user","content":"hi"}]}`)
		r.expectError(t, 403, `Request blocked by content filter "project code" of guardrail "Key rules"`)
		if seen != "" || e.usage(t) != before {
			t.Errorf("a blocked request reached the provider (%s) or was charged", seen)
		}
	})

	t.Run("unknown preset", func(t *testing.T) {
		before := e.usage(t)
		for _, body := range []string{
			`{"model":"@preset/nope","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"ws/plain","preset":"nope","messages":[{"role":"user","content":"hi"}]}`,
		} {
			r, seen := e.send(t, "/chat/completions", body)
			msg := `model: preset "nope" not found`
			if strings.Contains(body, `"preset"`) {
				msg = `preset: preset "nope" not found`
			}
			r.expectError(t, 400, msg)
			if seen != "" {
				t.Errorf("the provider received %s", seen)
			}
		}
		// another account's preset is unknown to this one
		other := c.newOrg("11")
		c.api("POST", "/presets/theirs/chat/completions", other.Mgmt, `{"model":"ws/plain"}`).expect(t, 200)
		r, _ := e.send(t, "/chat/completions", `{"model":"@preset/theirs","messages":[{"role":"user","content":"hi"}]}`)
		r.expectError(t, 400, `model: preset "theirs" not found`)
		if after := e.usage(t); after != before {
			t.Errorf("usage %s -> %s", before, after)
		}
	})
}
