package handlers

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// peekJSON is gjson.GetBytes without its copies: the result's Raw and Str
// alias doc. gjson.GetBytes copies each string it returns, which on a
// streamed answer was three allocations per event for values that are
// only measured or spliced around. Use the result before doc changes, and
// strings.Clone what is kept.
func peekJSON(doc []byte, path string) gjson.Result {
	if len(doc) == 0 {
		return gjson.Result{}
	}
	return gjson.Get(unsafe.String(unsafe.SliceData(doc), len(doc)), path)
}

// eachTopMember calls fn with each member of the JSON object doc, in order:
// the offsets of the key as written between its quotes (escaped reports a
// backslash in it) and of the value, until fn returns false. Strings are
// skipped by a plain byte loop and containers by counting brackets outside
// strings, without gjson's per-value parsing. ok is false when doc is not an
// object of that shape (then fn may have seen some members); the values
// are not validated, as gjson does not validate them either.
func eachTopMember(doc []byte, fn memberFunc) (ok bool) {
	i := skipJSONSpace(doc, 0)
	end, stopped := walkObject(doc, i, fn)
	return stopped || end >= 0 && skipJSONSpace(doc, end) == len(doc)
}

// memberFunc is called with one member's offsets; false stops the walk.
type memberFunc func(keyStart, keyEnd int, escaped bool, start, end int) bool

// walkObject calls fn for each member of the object that opens at doc[i]
// and returns the index after it, -1 when there is no such object, or
// stopped when fn stopped the walk.
func walkObject(doc []byte, i int, fn memberFunc) (end int, stopped bool) {
	if i >= len(doc) || doc[i] != '{' {
		return -1, false
	}
	i = skipJSONSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return i + 1, false
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return -1, false
		}
		keyEnd, escaped := skipJSONString(doc, i)
		if keyEnd < 0 {
			return -1, false
		}
		keyStart := i + 1
		i = skipJSONSpace(doc, keyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return -1, false
		}
		start := skipJSONSpace(doc, i+1)
		end := skipJSONValue(doc, start)
		if end < 0 {
			return -1, false
		}
		if !fn(keyStart, keyEnd-1, escaped, start, end) {
			return end, true
		}
		i = skipJSONSpace(doc, end)
		if i >= len(doc) {
			return -1, false
		}
		switch doc[i] {
		case ',':
			i = skipJSONSpace(doc, i+1)
		case '}':
			return i + 1, false
		default:
			return -1, false
		}
	}
}

func skipJSONSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\n' || doc[i] == '\r' || doc[i] == '\t') {
		i++
	}
	return i
}

// skipJSONString returns the index after the string that opens at doc[i]
// (a quote), or -1 when it does not close; escaped reports a backslash in it.
// A byte loop, not bytes.IndexByte: an answer's strings are mostly a few
// bytes long, shorter than the vector search's setup.
func skipJSONString(doc []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '"':
			return j + 1, escaped
		case '\\':
			escaped = true
			j++ // the escaped byte
		}
	}
	return -1, escaped
}

// jsonStructural marks the bytes skipJSONValue stops at inside a container.
var jsonStructural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

// skipJSONValue returns the index after the value that starts at doc[i],
// or -1 when it runs past the end.
func skipJSONValue(doc []byte, i int) int {
	if i >= len(doc) {
		return -1
	}
	switch doc[i] {
	case '"':
		end, _ := skipJSONString(doc, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			for j < len(doc) && !jsonStructural[doc[j]] {
				j++
			}
			if j == len(doc) {
				break
			}
			switch doc[j] {
			case '"':
				end, _ := skipJSONString(doc, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			default:
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
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
