// Package jsoncheck checks JSON text in one iterative pass, before any
// recursive parser (gjson's validation and iteration, encoding/json) reads
// it: a body nested a million levels deep would otherwise overflow the
// goroutine stack, which kills the process, or grow it to gigabytes.
//
// Check is for request bodies: besides the syntax of RFC 8259 it refuses
// nesting deeper than MaxDepth, strings that are not valid UTF-8, and an
// object that repeats a key at any depth (parsers disagree on which copy
// wins). Valid is for provider answers: syntax and depth only.
//
// Memory: the checker keeps 12 bytes per key of the objects still open
// (reused between calls), and a decoded copy of keys written with escapes:
// at most about twice the body's size for a body made of nothing but keys.
package jsoncheck

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how many arrays and objects may be open at once.
const MaxDepth = 128

// MaxLen is the longest text the checker reads; its offsets are 32-bit.
const MaxLen = 1<<31 - 1

// linearKeys is how many keys of an object are compared one by one as
// they come; a larger object is sorted once when it closes instead.
const linearKeys = 16

// Kind says what is wrong with the text.
type Kind int

const (
	Syntax      Kind = iota + 1 // not JSON (or longer than MaxLen)
	TooDeep                     // more than MaxDepth levels
	Duplicate                   // an object repeats a key
	InvalidUTF8                 // a string is not valid UTF-8
	Control                     // CheckText: a control character other than tab, CR, LF
	Surrogate                   // CheckText: an unpaired UTF-16 surrogate escape (\ud800)
	TooLong                     // CheckText: a string longer than MaxTextLen
)

// MaxTextLen bounds every string of a CheckText body, in bytes as written
// in the JSON text.
const MaxTextLen = 16384

// Error describes the first problem found.
type Error struct {
	Kind Kind
	// Path is where: the repeated key for Duplicate
	// (`messages[0].role`), the string's place otherwise; for a key
	// (Key), the place of its object. "" is the top level.
	Path string
	Key  bool
}

func (e *Error) Error() string {
	var reason string
	switch e.Kind {
	case TooDeep:
		return "JSON nests deeper than " + strconv.Itoa(MaxDepth) + " levels"
	case Duplicate:
		return e.Path + ": duplicate field"
	case InvalidUTF8:
		reason = "not valid UTF-8"
	case Control:
		reason = "control characters are not allowed"
	case Surrogate:
		reason = "unpaired UTF-16 surrogate"
	case TooLong:
		reason = "longer than " + strconv.Itoa(MaxTextLen) + " bytes"
	default:
		return "not valid JSON"
	}
	switch {
	case e.Key && e.Path == "":
		return "field name: " + reason
	case e.Key:
		return "field name in " + e.Path + ": " + reason
	case e.Path == "":
		return "JSON string: " + reason
	}
	return e.Path + ": " + reason
}

// Member is one key and value of the top-level object, as offsets into
// the checked text.
type Member struct {
	KeyStart, KeyEnd     uint32 // the key's text without its quotes, escapes undecoded
	ValueStart, ValueEnd uint32 // the value's raw text
	Escaped              bool   // the key holds a backslash escape
}

// Check checks a request body. When members is not nil and the text is an
// object, the top-level members are appended to *members in order.
func Check(b []byte, members *[]Member) *Error {
	return checkers.Get().(*checker).check(b, members, false)
}

// check runs a pooled checker and puts it back.
func (c *checker) check(b []byte, members *[]Member, text bool) *Error {
	c.b, c.strict, c.text, c.members = b, true, text, members
	err := c.run()
	c.b, c.members, c.depth = nil, nil, 0
	if cap(c.keys) <= maxPooledKeys && cap(c.scratch) <= maxPooledKeys {
		c.keys, c.scratch = c.keys[:0], c.scratch[:0]
		checkers.Put(c)
	}
	return err
}

// checkers are Check's checkers, kept with their key buffers so that a
// check allocates nothing; buffers grown by a large body are dropped.
var checkers = sync.Pool{New: func() any { return new(checker) }}

const maxPooledKeys = 1024

// CheckText is Check for administrative bodies, whose strings are names,
// ids and descriptions: it also refuses control characters other than
// tab, CR and LF (escaped or not, C1 included), unpaired surrogate escapes,
// which no UTF-8 text can hold, and strings longer than MaxTextLen.
func CheckText(b []byte, members *[]Member) *Error {
	return checkers.Get().(*checker).check(b, members, true)
}

