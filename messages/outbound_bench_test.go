package messages

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// anthropicStream is a typical Messages stream of 40 text deltas.
var anthropicStream = func() string {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for range 40 {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word\"}}\n\n")
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":40}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}()

// BenchmarkAnthropicToChatStream measures translating one streamed answer
// into chat chunks.
func BenchmarkAnthropicToChatStream(b *testing.B) {
	data := []byte(anthropicStream)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		aw := NewAnthropicToChat(rec, "claude")
		aw.Header().Set("Content-Type", "text/event-stream")
		aw.WriteHeader(200)
		if _, err := aw.Write(data); err != nil {
			b.Fatal(err)
		}
	}
}
