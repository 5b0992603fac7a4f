package healjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestHeal(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, repairs string
	}{
		{"valid", `{"a": [1, 2]}`, `{"a": [1, 2]}`, "none"},
		{"valid with spaces", " \n{\"a\":1}\n", " \n{\"a\":1}\n", "none"},
		{"fence", "```json\n{\"a\": 1}\n```", `{"a": 1}`, "code_fence"},
		{"fence without info", "```\n[1,2]\n```", `[1,2]`, "code_fence"},
		{"fence and prose", "Here it is:\n```json\n{\"a\": 1,}\n```\nEnjoy!", `{"a":1}`, "code_fence,prose,trailing_comma"},
		{"unclosed fence", "```json\n{\"a\": 1}", `{"a": 1}`, "code_fence"},
		{"prose around", `Sure! {"name": "Ada"} Hope that helps.`, `{"name":"Ada"}`, "prose"},
		{"prose with brackets first", `Result [see below]: {"a": 1}`, `{"a":1}`, "prose"},
		{"trailing commas", `{"a": [1, 2,], "b": {"c": 3,},}`, `{"a":[1,2],"b":{"c":3}}`, "trailing_comma"},
		{"unquoted keys", `{name: "Ada", age_1: 36, $x: true}`, `{"name":"Ada","age_1":36,"$x":true}`, "unquoted_key"},
		{"single quotes", `{'name': 'Ada\'s "book"'}`, `{"name":"Ada's \"book\""}`, "single_quote"},
		{"escaped apostrophe in double quotes", `{"a": "it\'s"`, `{"a":"it's"}`, "truncated"},
		{"python literals", `{"a": True, "b": False, "c": None}`, `{"a":true,"b":false,"c":null}`, "literal"},
		{"comments", "{\n// the name\n\"a\": 1, /* two */ \"b\": 2}", `{"a":1,"b":2}`, "comment"},
		{"missing comma", "{\"a\": 1\n\"b\": 2}", `{"a":1,"b":2}`, "missing_comma"},
		{"missing comma in array", `[{"a":1} {"a":2}]`, `[{"a":1},{"a":2}]`, "missing_comma"},
		{"raw newline in string", "{\"a\": \"line1\nline2\"}", `{"a":"line1\nline2"}`, "control_char"},
		{"cut in string value", `{"a": "hello wor`, `{"a":"hello wor"}`, "truncated"},
		{"cut in key", `{"a": 1, "bc`, `{"a":1}`, "truncated"},
		{"cut after colon", `{"a": 1, "b":`, `{"a":1}`, "truncated"},
		{"cut after comma", `{"a": [1, 2,`, `{"a":[1,2]}`, "truncated"},
		{"cut in number", `{"a": 1, "b": 2.`, `{"a":1}`, "truncated"},
		{"cut number kept", `[1, 23`, `[1,23]`, "truncated"},
		{"cut in literal", `{"a": tr`, `{}`, "truncated"},
		{"cut in nested", `{"a": {"b": [{"c": "d`, `{"a":{"b":[{"c":"d"}]}}`, "truncated"},
		{"cut in escape", `{"a": "x\`, `{"a":"x"}`, "truncated"},
		{"cut in unicode escape", `{"a": "x\u00`, `{"a":"x"}`, "truncated"},
		{"everything", "Here:\n```json\n{name: 'Ada', tags: ['a', 'b',], // c\n note: \"cut", `{"name":"Ada","tags":["a","b"],"note":"cut"}`,
			"code_fence,prose,trailing_comma,unquoted_key,single_quote,truncated,comment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, r, ok := Heal([]byte(tc.in))
			if !ok {
				t.Fatalf("Heal(%q) not ok", tc.in)
			}
			if string(out) != tc.want || r.String() != tc.repairs {
				t.Fatalf("Heal(%q) = %q, %s; want %q, %s", tc.in, out, r, tc.want, tc.repairs)
			}
			if !json.Valid(out) {
				t.Fatalf("Heal(%q) = %q, not valid JSON", tc.in, out)
			}
		})
	}
}

