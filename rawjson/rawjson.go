// Package rawjson walks JSON text by hand: members and elements are found
// by skipping strings with strings.IndexByte (fast on long texts) and
// containers by counting brackets, and kept as their JSON text, so that a
// translation costs one scan of a body instead of gjson's per-path walks
// and per-string unescaping. It also writes raw JSON the way encoding/json
// writes a json.RawMessage, for hand-written encoders that must match it
// byte for byte. The text it walks was validated before (the router
// refuses a body that is not JSON).
package rawjson

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// SkipValue returns the index just past the JSON value starting at s[i],
// or -1 when s is malformed there.
func SkipValue(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return SkipString(s, i)
	case '{', '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				if i = SkipString(s, i); i < 0 {
					return -1
				}
				i--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	for ; i < len(s); i++ {
		switch s[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// SkipString returns the index just past the JSON string starting at s[i]
// (-1 if it has no end): the next quote not escaped, found by
// strings.IndexByte, which is fast on long texts.
func SkipString(s string, i int) int {
	for i++; ; {
		k := strings.IndexByte(s[i:], '"')
		if k < 0 {
			return -1
		}
		i += k
		escapes := 0
		for j := i - 1; s[j] == '\\'; j-- {
			escapes++
		}
		i++
		if escapes%2 == 0 {
			return i
		}
	}
}

// SkipSpace returns the index of the first byte at or after s[i] that is
// not JSON whitespace.
func SkipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// EachMember calls fn with each member of the JSON object raw: its key's
// text (unescaped only when it has no escapes, which member names never
// need) and its value's JSON text.
func EachMember(raw string, fn func(key, val string) bool) {
	i := SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return
	}
	for i++; ; {
		i = SkipSpace(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return
		}
		end := SkipString(raw, i)
		if end < 0 {
			return
		}
		key := raw[i+1 : end-1]
		i = SkipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return
		}
		i = SkipSpace(raw, i+1)
		end = SkipValue(raw, i)
		if end < 0 || !fn(key, raw[i:end]) {
			return
		}
		i = SkipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i++
	}
}

// EachElem calls fn with the JSON text of each element of the JSON array
// raw.
func EachElem(raw string, fn func(val string) bool) {
	i := SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return
	}
	i = SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return
	}
	for {
		i = SkipSpace(raw, i)
		end := SkipValue(raw, i)
		if end < 0 || !fn(raw[i:end]) {
			return
		}
		i = SkipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i++
	}
}

// Member is a value's JSON text as a gjson.Result. A string keeps its
// text in Raw and, unless it has escapes, in Str; one with escapes is
// unescaped only when unescape is set. Containers are parsed lazily by
// gjson.
func Member(raw string, unescape bool) gjson.Result {
	if len(raw) >= 2 && raw[0] == '"' {
		r := gjson.Result{Type: gjson.String, Raw: raw}
		if strings.IndexByte(raw[1:len(raw)-1], '\\') >= 0 {
			if unescape {
				return gjson.Parse(raw)
			}
			return r
		}
		r.Str = raw[1 : len(raw)-1]
		return r
	}
	return gjson.Parse(raw)
}

// AppendRaw appends the JSON text raw as encoding/json writes a
// json.RawMessage: compacted, with <, >, &, U+2028 and U+2029 escaped.
// Most raw values need neither, and are copied as they are.
func AppendRaw(b []byte, raw string) ([]byte, error) {
	if rawIsPlain(raw) {
		return append(b, raw...), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(raw)); err != nil {
		return b, err
	}
	var esc bytes.Buffer
	json.HTMLEscape(&esc, buf.Bytes())
	return append(b, esc.Bytes()...), nil
}

// rawIsPlain reports whether raw has no space outside its strings and no
// character encoding/json escapes in them.
func rawIsPlain(raw string) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case ' ', '\t', '\n', '\r', '<', '>', '&':
			return false
		case 0xE2: // the first byte of U+2028 and U+2029
			if i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9) {
				return false
			}
		case '"':
			// Inside a string only the escaped characters matter.
			end := SkipString(raw, i)
			if end < 0 {
				return false
			}
			for j := i + 1; j < end-1; j++ {
				switch raw[j] {
				case '<', '>', '&':
					return false
				case 0xE2:
					if j+2 < end && raw[j+1] == 0x80 && (raw[j+2] == 0xA8 || raw[j+2] == 0xA9) {
						return false
					}
				}
			}
			i = end - 1
		}
	}
	return true
}

// Lookup sets out[i] to the member keys[i] of the JSON object raw, as
// Member unescaping (its first occurrence, as gjson's Get takes; a
// missing one left as it is), in one walk of raw.
func Lookup(raw string, keys []string, out []gjson.Result) {
	EachMember(raw, func(key, val string) bool {
		if strings.IndexByte(key, '\\') >= 0 {
			key = gjson.Parse(`"` + key + `"`).Str
		}
		for i, k := range keys {
			if k == key && !out[i].Exists() {
				out[i] = Member(val, true)
			}
		}
		return true
	})
}

// AppendFloat appends f as encoding/json writes a float64; ok is false
// (nothing appended) for NaN and infinities, which it refuses.
func AppendFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// Array is r.Array() (gjson's: the elements of an array, a value that is
// not one as its only element, nothing for null or a missing value) with
// an array's elements found in one walk and kept as Member unescaping.
func Array(r gjson.Result) []gjson.Result {
	if !r.IsArray() {
		return r.Array()
	}
	var out []gjson.Result
	EachElem(r.Raw, func(v string) bool {
		out = append(out, Member(v, true))
		return true
	})
	return out
}

// ForEach is r.ForEach for an object (gjson's: each member's unescaped
// key and value, in order, until fn returns false) in one walk, values
// kept as Member unescaping.
func ForEach(r gjson.Result, fn func(key string, val gjson.Result) bool) {
	if !r.IsObject() {
		r.ForEach(func(k, v gjson.Result) bool { return fn(k.Str, v) })
		return
	}
	EachMember(r.Raw, func(key, val string) bool {
		if strings.IndexByte(key, '\\') >= 0 {
			key = gjson.Parse(`"` + key + `"`).Str
		}
		return fn(key, Member(val, true))
	})
}

// View is b as a string without a copy (gjson.ParseBytes copies a 4 KB
// body): for a walk that keeps nothing of it, while b does not change.
func View(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
