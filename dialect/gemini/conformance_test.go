package gemini_test

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/dialect/dialecttest"
	"github.com/tollgate-dev/caddy-tollgate/dialect/gemini"
)

func TestConformance(t *testing.T) {
	for _, auth := range []string{gemini.AuthAPIKey, gemini.AuthServiceAccount} {
		t.Run(auth, func(t *testing.T) {
			dialecttest.Run(t, dialecttest.Case{
				Module:  &gemini.Module{Auth: auth},
				Options: dialect.Options{Name: "g", Model: "gemini-2.5-flash"},
				Plain: dialecttest.Answer{ContentType: "application/json", Body: []byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hi"}]},"finishReason":"STOP"}],` +
					`"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`)},
				Stream: dialecttest.Answer{ContentType: "text/event-stream", Body: []byte(
					`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"H"}]}}],"usageMetadata":{"promptTokenCount":5},"responseId":"r2"}` + "\r\n\r\n" +
						`data: {"candidates":[{"content":{"role":"model","parts":[{"text":"i"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":2,"totalTokenCount":7},"responseId":"r2"}` + "\r\n\r\n")},
				ErrorStatus: 429,
				ErrorBody:   []byte(`{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`),
			})
		})
	}
}
