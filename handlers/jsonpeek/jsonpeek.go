// Package jsonpeek reads JSON documents in place, for the meter's and the
// router's hot paths: values found without copies (their Raw and Str
// alias the document), members and elements walked by offset, strings and
// values skipped eight bytes at a time.
package jsonpeek

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// Get is gjson.GetBytes without its copies: the result's Raw and Str
// alias doc. gjson.GetBytes copies each string it returns, which on a
// streamed answer was three allocations per event for values that are
// only measured or spliced around. Use the result before doc changes, and
// strings.Clone what is kept.
func Get(doc []byte, path string) gjson.Result {
	if len(doc) == 0 {
		return gjson.Result{}
	}
	return gjson.Get(ViewString(doc), path)
}

// EachTopMember calls fn with each member of the JSON object doc, in order:
// the offsets of the key as written between its quotes (escaped reports a
// backslash in it) and of the value, until fn returns false. Strings are
// skipped eight bytes at a time and containers by counting brackets outside
// strings, without gjson's per-value parsing. ok is false when doc is not an
// object of that shape (then fn may have seen some members); the values
// are not validated, as gjson does not validate them either.
func EachTopMember(doc []byte, fn MemberFunc) (ok bool) {
	end, stopped := WalkObject(doc, jsoncheck.SkipSpace(doc, 0), fn)
	return stopped || end >= 0 && jsoncheck.SkipSpace(doc, end) == len(doc)
}

// EachTopValue is EachTopMember for a caller that reads the values itself.
func EachTopValue(doc []byte, fn ValueFunc) (ok bool) {
	end, stopped := WalkValues(doc, jsoncheck.SkipSpace(doc, 0), fn)
	return stopped || end >= 0 && jsoncheck.SkipSpace(doc, end) == len(doc)
}

// MemberFunc is called with one member's offsets; false stops the walk.
type MemberFunc func(keyStart, keyEnd int, escaped bool, start, end int) bool

// ValueFunc is called with one member's key offsets and where its value
// starts; it reads the value and returns the index after it (-1: there is
// no value there) and whether the walk goes on.
type ValueFunc func(keyStart, keyEnd int, escaped bool, start int) (end int, more bool)

// WalkObject calls fn for each member of the object that opens at doc[i]
// and returns the index after it, -1 when there is no such object, or
// stopped when fn stopped the walk.
func WalkObject(doc []byte, i int, fn MemberFunc) (end int, stopped bool) {
	return WalkValues(doc, i, func(keyStart, keyEnd int, escaped bool, start int) (int, bool) {
		end := SkipValue(doc, start)
		return end, end >= 0 && fn(keyStart, keyEnd, escaped, start, end)
	})
}

// WalkValues is WalkObject for a caller that reads the values itself.
func WalkValues(doc []byte, i int, fn ValueFunc) (end int, stopped bool) {
	if i >= len(doc) || doc[i] != '{' {
		return -1, false
	}
	i = jsoncheck.SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return i + 1, false
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return -1, false
		}
		keyEnd, escaped := SkipString(doc, i)
		if keyEnd < 0 {
			return -1, false
		}
		keyStart := i + 1
		i = jsoncheck.SkipSpace(doc, keyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return -1, false
		}
		end, more := fn(keyStart, keyEnd-1, escaped, jsoncheck.SkipSpace(doc, i+1))
		if end < 0 {
			return -1, false
		}
		if !more {
			return end, true
		}
		i = jsoncheck.SkipSpace(doc, end)
		if i >= len(doc) {
			return -1, false
		}
		switch doc[i] {
		case ',':
			i = jsoncheck.SkipSpace(doc, i+1)
		case '}':
			return i + 1, false
		default:
			return -1, false
		}
	}
}

// SkipString returns the index after the string that opens at doc[i]
// (a quote), or -1 when it does not close; escaped reports a backslash in
// a string that closes. Its first 32 bytes are read eight at a time (a
// word that holds a quote or backslash says where: zeroBytes is exact up
// to the first zero byte), which ends most keys and ids; a longer text is
// searched for its quotes and backslashes by bytes.IndexByte, which reads
// dozens of bytes a step.
func SkipString(doc []byte, i int) (end int, escaped bool) {
	j := i + 1
	for range 4 {
		if j+8 > len(doc) {
			break
		}
		w := binary.LittleEndian.Uint64(doc[j:])
		m := zeroBytes(w^(ones*'"')) | zeroBytes(w^(ones*'\\'))
		if m == 0 {
			j += 8
			continue
		}
		j += bits.TrailingZeros64(m) >> 3
		if doc[j] == '"' {
			return j + 1, false
		}
		break // an escape: the search below takes it
	}
	q := -1 // the first quote at or after j, once searched for
	for {
		if q < j {
			k := bytes.IndexByte(doc[j:], '"')
			if k < 0 {
				return -1, escaped
			}
			q = j + k
		}
		k := bytes.IndexByte(doc[j:q], '\\')
		if k < 0 {
			return q + 1, escaped
		}
		escaped = true
		j += k + 2 // the backslash and the byte it escapes, maybe q
	}
}

