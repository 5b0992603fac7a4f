package messages

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// claudeCodeRequest is a request Claude Code 2.1.331 sent in print mode
// (its system prompt, a system message mid-conversation, 12 tools and the
// others deferred), as the gateway received it: about 50 KB.
func claudeCodeRequest(tb testing.TB) []byte {
	tb.Helper()
	body, err := os.ReadFile("testdata/claude-code-2.1.331.json")
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// BenchmarkMessagesToChatClaudeCode measures translating Claude Code's
// request for a chat provider, as it came and with its tools twice (24,
// about 80 KB); the goal is under 100 µs of CPU (cpu-ns/op) for the first.
//
//	go test ./messages -run '^$' -bench MessagesToChatClaudeCode -benchmem
func BenchmarkMessagesToChatClaudeCode(b *testing.B) {
	b.Run("12 tools", func(b *testing.B) { benchMessagesToChat(b, claudeCodeRequest(b)) })
	b.Run("24 tools", func(b *testing.B) { benchMessagesToChat(b, withToolsTwice(b, claudeCodeRequest(b))) })
}

// withToolsTwice adds a renamed copy of each tool of body: Claude Code
// sends 24 tools when none is deferred.
func withToolsTwice(b *testing.B, body []byte) []byte {
	tools := gjson.GetBytes(body, "tools").Array()
	for i, t := range tools {
		dup, err := sjson.Set(t.Raw, "name", t.Get("name").Str+"Copy"+strconv.Itoa(i))
		if err == nil {
			body, err = sjson.SetRawBytes(body, "tools.-1", []byte(dup))
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return body
}

func benchMessagesToChat(b *testing.B, body []byte) {
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
