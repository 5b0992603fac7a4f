// Package redact removes secrets from text that came from elsewhere (a
// provider's error message, its body) before it reaches a client or a log:
// a provider may echo the credential it was sent, whole, behind "Bearer ",
// or cut short.
package redact

import "strings"

// Mark stands where a secret was.
const Mark = "[REDACTED]"

// MinRun is the shortest run of a secret's characters that is removed
// wherever it appears: a provider may echo any part of a key.
const MinRun = 8

// minWhole is the shortest secret removed where it appears whole; a
// shorter one (a test's "k") would blank out ordinary words.
const minWhole = 6

// Secrets removes from s every run of MinRun or more
// characters of a secret (the secret whole, behind "Bearer " or cut
// short), in its plain and its JSON-escaped form, and every whole
// occurrence of a shorter secret of at least minWhole characters.
func Secrets(s string, secrets ...string) string {
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
		if len(secret) < minWhole {
			continue
		}
		forms := []string{secret}
		if esc := strings.ReplaceAll(secret, "/", `\/`); esc != secret {
			forms = append(forms, esc)
		}
		for _, f := range forms {
			if len(f) < MinRun {
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
			// Every window of MinRun characters of s that occurs in
			// the secret: together they cover each longer shared run.
			for i := 0; i+MinRun <= len(s); i++ {
				if strings.Contains(f, s[i:i+MinRun]) {
					mark(i, i+MinRun)
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
		b.WriteString(Mark)
	}
	return b.String()
}