// Byte-parallel tests on a little-endian word of 8 bytes.
const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

// zeroBytes is nonzero exactly when some byte of w is zero.
func zeroBytes(w uint64) uint64 { return (w - ones) &^ w & high }

// EachElement calls fn with the offset of each element of the array that
// opens at doc[i]; fn reads the element and returns the offset after it
// (-1: malformed), so that each element is walked once, and whether to go
// on. ok is false when there is no such array.
func EachElement(doc []byte, i int, fn func(start int) (end int, more bool)) (ok bool) {
	if i >= len(doc) || doc[i] != '[' {
		return false
	}
	i = jsoncheck.SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return true
	}
	for {
		if i >= len(doc) {
			return false
		}
		end, more := fn(i)
		if end < 0 {
			return false
		}
		if !more {
			return true
		}
		i = jsoncheck.SkipSpace(doc, end)
		if i >= len(doc) {
			return false
		}
		switch doc[i] {
		case ',':
			i = jsoncheck.SkipSpace(doc, i+1)
		case ']':
			return true
		default:
			return false
		}
	}
}

// ViewBytes is s as bytes, without a copy: for reading only.
func ViewBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// ViewString is b as a string, without a copy: valid while b is unchanged.
func ViewString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// MemberKey is the key of a member WalkObject reported, decoded when it
// holds escapes.
func MemberKey(doc string, keyStart, keyEnd int, escaped bool) string {
	if escaped {
		return gjson.Parse(doc[keyStart-1 : keyEnd+1]).Str
	}
	return doc[keyStart:keyEnd]
}

// ParseSkipped is gjson.Parse(doc[start:end]) for a value SkipValue
// found to end at end: a string without a backslash is taken as it is,
// where gjson would read its text again for escapes (an answer's id).
func ParseSkipped(doc string, start, end int) gjson.Result {
	if end-start >= 2 && doc[start] == '"' && strings.IndexByte(doc[start+1:end-1], '\\') < 0 {
		return gjson.Result{Type: gjson.String, Raw: doc[start:end], Str: doc[start+1 : end-1]}
	}
	return gjson.Parse(doc[start:end])
}

// jsonStructural marks the bytes SkipValue stops at inside a container
// (and parentheses, which CloseContainerParens notes).
var jsonStructural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true, '(': true, ')': true}

// SkipValue returns the index after the value that starts at doc[i],
// or -1 when it runs past the end.
func SkipValue(doc []byte, i int) int {
	if i >= len(doc) {
		return -1
	}
	switch doc[i] {
	case '"':
		end, _ := SkipString(doc, i)
		return end
	case '{', '[':
		return CloseContainer(doc, i, 0)
	}
	j := i
	for j < len(doc) && doc[j] != ',' && doc[j] != '}' && doc[j] != ']' && doc[j] != ' ' && doc[j] != '\n' && doc[j] != '\r' && doc[j] != '\t' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// CloseContainer returns the index after the container that doc[i:]
// closes, depth brackets deep at doc[i] (0: at its opening bracket), or -1.
func CloseContainer(doc []byte, i, depth int) int {
	end, _ := CloseContainerParens(doc, i, depth)
	return end
}

// CloseContainerParens is CloseContainer that also reports a
// parenthesis outside the strings it skipped (parensOutsideStrings of
// what it walked), so that a walk need not read a long text again for
// PlainValue.
func CloseContainerParens(doc []byte, i, depth int) (end int, parens bool) {
	for j := i; j < len(doc); j++ {
		for j < len(doc) && !jsonStructural[doc[j]] {
			j++
		}
		if j == len(doc) {
			break
		}
		switch doc[j] {
		case '"':
			end, _ := SkipString(doc, j)
			if end < 0 {
				return -1, parens
			}
			j = end - 1
		case '{', '[':
			depth++
		case '(', ')':
			parens = true
		default:
			if depth--; depth == 0 {
				return j + 1, parens
			}
		}
	}
	return -1, parens
}

// PlainValue reports whether the value v, as SkipValue skipped it, is
// one gjson skips to the same end: a string, true, false, null, a number,
// or a container without a parenthesis outside its strings (gjson counts
// those as brackets).
func PlainValue(v []byte) bool {
	switch v[0] {
	case '"':
		return true
	case '{', '[':
		return !parensOutsideStrings(v)
	case 't', 'f', 'n':
		s := ViewString(v)
		return s == "true" || s == "false" || s == "null"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		for _, c := range v {
			if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
				return false
			}
		}
		return true
	}
	return false
}

// parensOutsideStrings reports whether the container v has a parenthesis
// outside its strings. Most have none at all, found at memory speed.
func parensOutsideStrings(v []byte) bool {
	if bytes.IndexByte(v, '(') < 0 && bytes.IndexByte(v, ')') < 0 {
		return false
	}
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '(', ')':
			return true
		case '"':
			end, _ := SkipString(v, i)
			if end < 0 {
				return false
			}
			i = end - 1
		}
	}
	return false
}
