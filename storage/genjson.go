package storage

import (
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// MarshalJSON encodes a generation record without reflection: one is
// written per request inside the group commit, where encoding/json was the
// largest cost. The output is what encoding/json would produce for the
// struct tags (checked by TestGenerationJSONMatchesEncodingJSON).
func (g Generation) MarshalJSON() ([]byte, error) {
	// Sized for the member names, numbers and time, plus the strings
	// (escapes aside), so that the record is built in one allocation.
	return g.AppendJSON(make([]byte, 0, 384+len(g.ID)+len(g.AccountID)+len(g.KeyHash)+len(g.WorkspaceID)+len(g.Model)+
		len(g.Provider)+len(g.UpstreamModel)+len(g.UpstreamID)+len(g.Status)+len(g.FinishReason)+len(g.User)))
}

// AppendJSON appends what MarshalJSON returns (kernel.Appender: the group
// commit encodes its records into one buffer).
func (g Generation) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, g.ID)
	b = append(b, `,"account_id":`...)
	b = jsonstr.Append(b, g.AccountID)
	b = append(b, `,"key_hash":`...)
	b = jsonstr.Append(b, g.KeyHash)
	if g.WorkspaceID != "" {
		b = append(b, `,"workspace_id":`...)
		b = jsonstr.Append(b, g.WorkspaceID)
	}
	b = append(b, `,"model":`...)
	b = jsonstr.Append(b, g.Model)
	b = append(b, `,"provider":`...)
	b = jsonstr.Append(b, g.Provider)
	if g.UpstreamModel != "" {
		b = append(b, `,"upstream_model":`...)
		b = jsonstr.Append(b, g.UpstreamModel)
	}
	if g.UpstreamID != "" {
		b = append(b, `,"upstream_id":`...)
		b = jsonstr.Append(b, g.UpstreamID)
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
	b = g.Cost.Append(b)
	if g.BYOK {
		b = append(b, `,"byok":true`...)
	}
	if g.Credits != 0 {
		b = append(b, `,"credits":`...)
		b = g.Credits.Append(b)
	}
	b = append(b, `,"status":`...)
	b = jsonstr.Append(b, g.Status)
	b = append(b, `,"streamed":`...)
	b = strconv.AppendBool(b, g.Streamed)
	if g.FinishReason != "" {
		b = append(b, `,"finish_reason":`...)
		b = jsonstr.Append(b, g.FinishReason)
	}
	if g.UsageEstimated {
		b = append(b, `,"usage_estimated":true`...)
	}
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, g.LatencyMS, 10)
	if g.User != "" {
		b = append(b, `,"user":`...)
		b = jsonstr.Append(b, g.User)
	}
	b = append(b, `,"created_at":"`...)
	b = g.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if len(g.ContentFlags) > 0 {
		b = append(b, `,"content_flags":[`...)
		for i, f := range g.ContentFlags {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"guardrail_id":`...)
			b = jsonstr.Append(b, f.GuardrailID)
			b = append(b, `,"label":`...)
			b = jsonstr.Append(b, f.Label)
			if f.Builtin != "" {
				b = append(b, `,"builtin":`...)
				b = jsonstr.Append(b, f.Builtin)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(g.Attempts) > 0 {
		b = append(b, `,"attempts":[`...)
		for i, a := range g.Attempts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"provider":`...)
			b = jsonstr.Append(b, a.Provider)
			b = append(b, `,"model":`...)
			b = jsonstr.Append(b, a.Model)
			b = append(b, `,"status":`...)
			b = strconv.AppendInt(b, int64(a.Status), 10)
			b = append(b, `,"latency_ms":`...)
			b = strconv.AppendInt(b, a.LatencyMS, 10)
			if a.BYOK {
				b = append(b, `,"byok":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if g.Routing != "" {
		b = append(b, `,"routing":`...)
		b = jsonstr.Append(b, g.Routing)
	}
	return append(b, '}'), nil
}
