package messages

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// claudeCodeRequest is a request Claude Code 2.1.331 sent in print mode
// (its system prompt, a system message mid-conversation, 12 tools), as the
// gateway received it: about 50 KB.
func claudeCodeRequest(tb testing.TB) []byte {
	tb.Helper()
	body, err := os.ReadFile("testdata/claude-code-2.1.331.json")
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// BenchmarkMessagesToChatClaudeCode measures translating Claude Code's
// request for a chat provider; the goal is under 100 µs.
//
//	go test ./handlers/messages -run '^$' -bench MessagesToChatClaudeCode -benchmem
func BenchmarkMessagesToChatClaudeCode(b *testing.B) {
	body := claudeCodeRequest(b)
	if _, err := MessagesToChat(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := MessagesToChat(body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's CPU time (user and system, the garbage
// collector's included): on a busy machine ns/op counts the time the
// benchmark waited for a core, cpu-ns/op only what it used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
