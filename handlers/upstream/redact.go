package upstream

import (
	"bytes"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/internal/redact"
)

// A provider's error text may echo the credential it was sent: "Incorrect
// API key provided: Bearer sk-...", a truncated "sk-abc123...xyz", a
// request's signature. Every piece of provider text that reaches a client
// (an error's message and raw body, a stream's error event) goes through
// Route.Redact first, which knows the current attempt's secrets: its
// provider key (the operator's, the account's BYOK key or a private
// endpoint's) and, for a signed request, the signature it carried.

// Redact returns s without the current attempt's secrets (redact.Secrets).
func (rt *Route) Redact(s string) string {
	if rt == nil {
		return s
	}
	return redact.Secrets(s, rt.Key, rt.Signature)
}

// RedactBytes is redact for an event's bytes: b itself when it holds no
// secret.
func (rt *Route) RedactBytes(b []byte) []byte {
	if rt == nil || (rt.Key == "" && rt.Signature == "") {
		return b
	}
	s := jsonpeek.ViewString(b)
	if out := rt.Redact(s); out != s {
		return []byte(out)
	}
	return b
}

// MayCarryProviderError reports whether an event may carry a provider's
// error text: the cheap test that keeps the redaction off the others.
func MayCarryProviderError(b []byte) bool {
	return bytes.Contains(b, errorWord)
}

var errorWord = []byte("error")

// SignatureOf is the signature of an AWS Signature V4 Authorization
// header ("... Signature=<hex>"), "" without one.
func SignatureOf(auth string) string {
	_, sig, ok := strings.Cut(auth, "Signature=")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(sig, ", "); i >= 0 {
		sig = sig[:i]
	}
	return sig
}
