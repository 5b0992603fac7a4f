package jsoncheck

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func TestCheck(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	many := func(n int, dup bool) string {
		var sb strings.Builder
		sb.WriteString(`{"o":{`)
		for i := range n {
			if i > 0 {
				sb.WriteByte(',')
			}
			k := i
			if dup && i == n-1 {
				k = 3
			}
			sb.WriteString(`"k` + strings.Repeat("x", k) + `":0`)
		}
		sb.WriteString(`}}`)
		return sb.String()
	}
	tests := []struct {
		in   string
		kind Kind
		msg  string
	}{
		{`{}`, 0, ""},
		{` {"a":[1,-0,1e308,-1.5E-7,"x",true,false,null,{}]} `, 0, ""},
		{`"\u00e9\ud83d\ude00"`, 0, ""},
		{"\"\xe2\x82\xac\"", 0, ""},
		{deep(MaxDepth, "[", "]"), 0, ""},
		{deep(MaxDepth+1, "[", "]"), TooDeep, "JSON nests deeper than 128 levels"},
		{strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), TooDeep, "JSON nests deeper than 128 levels"},
		{strings.Repeat("[", 1<<20), TooDeep, "JSON nests deeper than 128 levels"},
		{`{"a":1,"a":2}`, Duplicate, "a: duplicate field"},
		{`{"a":1,"\u0061":2}`, Duplicate, "a: duplicate field"},
		{`{"\ud800":1,"\ufffd":2}`, Duplicate, "\ufffd: duplicate field"},
		{`{"m":[{"r":1},{"r":1,"x":{"y":0,"y":1}}]}`, Duplicate, "m[1].x.y: duplicate field"},
		{`{"a":{"b":1},"c":{"b":1}}`, 0, ""},
		{`[{"a":1},{"a":1}]`, 0, ""},
		{many(40, false), 0, ""},
		{many(40, true), Duplicate, "o.kxxx: duplicate field"},
		{"{\"a\":\"\xff\"}", InvalidUTF8, "a: not valid UTF-8"},
		{"{\"a\":[\"ok\",\"\xed\xa0\x80\"]}", InvalidUTF8, "a[1]: not valid UTF-8"},
		{"{\"\xc3\":1}", InvalidUTF8, "field name: not valid UTF-8"},
		{"{\"a\":{\"\xc3\":1}}", InvalidUTF8, "field name in a: not valid UTF-8"},
		{"\"\xc3\"", InvalidUTF8, "JSON string: not valid UTF-8"},
		{``, Syntax, "not valid JSON"},
		{` `, Syntax, "not valid JSON"},
		{`{`, Syntax, "not valid JSON"},
		{`[1,]`, Syntax, "not valid JSON"},
		{`{"a":1,}`, Syntax, "not valid JSON"},
		{`{"a" 1}`, Syntax, "not valid JSON"},
		{`{1:1}`, Syntax, "not valid JSON"},
		{`NaN`, Syntax, "not valid JSON"},
		{`{"a":NaN}`, Syntax, "not valid JSON"},
		{`{"a":Infinity}`, Syntax, "not valid JSON"},
		{`01`, Syntax, "not valid JSON"},
		{`1.`, Syntax, "not valid JSON"},
		{`1e`, Syntax, "not valid JSON"},
		{`-`, Syntax, "not valid JSON"},
		{`+1`, Syntax, "not valid JSON"},
		{`"\x"`, Syntax, "not valid JSON"},
		{`"\u12"`, Syntax, "not valid JSON"},
		{"\"a\x01\"", Syntax, "not valid JSON"},
		{`{} {}`, Syntax, "not valid JSON"},
		{`tru`, Syntax, "not valid JSON"},
		{`[}`, Syntax, "not valid JSON"},
		{`{]`, Syntax, "not valid JSON"},
	}
	for _, tt := range tests {
		err := Check([]byte(tt.in), nil)
		var kind Kind
		var msg string
		if err != nil {
			kind, msg = err.Kind, err.Error()
		}
		if kind != tt.kind || msg != tt.msg {
			in := tt.in
			if len(in) > 60 {
				in = in[:60] + "..."
			}
			t.Errorf("Check(%q) = %d %q, want %d %q", in, kind, msg, tt.kind, tt.msg)
		}
		// Valid is the syntax and depth part.
		wantValid := tt.kind == 0 || tt.kind == Duplicate || tt.kind == InvalidUTF8
		if got := Valid([]byte(tt.in)); got != wantValid {
			t.Errorf("Valid(%.60q) = %v, want %v", tt.in, got, wantValid)
		}
	}
}

