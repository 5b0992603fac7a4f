package openai

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

func TestMaxTokensField(t *testing.T) {
	newer := newDialect(dialect.Options{MaxTokensField: "max_completion_tokens"})
	for in, want := range map[string]string{
		`{"max_tokens":5,"messages":[]}`:             `{"messages":[],"max_completion_tokens":5}`,
		`{"max_tokens":5,"max_completion_tokens":7}`: `{"max_completion_tokens":7}`,
	} {
		if got, _ := newer.Adapt(dialect.Chat, []byte(in), 0); string(got) != want {
			t.Errorf("%s: got %s", in, got)
		}
	}
	body := `{"max_tokens":5}`
	if got, _ := newDialect(dialect.Options{}).Adapt(dialect.Chat, []byte(body), 0); string(got) != body {
		t.Errorf("got %s", got)
	}
	if got, _ := newer.Adapt(dialect.Responses, []byte(body), 0); string(got) != body {
		t.Errorf("responses: got %s", got)
	}
}

// The output limit the gateway sets: max_completion_tokens on OpenAI's
// own API (its reasoning models refuse max_tokens) or where the operator
// names it, max_output_tokens on Responses, else max_tokens.
func TestOutputLimitField(t *testing.T) {
	for _, tc := range []struct {
		o      dialect.Options
		kind   dialect.Kind
		native bool
		want   string
	}{
		{dialect.Options{Name: "openai"}, dialect.Chat, true, "max_completion_tokens"},
		{dialect.Options{Name: "x", Host: "api.openai.com"}, dialect.Chat, true, "max_completion_tokens"},
		{dialect.Options{Name: "x", MaxTokensField: "max_completion_tokens"}, dialect.Chat, true, "max_completion_tokens"},
		{dialect.Options{Name: "x"}, dialect.Chat, true, "max_tokens"},
		{dialect.Options{Name: "openai"}, dialect.Responses, true, "max_output_tokens"},
		{dialect.Options{Name: "openai", API: "chat"}, dialect.Responses, false, "max_tokens"},
		{dialect.Options{Name: "openai"}, dialect.Messages, false, "max_tokens"},
	} {
		if got := newDialect(tc.o).OutputLimitField(tc.kind, tc.native); got != tc.want {
			t.Errorf("%+v %s: %s, want %s", tc.o, tc.kind, got, tc.want)
		}
	}
}

// The public effort max reaches an OpenAI-style provider as xhigh, its
// highest; other efforts and bodies pass unchanged.
func TestOwnEffort(t *testing.T) {
	d := newDialect(dialect.Options{})
	for _, tc := range []struct {
		kind     dialect.Kind
		in, want string
	}{
		{dialect.Chat, `{"reasoning_effort":"max","messages":[]}`, `{"reasoning_effort":"xhigh","messages":[]}`},
		{dialect.Responses, `{"input":"max","reasoning":{"effort":"max","summary":"auto"}}`, `{"input":"max","reasoning":{"effort":"xhigh","summary":"auto"}}`},
		{dialect.Chat, `{"reasoning_effort":"high","messages":[{"role":"user","content":"max"}]}`, `{"reasoning_effort":"high","messages":[{"role":"user","content":"max"}]}`},
		{dialect.Responses, `{"reasoning_effort":"max"}`, `{"reasoning_effort":"max"}`},
		{dialect.Chat, `{"model":"m"}`, `{"model":"m"}`},
	} {
		if got, _ := d.Adapt(tc.kind, []byte(tc.in), 0); string(got) != tc.want {
			t.Errorf("%s %s: got %s, want %s", tc.kind, tc.in, got, tc.want)
		}
	}
}

// An assistant message sent back with another provider's thinking
// (reasoning, reasoning_details) reaches an OpenAI-style provider without
// it: OpenAI's chat API refuses members it does not define.
func TestWithoutReasoning(t *testing.T) {
	d := newDialect(dialect.Options{})
	for _, tc := range []struct{ in, want string }{
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"a","reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"r","signature":"s"}],"tool_calls":[]},{"role":"user","content":"y"}],"reasoning_effort":"low"}`,
			`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"a","tool_calls":[]},{"role":"user","content":"y"}],"reasoning_effort":"low"}`},
		{`{"messages":[{"role":"assistant","reasoning_details":[], "content" : "a"}]}`, `{"messages":[{"role":"assistant","content":"a"}]}`},
		{`{"messages":[{"role":"user","content":"\"reasoning\""}]}`, `{"messages":[{"role":"user","content":"\"reasoning\""}]}`},
		{`{"messages":[{"role":"user","content":"reasoning"}]}`, `{"messages":[{"role":"user","content":"reasoning"}]}`},
	} {
		if got, _ := d.Adapt(dialect.Chat, []byte(tc.in), 0); string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	// A Responses body's reasoning is its own parameter.
	body := `{"input":"x","reasoning":{"effort":"low"}}`
	if got, _ := d.Adapt(dialect.Responses, []byte(body), 0); string(got) != body {
		t.Errorf("responses: got %s", got)
	}
}
