package websearch

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var testSources = []Source{
	{Title: "Go", URL: "https://go.dev/", Snippet: "The Go language"},
	{Title: "Wiki Foo", URL: "https://en.wikipedia.org/wiki/Foo_(bar)", Snippet: "Foo is a bar"},
	{Title: "Ünïcödé", URL: "https://例え.jp/パス", Snippet: "日本語"},
}

// cpSlice slices s by code points, the unit of the annotation indices.
func cpSlice(s string, start, end int) string {
	r := []rune(s)
	return string(r[start:end])
}

func TestAnnotate(t *testing.T) {
	type ann struct{ span, url, title, content string }
	tests := []struct {
		name, text string
		want       []ann
	}{
		{"none", "no links here [or here] (x)", nil},
		{"one link", "See [Go](https://go.dev/) now.",
			[]ann{{"[Go](https://go.dev/)", "https://go.dev/", "Go", "The Go language"}}},
		{"url variant matches the source", "[the site](http://www.go.dev#top)",
			[]ann{{"[the site](http://www.go.dev#top)", "https://go.dev/", "Go", "The Go language"}}},
		{"unknown url keeps link text", "[Other page](https://example.com/a?b=1)",
			[]ann{{"[Other page](https://example.com/a?b=1)", "https://example.com/a?b=1", "Other page", ""}}},
		{"parentheses in url", "Per [Foo](https://en.wikipedia.org/wiki/Foo_(bar)), ok",
			[]ann{{"[Foo](https://en.wikipedia.org/wiki/Foo_(bar))", "https://en.wikipedia.org/wiki/Foo_(bar)", "Wiki Foo", "Foo is a bar"}}},
		{"nested brackets in text", "x [a [b] c](https://go.dev) y",
			[]ann{{"[a [b] c](https://go.dev)", "https://go.dev/", "Go", "The Go language"}}},
		{"unbalanced outer bracket", "x [see [Go](https://go.dev) y",
			[]ann{{"[Go](https://go.dev)", "https://go.dev/", "Go", "The Go language"}}},
		{"angle url and title", `[t](<https://a.com/x y> "T") and [u](https://b.com 'q')`,
			[]ann{{`[t](<https://a.com/x y> "T")`, "https://a.com/x y", "t", ""}, {`[u](https://b.com 'q')`, "https://b.com", "u", ""}}},
		{"several, with emoji and non-ASCII", "Ça 😀 [Go](https://go.dev) — 𝄞 [日本](https://例え.jp/パス)!",
			[]ann{{"[Go](https://go.dev)", "https://go.dev/", "Go", "The Go language"}, {"[日本](https://例え.jp/パス)", "https://例え.jp/パス", "Ünïcödé", "日本語"}}},
		{"emoji in link text", "😀😀[😀 go 😀](https://go.dev)😀",
			[]ann{{"[😀 go 😀](https://go.dev)", "https://go.dev/", "Go", "The Go language"}}},
		{"numbered references", "Go is fast [1]. Foo[2] is not, but x [2][3].",
			[]ann{{"[1]", "https://go.dev/", "Go", "The Go language"}, {"[2]", "https://en.wikipedia.org/wiki/Foo_(bar)", "Wiki Foo", "Foo is a bar"}, {"[3]", "https://例え.jp/パス", "Ünïcödé", "日本語"}}},
		{"reference at the very end", "as shown [1]",
			[]ann{{"[1]", "https://go.dev/", "Go", "The Go language"}}},
		{"not references", "a[1] [4] [0] [1](x) [1]: def \\[1] ![1]", nil},
		{"image and escape skipped", `![Go](https://go.dev/logo.png) \[Go](https://go.dev)`, nil},
		{"non-http link skipped", "[mail](mailto:a@b.c) [rel](/x) [e]()", nil},
		{"link text on one line only", "[a\nb](https://go.dev)", nil},
		{"unclosed", "[Go](https://go.dev", nil},
		{"link inside link text: the inner one wins", "[a [Go](https://go.dev) b](https://x.org)",
			[]ann{{"[Go](https://go.dev)", "https://go.dev/", "Go", "The Go language"}}},
		{"image inside link text", "[![badge](https://img.org/b.svg)](https://go.dev)",
			[]ann{{"[![badge](https://img.org/b.svg)](https://go.dev)", "https://go.dev/", "Go", "The Go language"}}},
		{"escaped bracket in text", `[a\]b](https://go.dev)`,
			[]ann{{`[a\]b](https://go.dev)`, "https://go.dev/", "Go", "The Go language"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Annotate(tt.text, testSources)
			if got == nil {
				t.Fatal("nil slice")
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d annotations %+v, want %d", len(got), got, len(tt.want))
			}
			for i, a := range got {
				w := tt.want[i]
				span := cpSlice(tt.text, a.StartIndex, a.EndIndex)
				if a.Type != "url_citation" || span != w.span || a.URL != w.url || a.Title != w.title || a.Content != w.content {
					t.Errorf("annotation %d: %+v (span %q), want %+v", i, a, span, w)
				}
			}
		})
	}
}

// Indices are code points: check them against byte offsets explicitly.
func TestAnnotateCodePointIndices(t *testing.T) {
	text := "😀é [Go](https://go.dev)"
	a := Annotate(text, nil)
	if len(a) != 1 || a[0].StartIndex != 3 || a[0].EndIndex != 3+utf8.RuneCountInString("[Go](https://go.dev)") {
		t.Fatalf("%+v", a)
	}
}

var streamTexts = []string{
	"Ça 😀 [Go](https://go.dev) — 𝄞 [日本](https://例え.jp/パス)! [1][2] x[3] [3]",
	"[a [b] c](https://go.dev) [see [Foo](https://en.wikipedia.org/wiki/Foo_(bar)) [t](<https://a.com/x y> \"T\") end [1]",
	"![img](https://go.dev/x.png) \\[no](https://go.dev) [mail](mailto:x) 🇫🇷🇫🇷 [🇫🇷](https://fr.example) [2]",
	"[unterminated " + strings.Repeat("é", 600) + " [Go](https://go.dev) [1]",
	strings.Repeat("[", 50) + "[x](https://x.org)" + strings.Repeat("]", 3) + "(https://y.org) [1]:x [2]",
	"[![b](https://i.org/b.svg)](https://go.dev) [a [Go](https://go.dev) b](https://x.org) [1]",
	"\xc3[Go](https://go.dev)\xe2\x82 [1] \xf0\x9f\x98 tail",
}

// Feeding the text in any split gives exactly Annotate's annotations.
func TestStreamerMatchesAnnotate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for ti, text := range streamTexts {
		want := Annotate(text, testSources)
		if len(want) == 0 {
			t.Fatalf("text %d has no annotations", ti)
		}
		for trial := range 300 {
			s := NewStreamer(testSources)
			var got []Annotation
			rest := text
			for rest != "" {
				n := 1 + rng.IntN(8)
				if trial%3 == 0 {
					n = 1 // byte by byte, splitting every multi-byte character
				}
				n = min(n, len(rest))
				got = append(got, s.Feed(rest[:n])...)
				rest = rest[n:]
			}
			got = append(got, s.Flush()...)
			if len(got) == 0 {
				got = []Annotation{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("text %d trial %d:\n got %+v\nwant %+v", ti, trial, got, want)
			}
		}
	}
}

// A link's annotation comes out with the delta holding its ")".
func TestStreamerEmitsEarly(t *testing.T) {
	s := NewStreamer(testSources)
	if a := s.Feed("Read [Go](https://go"); len(a) != 0 {
		t.Fatalf("early %+v", a)
	}
	if a := s.Feed(".dev) and"); len(a) != 1 || a[0].StartIndex != 5 {
		t.Fatalf("%+v", a)
	}
	if a := s.Feed(" [1]"); len(a) != 0 {
		t.Fatalf("reference before its next byte %+v", a)
	}
	if a := s.Feed("."); len(a) != 1 || a[0].URL != "https://go.dev/" {
		t.Fatalf("%+v", a)
	}
	if len(s.buf) > 1 {
		t.Errorf("decided text kept: %q", s.buf)
	}
}

// A "[" that never closes does not make the streamer hold the whole text.
func TestStreamerBoundedBuffer(t *testing.T) {
	s := NewStreamer(nil)
	s.Feed("[")
	for range 1000 {
		s.Feed("abcdefghij ")
	}
	if len(s.buf) > 100 {
		t.Errorf("buffer %d bytes", len(s.buf))
	}
}

func FuzzStreamer(f *testing.F) {
	for _, s := range streamTexts {
		f.Add(s, uint64(7))
	}
	f.Fuzz(func(t *testing.T, text string, seed uint64) {
		want := Annotate(text, testSources)
		n := utf8.RuneCountInString(text)
		for _, a := range want {
			if a.StartIndex < 0 || a.StartIndex >= a.EndIndex || a.EndIndex > n {
				t.Fatalf("bad indices %+v", a)
			}
		}
		rng := rand.New(rand.NewPCG(seed, 0))
		s := NewStreamer(testSources)
		got := []Annotation{}
		for rest := text; rest != ""; {
			k := min(1+rng.IntN(16), len(rest))
			got = append(got, s.Feed(rest[:k])...)
			rest = rest[k:]
		}
		got = append(got, s.Flush()...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("streamed %+v\nwhole %+v", got, want)
		}
	})
}

// Pathological bracket nesting stays fast (no exponential re-parsing).
func TestAnnotateNestingCost(t *testing.T) {
	nested := strings.Repeat("[", 300) + "[x](https://go.dev)" + strings.Repeat("](https://x.org)", 300)
	if a := Annotate(nested, testSources); len(a) != 1 || cpSlice(nested, a[0].StartIndex, a[0].EndIndex) != "[x](https://go.dev)" {
		t.Errorf("%+v", a)
	}
	Annotate(strings.Repeat("[", 100000), nil)
	Annotate(strings.Repeat("[a](", 20000), nil)
	Annotate(strings.Repeat("[](x) ", 20000), nil)
}