func TestCheckText(t *testing.T) {
	tests := []struct{ in, msg string }{
		{`{"name":"Ann \u00e9 \ud83d\ude00","d":"a\nb\tc\r"}`, ""},
		{"{\"name\":\"\xe2\x82\xac\"}", ""},
		{`{"name":"a\u0000"}`, "name: control characters are not allowed"},
		{`{"name":"a\u001f"}`, "name: control characters are not allowed"},
		{`{"name":"a\u007f"}`, "name: control characters are not allowed"},
		{`{"name":"a\u0085"}`, "name: control characters are not allowed"},
		{"{\"name\":\"a\x7f\"}", "name: control characters are not allowed"},
		{"{\"name\":\"a\xc2\x85\"}", "name: control characters are not allowed"},
		{`{"name":"a\b"}`, "name: control characters are not allowed"},
		{`{"l":["ok","\f"]}`, "l[1]: control characters are not allowed"},
		{`{"name":"\ud800"}`, "name: unpaired UTF-16 surrogate"},
		{`{"name":"\ud800x"}`, "name: unpaired UTF-16 surrogate"},
		{`{"name":"\ud800\u0041"}`, "name: unpaired UTF-16 surrogate"},
		{`{"name":"\udc00"}`, "name: unpaired UTF-16 surrogate"},
		{`{"name":"\ude00\ud83d"}`, "name: unpaired UTF-16 surrogate"},
		{`{"a\u0000":1}`, "field name: control characters are not allowed"},
		{`{"name":"` + strings.Repeat("a", MaxTextLen) + `"}`, ""},
		{`{"name":"` + strings.Repeat("a", MaxTextLen+1) + `"}`, "name: longer than 16384 bytes"},
		{`{"` + strings.Repeat("a", MaxTextLen+1) + `":1}`, "field name: longer than 16384 bytes"},
	}
	for _, tt := range tests {
		var msg string
		if err := CheckText([]byte(tt.in), nil); err != nil {
			msg = err.Error()
		}
		if msg != tt.msg {
			t.Errorf("CheckText(%.60q) = %q, want %q", tt.in, msg, tt.msg)
		}
		if err := Check([]byte(tt.in), nil); err != nil {
			t.Errorf("Check(%.60q) = %v; the text rules are CheckText's", tt.in, err)
		}
	}
}

func TestCheckMembers(t *testing.T) {
	body := ` { "a" : 1 , "b\n":{"x":[1,{}]}, "c":[], "d":"s" } `
	var ms []Member
	if err := Check([]byte(body), &ms); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, body[m.KeyStart:m.KeyEnd]+"="+body[m.ValueStart:m.ValueEnd])
	}
	want := []string{`a=1`, `b\n={"x":[1,{}]}`, `c=[]`, `d="s"`}
	if strings.Join(got, " ") != strings.Join(want, " ") || !ms[1].Escaped || ms[0].Escaped {
		t.Errorf("members %q (%+v), want %q", got, ms, want)
	}
	ms = ms[:0]
	if err := Check([]byte(`[{"a":1}]`), &ms); err != nil || len(ms) != 0 {
		t.Errorf("array: %v %v", err, ms)
	}
}

