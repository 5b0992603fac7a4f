package bedrock_test

import (
	"bytes"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/bedrock"
	"github.com/tollgate-dev/caddy-tollgate/dialect/dialecttest"
)

func TestConformance(t *testing.T) {
	var frames bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, e := range [][2]string{{"messageStart", `{"role":"assistant"}`}, {"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`},
		{"messageStop", `{"stopReason":"end_turn"}`}, {"metadata", `{"usage":{"inputTokens":5,"outputTokens":2,"totalTokens":7}}`}} {
		var h eventstream.Headers
		h.Set(":message-type", eventstream.StringValue("event"))
		h.Set(":event-type", eventstream.StringValue(e[0]))
		if err := enc.Encode(&frames, eventstream.Message{Headers: h, Payload: []byte(e[1])}); err != nil {
			t.Fatal(err)
		}
	}
	dialecttest.Run(t, dialecttest.Case{
		Module:  &bedrock.Module{AWSRegion: "us-east-1"},
		Options: dialect.Options{Name: "b", Model: "anthropic.claude-sonnet-4"},
		Plain: dialecttest.Answer{ContentType: "application/json", Body: []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},` +
			`"stopReason":"end_turn","usage":{"inputTokens":5,"outputTokens":2,"totalTokens":7}}`)},
		Stream:      dialecttest.Answer{ContentType: "application/vnd.amazon.eventstream", Body: frames.Bytes()},
		ErrorStatus: 429,
		ErrorBody:   []byte(`{"message":"Too many requests, please wait before trying again."}`),
	})
}
