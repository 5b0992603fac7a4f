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

	"github.com/tidwall/gjson"
)

// notOutput are member names whose values are not model output.
var notOutput = map[string]bool{
	"role": true, "id": true, "type": true, "index": true, "object": true,
	"annotations": true, "citations": true, "citation": true, "logprobs": true,
	"finish_reason": true, "stop_reason": true, "stop_sequence": true,
	"status": true, "call_id": true, "item_id": true, "output_index": true,
	"content_index": true, "sequence_number": true, "summary_index": true,
	"signature": true, "format": true, "encrypted_content": true,
	"expires_at": true, "created": true, "created_at": true, "obfuscation": true,
	"usage": true, "model": true,
}

// Value is the output in a JSON value v, as raw JSON: a string's decoded
// bytes, a number's or boolean's bytes, a container's members and
// elements (those named in notOutput aside).
func Value(v string) int {
	return value(gjson.Parse(v))
}

func value(v gjson.Result) int {
	switch v.Type {
	case gjson.String:
		return StringLen(v.Raw)
	case gjson.Number, gjson.True, gjson.False:
		return len(v.Raw)
	case gjson.JSON:
		n := 0
		object := v.IsObject()
		v.ForEach(func(k, e gjson.Result) bool {
			if object && notOutput[k.Str] {
				return true
			}
			n += value(e)
			return true
		})
		return n
	}
	return 0
}

// Chat is the output of a Chat Completions chunk or answer: every choice's
// delta (a stream) or message (an answer).
func Chat(doc []byte) int {
	choices := gjson.Get(view(doc), "choices")
	if !choices.IsArray() {
		return 0
	}
	n := 0
	choices.ForEach(func(_, c gjson.Result) bool {
		d := c.Get("delta")
		if !d.Exists() {
			d = c.Get("message")
		}
		if d.IsObject() {
			n += value(d)
		}
		return true
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
		return value(gjson.Get(view(doc), "item"))
	case strings.HasSuffix(typ, ".delta"):
		return value(gjson.Get(view(doc), "delta"))
	case strings.HasSuffix(typ, ".partial_image"):
		return value(gjson.Get(view(doc), "partial_image_b64"))
	}
	return 0
}

// ResponsesAnswer is the output of a Responses object: its output items.
func ResponsesAnswer(doc []byte) int {
	if out := gjson.Get(view(doc), "output"); out.IsArray() {
		return value(out)
	}
	return 0
}

// MessagesEvent is the output of an Anthropic Messages stream event: the
// delta of content_block_delta (text, tool input JSON, thinking) and what
// a content_block_start already carries.
func MessagesEvent(typ string, doc []byte) int {
	switch typ {
	case "content_block_delta":
		return value(gjson.Get(view(doc), "delta"))
	case "content_block_start":
		return value(gjson.Get(view(doc), "content_block"))
	}
	return 0
}

// MessagesAnswer is the output of an Anthropic Messages answer: its
// content blocks.
func MessagesAnswer(doc []byte) int {
	if c := gjson.Get(view(doc), "content"); c.IsArray() {
		return value(c)
	}
	return 0
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
