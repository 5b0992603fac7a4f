// Package healjson repairs the JSON text a model wrote when it was asked
// for JSON: the response-healing plugin. Models wrap their JSON in code
// fences or prose, leave trailing commas, write JavaScript-style objects
// (unquoted keys, single quotes, comments, Python's True/False/None) or
// are cut off mid-value by max_tokens; Heal rewrites such text as the
// strict JSON value it stands for, in one pass without recursion, and
// reports what it repaired. Text it cannot make valid is left alone.
package healjson

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// Repair is a set of the kinds of repair Heal made.
type Repair uint16

const (
	CodeFence     Repair = 1 << iota // the JSON was inside a ``` fence
	Prose                            // text before or after the JSON value
	TrailingComma                    // a comma before } or ]
	UnquotedKey                      // an object key without quotes
	SingleQuote                      // a string in single quotes
	Truncated                        // the text stopped inside a value: strings and containers closed
	Comment                          // // or /* */ comments
	Literal                          // True, False, None (Python) as true, false, null
	MissingComma                     // a comma missing between members or elements
	ControlChar                      // a raw newline or tab inside a string, escaped
	nRepairs      = iota
)

var repairNames = [nRepairs]string{
	"code_fence", "prose", "trailing_comma", "unquoted_key", "single_quote",
	"truncated", "comment", "literal", "missing_comma", "control_char",
}

// String is the repairs' names, comma-separated, in a fixed order; "none"
// for none.
func (r Repair) String() string {
	if r == 0 {
		return "none"
	}
	var b strings.Builder
	for i, name := range repairNames {
		if r&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(name)
		}
	}
	return b.String()
}

// maxCandidates bounds how many starts of a JSON value Heal tries in text
// with prose around it.
const maxCandidates = 4

// Heal returns text as a valid JSON value: text itself, unchanged and with
// no repairs, when it already is one; otherwise the object or array it
// holds, repaired. ok is false when no repair makes it valid (out is then
// text).
func Heal(text []byte) (out []byte, repairs Repair, ok bool) {
	if jsoncheck.Valid(text) {
		return text, 0, true
	}
	if body, fenced, prose := unfence(text); fenced {
		r := CodeFence
		if prose {
			r |= Prose
		}
		if jsoncheck.Valid(body) {
			return bytes.TrimSpace(body), r, true
		}
		if out, r2, ok := healValue(body); ok {
			return out, r | r2, true
		}
	}
	if out, r, ok := healValue(text); ok {
		return out, r, true
	}
	return text, 0, false
}

// healValue repairs the first object or array of text that can be, of
// the first few.
func healValue(text []byte) (out []byte, r Repair, ok bool) {
	from := 0
	for range maxCandidates {
		i := bytes.IndexAny(text[from:], "{[")
		if i < 0 {
			break
		}
		start := from + i
		h := healer{out: make([]byte, 0, len(text)-start+16)}
		if end, r, good := h.run(text, start); good && jsoncheck.Valid(h.out) {
			if len(bytes.TrimSpace(text[:start])) > 0 || len(bytes.TrimSpace(text[end:])) > 0 {
				r |= Prose
			}
			return h.out, r, true
		}
		from = start + 1
	}
	return nil, 0, false
}

// unfence returns what the first ``` fence of text holds (its info
// string, such as "json", dropped; to the end of text when the fence is
// not closed), whether there was one, and whether text has more than
// space outside it.
func unfence(text []byte) (body []byte, fenced, prose bool) {
	i := bytes.Index(text, fence)
	if i < 0 {
		return text, false, false
	}
	prose = len(bytes.TrimSpace(text[:i])) > 0
	rest := text[i+len(fence):]
	j := 0
	for j < len(rest) && isIdent(rest[j]) {
		j++
	}
	rest = rest[j:]
	if end := bytes.Index(rest, fence); end >= 0 {
		prose = prose || len(bytes.TrimSpace(rest[end+len(fence):])) > 0
		rest = rest[:end]
	}
	return rest, true, prose
}

var fence = []byte("```")

// Container states.
const (
	objKey   = iota // object: a key or } expected
	objColon        // object: : expected
	objValue        // object: a value expected
	objNext         // object: , or } expected
	arrValue        // array: a value or ] expected
	arrNext         // array: , or ] expected
)

