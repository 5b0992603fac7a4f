// Package outputlen measures the model output an answer carries, in every
// dialect the gateway meters: the bytes of what the model generated —
// text, tool-call arguments and names, reasoning, refusals, audio, images,
// legacy function calls — so that an answer whose provider reports no
// usage is charged for all of it by one rule (one token per four bytes,
// billing.EstimateTextTokens), whatever kind of output it was.
//
// A string counts its decoded bytes; a number or boolean its bytes as
// written. Members that the provider or the protocol writes rather than
// the model (ids, types, roles, indexes, annotations, signatures...) count
// nothing. Every function reads the JSON in place (nothing is kept) and
// allocates nothing.
package outputlen

import (
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// notOutput reports whether a member named k holds no model output.
func notOutput(k string) bool {
	switch k {
	case "role", "id", "type", "index", "object",
		"annotations", "citations", "citation", "logprobs",
		"finish_reason", "stop_reason", "stop_sequence",
		"status", "call_id", "item_id", "output_index",
		"content_index", "sequence_number", "summary_index",
		"signature", "format", "encrypted_content",
		"expires_at", "created", "created_at", "obfuscation",
		"usage", "model":
		return true
	}
	return false
}

// Value is the output in the JSON value v: a string's decoded bytes, a
// number's or boolean's bytes, a container's members and elements (those
// named in notOutput aside).
func Value(v string) int {
	n, _ := walk(v, jsoncheck.SkipSpace(v, 0))
	return n
}

// Chat is the output of a Chat Completions chunk or answer: every choice's
// delta (a stream) or message (an answer).
func Chat(doc []byte) int {
	d := view(doc)
	i := member(d, jsoncheck.SkipSpace(d, 0), "choices")
	if i < 0 || d[i] != '[' {
		return 0
	}
	n := 0
	eachElement(d, i, func(e int) int {
		if d[e] != '{' {
			return skip(d, e)
		}
		// One walk of the choice: its delta or message measured, the
		// rest skipped.
		return eachMember(d, e, func(k string, v int) int {
			if (k == "delta" || k == "message") && d[v] == '{' {
				m, end := walk(d, v)
				n += m
				return end
			}
			return skip(d, v)
		})
	})
	return n
}

// ResponsesEvent is the output of a Responses stream event of type typ:
// the delta of every *.delta event (output text, function call and custom
// tool arguments, reasoning and its summary, refusals, audio and its
// transcript, code...), a partial image's bytes, and what an output item
// carries as it is added (a function call's name). An item's done event
// repeats its deltas and counts nothing.
func ResponsesEvent(typ string, doc []byte) int {
	switch {
	case typ == "response.output_item.added":
		return memberOutput(view(doc), "item")
	case strings.HasSuffix(typ, ".delta"):
		return memberOutput(view(doc), "delta")
	case strings.HasSuffix(typ, ".partial_image"):
		return memberOutput(view(doc), "partial_image_b64")
	}
	return 0
}

// ResponsesAnswer is the output of a Responses object: its output items.
func ResponsesAnswer(doc []byte) int { return memberOutput(view(doc), "output") }

// MessagesEvent is the output of an Anthropic Messages stream event: the
// delta of content_block_delta (text, tool input JSON, thinking) and what
// a content_block_start already carries.
func MessagesEvent(typ string, doc []byte) int {
	switch typ {
	case "content_block_delta":
		return memberOutput(view(doc), "delta")
	case "content_block_start":
		return memberOutput(view(doc), "content_block")
	}
	return 0
}

// MessagesAnswer is the output of an Anthropic Messages answer: its
// content blocks.
func MessagesAnswer(doc []byte) int { return memberOutput(view(doc), "content") }

// memberOutput is the output of the top-level member key of the object doc.
func memberOutput(doc, key string) int {
	i := member(doc, jsoncheck.SkipSpace(doc, 0), key)
	if i < 0 {
		return 0
	}
	n, _ := walk(doc, i)
	return n
}

// The walk reads JSON in place, as written: no string is decoded (gjson
// would copy every string with an escape, as tool-call arguments all
// have). A malformed document counts what came before the fault.

// member returns where the value of the first member key of the object at
// doc[i] starts, or -1.
func member(doc string, i int, key string) int {
	if i >= len(doc) || doc[i] != '{' {
		return -1
	}
	i = jsoncheck.SkipSpace(doc, i+1)
	for i < len(doc) && doc[i] == '"' {
		kEnd := skipString(doc, i)
		if kEnd < 0 {
			return -1
		}
		k := doc[i+1 : kEnd-1]
		if i = jsoncheck.SkipSpace(doc, kEnd); i >= len(doc) || doc[i] != ':' {
			return -1
		}
		v := jsoncheck.SkipSpace(doc, i+1)
		if k == key {
			return v
		}
		if i = skip(doc, v); i < 0 {
			return -1
		}
		if i = jsoncheck.SkipSpace(doc, i); i >= len(doc) || doc[i] != ',' {
			return -1
		}
		i = jsoncheck.SkipSpace(doc, i+1)
	}
	return -1
}

// eachMember calls fn with each member of the object at doc[i]: its key as
// written and where its value starts; fn returns the index after the value,
// or -1 to stop. It returns the index after the object, -1 when stopped or
// malformed.
func eachMember(doc string, i int, fn func(key string, v int) int) int {
	if i >= len(doc) || doc[i] != '{' {
		return -1
	}
	if i = jsoncheck.SkipSpace(doc, i+1); i < len(doc) && doc[i] == '}' {
		return i + 1
	}
	for i < len(doc) && doc[i] == '"' {
		kEnd := skipString(doc, i)
		if kEnd < 0 {
			return -1
		}
		key := doc[i+1 : kEnd-1]
		if i = jsoncheck.SkipSpace(doc, kEnd); i >= len(doc) || doc[i] != ':' {
			return -1
		}
		if i = fn(key, jsoncheck.SkipSpace(doc, i+1)); i < 0 {
			return -1
		}
		if i = jsoncheck.SkipSpace(doc, i); i >= len(doc) {
			return -1
		}
		switch doc[i] {
		case '}':
			return i + 1
		case ',':
			i = jsoncheck.SkipSpace(doc, i+1)
		default:
			return -1
		}
	}
	return -1
}

// eachElement calls fn with where each element of the array at doc[i]
// starts; fn returns the index after it, or -1 to stop. It returns the
// index after the array, -1 when stopped or malformed.
func eachElement(doc string, i int, fn func(e int) int) int {
	if i = jsoncheck.SkipSpace(doc, i+1); i < len(doc) && doc[i] == ']' {
		return i + 1
	}
	for i < len(doc) {
		if i = fn(i); i < 0 {
			return -1
		}
		if i = jsoncheck.SkipSpace(doc, i); i >= len(doc) {
			return -1
		}
		switch doc[i] {
		case ']':
			return i + 1
		case ',':
			i = jsoncheck.SkipSpace(doc, i+1)
		default:
			return -1
		}
	}
	return -1
}

// walk returns the output of the value at doc[i] and the index after it
// (-1: malformed).
func walk(doc string, i int) (n, end int) {
	if i >= len(doc) {
		return 0, -1
	}
	switch c := doc[i]; c {
	case '"':
		end = skipString(doc, i)
		if end < 0 {
			return 0, -1
		}
		return StringLen(doc[i:end]), end
	case '{':
		end = eachMember(doc, i, func(k string, v int) int {
			if notOutput(k) {
				return skip(doc, v)
			}
			m, end := walk(doc, v)
			n += m
			return end
		})
	case '[':
		end = eachElement(doc, i, func(e int) int {
			m, end := walk(doc, e)
			n += m
			return end
		})
	default:
		end = skipScalar(doc, i)
		if c != 'n' && end > i {
			n = end - i
		}
	}
	return n, end
}

// skip returns the index after the value at doc[i], -1 when malformed.
func skip(doc string, i int) int {
	if i >= len(doc) {
		return -1
	}
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				if j = skipString(doc, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	return skipScalar(doc, i)
}

// skipString returns the index after the string that opens at doc[i], or
// -1 when it does not close. Keys and short values end within a few
// bytes, read one by one; a longer text is searched by IndexByte.
func skipString(doc string, i int) int {
	j := i + 1
	for n := 0; n < 24 && j < len(doc); n++ {
		switch doc[j] {
		case '"':
			return j + 1
		case '\\':
			j++ // the escaped byte
		}
		j++
	}
	from := j
	for j < len(doc) {
		k := strings.IndexByte(doc[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// Escaped when an odd run of backslashes precedes it.
		b := j
		for b > from && doc[b-1] == '\\' {
			b--
		}
		if (j-b)%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

func skipScalar(doc string, i int) int {
	j := i
	for j < len(doc) && doc[j] != ',' && doc[j] != '}' && doc[j] != ']' && doc[j] != ' ' && doc[j] != '\n' && doc[j] != '\r' && doc[j] != '\t' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// StringLen is the decoded length in bytes of the JSON string literal raw
// (quotes included), without decoding it; an invalid escape counts as
// written.
func StringLen(raw string) int {
	if len(raw) < 2 {
		return 0
	}
	s := raw[1 : len(raw)-1]
	i := strings.IndexByte(s, '\\')
	if i < 0 {
		return len(s)
	}
	n := i
	for i < len(s) {
		c := s[i]
		if c != '\\' {
			n++
			i++
			continue
		}
		if i+1 >= len(s) {
			return n + 1
		}
		if s[i+1] != 'u' {
			n++
			i += 2
			continue
		}
		r, ok := hex4(s, i+2)
		if !ok {
			n += 2
			i += 2
			continue
		}
		i += 6
		if r >= 0xD800 && r < 0xDC00 {
			// A surrogate pair is one four-byte character.
			if i+5 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if lo, ok := hex4(s, i+2); ok && lo >= 0xDC00 && lo < 0xE000 {
					n += 4
					i += 6
					continue
				}
			}
			n += 3 // alone: the replacement character
			continue
		}
		if l := utf8.RuneLen(r); l > 0 {
			n += l
		} else {
			n += 3 // a lone low surrogate: the replacement character
		}
	}
	return n
}

// hex4 reads four hex digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// view is b as a string without a copy, for reading in place.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