// Valid reports whether b is one JSON value nested at most MaxDepth deep:
// gjson.ValidBytes without its recursion.
func Valid(b []byte) bool {
	c := checkers.Get().(*checker)
	c.b, c.strict, c.text = b, false, false
	ok := c.run() == nil
	c.b, c.depth = nil, 0
	checkers.Put(c)
	return ok
}

// key is a key of an open object: a span of the text, or of scratch when
// the key held escapes and was decoded for comparison.
type key struct {
	start, end uint32
	decoded    bool
}

// frame is an open array or object.
type frame struct {
	object bool
	keys   int32 // object: where its keys start in checker.keys
	index  int32 // array: the current element's index
	cur    key   // object: the current key
}

type checker struct {
	b       []byte
	strict  bool // UTF-8 and duplicate keys
	text    bool // CheckText's rules
	members *[]Member

	stack   [MaxDepth]frame
	depth   int
	keys    []key  // keys of the open objects, innermost last
	scratch []byte // decoded keys that held escapes
	escaped bool   // the string str last read holds an escape
}

func (c *checker) run() *Error {
	b := c.b
	if len(b) > MaxLen {
		return &Error{Kind: Syntax}
	}
	i := SkipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return &Error{Kind: Syntax}
		}
		c.valueAt(i, false)
		var err *Error
		switch ch := b[i]; {
		case ch == '{' || ch == '[':
			if c.depth == MaxDepth {
				return &Error{Kind: TooDeep}
			}
			c.stack[c.depth] = frame{object: ch == '{', keys: int32(len(c.keys))}
			c.depth++
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == ch+2 { // '}' is '{'+2, ']' is '['+2
				c.depth--
				i++
				break // the value ends here
			}
			if ch == '{' {
				if i, err = c.key(i); err != nil {
					return err
				}
			}
			continue
		case ch == '"':
			i, err = c.str(i, false)
		case ch == 't':
			i, err = literal(b, i, "true")
		case ch == 'f':
			i, err = literal(b, i, "false")
		case ch == 'n':
			i, err = literal(b, i, "null")
		default:
			i, err = number(b, i)
		}
		if err != nil {
			return err
		}
		c.valueAt(i, true)
		// After a value: close what ends here, then find the next value.
		for {
			i = SkipSpace(b, i)
			if c.depth == 0 {
				if i != len(b) {
					return &Error{Kind: Syntax}
				}
				return nil
			}
			if i >= len(b) {
				return &Error{Kind: Syntax}
			}
			f := &c.stack[c.depth-1]
			if b[i] == ',' {
				i = SkipSpace(b, i+1)
				if f.object {
					if i, err = c.key(i); err != nil {
						return err
					}
				} else {
					f.index++
				}
				break
			}
			if f.object && b[i] == '}' {
				if err := c.closeObject(f); err != nil {
					return err
				}
			} else if f.object || b[i] != ']' {
				return &Error{Kind: Syntax}
			}
			c.depth--
			i++
			c.valueAt(i, true)
		}
	}
}

// valueAt records where the value of the current top-level member starts
// or ends (end is just after it).
func (c *checker) valueAt(i int, end bool) {
	if c.members == nil || c.depth != 1 || !c.stack[0].object {
		return
	}
	m := &(*c.members)[len(*c.members)-1]
	if end {
		m.ValueEnd = uint32(i)
	} else {
		m.ValueStart = uint32(i)
	}
}

// key reads an object's key at b[i] and the colon after it.
func (c *checker) key(i int) (int, *Error) {
	b := c.b
	if i >= len(b) || b[i] != '"' {
		return i, &Error{Kind: Syntax}
	}
	end, err := c.str(i, true)
	if err != nil {
		return end, err
	}
	f := &c.stack[c.depth-1]
	k := key{start: uint32(i + 1), end: uint32(end - 1)}
	escaped := c.escaped
	if c.members != nil && c.depth == 1 {
		*c.members = append(*c.members, Member{KeyStart: k.start, KeyEnd: k.end, Escaped: escaped})
	}
	if c.strict {
		if escaped {
			s := len(c.scratch)
			c.scratch = appendUnescaped(c.scratch, b[k.start:k.end])
			k = key{start: uint32(s), end: uint32(len(c.scratch)), decoded: true}
		}
		if n := len(c.keys) - int(f.keys); n < linearKeys {
			for _, prev := range c.keys[f.keys:] {
				if bytes.Equal(c.keyText(prev), c.keyText(k)) {
					return i, c.duplicate(k)
				}
			}
		}
		c.keys = append(c.keys, k)
	}
	f.cur = k
	i = SkipSpace(b, end)
	if i >= len(b) || b[i] != ':' {
		return i, &Error{Kind: Syntax}
	}
	return SkipSpace(b, i+1), nil
}

