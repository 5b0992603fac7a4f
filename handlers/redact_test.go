package handlers

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

func TestSignatureOf(t *testing.T) {
	if got := upstream.SignatureOf("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=00ff"); got != "00ff" {
		t.Errorf("signatureOf: %q", got)
	}
	if got := upstream.SignatureOf("Bearer sk-1"); got != "" {
		t.Errorf("signatureOf a bearer token: %q", got)
	}
}
