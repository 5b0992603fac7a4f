package messages

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/handlers/rawjson"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// appendChatCompletion appends c as encoding/json writes it, without its
// reflection (a 4 KB answer's translation spent much of its time there);
// ok is false when encoding/json would fail (a server_tool_use that does
// not compact), for the caller to fall back to it.
func appendChatCompletion(b []byte, c *chatCompletion) (_ []byte, ok bool) {
	ok = true
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, c.ID)
	b = append(b, `,"object":`...)
	b = jsonstr.Append(b, c.Object)
	b = append(b, `,"created":`...)
	b = strconv.AppendInt(b, c.Created, 10)
	b = append(b, `,"model":`...)
	b = jsonstr.Append(b, c.Model)
	b = append(b, `,"choices":`...)
	if c.Choices == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range c.Choices {
			if i > 0 {
				b = append(b, ',')
			}
			ch := &c.Choices[i]
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(ch.Index), 10)
			if ch.Message != nil {
				b = append(b, `,"message":`...)
				b = appendOutChatMessage(b, ch.Message)
			}
			if ch.Delta != nil {
				b = append(b, `,"delta":`...)
				b = appendOutChatMessage(b, ch.Delta)
			}
			b = append(b, `,"finish_reason":`...)
			if ch.FinishReason == nil {
				b = append(b, "null"...)
			} else {
				b = jsonstr.Append(b, *ch.FinishReason)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if u := c.Usage; u != nil {
		b = append(b, `,"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, u.PromptTokens, 10)
		b = append(b, `,"completion_tokens":`...)
		b = strconv.AppendInt(b, u.CompletionTokens, 10)
		b = append(b, `,"total_tokens":`...)
		b = strconv.AppendInt(b, u.TotalTokens, 10)
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, u.PromptTokensDetails.CachedTokens, 10)
		b = append(b, `,"cache_write_tokens":`...)
		b = strconv.AppendInt(b, u.PromptTokensDetails.CacheWriteTokens, 10)
		b = append(b, '}')
		if len(u.ServerToolUse) > 0 {
			b = append(b, `,"server_tool_use":`...)
			var err error
			if b, err = rawjson.AppendRaw(b, string(u.ServerToolUse)); err != nil {
				ok = false
			}
		}
		b = append(b, '}')
	}
	return append(b, '}'), ok
}

func appendOutChatMessage(b []byte, m *outChatMessage) []byte {
	sep := byte('{')
	member := func(name string) {
		b = append(b, sep)
		b = append(b, name...)
		sep = ','
	}
	if m.Role != "" {
		member(`"role":`)
		b = jsonstr.Append(b, m.Role)
	}
	if m.Content != nil {
		member(`"content":`)
		b = jsonstr.Append(b, *m.Content)
	}
	if m.Reasoning != "" {
		member(`"reasoning":`)
		b = jsonstr.Append(b, m.Reasoning)
	}
	if len(m.ToolCalls) > 0 {
		member(`"tool_calls":[`)
		for i, c := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			csep := byte('{')
			cmember := func(name string) {
				b = append(b, csep)
				b = append(b, name...)
				csep = ','
			}
			if c.Index != nil {
				cmember(`"index":`)
				b = strconv.AppendInt(b, int64(*c.Index), 10)
			}
			if c.ID != "" {
				cmember(`"id":`)
				b = jsonstr.Append(b, c.ID)
			}
			if c.Type != "" {
				cmember(`"type":`)
				b = jsonstr.Append(b, c.Type)
			}
			cmember(`"function":`)
			if c.Function.Name != "" {
				b = append(b, `{"name":`...)
				b = jsonstr.Append(b, c.Function.Name)
				b = append(b, `,"arguments":`...)
			} else {
				b = append(b, `{"arguments":`...)
			}
			b = jsonstr.Append(b, c.Function.Arguments)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if len(m.Annotations) > 0 {
		member(`"annotations":[`)
		for i, a := range m.Annotations {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":`...)
			b = jsonstr.Append(b, a.Type)
			b = append(b, `,"url_citation":{"url":`...)
			b = jsonstr.Append(b, a.URLCitation.URL)
			b = append(b, `,"title":`...)
			b = jsonstr.Append(b, a.URLCitation.Title)
			if a.URLCitation.Content != "" {
				b = append(b, `,"content":`...)
				b = jsonstr.Append(b, a.URLCitation.Content)
			}
			b = append(b, `,"start_index":`...)
			b = strconv.AppendInt(b, a.URLCitation.StartIndex, 10)
			b = append(b, `,"end_index":`...)
			b = strconv.AppendInt(b, a.URLCitation.EndIndex, 10)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if sep == '{' {
		b = append(b, '{')
	}
	return append(b, '}')
}
