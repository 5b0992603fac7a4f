package contentfilter

import (
	"context"
	"encoding/json"
	"errors"
	"regexp/syntax"
	"strings"
	"testing"
)

func costOf(t testing.TB, p string) int {
	t.Helper()
	parsed, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		t.Fatal(err)
	}
	return patternCost(prog)
}

// Patterns that keep many threads alive at each byte are refused when the
// guardrail is written, with the pattern named; the patterns people write
// (literals, classes with short counts, words) are accepted at a cost of
// a few instructions a byte.
func TestPatternCostRefusesSlowPatterns(t *testing.T) {
	for _, p := range []string{`(a|b){1000}x`, `[a-z]{1,1000}x`, `.{0,999}x`, `[\p{L}\p{N}]{900}z`,
		`(.*a){20}x`, `(a|b){100}x`, `[a-z]{1,70}x`, `(\w+\s?){1,30}x`} {
		raw, _ := json.Marshal([]map[string]string{{"pattern": "ok", "action": "flag"}, {"pattern": p, "action": "block"}})
		_, _, _, err := Compile("g", "G", raw, nil)
		var fe *Error
		if !errors.As(err, &fe) || fe.Field != "content_filters[1].pattern" || !strings.Contains(fe.Reason, "too costly") {
			t.Errorf("%s: %v, want content_filters[1].pattern too costly", p, err)
		}
	}
	for p, most := range map[string]int{
		`\bPROJ-[0-9]{4}\b`: 8, `sk-[a-z0-9]{8}`: 8, `codename-\w+`: 8, `[\w.+-]+@[\w-]+\.[\w.]+`: 8,
		`\b\d{3}-\d{2}-\d{4}\b`: 8, `(?i)confidential|secret|internal only`: 12,
		`(?i)\b(password|passwd|pwd)\s*[:=]\s*\S+`: 12, `\b[A-Z]{2}\d{6,10}\b`: 12, `[a-z]{1,20}x`: MaxPatternCost,
	} {
		if c := costOf(t, p); c > most {
			t.Errorf("%s: cost %d, want at most %d", p, c, most)
		}
		raw, _ := json.Marshal([]map[string]string{{"pattern": p, "action": "block"}})
		if _, _, _, err := Compile("g", "G", raw, nil); err != nil {
			t.Errorf("%s refused: %v", p, err)
		}
	}
}

// A counted repetition's cost grows with its count: the estimate sees it.
func TestPatternCostGrowsWithCount(t *testing.T) {
	if a, b := costOf(t, `[a-z]{1,5}x`), costOf(t, `[a-z]{1,20}x`); a >= b || b < 20 {
		t.Fatalf("costs %d and %d", a, b)
	}
}

// slowestAccepted is the costliest pattern the model accepts of the kind
// that is slowest to run (a class under a counted repetition); its worst
// text is letters, which keep every count alive.
const slowestAccepted = `[a-z]{1,30}x`

// A request whose text times its patterns' cost exceeds the budget is
// refused before the scan; one within it is scanned.
func TestScanBudget(t *testing.T) {
	g := mustGuard(t, "g", `[{"pattern":"`+slowestAccepted+`","action":"block"}]`, ``)
	cost := g.rules[0].cost
	if cost > MaxPatternCost || cost < 30 {
		t.Fatalf("cost %d", cost)
	}
	s := Set{g}
	fits := ScanBudget/cost - 64
	// Charged by length and cost, whatever the text: digits keep no
	// thread alive, and scan fast.
	digits := strings.Repeat("0123456789", fits/10)
	var res Result
	s.Text(digits, true, &res)
	if res.Stopped() {
		t.Fatalf("a text within the budget stopped: %+v", res)
	}
	// The budget is the request's: two texts together exceed it.
	s.Text(digits, true, &res)
	if !res.TooCostly {
		t.Fatal("the request's second text was scanned past the budget")
	}
	body := benchBody(ScanBudget/cost + 1)
	if _, res := s.Body(AnyAPI, body); !res.TooCostly || res.Block != nil {
		t.Fatalf("result %+v", res)
	}
}

// A scan stops once the request's context ends (the client left).
func TestScanStopsWithTheRequest(t *testing.T) {
	s := Set{mustGuard(t, "g", `[{"pattern":"`+slowestAccepted+`","action":"block"},{"pattern":"PROJ","action":"block"}]`, ``)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, res := s.BodyContext(ctx, AnyAPI, benchBody(1000)); !errors.Is(res.Err, context.Canceled) || !res.Stopped() {
		t.Fatalf("result %+v", res)
	}
	if _, res := s.BodyContext(context.Background(), AnyAPI, benchBody(1000)); res.Err != nil || res.TooCostly {
		t.Fatalf("result %+v", res)
	}
}

// BenchmarkSlowestAcceptedPattern scans the longest text the budget lets
// each of the slowest accepted patterns scan, on the text that is its
// worst: the request's worst case for custom patterns (goal: about a
// second).
func BenchmarkSlowestAcceptedPattern(b *testing.B) {
	for _, c := range []struct{ name, pattern, text string }{
		{"class", slowestAccepted, "abcdefghij"},
		{"folded", `(?i)[a-z]{1,30}x`, "abcdefghij"},
		{"unicode", `[\\p{L}\\p{N}]{1,30}z`, "abcdéfghij"},
		{"stars", `(.*a){8}x`, "aaaaaaaaaa"},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := Set{mustGuard(b, "g", `[{"pattern":"`+c.pattern+`","action":"block"}]`, ``)}
			n := ScanBudget / s[0].rules[0].cost
			text := strings.Repeat(c.text, n/len(c.text)+1)[:n]
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				var res Result
				if s.Text(text, true, &res); res.Stopped() {
					b.Fatal("stopped")
				}
			}
		})
	}
}
