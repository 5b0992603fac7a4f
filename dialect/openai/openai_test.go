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
