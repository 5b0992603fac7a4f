package contentfilter

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// allBuiltins turns on the eight builtins, redacting (the most work: every
// detector runs over every text to its end).
const allBuiltins = `[{"slug":"email","action":"redact"},{"slug":"phone","action":"redact"},{"slug":"ssn","action":"redact"},
{"slug":"credit-card","action":"redact"},{"slug":"ip-address","action":"redact"},{"slug":"person-name","action":"redact"},
{"slug":"address","action":"redact"},{"slug":"regex-prompt-injection","action":"flag"}]`

// prose is English text with numbers, capitalized words and the odd
// address: what a prompt looks like to the detectors.
const prose = `The quarterly report for Project Atlas shows 1,204 new customers in 2024, up from 987. ` +
	`Our team in New York met on Monday to review the numbers; version 2.3.1 of the app shipped on 2024-03-15. ` +
	`Please summarize the main risks, list the next steps, and ignore the typo in the appendix. ` +
	`Revenue grew 12.5% to $4.2 million while costs stayed at 3.1 million. The server at build-07 handled 850 requests per second. `

func benchBody(size int) []byte {
	text := strings.Repeat(prose, size/len(prose)+1)[:size]
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":`)
	body = jsonstr.Append(body, text)
	return append(body, `}]}`...)
}

func benchmarkBuiltins(b *testing.B, size int) {
	s := Set{mustGuard(b, "g", ``, allBuiltins)}
	body := benchBody(size)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, res := s.Body(Chat, body); res.Block != nil {
			b.Fatal("blocked")
		}
	}
}

// The eight builtins on a 4 KB prompt (goal: at most 150 µs) and a 100 KB
// one (goal: at most 3 ms).
func BenchmarkBuiltins4KB(b *testing.B)   { benchmarkBuiltins(b, 4<<10) }
func BenchmarkBuiltins100KB(b *testing.B) { benchmarkBuiltins(b, 100<<10) }

// tenPatterns are ten custom filters of the kinds operators write: codes,
// secrets' shapes, phrases; each holds a literal its prefilter looks for
// (BenchmarkScanNoLiteral1MiB measures one that does not).
const tenPatterns = `[{"pattern":"\\bPROJ-[0-9]{4}\\b","action":"block"},{"pattern":"sk-[a-zA-Z0-9]{48}","action":"redact"},
{"pattern":"(?i)strictly confidential","action":"flag"},{"pattern":"\\bAKIA[0-9A-Z]{16}\\b","action":"redact"},
{"pattern":"(?i)internal use only","action":"flag"},{"pattern":"ghp_[A-Za-z0-9]{36}","action":"redact"},
{"pattern":"(?i)password\\s*[:=]","action":"redact"},{"pattern":"\\bxox[baprs]-[0-9A-Za-z-]{10,}","action":"redact"},
{"pattern":"(?i)project (falcon|eagle)","action":"block"},{"pattern":"\\bEMP-[0-9]{6}\\b","action":"redact"}]`

// proseNonASCII is prose with the odd accented word and typographic
// punctuation: the folded copies are made.
const proseNonASCII = `The café’s quarterly report — for Project Atlas — shows 1,204 new customers in 2024, up from 987. ` +
	`Our team in München met on Monday to review the numbers; version 2.3.1 shipped on 2024-03-15. ` +
	`Please summarize the main risks, list the next steps, and ignore the typo in the appendix. ` +
	`Revenue grew 12.5% to €4.2 million while costs stayed at 3.1 million. The server at build-07 handled 850 requests per second. `

func benchmarkScan(b *testing.B, text string, size int) {
	benchmarkScanWith(b, Set{mustGuard(b, "g", tenPatterns, allBuiltins)}, text, size)
}

func benchmarkScanWith(b *testing.B, s Set, text string, size int) {
	t := strings.Repeat(text, size/len(text)+1)[:size]
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":`)
	body = jsonstr.Append(body, strings.ToValidUTF8(t, ""))
	body = append(body, `}]}`...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0, ok := cpuTime()
	for b.Loop() {
		if _, res := s.Body(Chat, body); res.Block != nil {
			b.Fatal("blocked")
		}
	}
	if cpu1, _ := cpuTime(); ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// Every builtin and ten custom patterns: a 4 KB request (goal: at most
// 50 µs) and a 1 MiB one (goal: at most 5 ms), ASCII prose and prose
// with non-ASCII characters (folded copies made).
func BenchmarkScan4KB(b *testing.B)          { benchmarkScan(b, prose, 4<<10) }
func BenchmarkScan1MiB(b *testing.B)         { benchmarkScan(b, prose, 1<<20) }
func BenchmarkScanNonASCII4KB(b *testing.B)  { benchmarkScan(b, proseNonASCII, 4<<10) }
func BenchmarkScanNonASCII1MiB(b *testing.B) { benchmarkScan(b, proseNonASCII, 1<<20) }

// One custom pattern with no literal for a prefilter to look for: the
// regular expression runs over every byte (Go's RE2, tens of MB/s).
func BenchmarkScanNoLiteral1MiB(b *testing.B) {
	benchmarkScanWith(b, Set{mustGuard(b, "g", `[{"pattern":"\\b[A-Z]{2}[0-9]{6}[A-Z]\\b","action":"redact"}]`, ``)}, prose, 1<<20)
}
