package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
)

type corpusRow struct {
	Text   string `json:"text"`
	O200k  int    `json:"o200k_base"`
	Cl100k int    `json:"cl100k_base"`
}

func loadCorpus(t testing.TB) []corpusRow {
	data, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []corpusRow
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// The counts equal those of OpenAI's tiktoken (testdata/reference.js),
// text by text and for the whole corpus joined.
func TestCountMatchesReference(t *testing.T) {
	rows := loadCorpus(t)
	for _, name := range Names() {
		e, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			want := r.O200k
			if name == Cl100kBase {
				want = r.Cl100k
			}
			if got := e.Count(r.Text); got != want {
				t.Errorf("%s %q: %d tokens, tiktoken counts %d", name, r.Text, got, want)
			}
		}
	}
}

func TestSplitEdges(t *testing.T) {
	e, err := Get(O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]int{
		"":            0,
		"a":           1,
		"hello world": 2,
		"\n":          1,
		"   ":         1,
	} {
		if got := e.Count(s); got != want {
			t.Errorf("%q: %d, want %d", s, got, want)
		}
	}
}

// A long piece (one word, one run of spaces) is merged in O(n log n):
// the heap's merges equal the scan's on pieces both can take.
func TestLongPieceMergesAsShort(t *testing.T) {
	e, err := Get(O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"antidisestablishmentarianism", "Pneumonoultramicroscopicsilicovolcanoconiosis",
		"xqzjvkwpyfhgbmdlrtsn", strings.Repeat("ab", 20), strings.Repeat(" ", 40)} {
		if len(w) > smallPiece {
			t.Fatalf("%q is not short", w)
		}
		if short, long := e.countPiece(w), e.mergeLong(w); short != long {
			t.Errorf("%q: scan %d, heap %d", w, short, long)
		}
	}
}

// A piece longer than exactPiece is counted in chunks, plus one a cut:
// never below its exact count (the heap's, on the whole piece) and at
// most a few percent above, on long pieces of letters, mixed case,
// Chinese, word fragments and spaces.
func TestLongPieceBound(t *testing.T) {
	r := rand.New(rand.NewSource(48))
	from := func(alphabet []string) func(n int) string {
		return func(n int) string {
			var b strings.Builder
			for b.Len() < n {
				b.WriteString(alphabet[r.Intn(len(alphabet))])
			}
			return b.String()
		}
	}
	letters := strings.Split("abcdefghijklmnopqrstuvwxyz", "")
	gens := map[string]func(int) string{
		"letters": from(letters),
		"mixed":   from(strings.Split("aeioustrnlkAEZqxéß", "")),
		"chinese": from(strings.Split("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事", "")),
		"words":   from([]string{"the", "tion", "ing", "ment", "anti", "dis", "establish", "ness", "over", "under", "a", "b"}),
		"spaces":  from([]string{" ", " ", " ", "\t"}),
	}
	for _, name := range Names() {
		e, err := Get(name)
		if err != nil {
			t.Fatal(err)
		}
		for g, gen := range gens {
			var exactSum, boundSum int
			for range 60 {
				p := gen(exactPiece + 1 + r.Intn(3000))
				exact, bound := e.mergeLong(p), e.countChunks(p)
				if bound < exact {
					t.Fatalf("%s %s: %d tokens counted, %d exactly: %q", name, g, bound, exact, p)
				}
				exactSum += exact
				boundSum += bound
			}
			if over := float64(boundSum-exactSum) / float64(exactSum); over > 0.05 {
				t.Errorf("%s %s: %.1f%% above the exact counts", name, g, 100*over)
			}
		}
	}
}

