package handlers

import (
	"strings"
	"testing"
)

func TestRedactSecrets(t *testing.T) {
	const key = "sk-proj-abc123DEF456ghi789JKL/xyz"
	cases := []string{
		"Incorrect API key provided: " + key,
		"Incorrect API key provided: Bearer " + key,
		"Incorrect API key provided: " + key[:14] + "..." + key[len(key)-4:],
		`{"error":{"message":"bad key ` + strings.ReplaceAll(key, "/", `\/`) + `"}}`,
		"key ends in " + key[len(key)-10:],
	}
	for _, c := range cases {
		got := redactSecrets(c, key, "")
		if !strings.Contains(got, redacted) {
			t.Errorf("%q: nothing redacted: %q", c, got)
		}
		for i := 0; i+minSecretRun <= len(key); i++ {
			if strings.Contains(got, key[i:i+minSecretRun]) {
				t.Errorf("%q: %q still holds %q", c, got, key[i:i+minSecretRun])
			}
		}
	}
	if got := redactSecrets("Incorrect API key provided: Bearer "+key, key); got != "Incorrect API key provided: Bearer "+redacted {
		t.Errorf("whole key: %q", got)
	}
	// Text that shares no run of 8 characters with a secret is untouched,
	// and so is a secret too short to tell from ordinary words.
	for _, c := range []string{"The model is overloaded", "sk-proj", ""} {
		if got := redactSecrets(c, key, "k"); got != c {
			t.Errorf("%q changed: %q", c, got)
		}
	}
	if got := redactSecrets("short key abcdef given", "abcdef"); got != "short key "+redacted+" given" {
		t.Errorf("short key: %q", got)
	}
	if got := signatureOf("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=00ff"); got != "00ff" {
		t.Errorf("signatureOf: %q", got)
	}
}