func TestHealUnrepairable(t *testing.T) {
	for _, in := range []string{
		"",
		"I cannot answer that.",
		`{"a": undefined}`,
		`{"a": 1 2 3 :}`,
		`{"a": [1, 2}`,
		`{"a" 1}`,
		`{:}`,
		`[1.2.3]`,
	} {
		out, r, ok := Heal([]byte(in))
		if ok || r != 0 || string(out) != in {
			t.Errorf("Heal(%q) = %q, %s, %v; want it unchanged and not ok", in, out, r, ok)
		}
	}
}

func TestHealDepthBounded(t *testing.T) {
	in := strings.Repeat("[", 100000)
	if _, _, ok := Heal([]byte(in)); ok {
		t.Fatal("a value nested beyond jsoncheck.MaxDepth was healed")
	}
	in = strings.Repeat("[", 50)
	out, r, ok := Heal([]byte(in))
	if !ok || string(out) != strings.Repeat("[", 50)+strings.Repeat("]", 50) || r != Truncated {
		t.Fatalf("Heal(50 [) = %q, %s, %v", out, r, ok)
	}
}

func TestSchema(t *testing.T) {
	s, err := Compile([]byte(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Check([]byte(`{"name":"Ada","age":36}`)); !ok {
		t.Fatal("a valid instance failed")
	}
	if ok, where := s.Check([]byte(`{"name":"Ada","age":"old"}`)); ok || where != "/age" {
		t.Fatalf("an invalid instance: %v at %q", ok, where)
	}
	if ok, where := s.Check([]byte(`{"age":1}`)); ok || where != "/" {
		t.Fatalf("a missing required member: %v at %q", ok, where)
	}
	if _, err := Compile([]byte(`{"$ref":"file:///etc/passwd"}`)); err == nil {
		t.Fatal("a schema referring to a file compiled")
	}
	if _, err := Compile([]byte(`{"type":12}`)); err == nil {
		t.Fatal("an invalid schema compiled")
	}
}

func FuzzHeal(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, "```json\n{a: 'b',}\n```", `[1, 2,`, `{"a": "x\u00`, `{'k': True}`, "x {y: [1 2]} z", `{"a":{"b":[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		out, r, ok := Heal(in)
		if !bytes.Equal(in, orig) {
			t.Fatal("Heal changed its input")
		}
		if !ok {
			if !bytes.Equal(out, in) || r != 0 {
				t.Fatalf("unrepairable %q came back as %q, %s", in, out, r)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Heal(%q) = %q: not valid JSON", in, out)
		}
		if json.Valid(in) && (!bytes.Equal(out, in) || r != 0) {
			t.Fatalf("valid %q came back as %q, %s", in, out, r)
		}
	})
}

// A 10 KB answer with most of the repairs.
func brokenAnswer() []byte {
	var b strings.Builder
	b.WriteString("Here is the JSON you asked for:\n```json\n{items: [\n")
	for i := 0; b.Len() < 10<<10; i++ {
		b.WriteString("  {id: 12345, 'name': 'item number twelve', \"tags\": [\"alpha\", \"beta\",], ok: True,},\n")
	}
	b.WriteString("], \"note\": \"the list was cut")
	return []byte(b.String())
}

func TestBrokenAnswerHeals(t *testing.T) {
	out, r, ok := Heal(brokenAnswer())
	if !ok || !json.Valid(out) || r&(CodeFence|UnquotedKey|SingleQuote|TrailingComma|Literal|Truncated|Prose) != CodeFence|UnquotedKey|SingleQuote|TrailingComma|Literal|Truncated|Prose {
		t.Fatalf("10 KB answer: %v %s", ok, r)
	}
}

func BenchmarkHeal10KB(b *testing.B) {
	in := brokenAnswer()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		Heal(in)
	}
}

func BenchmarkHealValid10KB(b *testing.B) {
	in, _, _ := Heal(brokenAnswer())
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		Heal(in)
	}
}