// CountUpTo counts as Count, in steps of 64 KiB cut between pieces; it
// stops once its context ends, or once the count passes its limit.
func TestCountUpTo(t *testing.T) {
	var b strings.Builder
	for _, r := range loadCorpus(t) {
		b.WriteString(r.Text + "   ")
	}
	text := strings.Repeat(b.String(), (300<<10)/b.Len()+1)
	for _, name := range Names() {
		e, _ := Get(name)
		all := e.Count(text)
		if n, err := e.CountUpTo(context.Background(), text, 0); err != nil || n != all {
			t.Fatalf("%s: %d, %v; Count says %d", name, n, err, all)
		}
		if n, err := e.CountUpTo(context.Background(), text, all); err != nil || n != all {
			t.Fatalf("%s at its count: %d, %v; Count says %d", name, n, err, all)
		}
		if n, err := e.CountUpTo(context.Background(), text, 1000); !errors.Is(err, ErrOverLimit) || n <= 1000 || n >= all {
			t.Fatalf("%s over 1000: %d, %v of %d", name, n, err, all)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, _ := Get(O200kBase)
	if n, err := e.CountUpTo(ctx, text, 0); !errors.Is(err, context.Canceled) || n != 0 {
		t.Fatalf("canceled: %d, %v", n, err)
	}
}

func TestUnknownName(t *testing.T) {
	if _, err := Get("gpt2"); err == nil || !strings.Contains(err.Error(), `"gpt2"`) {
		t.Fatalf("err = %v", err)
	}
}

// benchText is prose, code and JSON of several scripts, n bytes long.
func benchText(b *testing.B, n int) string {
	var sb strings.Builder
	rows := loadCorpus(b)
	for sb.Len() < n {
		for _, r := range rows {
			sb.WriteString(r.Text)
			sb.WriteByte('\n')
		}
	}
	s := sb.String()[:n]
	for !strings.HasSuffix(s, "\n") && len(s) > 0 && s[len(s)-1] >= 0x80 {
		s = s[:len(s)-1] // end on a whole character
	}
	return s
}

func benchmarkCount(b *testing.B, name string, n int) {
	e, err := Get(name)
	if err != nil {
		b.Fatal(err)
	}
	s := benchText(b, n)
	tokens := e.Count(s)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		e.Count(s)
	}
	b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkCountO200k1KB(b *testing.B)    { benchmarkCount(b, O200kBase, 1<<10) }
func BenchmarkCountO200k100KB(b *testing.B)  { benchmarkCount(b, O200kBase, 100<<10) }
func BenchmarkCountO200k1MB(b *testing.B)    { benchmarkCount(b, O200kBase, 1<<20) }
func BenchmarkCountCl100k1KB(b *testing.B)   { benchmarkCount(b, Cl100kBase, 1<<10) }
func BenchmarkCountCl100k100KB(b *testing.B) { benchmarkCount(b, Cl100kBase, 100<<10) }
func BenchmarkCountCl100k1MB(b *testing.B)   { benchmarkCount(b, Cl100kBase, 1<<20) }

// A text of one repeated letter is a single piece, counted in chunks.
func BenchmarkCountO200kOneWord1MB(b *testing.B) {
	e, _ := Get(O200kBase)
	s := strings.Repeat("a", 1<<20)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		e.Count(s)
	}
}

// randomWords is n bytes of words of random letters, each of size
// bytes: what costs the tokenizer most (no word is a token, every pair
// is looked up).
func randomWords(n, size int) string {
	r := rand.New(rand.NewSource(1))
	var b strings.Builder
	for b.Len() < n {
		for range size {
			b.WriteByte(byte('a' + r.Intn(26)))
		}
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// The worst inputs known: a MiB of random words of 60 KB (once five times
// the cost of ordinary text, now counted in chunks) and of 256 bytes (the
// longest pieces merged whole). Goal: at most about three times
// BenchmarkCountO200k1MB.
func BenchmarkCountO200kWorst60KBWords1MB(b *testing.B) { benchmarkWords(b, 60_000) }
func BenchmarkCountO200kWorst256BWords1MB(b *testing.B) { benchmarkWords(b, exactPiece-1) }

func benchmarkWords(b *testing.B, size int) {
	e, _ := Get(O200kBase)
	s := randomWords(1<<20, size)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		e.Count(s)
	}
}

// Loading and counting are safe from many goroutines at once.
func TestConcurrentGetAndCount(t *testing.T) {
	rows := loadCorpus(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			name := Names()[g%2]
			e, err := Get(name)
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range rows {
				want := r.O200k
				if name == Cl100kBase {
					want = r.Cl100k
				}
				if got := e.Count(r.Text); got != want {
					t.Errorf("%s: %d, want %d", name, got, want)
				}
			}
		})
	}
	wg.Wait()
}
