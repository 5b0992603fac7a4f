package jsonstr

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strings"
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

// TestPlainWordMatchesTable: a word is plain exactly when each of its
// bytes is safe, for every byte value at every place among safe bytes,
// for every pair of byte values at two places, and for random words.
func TestPlainWordMatchesTable(t *testing.T) {
	check := func(w [8]byte) {
		t.Helper()
		want := true
		for _, c := range w {
			want = want && safe[c]
		}
		x := binary.LittleEndian.Uint64(w[:])
		if got := plainWord(x); got != want {
			t.Fatalf("plainWord(% x) = %t, want %t", w, got, want)
		}
	}
	for _, fill := range []byte{' ', 'a', 0x7f, '=', '?', '#', '\'', '['} {
		for c := 0; c < 256; c++ {
			for p := range 8 {
				w := [8]byte{fill, fill, fill, fill, fill, fill, fill, fill}
				w[p] = byte(c)
				check(w)
			}
		}
	}
	for c := 0; c < 256; c++ {
		for d := 0; d < 256; d++ {
			for _, p := range [][2]int{{0, 1}, {3, 7}, {6, 2}} {
				w := [8]byte{'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'}
				w[p[0]], w[p[1]] = byte(c), byte(d)
				check(w)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		check(w)
		for p := range 8 { // mostly safe words, one random byte
			w[p] = byte(0x20 + rng.IntN(0x60))
		}
		w[rng.IntN(8)] = byte(rng.Uint32())
		check(w)
	}
}

// TestAppendMatchesEncodingJSONLong: every byte value at every place of
// strings long enough to be read a word at a time.
func TestAppendMatchesEncodingJSONLong(t *testing.T) {
	base := "gen-0001763900000000-abcdef/vendor/model:free"
	for c := 0; c < 256; c++ {
		for p := range len(base) {
			s := base[:p] + string([]byte{byte(c)}) + base[p:]
			if got, want := string(Append(nil, s)), marshal(t, s); got != want {
				t.Fatalf("Append(%q) = %s, want %s", s, got, want)
			}
		}
	}
	for _, s := range []string{"日本語のテキスト、とても長い文字列です", "abcdefgh\u2028ijklmnop\u2029", "abcdefghijklmnop\xffqrstuvwxyz012345", strings.Repeat("<&>\"\\", 9)} {
		if got, want := string(Append(nil, s)), marshal(t, s); got != want {
			t.Fatalf("Append(%q) = %s, want %s", s, got, want)
		}
	}
}

func BenchmarkAppendModelName(b *testing.B) {
	buf := make([]byte, 0, 128)
	for b.Loop() {
		buf = Append(buf[:0], "anthropic/claude-3.5-sonnet-20241022:beta")
	}
}
