package handlers

import (
	"bytes"
	"strings"
)

// A provider's error text may echo the credential it was sent: "Incorrect
// API key provided: Bearer sk-...", a truncated "sk-abc123...xyz", a
// request's signature. Every piece of provider text that reaches a client
// (an error's message and raw body, a stream's error event) goes through
// Route.redact first, which knows the current attempt's secrets: its
// provider key (the operator's, the account's BYOK key or a private
// endpoint's) and, for a signed request, the signature it carried.

// redacted stands where a secret was.
const redacted = "[REDACTED]"

// minSecretRun is the shortest run of a secret's characters that is
// removed wherever it appears: a provider may echo any part of a key.
const minSecretRun = 8

// minWholeSecret is the shortest secret removed where it appears whole;
// a shorter one (a test's "k") would blank out ordinary words.
const minWholeSecret = 6

// redact returns s without the current attempt's secrets.
func (rt *Route) redact(s string) string {
	if rt == nil {
		return s
	}
	return redactSecrets(s, rt.key, rt.signature)
}

// redactBytes is redact for an event's bytes: b itself when it holds no
// secret.
func (rt *Route) redactBytes(b []byte) []byte {
	if rt == nil || (len(rt.key) < minWholeSecret && len(rt.signature) < minWholeSecret) {
		return b
	}
	s := viewString(b)
	if out := rt.redact(s); out != s {
		return []byte(out)
	}
	return b
}

// redactSecrets removes from s every run of minSecretRun or more
// characters of a secret (the secret whole, behind "Bearer " or cut
// short), in its plain and its JSON-escaped form, and every whole
// occurrence of a shorter secret of at least minWholeSecret characters.
func redactSecrets(s string, secrets ...string) string {
	var cover []bool // cover[i]: s[i] is part of a secret's run
	mark := func(from, to int) {
		if cover == nil {
			cover = make([]bool, len(s))
		}
		for i := from; i < to; i++ {
			cover[i] = true
		}
	}
	for _, secret := range secrets {
		if len(secret) < minWholeSecret {
			continue
		}
		forms := []string{secret}
		if esc := strings.ReplaceAll(secret, "/", `\/`); esc != secret {
			forms = append(forms, esc)
		}
		for _, f := range forms {
			if len(f) < minSecretRun {
				for at := 0; ; {
					i := strings.Index(s[at:], f)
					if i < 0 {
						break
					}
					mark(at+i, at+i+len(f))
					at += i + len(f)
				}
				continue
			}
			// Every window of minSecretRun characters of s that occurs in
			// the secret: together they cover each longer shared run.
			for i := 0; i+minSecretRun <= len(s); i++ {
				if strings.Contains(f, s[i:i+minSecretRun]) {
					mark(i, i+minSecretRun)
				}
			}
		}
	}
	if cover == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if !cover[i] {
			j := i
			for j < len(s) && !cover[j] {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		for i < len(s) && cover[i] {
			i++
		}
		b.WriteString(redacted)
	}
	return b.String()
}

// mayCarryProviderError reports whether an event may carry a provider's
// error text: the cheap test that keeps the redaction off the others.
func mayCarryProviderError(b []byte) bool {
	return bytes.Contains(b, errorWord)
}

var errorWord = []byte("error")

// signatureOf is the signature of an AWS Signature V4 Authorization
// header ("... Signature=<hex>"), "" without one.
func signatureOf(auth string) string {
	_, sig, ok := strings.Cut(auth, "Signature=")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(sig, ", "); i >= 0 {
		sig = sig[:i]
	}
	return sig
}
