package messages

import (
	"strings"

	"github.com/tidwall/gjson"
)

// A Claude Code request is mostly long texts (its system prompt, tool
// descriptions, file contents) that the translation copies as they are.
// gjson's ForEach unescapes every string member it passes; members and
// elements are walked here instead, with texts kept as their JSON text
// (member), so that the translation costs one scan of the body.

// skipValue returns the index just past the JSON value starting at s[i],
// or -1 when s is malformed there.
func skipValue(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				if i = skipString(s, i); i < 0 {
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

// skipString returns the index just past the JSON string starting at s[i]
// (-1 if it has no end): the next quote not escaped, found by
// strings.IndexByte, which is fast on long texts.
func skipString(s string, i int) int {
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

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// eachMember calls fn with each member of the JSON object raw: its key's
// text (unescaped only when it has no escapes, which member names never
// need) and its value's JSON text.
func eachMember(raw string, fn func(key, val string) bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return
	}
	for i++; ; {
		i = skipSpace(raw, i)
		if i >= len(raw) || raw[i] != '"' {
			return
		}
		end := skipString(raw, i)
		if end < 0 {
			return
		}
		key := raw[i+1 : end-1]
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return
		}
		i = skipSpace(raw, i+1)
		end = skipValue(raw, i)
		if end < 0 || !fn(key, raw[i:end]) {
			return
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i++
	}
}

// eachElem calls fn with the JSON text of each element of the JSON array
// raw.
func eachElem(raw string, fn func(val string) bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == ']' {
		return
	}
	for {
		i = skipSpace(raw, i)
		end := skipValue(raw, i)
		if end < 0 || !fn(raw[i:end]) {
			return
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i++
	}
}

// member is a value's JSON text as a gjson.Result. A string keeps its
// text in Raw and, unless it has escapes, in Str; one with escapes is
// unescaped only when unescape is set. Containers are parsed lazily by
// gjson.
func member(raw string, unescape bool) gjson.Result {
	if len(raw) >= 2 && raw[0] == '"' {
		r := gjson.Result{Type: gjson.String, Raw: raw}
		for k := 1; k < len(raw)-1; k++ {
			if raw[k] == '\\' {
				if unescape {
					return gjson.Parse(raw)
				}
				return r
			}
		}
		r.Str = raw[1 : len(raw)-1]
		return r
	}
	return gjson.Parse(raw)
}
