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
		i = skipSafe(s, i)
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

// skipSafe is the index of the first byte of s from i on that is not
// safe; len(s) if none. Most strings are all safe: it reads them eight
// bytes at a time (plainWord), and the bytes of the word that holds an
// unsafe one, and of a last partial word, one by one from the table.
func skipSafe(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		// One 8-byte load (the compiler combines the bytes).
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if !plainWord(x) {
			break
		}
	}
	for i < len(s) && safe[s[i]] {
		i++
	}
	return i
}

const (
	ones = 0x0101010101010101 // 0x01 in every byte
	tops = 0x8080808080808080 // the top bit of every byte
)

// plainWord reports whether each of the 8 bytes of x is safe: ASCII, at
// least 0x20, and none of '"', '\\', '<', '>' and '&'. It uses the exact
// tests for "some byte is zero" ((v - ones) &^ v & tops) and "some byte is
// below n" ((v - n*ones) &^ v & tops, n <= 0x80), which can be wrong only
// about which byte, never about whether there is one. OR-ing in 0x02 maps
// '<' (0x3c) to '>' (0x3e) and nothing else to it; OR-ing in 0x04 maps
// '"' (0x22) to '&' (0x26), and nothing else to it.
func plainWord(x uint64) bool {
	zero := func(v uint64) uint64 { return (v - ones) &^ v & tops }
	bad := x&tops | // not ASCII
		(x-0x20*ones)&^x&tops | // a control character
		zero(x^('\\'*ones)) |
		zero((x|0x02*ones)^('>'*ones)) |
		zero((x|0x04*ones)^('&'*ones))
	return bad == 0
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
