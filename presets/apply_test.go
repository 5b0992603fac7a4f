package presets

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func TestConfigFrom(t *testing.T) {
	for _, c := range []struct {
		kind       dialect.Kind
		body       string
		cfg, sys   string
		wantSystem bool
	}{
		{dialect.Chat, `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"}],"model":"openai/gpt-4o","temperature":0.7,"stream":true,"stop_sequences":["x"]}`,
			`{"model":"openai/gpt-4o","temperature":0.7}`, "You are terse.", true},
		{dialect.Messages, `{"max_tokens":1024,"messages":[{"role":"user","content":"Hi"}],"model":"anthropic/claude","system":[{"type":"text","text":"A"},{"type":"text","text":"B"}],"provider":{"order":["x"]}}`,
			`{"model":"anthropic/claude","provider":{"order":["x"]},"max_tokens":1024}`, "A\n\nB", true},
		{dialect.Responses, `{"input":"Hi","instructions":"Be kind.","model":"openai/gpt-5","max_output_tokens":50,"top_k":3}`,
			`{"model":"openai/gpt-5","max_output_tokens":50}`, "Be kind.", true},
		{dialect.Chat, `{"messages":[{"role":"user","content":"Hi"}],"temperature":null}`, `{}`, "", false},
	} {
		cfg, sys, err := ConfigFrom(c.kind, []byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		if cfg != c.cfg || (sys != nil) != c.wantSystem || sys != nil && *sys != c.sys {
			t.Errorf("%s:\n got %s %v\nwant %s %q", c.body, cfg, sys, c.cfg, c.sys)
		}
	}
	for _, bad := range []string{`[]`, `{"model":"@preset/x"}`, `{"model":3}`, `{"provider":"x"}`} {
		if _, _, err := ConfigFrom(dialect.Chat, []byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestNamed(t *testing.T) {
	for body, want := range map[string][2]string{
		`{"model":"openai/gpt-4o"}`:                   {"", ""},
		`{"model":"@preset/triage"}`:                  {"triage", "model"},
		`{"model":"openai/gpt-4o","preset":"triage"}`: {"triage", "preset"},
		`{"preset":null,"model":"m"}`:                 {"", ""},
		`{"messages":[{"content":"say \"preset\""}]}`: {"", ""},
	} {
		slug, field, err := Named([]byte(body))
		if err != nil || slug != want[0] || field != want[1] {
			t.Errorf("%s: %q %q %v", body, slug, field, err)
		}
	}
	for _, bad := range []string{`{"preset":3}`, `{"model":"@preset/"}`, `{"model":"@preset/a","preset":"b"}`} {
		if _, _, err := Named([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	body := []byte(`{"model":"openai/gpt-4o","messages":[{"role":"user","content":"hello"}]}`)
	if n := testing.AllocsPerRun(100, func() { _, _, _ = Named(body) }); n != 0 {
		t.Errorf("a body without a preset: %v allocations", n)
	}
}

func asMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

func TestApply(t *testing.T) {
	sys := "You are a pirate."
	v := &Version{Slug: "p", SystemPrompt: &sys,
		Config: `{"model":"openai/gpt-4o","models":["openai/gpt-4o","x/y"],"provider":{"order":["a"],"allow_fallbacks":false},"temperature":0.2,"top_k":5,"max_tokens":100,"stop":"END"}`}
	for _, c := range []struct {
		name string
		kind dialect.Kind
		body string
		want string
	}{
		{"chat: the preset fills in", dialect.Chat,
			`{"model":"@preset/p","messages":[{"role":"user","content":"Hi"}],"temperature":null}`,
			`{"messages":[{"role":"system","content":"You are a pirate."},{"role":"user","content":"Hi"}],"model":"openai/gpt-4o","models":["openai/gpt-4o","x/y"],"provider":{"order":["a"],"allow_fallbacks":false},"temperature":0.2,"top_k":5,"max_tokens":100,"stop":"END"}`},
		{"chat: the request wins", dialect.Chat,
			`{"model":"m/own","preset":"p","messages":[],"provider":{"order":["b"]},"temperature":1,"max_completion_tokens":7,"stop":["x"]}`,
			`{"model":"m/own","messages":[{"role":"system","content":"You are a pirate."}],"provider":{"order":["b"],"allow_fallbacks":false},"temperature":1,"max_completion_tokens":7,"stop":["x"],"top_k":5}`},
		{"messages", dialect.Messages,
			`{"model":"@preset/p","system":"Own.","messages":[{"role":"user","content":"Hi"}]}`,
			`{"system":"You are a pirate.\n\nOwn.","messages":[{"role":"user","content":"Hi"}],"model":"openai/gpt-4o","models":["openai/gpt-4o","x/y"],"provider":{"order":["a"],"allow_fallbacks":false},"temperature":0.2,"top_k":5,"max_tokens":100,"stop_sequences":["END"]}`},
		{"responses", dialect.Responses,
			`{"model":"@preset/p","input":"Hi"}`,
			`{"input":"Hi","model":"openai/gpt-4o","models":["openai/gpt-4o","x/y"],"provider":{"order":["a"],"allow_fallbacks":false},"temperature":0.2,"max_output_tokens":100,"instructions":"You are a pirate."}`},
	} {
		got, err := Apply(c.kind, []byte(c.body), v)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !reflect.DeepEqual(asMap(t, got), asMap(t, []byte(c.want))) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	if _, err := Apply(dialect.Chat, []byte(`{"model":"@preset/p","messages":[]}`), &Version{Slug: "p", Config: `{"temperature":1}`}); err == nil {
		t.Error("a preset without a model, and a request without one: accepted")
	}
}
