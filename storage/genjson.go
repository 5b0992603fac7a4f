package storage

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// MarshalJSON encodes a generation record without reflection: one is
// written per request inside the group commit, where encoding/json was the
// largest cost. The output is what encoding/json would produce for the
// struct tags (checked by TestGenerationJSONMatchesEncodingJSON).
func (g Generation) MarshalJSON() ([]byte, error) {
	// Sized for the member names, numbers and time, plus the strings
	// (escapes aside), so that the record is built in one allocation.
	b := make([]byte, 0, 384+len(g.ID)+len(g.AccountID)+len(g.KeyHash)+len(g.WorkspaceID)+len(g.Model)+
		len(g.Provider)+len(g.UpstreamModel)+len(g.UpstreamID)+len(g.Status)+len(g.FinishReason)+len(g.User))
	b = append(b, `{"id":`...)
	b = appendJSONString(b, g.ID)
	b = append(b, `,"account_id":`...)
	b = appendJSONString(b, g.AccountID)
	b = append(b, `,"key_hash":`...)
	b = appendJSONString(b, g.KeyHash)
	if g.WorkspaceID != "" {
		b = append(b, `,"workspace_id":`...)
		b = appendJSONString(b, g.WorkspaceID)
	}
	b = append(b, `,"model":`...)
	b = appendJSONString(b, g.Model)
	b = append(b, `,"provider":`...)
	b = appendJSONString(b, g.Provider)
	if g.UpstreamModel != "" {
		b = append(b, `,"upstream_model":`...)
		b = appendJSONString(b, g.UpstreamModel)
	}
	if g.UpstreamID != "" {
		b = append(b, `,"upstream_id":`...)
		b = appendJSONString(b, g.UpstreamID)
	}
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, g.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, g.CompletionTokens, 10)
	if g.CacheReadTokens != 0 {
		b = append(b, `,"cache_read_tokens":`...)
		b = strconv.AppendInt(b, g.CacheReadTokens, 10)
	}
	if g.CacheWriteTokens != 0 {
		b = append(b, `,"cache_write_tokens":`...)
		b = strconv.AppendInt(b, g.CacheWriteTokens, 10)
	}
	if g.SearchResults != 0 {
		b = append(b, `,"search_results":`...)
		b = strconv.AppendInt(b, g.SearchResults, 10)
	}
	b = append(b, `,"cost":`...)
	b = append(b, g.Cost.String()...)
	if g.BYOK {
		b = append(b, `,"byok":true`...)
	}
	if g.Credits != 0 {
		b = append(b, `,"credits":`...)
		b = append(b, g.Credits.String()...)
	}
	b = append(b, `,"status":`...)
	b = appendJSONString(b, g.Status)
	b = append(b, `,"streamed":`...)
	b = strconv.AppendBool(b, g.Streamed)
	if g.FinishReason != "" {
		b = append(b, `,"finish_reason":`...)
		b = appendJSONString(b, g.FinishReason)
	}
	if g.UsageEstimated {
		b = append(b, `,"usage_estimated":true`...)
	}
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, g.LatencyMS, 10)
	if g.User != "" {
		b = append(b, `,"user":`...)
		b = appendJSONString(b, g.User)
	}
	b = append(b, `,"created_at":"`...)
	b = g.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...), nil
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the ASCII bytes appendJSONString copies as they are: one
// table lookup per byte instead of six comparisons. It spans every byte
// value (non-ASCII ones false), so that the lookup needs no range check.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s as a JSON string the way encoding/json does:
// quotes, backslashes and control characters escaped, <, > and & escaped
// for HTML safety, invalid UTF-8 replaced by U+FFFD, U+2028/2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// A tight loop over the run of safe bytes (most strings are all
		// safe): the compiler keeps it to a handful of instructions a byte.
		for i < len(s) && jsonSafe[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
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
