package integration

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
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

	t.Run("disabled", func(t *testing.T) {
		c.api("PATCH", "/presets/pirate", e.org.Mgmt, `{"status":"disabled"}`).expect(t, 200)
		r, seen := e.send(t, "/chat/completions", `{"model":"@preset/pirate","messages":[{"role":"user","content":"hi"}]}`)
		r.expectError(t, 400, `model: preset "pirate" is disabled`)
		if seen != "" {
			t.Errorf("the provider received %s", seen)
		}
		c.api("PATCH", "/presets/pirate", e.org.Mgmt, `{"status":"active"}`).expect(t, 200)
		e.send(t, "/chat/completions", `{"model":"@preset/pirate","messages":[{"role":"user","content":"hi"}]}`)
	})
}

// TestReplicasPresets: replicas on one Redis see each other's presets and
// versions; versions posted at once to both get distinct numbers (or a
// 409), none lost; a preset made at one replica serves requests at the
// other, charged once.
func TestReplicasPresets(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "10")
	key, _ := cs[0].newKey(org.MgmtKey, `{"name":"presets"}`)
	cs[0].api("POST", "/presets/shared/chat/completions", org.MgmtKey,
		`{"model":"tollgate-mock","max_tokens":7,"messages":[{"role":"system","content":"Be brief."}]}`).expect(t, 200)
	within(t, feedBound, "the preset reaches the other replica", func() bool {
		return cs[1].api("GET", "/presets/shared", org.MgmtKey, nil).Status == 200
	})

	var mu sync.Mutex
	versions := map[int64]string{}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			c := cs[i%2]
			r, err := c.try("POST", c.gateway+"/api/v1/presets/shared/chat/completions", org.MgmtKey, `{"model":"tollgate-mock","max_tokens":7}`)
			if err != nil {
				t.Error(err)
				return
			}
			switch r.Status {
			case 200:
				v := r.JSON.Get("data.designated_version")
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := versions[v.Get("version").Int()]; dup {
					t.Errorf("version %d made twice (%s, %s)", v.Get("version").Int(), prev, v.Get("id").Str)
				}
				versions[v.Get("version").Int()] = v.Get("id").Str
			case 409:
			default:
				t.Errorf("status %d: %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	if len(versions) == 0 {
		t.Fatal("no version was made")
	}
	for _, c := range cs {
		within(t, feedBound, "every version reaches every replica", func() bool {
			vs := c.api("GET", "/presets/shared/versions?limit=100", org.MgmtKey, nil).JSON
			if vs.Get("total_count").Int() != int64(len(versions))+1 {
				return false
			}
			for _, v := range vs.Get("data").Array() {
				if id, ok := versions[v.Get("version").Int()]; ok && id != v.Get("id").Str {
					t.Fatalf("version %d is %s, its writer got %s", v.Get("version").Int(), v.Get("id").Str, id)
				}
			}
			return true
		})
	}

	before := cs[0].api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.total_usage").Float()
	r := cs[1].mustPost("/chat/completions", key, `{"model":"@preset/shared","messages":[{"role":"user","content":"hi"}]}`, nil)
	r.expect(t, 200)
	if r.JSON.Get("model").Str != "tollgate-mock" {
		t.Errorf("answer: %s", r.Body)
	}
	cost := r.JSON.Get("usage.cost").Float()
	within(t, feedBound, "the charge reaches the first replica", func() bool {
		after := cs[0].api("GET", "/credits", org.MgmtKey, nil).JSON.Get("data.total_usage").Float()
		return cost > 0 && after > before && math.Abs(after-before-cost) < 1e-9
	})
	g := cs[0].api("GET", "/generation?id="+r.JSON.Get("id").Str, key, nil).expect(t, 200).JSON.Get("data")
	if p := cs[0].api("GET", "/presets/shared", org.MgmtKey, nil).JSON.Get("data.id").Str; g.Get("preset_id").Str != p {
		t.Errorf("generation: %s; preset %s", g.Raw, p)
	}
}

// The operator's presets commands through the built binary: put makes a
// preset and its next version, list and show print them, status
// disables one, which then refuses requests.
func TestOperatorCLIPresets(t *testing.T) {
	p := startProcess(t, t.TempDir())
	addr := "--address=" + p.admin
	acct := cli(t, p, "account", "create", "--name", "Acme", "--type", "organization").Get("data.id").String()
	cli(t, p, "credits", "add", "--account", acct, "--amount", "5")
	put := cli(t, p, "presets", "put", "triage", "--account", acct, "--body",
		`{"model":"tollgate-mock","temperature":0.2,"messages":[{"role":"system","content":"Sort the ticket."}]}`)
	if put.Get("data.designated_version.version").Int() != 1 || put.Get("data.designated_version.system_prompt").Str != "Sort the ticket." {
		t.Fatalf("presets put: %s", put.Raw)
	}
	cli(t, p, "presets", "put", "triage", "--account", acct, "--body", `{"model":"tollgate-mock","temperature":0.1}`)
	if got := cli(t, p, "presets", "show", "triage", "--account", acct).Get("data.designated_version.config.temperature").Float(); got != 0.1 {
		t.Fatalf("presets show: temperature %v", got)
	}
	table, _, code := cliText(t, "presets", "list", "--account", acct, addr)
	if code != 0 || !strings.Contains(table, "SLUG") || !strings.Contains(table, "triage") || !strings.Contains(table, "active") {
		t.Fatalf("presets list (%d):\n%s", code, table)
	}
	c := newClient(t, p.gateway, p.admin)
	key := cli(t, p, "keys", "create", "--account", acct, "--name", "app").Get("key").String()
	c.api("POST", "/chat/completions", key, `{"model":"@preset/triage","messages":[{"role":"user","content":"hi"}]}`).expect(t, 200)
	if got := cli(t, p, "presets", "status", "triage", "--account", acct, "--status", "disabled").Get("data.status").Str; got != "disabled" {
		t.Fatalf("presets status: %s", got)
	}
	c.api("POST", "/chat/completions", key, `{"model":"@preset/triage","messages":[{"role":"user","content":"hi"}]}`).
		expectError(t, 400, `model: preset "triage" is disabled`)
	if _, stderr, code := cliText(t, "presets", "put", "Bad Slug", "--account", acct, "--body", `{"model":"m"}`, addr); code != 1 || !strings.Contains(stderr, "slug:") {
		t.Fatalf("a bad slug: exit %d, %s", code, stderr)
	}
}
