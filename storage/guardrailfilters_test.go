package storage

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
)

// A guardrail's content filters are checked and compiled when it is
// written, and compiled again when the database is loaded; the key's
// cached rules carry them. A refused setting stores nothing.
func TestGuardrailFiltersCompiledAndReloaded(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, err := s.CreateAccount(NewAccount{Name: "Acme", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.EffectiveRules(k.Hash); r.Filters != nil {
		t.Fatalf("filters without a guardrail: %v", r.Filters)
	}
	g, err := s.CreateGuardrail(acct.ID, func(g *Guardrail) error {
		g.Name = "G"
		g.ContentFilters = json.RawMessage(`[{"pattern":"PROJ-[0-9]+","action":"block"}]`)
		g.ContentFilterBuiltins = json.RawMessage(`[{"slug":"email","action":"redact"}]`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(g.ContentFilterBuiltins) != `[{"action":"redact","label":"[EMAIL]","slug":"email"}]` {
		t.Errorf("stored builtins %s", g.ContentFilterBuiltins)
	}
	if _, err := s.AssignKeys(acct.ID, g.ID, []string{k.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.UpdateGuardrail(acct.ID, g.ID, func(g *Guardrail, _ bool) error {
		g.ContentFilters = json.RawMessage(`[{"pattern":"(","action":"block"}]`)
		return nil
	})
	if !errors.Is(err, ErrInvalid) || err.Error() != "invalid: content_filters[0].pattern: invalid RE2 pattern: missing closing )" {
		t.Fatalf("bad pattern: %v", err)
	}
	check := func(s *Store, when string) {
		t.Helper()
		r := s.EffectiveRules(k.Hash)
		if len(r.Filters) != 1 || r.Filters[0].ID != g.ID || r.Filters.Unusable() != nil {
			t.Fatalf("%s: filters %+v", when, r.Filters)
		}
		out, res := r.Filters.Body(contentfilter.Responses, []byte(`{"input":"mail a@b.com"}`))
		if string(out) != `{"input":"mail [EMAIL]"}` || res.Block != nil {
			t.Fatalf("%s: %s %+v", when, out, res)
		}
		if _, res := r.Filters.Body(contentfilter.Responses, []byte(`{"input":"PROJ-1"}`)); res.Block == nil {
			t.Fatalf("%s: no block", when)
		}
	}
	check(s, "written")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	check(s, "reloaded")
}

// A stored filter that does not compile (written by another version)
// makes its guardrail unusable: requests under it are refused.
func TestGuardrailFiltersUnusableWhenLoaded(t *testing.T) {
	g := &Guardrail{ID: "g", Name: "G", ContentFilters: json.RawMessage(`[{"pattern":"(","action":"block"}]`)}
	g.loaded()
	if !g.Filters().IsUnusable() {
		t.Fatal("a filter that does not compile was loaded as usable")
	}
	ok := &Guardrail{ID: "h", Name: "H"}
	ok.loaded()
	if !ok.Filters().Empty() {
		t.Fatal("no filters, yet not empty")
	}
}
