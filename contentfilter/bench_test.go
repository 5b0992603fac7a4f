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
