package anthropic_test

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/anthropic"
	"github.com/tollgate-dev/caddy-tollgate/dialect/dialecttest"
)

func TestConformance(t *testing.T) {
	dialecttest.Run(t, dialecttest.Case{
		Module:  new(anthropic.Module),
		Options: dialect.Options{Name: "a", Model: "claude-sonnet-4"},
		Plain: dialecttest.Answer{ContentType: "application/json", Body: []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4",` +
			`"content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`)},
		Stream: dialecttest.Answer{ContentType: "text/event-stream", Body: []byte("event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}` + "\n\n" +
			"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
			"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}` + "\n\n" +
			"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n")},
		ErrorStatus: 529,
		ErrorBody:   []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
	})
}