// healer rewrites one value as strict JSON.
type healer struct {
	out   []byte
	stack []byte // open containers' states
	safe  int    // len(out) where the value could be closed as it is
	r     Repair
}

// run rewrites the value at b[start]; end is where it ended in b. good is
// false when b holds something no rule repairs.
func (h *healer) run(b []byte, start int) (end int, r Repair, good bool) {
	i := start
	for i < len(b) {
		c := b[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '/' && i+1 < len(b) && (b[i+1] == '/' || b[i+1] == '*'):
			i = skipComment(b, i)
			h.r |= Comment
			continue
		}
		if len(h.stack) == 0 && len(h.out) > 0 {
			return i, h.r, true // the value is complete: the rest is prose
		}
		top := h.state()
		switch {
		case c == ',':
			switch top {
			case objNext:
				h.set(objKey)
			case arrNext:
				h.set(arrValue)
			default:
				return 0, 0, false
			}
			h.out = append(h.out, ',')
			i++
			continue
		case c == '}' || c == ']':
			want := byte('}')
			if top == arrValue || top == arrNext {
				want = ']'
			}
			if c != want || top == objColon || top == objValue {
				return 0, 0, false
			}
			if n := len(h.out); h.out[n-1] == ',' {
				h.out = h.out[:n-1]
				h.r |= TrailingComma
			}
			h.out = append(h.out, c)
			h.stack = h.stack[:len(h.stack)-1]
			h.valueDone()
			i++
			continue
		case c == ':':
			if top != objColon {
				return 0, 0, false
			}
			h.out = append(h.out, ':')
			h.set(objValue)
			i++
			continue
		}
		// A key or a value starts here.
		switch top {
		case objNext, arrNext:
			h.out = append(h.out, ',')
			h.r |= MissingComma
			if top == objNext {
				h.set(objKey)
			} else {
				h.set(arrValue)
			}
			top = h.state()
		case objColon:
			return 0, 0, false
		}
		if top == objKey {
			var ok bool
			if i, ok = h.key(b, i); !ok {
				return 0, 0, false
			}
			continue
		}
		var ok bool
		if i, ok = h.value(b, i); !ok {
			return 0, 0, false
		}
	}
	if len(h.stack) > 0 {
		h.closeAll()
	}
	return len(b), h.r, len(h.out) > 0
}

func (h *healer) state() int {
	if len(h.stack) == 0 {
		return arrValue // the top-level value
	}
	return int(h.stack[len(h.stack)-1])
}

func (h *healer) set(s int) {
	if len(h.stack) > 0 {
		h.stack[len(h.stack)-1] = byte(s)
	}
}

// valueDone moves the container on after a complete value, a point where
// a cut-off answer can be closed.
func (h *healer) valueDone() {
	switch h.state() {
	case objValue:
		h.set(objNext)
	case arrValue:
		h.set(arrNext)
	}
	h.safe = len(h.out)
}

// closeAll ends a cut-off value: back to the last complete value (a
// string value cut off is closed first, and kept), then every open
// container closed.
func (h *healer) closeAll() {
	h.r |= Truncated
	h.out = h.out[:h.safe]
	if n := len(h.out); n > 0 && h.out[n-1] == ',' {
		h.out = h.out[:n-1]
	}
	for j := len(h.stack) - 1; j >= 0; j-- {
		if h.stack[j] >= arrValue {
			h.out = append(h.out, ']')
		} else {
			h.out = append(h.out, '}')
		}
	}
	h.stack = h.stack[:0]
}

// key writes the object key at b[i]: quoted, or a bare identifier.
func (h *healer) key(b []byte, i int) (int, bool) {
	c := b[i]
	if c == '"' || c == '\'' {
		j, complete := h.str(b, i)
		if !complete {
			return j, true // cut off in a key: closeAll drops it
		}
		h.set(objColon)
		return j, true
	}
	j := i
	for j < len(b) && (isIdent(b[j]) || b[j] >= utf8.RuneSelf) {
		j++
	}
	if j == i {
		return 0, false
	}
	h.r |= UnquotedKey
	h.out = append(h.out, '"')
	h.out = append(h.out, b[i:j]...)
	h.out = append(h.out, '"')
	h.set(objColon)
	return j, true
}

