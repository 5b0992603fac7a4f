package messages

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// TestToChatImpliedEffort tells the reasoning_effort that thinking or
// output_config.effort implies from the one the public reasoning object
// names, and takes the implied one out for a model without reasoning.
func TestToChatImpliedEffort(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	tests := []struct {
		name, in, effort string
		implied          bool
	}{
		{"adaptive thinking", `{"model":"m","max_tokens":9,` + msgs + `,"thinking":{"type":"adaptive"},"output_config":{"effort":"low"},"tools":[{"name":"t","input_schema":{"type":"object","properties":{"reasoning_effort":{"type":"string"}}}}]}`, "low", true},
		{"effort alone", `{"model":"m","max_tokens":9,` + msgs + `,"output_config":{"effort":"max"}}`, "xhigh", true},
		{"enabled thinking", `{"model":"m","max_tokens":9,` + msgs + `,"stop_sequences":["x"],"thinking":{"type":"enabled","budget_tokens":9}}`, "xhigh", true},
		{"named reasoning", `{"model":"m","max_tokens":9,` + msgs + `,"reasoning":{"effort":"medium"}}`, "medium", false},
		{"none", `{"model":"m","max_tokens":9,` + msgs + `}`, "", false},
		{"disabled", `{"model":"m","max_tokens":9,` + msgs + `,"thinking":{"type":"disabled"}}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ToChat([]byte(tt.in), false)
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(c.Body, "reasoning_effort").Str; got != tt.effort || c.ImpliedEffort != tt.implied {
				t.Fatalf("reasoning_effort %q implied %v, want %q %v", got, c.ImpliedEffort, tt.effort, tt.implied)
			}
			// Left out when no provider takes it; a named one stays.
			none, err := ToChat([]byte(tt.in), true)
			if e := gjson.GetBytes(none.Body, "reasoning_effort"); err != nil || none.ImpliedEffort || e.Exists() != (tt.effort != "" && !tt.implied) {
				t.Fatalf("without implied effort: %s %v", none.Body, err)
			}
			lean := WithoutReasoningEffort(c.Body)
			if !json.Valid(lean) || gjson.GetBytes(lean, "reasoning_effort").Exists() {
				t.Fatalf("without effort: %s", lean)
			}
			// Everything else stays, the tool's own reasoning_effort too.
			want := gjson.ParseBytes(c.Body).Map()
			delete(want, "reasoning_effort")
			got := gjson.ParseBytes(lean).Map()
			if len(got) != len(want) {
				t.Fatalf("members %v, want %v", got, want)
			}
			for k, v := range want {
				if got[k].Raw != v.Raw {
					t.Errorf("%s = %s, want %s", k, got[k].Raw, v.Raw)
				}
			}
			if tt.effort == "" && &lean[0] != &c.Body[0] {
				t.Error("a body without reasoning_effort is copied")
			}
		})
	}
	// A body changed after the translation (spaces, another place) still
	// loses its reasoning_effort.
	odd := []byte(`{"model":"m", "reasoning_effort" : "high","messages":[]}`)
	if got := WithoutReasoningEffort(odd); string(got) != `{"model":"m","messages":[]}` {
		t.Errorf("odd body: %s", got)
	}
}

// TestFoldSystem moves in-conversation system messages into the
// top-level system, in order, keeping their cache_control.
func TestFoldSystem(t *testing.T) {
	tests := []struct{ name, in, system, roles string }{
		{"string system and messages",
			`{"model":"m","system":"Top.","messages":[{"role":"user","content":"a"},{"role":"system","content":"Mid."},{"role":"assistant","content":"b"},{"role":"system","content":[{"type":"text","text":"Late.","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"c"}]}`,
			`[{"type":"text","text":"Top."},{"type":"text","text":"Mid."},{"type":"text","text":"Late.","cache_control":{"type":"ephemeral"}}]`,
			`["user","assistant","user"]`},
		{"block system", `{"system":[{"type":"text","text":"A"}],"messages":[{"role":"system","content":"B"},{"role":"user","content":"c"}]}`,
			`[{"type":"text","text":"A"},{"type":"text","text":"B"}]`, `["user"]`},
		{"no top-level system", `{"messages":[{"role":"user","content":"a"},{"role":"system","content":"B"}]}`,
			`[{"type":"text","text":"B"}]`, `["user"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := FoldSystem([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if got := gjson.GetBytes(out, "system").Raw; got != tt.system {
				t.Errorf("system %s, want %s", got, tt.system)
			}
			if got := gjson.GetBytes(out, "messages.#.role").Raw; got != tt.roles {
				t.Errorf("roles %s, want %s", got, tt.roles)
			}
		})
	}
	same := []byte(`{"system":"s","messages":[{"role":"user","content":"a"}]}`)
	if out, err := FoldSystem(same); err != nil || &out[0] != &same[0] {
		t.Errorf("a body without system messages is rewritten: %s %v", out, err)
	}
	if _, err := FoldSystem([]byte(`{"messages":[{"role":"system","content":7}]}`)); err == nil || err.Error() != "messages[0].content: a string or text blocks" {
		t.Errorf("bad content: %v", err)
	}
}