// closeObject checks an object with many keys for repeats and forgets its
// keys.
func (c *checker) closeObject(f *frame) *Error {
	if !c.strict {
		return nil
	}
	keys := c.keys[f.keys:]
	if len(keys) > linearKeys {
		slices.SortFunc(keys, func(x, y key) int { return bytes.Compare(c.keyText(x), c.keyText(y)) })
		for j := 1; j < len(keys); j++ {
			if bytes.Equal(c.keyText(keys[j-1]), c.keyText(keys[j])) {
				return c.duplicate(keys[j])
			}
		}
	}
	c.keys = c.keys[:f.keys]
	if len(c.keys) == 0 {
		c.scratch = c.scratch[:0]
	}
	return nil
}

func (c *checker) keyText(k key) []byte {
	if k.decoded {
		return c.scratch[k.start:k.end]
	}
	return c.b[k.start:k.end]
}

// duplicate is the error for k repeated in the innermost open object.
func (c *checker) duplicate(k key) *Error {
	c.stack[c.depth-1].cur = k
	return &Error{Kind: Duplicate, Path: c.path(c.depth)}
}

// path names the place of the current element of the first n open
// containers: `a.b[2].c`.
func (c *checker) path(n int) string {
	var sb strings.Builder
	for _, f := range c.stack[:n] {
		if !f.object {
			sb.WriteByte('[')
			sb.WriteString(strconv.Itoa(int(f.index)))
			sb.WriteByte(']')
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		k := c.keyText(f.cur)
		if !f.cur.decoded && bytes.IndexByte(k, '\\') >= 0 {
			k = appendUnescaped(nil, k)
		}
		if len(k) > 64 { // a name in a message, not the whole key
			k = append(bytes.ToValidUTF8(k[:64], nil), "..."...)
		}
		sb.Write(k)
	}
	return sb.String()
}

// str reads the string starting at the quote b[i]; it returns the index
// after the closing quote.
func (c *checker) str(i int, isKey bool) (int, *Error) {
	b := c.b
	start := i
	c.escaped = false
	for i++; i < len(b); {
		// Eight plain bytes at a time: a prompt's text is mostly runs of
		// them, and the byte loop below read them at about 1 GB/s. A word
		// that is not plain says where its first byte that is not is.
		for i+8 <= len(b) {
			if m := nonPlain(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i == len(b) {
			break
		}
		ch := b[i]
		if plain[ch] {
			i++
			continue
		}
		switch {
		case ch == '"':
			if c.text && i-start-1 > MaxTextLen {
				return i, c.textError(TooLong, isKey)
			}
			return i + 1, nil
		case ch < ' ':
			return i, &Error{Kind: Syntax}
		case ch == '\\':
			c.escaped = true
			i++
			if i >= len(b) {
				return i, &Error{Kind: Syntax}
			}
			switch b[i] {
			case '"', '\\', '/', 'n', 'r', 't':
				i++
			case 'b', 'f':
				if c.text {
					return i, c.textError(Control, isKey)
				}
				i++
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return i, &Error{Kind: Syntax}
				}
				n := 4
				if c.text {
					var kind Kind
					if n, kind = textEscape(b[i+1:]); kind != 0 {
						return i, c.textError(kind, isKey)
					}
				}
				i += 1 + n
			default:
				return i, &Error{Kind: Syntax}
			}
		case ch < utf8.RuneSelf:
			if ch == 0x7f && c.text {
				return i, c.textError(Control, isKey)
			}
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 && c.strict {
				return i, c.textError(InvalidUTF8, isKey)
			}
			if c.text && IsControl(r) {
				return i, c.textError(Control, isKey)
			}
			i += n
		}
	}
	return i, &Error{Kind: Syntax}
}

// textEscape checks the \u escape whose four hex digits start b under
// CheckText's rules: it returns how many bytes of b the escape takes (a
// surrogate pair takes 10) or what is wrong.
func textEscape(b []byte) (int, Kind) {
	r := hex4(b)
	switch {
	case IsControl(r):
		return 0, Control
	case r >= 0xdc00 && r < 0xe000:
		return 0, Surrogate
	case r >= 0xd800 && r < 0xdc00:
		if len(b) < 10 || b[4] != '\\' || b[5] != 'u' || !isHex(b[6]) || !isHex(b[7]) || !isHex(b[8]) || !isHex(b[9]) {
			return 0, Surrogate
		}
		if r2 := hex4(b[6:]); r2 < 0xdc00 || r2 >= 0xe000 {
			return 0, Surrogate
		}
		return 10, 0
	}
	return 4, 0
}

// IsControl reports whether r is a control character other than tab, LF
// and CR: C0, DEL or C1.
func IsControl(r rune) bool {
	return r < ' ' && r != '\t' && r != '\n' && r != '\r' || r >= 0x7f && r <= 0x9f
}

func (c *checker) textError(kind Kind, isKey bool) *Error {
	n := c.depth
	if isKey {
		n-- // the key's own text cannot name it
	}
	return &Error{Kind: kind, Path: c.path(n), Key: isKey}
}

// Byte-parallel tests on a little-endian word of 8 bytes.
const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// zeroBytes has the high bit of each byte of w that is zero set (and
// possibly of bytes above one): nonzero exactly when some byte is zero.
func zeroBytes(w uint64) uint64 { return (w - ones) &^ w & high }

// nonPlain is zero when all 8 bytes of w are plain (from the space to the
// tilde, neither the quote nor the backslash), else has the high bit set
// of the first byte of w that is not (and possibly of bytes above it).
// One branch for the word: w|(w+ones) has a byte's high bit set from 0x7f up (a carry out of
// a 0xff byte only reaches bytes above one caught); the borrows of the
// test for bytes below the space, and zeroBytes's, reach only bytes above
// one caught too.
func nonPlain(w uint64) uint64 {
	return (w|(w+ones))&high | // DEL or not ASCII
		(w-ones*' ')&^w&high | // below the space
		zeroBytes(w^(ones*'"')) | zeroBytes(w^(ones*'\\'))
}

// plain marks the bytes a string may hold as they are: ASCII but the
// quote, the backslash, C0 and DEL.
var plain = func() (t [256]bool) {
	for ch := ' '; ch < 0x7f; ch++ {
		t[ch] = ch != '"' && ch != '\\'
	}
	return t
}()

func literal(b []byte, i int, lit string) (int, *Error) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return i, &Error{Kind: Syntax}
	}
	return i + len(lit), nil
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(b []byte, i int) (int, *Error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, &Error{Kind: Syntax}
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, &Error{Kind: Syntax}
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, &Error{Kind: Syntax}
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// SkipSpace is the index of the first byte of b from i on that is not
// JSON whitespace (space, tab, CR, LF); len(b) if none. It serves the
// packages that walk JSON themselves, on bytes or on a string.
func SkipSpace[T string | []byte](b T, i int) int {
	// Most calls stop at once, at a byte above the space: one comparison
	// says so, where the four below took four.
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

func isHex(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
}

// appendUnescaped appends the decoded text of a checked JSON string body
// (without quotes) to dst. A lone surrogate decodes to U+FFFD, as in gjson
// and encoding/json.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			j := bytes.IndexByte(s[i:], '\\')
			if j < 0 {
				return append(dst, s[i:]...)
			}
			dst = append(dst, s[i:i+j]...)
			i += j
			continue
		}
		i++
		switch s[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(s[i+1:])
			i += 4
			if utf16.IsSurrogate(r) && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if r2 := utf16.DecodeRune(r, hex4(s[i+3:])); r2 != utf8.RuneError {
					r = r2
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r) // a lone surrogate appends U+FFFD
		default: // " \ /
			dst = append(dst, s[i])
		}
		i++
	}
	return dst
}

func hex4(s []byte) rune {
	var r rune
	for _, ch := range s[:4] {
		r <<= 4
		switch {
		case ch <= '9':
			r |= rune(ch - '0')
		case ch <= 'F':
			r |= rune(ch - 'A' + 10)
		default:
			r |= rune(ch - 'a' + 10)
		}
	}
	return r
}
