package dialect_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/bedrock"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/gemini"
	_ "github.com/tollgate-dev/caddy-tollgate/dialect/openai"
)

// chat4K is a 4 KB chat completions request: a system prompt, a few
// turns, a tool.
var chat4K = func() []byte {
	turn := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 8)
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":512,"temperature":0.5,"messages":[{"role":"system","content":"You are terse."}`)
	for i := 0; b.Len() < 3800; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b.WriteString(`,{"role":"` + role + `","content":"` + turn + `"}`)
	}
	b.WriteString(`],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`)
	return []byte(b.String())
}()

// answers4K are 4 KB answers in each dialect's own form, for ToChat.
var answers4K = map[string][]byte{
	"anthropic": []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 88) + `"}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"usage":{"input_tokens":1000,"output_tokens":900,"cache_read_input_tokens":100,"cache_creation_input_tokens":0}}`),
	"bedrock": []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 88) + `"}]}},"stopReason":"end_turn",` +
		`"usage":{"inputTokens":900,"outputTokens":900,"totalTokens":1900,"cacheReadInputTokens":100},"metrics":{"latencyMs":100}}`),
	"gemini": []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog. ", 88) + `"}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":1000,"candidatesTokenCount":900,"totalTokenCount":1900,"cachedContentTokenCount":100},"modelVersion":"gemini-2.5-flash"}`),
}

// BenchmarkDialectTranslate measures one attempt's translation per
// dialect: the 4 KB request built for the provider (FromChat, or Adapt
// where chat is native) and a 4 KB answer read back as a chat completion
// (ToChat; nothing where chat is native). The documented goal: under 30 µs.
func BenchmarkDialectTranslate(b *testing.B) {
	for _, style := range dialect.Names() {
		o := dialect.Options{Name: style, Model: "m", MaxTokensField: "max_completion_tokens",
			Settings: map[string]string{"deployment": "d", "api_version": "2024-10-21", "auth": "api_key", "aws_region": "us-east-1"}}
		o.Settings = pick(dialect.SettingsOf(style), o.Settings)
		d, err := dialect.New(style, o)
		if err != nil {
			b.Fatal(err)
		}
		answer := answers4K[style]
		b.Run(style, func(b *testing.B) {
			b.SetBytes(int64(len(chat4K) + len(answer)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if d.Native(dialect.Chat) {
					_, err = d.Adapt(dialect.Chat, chat4K, 1000)
				} else {
					_, err = d.FromChat(chat4K, 1000)
				}
				if err != nil {
					b.Fatal(err)
				}
				rec := httptest.NewRecorder()
				if r := d.ToChat(rec, "m", 1<<20); r != nil {
					r.Header().Set("Content-Type", "application/json")
					r.WriteHeader(200)
					r.Write(answer)
					r.Finish()
					if rec.Body.Len() == 0 {
						b.Fatal("no answer")
					}
				}
			}
		})
	}
}

// pick keeps the settings a style takes.
func pick(names []string, all map[string]string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = all[n]
	}
	return out
}
