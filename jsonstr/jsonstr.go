// Package jsonstr writes strings as JSON strings byte for byte as
// encoding/json does, without its reflection: the gateway's hand-written
// encoders (storage's records, the pipeline's ids and model names) call it
// per field on their hot paths. It is a leaf package.
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// safe marks the ASCII bytes Append copies as they are: one table lookup
// per byte instead of six comparisons. It spans every byte value
// (non-ASCII ones false), so that the lookup needs no range check.
var safe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// Append appends s as a JSON string the way encoding/json does: quotes,
// backslashes and control characters escaped (\b, \f, \n, \r and \t in
// their short forms), <, > and & escaped for HTML safety, invalid UTF-8
// replaced by U+FFFD, U+2028 and U+2029 escaped.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// A tight loop over the run of safe bytes (most strings are all
		// safe): the compiler keeps it to a handful of instructions a byte.
		for i < len(s) && safe[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			b = appendEscapedASCII(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendEscapedASCII appends the escape of an ASCII byte that is not safe.
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// Quote is s as a JSON string, in one allocation when s needs no escapes.
func Quote(s string) []byte {
	return Append(make([]byte, 0, len(s)+2), s)
}
