package contentfilter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCompileRefusesWithField(t *testing.T) {
	long := strings.Repeat("a", MaxPatternLen+1)
	many := "[" + strings.TrimSuffix(strings.Repeat(`{"pattern":"x","action":"flag"},`, MaxFilters+1), ",") + "]"
	for _, c := range []struct {
		custom, builtins, field string
	}{
		{`[{"pattern":"(","action":"block"}]`, ``, "content_filters[0].pattern"},
		{`[{"pattern":"ok","action":"block"},{"pattern":"a**","action":"block"}]`, ``, "content_filters[1].pattern"},
		{`[{"pattern":"` + long + `","action":"block"}]`, ``, "content_filters[0].pattern"},
		{`[{"pattern":"((a{1000}){1000}){1000}","action":"block"}]`, ``, "content_filters[0].pattern"},
		{`[{"pattern":"a*","action":"redact"}]`, ``, "content_filters[0].pattern"},
		{`[{"pattern":"","action":"block"}]`, ``, "content_filters[0].pattern"},
		{`[{"action":"block"}]`, ``, "content_filters[0].pattern"},
		{`[{"pattern":"x","action":"delete"}]`, ``, "content_filters[0].action"},
		{`[{"pattern":"x"}]`, ``, "content_filters[0].action"},
		{`[{"pattern":"x","action":"redact","label":"` + strings.Repeat("L", 101) + `"}]`, ``, "content_filters[0].label"},
		{`[{"pattern":"x","action":"redact","color":"red"}]`, ``, "content_filters[0].color"},
		{`[{"pattern":1,"action":"redact"}]`, ``, "content_filters[0].pattern"},
		{`{"pattern":"x"}`, ``, "content_filters"},
		{`["x"]`, ``, "content_filters[0]"},
		{many, ``, "content_filters"},
		{``, `[{"slug":"passport","action":"block"}]`, "content_filter_builtins[0].slug"},
		{``, `[{"slug":"email","action":"hide"}]`, "content_filter_builtins[0].action"},
		{``, `[{"slug":"email","action":"redact"},{"slug":"email","action":"block"}]`, "content_filter_builtins[1].slug"},
		{``, `[{"slug":"email","action":"redact","scan_scope":"user_only"}]`, "content_filter_builtins[0].scan_scope"},
		{``, `[{"slug":"regex-prompt-injection","action":"block","scan_scope":"some"}]`, "content_filter_builtins[0].scan_scope"},
		{``, `[{"slug":"email","action":"redact","label":"` + strings.Repeat("L", 101) + `"}]`, "content_filter_builtins[0].label"},
		{``, `[{"action":"redact"}]`, "content_filter_builtins[0].slug"},
	} {
		_, _, _, err := Compile("g", "G", json.RawMessage(c.custom), json.RawMessage(c.builtins))
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("custom %.60s builtins %.60s: error %v, want one naming %s", c.custom, c.builtins, err, c.field)
		}
	}
}

func TestCompileStoresNormalized(t *testing.T) {
	g, custom, builtins, err := Compile("g", "G",
		json.RawMessage(`[{"pattern":"\\bPROJ-[0-9]{4}\\b","action":"block"},{"pattern":"sk-[a-z]+","action":"redact","label":"[KEY]"}]`),
		json.RawMessage(`[{"slug":"email","action":"redact","label":"ignored"},{"slug":"regex-prompt-injection","action":"block","scan_scope":"user_only"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.rules) != 4 {
		t.Fatalf("rules %d", len(g.rules))
	}
	if want := `[{"action":"block","label":null,"pattern":"\\bPROJ-[0-9]{4}\\b"},{"action":"redact","label":"[KEY]","pattern":"sk-[a-z]+"}]`; string(custom) != want {
		t.Errorf("custom %s", custom)
	}
	if want := `[{"action":"redact","label":"[EMAIL]","slug":"email"},{"action":"block","label":"[PROMPT_INJECTION]","scan_scope":"user_only","slug":"regex-prompt-injection"}]`; string(builtins) != want {
		t.Errorf("builtins %s", builtins)
	}
	if g, c, b, err := Compile("g", "G", json.RawMessage("null"), nil); err != nil || !g.Empty() || c != nil || b != nil {
		t.Errorf("null: %v %s %s %v", g, c, b, err)
	}
}
