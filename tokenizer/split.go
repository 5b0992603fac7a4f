package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Character classes of the encodings' patterns.
const (
	cLetter  = 1 << iota // \p{L}
	cNumber              // \p{N}
	cSpace               // \s
	cUpper               // o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	cLower               // o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	cNewline             // \r or \n
	cMark                // \p{M}
)

var asciiClass [128]uint8

func init() {
	for r := range rune(128) {
		asciiClass[r] = classOf(r)
	}
}

func classOf(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return cSpace | cNewline
	case unicode.IsSpace(r):
		return cSpace
	case unicode.IsUpper(r) || unicode.IsTitle(r):
		return cLetter | cUpper
	case unicode.IsLower(r):
		return cLetter | cLower
	case unicode.IsLetter(r): // Lm, Lo
		return cLetter | cUpper | cLower
	case unicode.IsMark(r):
		return cUpper | cLower | cMark
	case unicode.IsNumber(r):
		return cNumber
	}
	return 0 // punctuation, symbols, others
}

// at decodes the character at i: its class and length.
func at(s string, i int) (uint8, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return classOf(r), n
}

// other reports a character of [^\s\p{L}\p{N}].
func other(c uint8) bool { return c&(cSpace|cLetter|cNumber) == 0 }

// prefixable reports a character of [^\r\n\p{L}\p{N}].
func prefixable(c uint8) bool { return c&(cNewline|cLetter|cNumber) == 0 }

// contraction is the length of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or 0.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return 0
	}
	if s[i+1] == 0xc5 && i+2 < len(s) && s[i+2] == 0xbf {
		return 3 // ſ (U+017F) folds to s
	}
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && s[i+2]|0x20 == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2]|0x20 == 'l' {
			return 3
		}
	}
	return 0
}

// numberEnd is the end of \p{N}{1,3} at i (a number there).
func numberEnd(s string, i int) int {
	for k := 0; k < 3 && i < len(s); k++ {
		c, n := at(s, i)
		if c&cNumber == 0 {
			break
		}
		i += n
	}
	return i
}

// spaceEnd is the end of the whitespace at i, by the pattern's last three
// alternatives: \s*[\r\n]+ | \s+(?!\S) | \s+.
func spaceEnd(s string, i int) int {
	q, lastNL, last := i, -1, i
	for q < len(s) {
		c, n := at(s, q)
		if c&cSpace == 0 {
			break
		}
		if c&cNewline != 0 {
			lastNL = q
		}
		last = q
		q += n
	}
	switch {
	case lastNL >= 0:
		return lastNL + 1
	case q == len(s) || last == i:
		return q
	}
	return last // leave the last space to the word that follows
}

// otherEnd is the end of ` ?[^\s\p{L}\p{N}]+` followed by any of the
// trailing bytes (o200k: \r, \n and /; cl100k: \r and \n), or -1.
func otherEnd(s string, i int, slash bool) int {
	p := i
	if s[p] == ' ' {
		p++
	}
	q := p
	for q < len(s) {
		c, n := at(s, q)
		if !other(c) {
			break
		}
		q += n
	}
	if q == p {
		return -1
	}
	for q < len(s) && (s[q] == '\r' || s[q] == '\n' || slash && s[q] == '/') {
		q++
	}
	return q
}

// o200kPiece is the end of the piece at i by o200k_base's pattern:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func o200kPiece(s string, i int) int {
	c, n := at(s, i)
	pre := prefixable(c) && i+n < len(s)
	if pre {
		if e := o200kWord1(s, i+n); e > 0 {
			return e
		}
	}
	if e := o200kWord1(s, i); e > 0 {
		return e
	}
	if pre {
		if e := o200kWord2(s, i+n); e > 0 {
			return e
		}
	}
	if e := o200kWord2(s, i); e > 0 {
		return e
	}
	if c&cNumber != 0 {
		return numberEnd(s, i)
	}
	if e := otherEnd(s, i, true); e > 0 {
		return e
	}
	if c&cSpace != 0 {
		return spaceEnd(s, i)
	}
	return i + n
}

// o200kWord1 matches [U]*[L]+ and a contraction at p, with U and L
// sharing Lm, Lo and marks; it ends at -1 when nothing matches.
func o200kWord1(s string, p int) int {
	q, shared, sharedEnd := p, -1, -1
	var c uint8
	var n int
	for q < len(s) {
		c, n = at(s, q)
		if c&cUpper == 0 {
			break
		}
		if c&cLower != 0 {
			shared, sharedEnd = q, q+n
		}
		q += n
	}
	var e int
	switch {
	case q < len(s) && c&cLower != 0 && c&cUpper == 0:
		// [L]+ from q: greedy over Ll and the shared classes.
		e = q
		for e < len(s) {
			c, n := at(s, e)
			if c&cLower == 0 {
				break
			}
			e += n
		}
	case shared >= 0:
		// Backtracked: the last shared character of the run ends it.
		e = sharedEnd
	default:
		return -1
	}
	return e + contraction(s, e)
}

// o200kWord2 matches [U]+[L]* and a contraction at p, or -1.
func o200kWord2(s string, p int) int {
	q := p
	for q < len(s) {
		c, n := at(s, q)
		if c&cUpper == 0 {
			break
		}
		q += n
	}
	if q == p {
		return -1
	}
	for q < len(s) {
		c, n := at(s, q)
		if c&cLower == 0 {
			break
		}
		q += n
	}
	return q + contraction(s, q)
}

// cl100kPiece is the end of the piece at i by cl100k_base's pattern:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func cl100kPiece(s string, i int) int {
	if k := contraction(s, i); k > 0 {
		return i + k
	}
	c, n := at(s, i)
	p := i
	if prefixable(c) && i+n < len(s) {
		if c2, _ := at(s, i+n); c2&cLetter != 0 {
			p = i + n
		}
	}
	if c2, _ := at(s, p); c2&cLetter != 0 {
		for p < len(s) {
			c, n := at(s, p)
			if c&cLetter == 0 {
				break
			}
			p += n
		}
		return p
	}
	if c&cNumber != 0 {
		return numberEnd(s, i)
	}
	if e := otherEnd(s, i, false); e > 0 {
		return e
	}
	if c&cSpace != 0 {
		return spaceEnd(s, i)
	}
	return i + n
}
