package catalog

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestAliasOf(t *testing.T) {
	for _, tt := range []struct{ id, alias string }{
		{"anthropic/claude-sonnet-4.5", "~anthropic/claude-sonnet-latest"},
		{"anthropic/claude-3.5-sonnet", "~anthropic/claude-sonnet-latest"},
		{"anthropic/claude-3-5-sonnet-20241022", "~anthropic/claude-sonnet-latest"},
		{"openai/gpt-5", "~openai/gpt-latest"},
		{"openai/gpt-4o", "~openai/gpt-latest"},
		{"openai/gpt-4o-mini", "~openai/gpt-mini-latest"},
		{"google/gemini-2.5-pro", "~google/gemini-pro-latest"},
		{"deepseek/deepseek-v3", "~deepseek/deepseek-latest"},
		{"openai/gpt-4o:free", ""}, // a variant
		{"tollgate-mock", ""},      // no author
		{"acme/4", ""},             // versions only
		{"~openai/gpt-latest", ""},
	} {
		alias, ok := AliasOf(tt.id)
		if alias != tt.alias || ok != (tt.alias != "") {
			t.Errorf("AliasOf(%q) = %q, %v; want %q", tt.id, alias, ok, tt.alias)
		}
	}
}

func model(id string, created int64) *Model {
	return &Model{ID: id, Public: json.RawMessage(fmt.Sprintf(`{"id":%q,"created":%d}`, id, created))}
}

func TestAliasLookup(t *testing.T) {
	const day = 86400
	c := New([]*Model{
		// The catalog's default date for all: the version decides.
		model("anthropic/claude-3.5-sonnet", 1704067200),
		model("anthropic/claude-sonnet-4", 1704067200),
		model("anthropic/claude-sonnet-4.5", 1704067200),
		model("anthropic/claude-3-opus", 1704067200),
		// A later creation date wins over a higher version.
		model("openai/gpt-5", 1704067200),
		model("openai/gpt-4.1", 1704067200+day),
		model("openai/gpt-4o-mini", 1704067200+2*day),
		model("openai/gpt-4o-mini:free", 1704067200+3*day),
		// Equal in every way: the first in catalog order.
		model("acme/big-2", 1704067200),
		model("acme/big-v2", 1704067200),
		// A model whose id is an alias's is itself.
		model("mistral/large-2", 1704067200),
		model("~mistral/large-latest", 1704067200),
	})
	for _, tt := range []struct{ id, want string }{
		{"~anthropic/claude-sonnet-latest", "anthropic/claude-sonnet-4.5"},
		{"~anthropic/claude-opus-latest", "anthropic/claude-3-opus"},
		{"~openai/gpt-latest", "openai/gpt-4.1"},
		{"~openai/gpt-mini-latest", "openai/gpt-4o-mini"},
		{"~acme/big-latest", "acme/big-2"},
		{"~mistral/large-latest", "~mistral/large-latest"},
		{"anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4"},
		{"~anthropic/claude-haiku-latest", ""},
		{"~openai/gpt-4o-latest", ""},
		{"anthropic/claude-sonnet", ""},
	} {
		m, ok := c.Lookup(tt.id)
		if got := ""; ok {
			got = m.ID
			if got != tt.want {
				t.Errorf("Lookup(%q) = %q, want %q", tt.id, got, tt.want)
			}
		} else if tt.want != "" {
			t.Errorf("Lookup(%q) found nothing, want %q", tt.id, tt.want)
		}
	}
	if n := len(c.Models()); n != 12 {
		t.Errorf("Models() has %d models: an alias is not one", n)
	}
	if !IsAlias("~openai/gpt-latest") || !IsAlias("~openai/gpt-latest:nitro") || IsAlias("openai/gpt-latest") {
		t.Error("IsAlias")
	}
}