// TestCheckAllocs: a body of small objects is checked without allocating.
// The checker is reused directly rather than through Check's sync.Pool,
// which the race detector empties at random.
func TestCheckAllocs(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}],"stream":true,"max_tokens":10}`)
	ms := make([]Member, 0, 8)
	c := new(checker)
	check := func() *Error {
		ms = ms[:0]
		c.b, c.strict, c.members, c.depth = body, true, &ms, 0
		c.keys, c.scratch = c.keys[:0], c.scratch[:0]
		return c.run()
	}
	check() // grow the key buffers once
	if n := testing.AllocsPerRun(100, func() {
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Check allocates %v times", n)
	}
}

// FuzzCheck compares the checker with encoding/json, which is iterative in
// its syntax check: Valid is json.Valid within MaxDepth, and Check
// accepts exactly the valid texts without invalid UTF-8 or repeated keys.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":[1,2,{"b":null}],"c":"\u00e9"}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
		`[[[[[[[[[[]]]]]]]]]]`, `{"a":{"a":{"a":1}}}`, `1e308`, `-0`, `"\ud800"`, "\"\xff\"",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":9223372036854775808}`,
		strings.Repeat("[", 200), `NaN`, `{"a":1,}`, `{"":0,"":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := Valid(b)
		wantValid := json.Valid(b) && nesting(b) <= MaxDepth
		if valid != wantValid {
			t.Fatalf("Valid(%q) = %v, json.Valid and depth %d say %v", b, valid, nesting(b), wantValid)
		}
		if gjson.ValidBytes(b) != json.Valid(b) && nesting(b) < 1000 && utf8.Valid(b) {
			// gjson is what reads the bodies after the check; it must
			// agree on syntax.
			t.Fatalf("gjson.ValidBytes(%q) = %v", b, !json.Valid(b))
		}
		err := Check(b, nil)
		if CheckText(b, nil) == nil && err != nil {
			t.Fatalf("CheckText(%q) accepts what Check refuses: %v", b, err)
		}
		if !valid {
			if err == nil {
				t.Fatalf("Check(%q) accepts an invalid text", b)
			}
			return
		}
		wantDup, wantBadUTF8 := duplicates(b), !utf8.Valid(b)
		switch {
		case err == nil && (wantDup || wantBadUTF8):
			t.Fatalf("Check(%q) = nil; duplicate %v, bad UTF-8 %v", b, wantDup, wantBadUTF8)
		case err != nil && err.Kind == Duplicate && !wantDup,
			err != nil && err.Kind == InvalidUTF8 && !wantBadUTF8,
			err != nil && err.Kind != Duplicate && err.Kind != InvalidUTF8:
			t.Fatalf("Check(%q) = %v", b, err)
		}
	})
}

// nesting is the deepest nesting of b's brackets outside strings.
func nesting(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == '[' || c == '{'):
			depth++
			deepest = max(deepest, depth)
		case !inString && (c == ']' || c == '}'):
			depth--
		}
	}
	return deepest
}

// duplicates reports whether valid JSON text b repeats a key in an object,
// comparing keys as encoding/json decodes them.
func duplicates(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type level struct {
		object  bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k := tok.(string)
			if top.keys[k] {
				return true
			}
			top.keys[k] = true
			top.wantKey = false
			continue
		}
		if top != nil && top.object {
			top.wantKey = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{object: true, keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// nonPlain agrees with the plain table for every byte value at every
// place of the word, and on random words.
func TestPlainWordMatchesTheTable(t *testing.T) {
	want := func(b []byte) bool {
		for _, c := range b {
			if !plain[c] {
				return false
			}
		}
		return true
	}
	for v := 0; v < 256; v++ {
		for at := 0; at < 8; at++ {
			for _, fill := range []byte{'a', ' ', '~', 0xff, 0x00} {
				b := bytes.Repeat([]byte{fill}, 8)
				b[at] = byte(v)
				if got := nonPlain(binary.LittleEndian.Uint64(b)) == 0; got != want(b) {
					t.Fatalf("nonPlain(% x) == 0 is %v, want %v", b, got, want(b))
				}
				if got, want := firstNonPlain(b); got != want {
					t.Fatalf("nonPlain(% x) points at byte %d, want %d", b, got, want)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		w := rng.Uint64()
		if rng.IntN(2) == 0 { // mostly printable, to reach the true case
			w = w&0x3f3f3f3f3f3f3f3f | 0x4040404040404040
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], w)
		if got := nonPlain(w) == 0; got != want(b[:]) {
			t.Fatalf("nonPlain(% x) == 0 is %v, want %v", b, got, want(b[:]))
		}
		if got, want := firstNonPlain(b[:]); got != want {
			t.Fatalf("nonPlain(% x) points at byte %d, want %d", b, got, want)
		}
	}
}

// BenchmarkCheckPrompt is a chat body with a 10 KB ASCII prompt, the
// shape most request bytes have.
func BenchmarkCheckPrompt(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 230) + `"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var members []Member
	for b.Loop() {
		members = members[:0]
		if err := Check(body, &members); err != nil {
			b.Fatal(err)
		}
	}
}

// firstNonPlain is the byte of the word b that nonPlain points at (8:
// none), and the first byte the table says is not plain.
func firstNonPlain(b []byte) (got, want int) {
	got = bits.TrailingZeros64(nonPlain(binary.LittleEndian.Uint64(b))) >> 3
	want = 8
	for i, c := range b {
		if !plain[c] {
			want = i
			break
		}
	}
	return got, want
}

// SkipSpace skips exactly JSON's four whitespace bytes, whatever
// follows, in bytes and in a string.
func TestSkipSpaceEveryByte(t *testing.T) {
	for c := range 256 {
		b := []byte{' ', byte(c), '\t', byte(c)}
		want := 1
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
			want = len(b)
		}
		if got := SkipSpace(b, 0); got != want {
			t.Errorf("byte %#x: skipped to %d, want %d", c, got, want)
		}
		if got := SkipSpace(string(b), 0); got != want {
			t.Errorf("byte %#x in a string: skipped to %d, want %d", c, got, want)
		}
	}
}

// A member's Escaped is whether its key, as written, holds a backslash:
// also after a value with escapes, and for escapes anywhere in the key.
func TestMemberEscaped(t *testing.T) {
	keys := []string{`a`, `a\"b`, `\n`, `x\\`, `\u0061bc`, `plain`, `long key without any escape in it`, `q\/`}
	for _, prefix := range []string{``, `"v\n":"x\ty",`, `"w":["\u00e9"],`} {
		for _, k := range keys {
			body := `{` + prefix + `"` + k + `":"a\"b"}`
			var members []Member
			if err := Check([]byte(body), &members); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			m := members[len(members)-1]
			if got, want := m.Escaped, strings.Contains(k, `\`); got != want || body[m.KeyStart:m.KeyEnd] != k {
				t.Errorf("%s: key %q escaped %v, want %q %v", body, body[m.KeyStart:m.KeyEnd], got, k, want)
			}
			if len(members) > 1 && members[0].Escaped != strings.Contains(prefix[:strings.Index(prefix[1:], `"`)+1], `\`) {
				t.Errorf("%s: first key escaped %v", body, members[0].Escaped)
			}
		}
	}
}