// value writes the value starting at b[i].
func (h *healer) value(b []byte, i int) (int, bool) {
	c := b[i]
	switch {
	case c == '{' || c == '[':
		if len(h.stack) >= jsoncheck.MaxDepth {
			return 0, false
		}
		h.out = append(h.out, c)
		if c == '{' {
			h.stack = append(h.stack, objKey)
		} else {
			h.stack = append(h.stack, arrValue)
		}
		h.safe = len(h.out)
		return i + 1, true
	case c == '"' || c == '\'':
		j, complete := h.str(b, i)
		if !complete {
			h.out = append(h.out, '"') // a string value cut off is kept, closed
			h.r |= Truncated
		}
		h.valueDone()
		return j, true
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(b) && isNumber(b[j]) {
			j++
		}
		h.out = append(h.out, b[i:j]...)
		if j == len(b) && !jsoncheck.Valid(b[i:j]) {
			return j, true // a number cut off: closeAll drops it
		}
		h.valueDone()
		return j, true
	case isIdent(c):
		j := i
		for j < len(b) && isIdent(b[j]) {
			j++
		}
		var word string
		switch string(b[i:j]) { // no allocation: the compiler compares the bytes
		case "true":
			word = "true"
		case "false":
			word = "false"
		case "null":
			word = "null"
		case "True":
			word, h.r = "true", h.r|Literal
		case "False":
			word, h.r = "false", h.r|Literal
		case "None":
			word, h.r = "null", h.r|Literal
		default:
			if j == len(b) && (bytes.HasPrefix([]byte("true"), b[i:j]) || bytes.HasPrefix([]byte("false"), b[i:j]) || bytes.HasPrefix([]byte("null"), b[i:j])) {
				return j, true // a literal cut off: closeAll drops it
			}
			return 0, false
		}
		h.out = append(h.out, word...)
		h.valueDone()
		return j, true
	}
	return 0, false
}

// str writes the string at b[i] (in double or single quotes) with double
// quotes, its raw control characters escaped; complete is false when b
// ends inside it.
func (h *healer) str(b []byte, i int) (end int, complete bool) {
	q := b[i]
	if q == '\'' {
		h.r |= SingleQuote
	}
	h.out = append(h.out, '"')
	j := i + 1
	for j < len(b) {
		c := b[j]
		switch {
		case c == q:
			h.out = append(h.out, '"')
			return j + 1, true
		case c == '\\':
			if j+1 >= len(b) {
				return len(b), false
			}
			n := b[j+1]
			switch {
			case n == '\'' && q == '\'':
				h.out = append(h.out, '\'')
			case n == '\'':
				h.out = append(h.out, '\'') // \' is not a JSON escape
			default:
				h.out = append(h.out, c, n)
			}
			j += 2
			continue
		case c == '"':
			h.out = append(h.out, '\\', '"') // inside single quotes
		case c < 0x20:
			h.r |= ControlChar
			switch c {
			case '\n':
				h.out = append(h.out, '\\', 'n')
			case '\r':
				h.out = append(h.out, '\\', 'r')
			case '\t':
				h.out = append(h.out, '\\', 't')
			default:
				h.out = append(h.out, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&15])
			}
		default:
			h.out = append(h.out, c)
		}
		j++
	}
	// Cut off: a dangling escape's backslash is not written, nor an
	// unfinished \u escape, so that the string can be closed.
	if k := bytes.LastIndex(h.out, []byte(`\u`)); k >= 0 && len(h.out)-k < 6 && (k == 0 || h.out[k-1] != '\\') {
		h.out = h.out[:k]
	}
	return len(b), false
}

const hexDigit = "0123456789abcdef"

// skipComment returns the end of the comment at b[i].
func skipComment(b []byte, i int) int {
	if b[i+1] == '/' {
		if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
			return i + j + 1
		}
		return len(b)
	}
	if j := bytes.Index(b[i+2:], []byte("*/")); j >= 0 {
		return i + 2 + j + 2
	}
	return len(b)
}

func isIdent(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isNumber(c byte) bool {
	return c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}
