package jsonstr

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// marshal is encoding/json's encoding of s, the reference.
func marshal(t testing.TB, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestQuoteExact(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", `""`},
		{"gen-0001763900000000-abcdef", `"gen-0001763900000000-abcdef"`},
		{"vendor/model:free", `"vendor/model:free"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"<&>", `"\u003c\u0026\u003e"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"~ DEL\x7f", "\"~ DEL\x7f\""},
		{"日本", `"日本"`},
		{"a\xffb", `"a\ufffdb"`},
		{"\xe2\x80", `"\ufffd\ufffd"`},
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`}, // a surrogate half is invalid UTF-8
		{"x\u2028y\u2029z", `"x\u2028y\u2029z"`},
		{"😀", `"😀"`},
	} {
		if got := string(Quote(tt.in)); got != tt.want {
			t.Errorf("Quote(%q) = %s, want %s", tt.in, got, tt.want)
		}
		if ref := marshal(t, tt.in); ref != tt.want {
			t.Errorf("encoding/json writes %q as %s, the table says %s", tt.in, ref, tt.want)
		}
	}
}

// Every byte value, alone and between safe bytes, as encoding/json writes it.
func TestAppendMatchesEncodingJSONEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, s := range []string{string([]byte{byte(c)}), "ab" + string([]byte{byte(c)}) + "cd"} {
			if got, want := string(Append(nil, s)), marshal(t, s); got != want {
				t.Errorf("Append(%q) = %s, want %s", s, got, want)
			}
		}
	}
}

func TestAppendKeepsPrefix(t *testing.T) {
	if got := string(Append([]byte(`{"id":`), "a\nb")); got != `{"id":"a\nb"` {
		t.Errorf("Append = %s", got)
	}
}

func FuzzAppendMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "<a href=\"x\">&amp;</a>", "\x00\b\f\u2028\xff", "日本\xe6\x97"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Append(nil, s)
		if want := marshal(t, s); string(got) != want {
			t.Fatalf("Append(%q) = %s, want %s", s, got, want)
		}
		if !utf8.Valid(got) || !json.Valid(got) {
			t.Fatalf("Append(%q) = %q is not valid JSON", s, got)
		}
	})
}

func BenchmarkQuoteID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Quote("gen-0001763900000000-abcdef")
	}
}
