package bedrock

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/handlers/rawjson"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// The Converse request and the chat answer written by hand, byte for byte
// as encoding/json writes them (encode_test.go checks), without its
// reflection: a 4 KB translation spent most of its time there. ok is
// false when encoding/json would fail on a float that is not finite; the
// caller then falls back to it for its error. Raw members come from a
// validated body (or were validated), so they are copied, compacted, not
// validated again.

// appendConverse appends r as encoding/json writes it.
func appendConverse(b []byte, r *converse) ([]byte, bool) {
	ok := true
	raw := func(s []byte) {
		var err error
		if b, err = rawjson.AppendRaw(b, string(s)); err != nil {
			ok = false
		}
	}
	blocks := func(bs []block) {
		if bs == nil {
			b = append(b, "null"...)
			return
		}
		b = append(b, '[')
		for i := range bs {
			if i > 0 {
				b = append(b, ',')
			}
			bl := &bs[i]
			sep := byte('{')
			member := func(name string) {
				b = append(b, sep)
				b = append(b, name...)
				sep = ','
			}
			if bl.Text != nil {
				member(`"text":`)
				b = jsonstr.Append(b, *bl.Text)
			}
			if im := bl.Image; im != nil {
				member(`"image":{"format":`)
				b = jsonstr.Append(b, im.Format)
				b = append(b, `,"source":{"bytes":`...)
				b = jsonstr.Append(b, im.Source.Bytes)
				b = append(b, "}}"...)
			}
			if u := bl.ToolUse; u != nil {
				member(`"toolUse":{"toolUseId":`)
				b = jsonstr.Append(b, u.ToolUseID)
				b = append(b, `,"name":`...)
				b = jsonstr.Append(b, u.Name)
				b = append(b, `,"input":`...)
				if len(u.Input) == 0 {
					b = append(b, "null"...)
				} else {
					raw(u.Input)
				}
				b = append(b, '}')
			}
			if res := bl.ToolResult; res != nil {
				member(`"toolResult":{"toolUseId":`)
				b = jsonstr.Append(b, res.ToolUseID)
				b = append(b, `,"content":`...)
				if res.Content == nil {
					b = append(b, "null"...)
				} else {
					b = append(b, '[')
					for j, c := range res.Content {
						if j > 0 {
							b = append(b, ',')
						}
						if len(c) == 0 {
							b = append(b, "null"...)
						} else {
							raw(c)
						}
					}
					b = append(b, ']')
				}
				b = append(b, '}')
			}
			if sep == '{' {
				b = append(b, '{')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `{"messages":`...)
	if r.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = jsonstr.Append(b, r.Messages[i].Role)
			b = append(b, `,"content":`...)
			blocks(r.Messages[i].Content)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(r.System) > 0 {
		b = append(b, `,"system":`...)
		blocks(r.System)
	}
	if ic := r.InferenceConfig; ic != nil {
		b = append(b, `,"inferenceConfig":`...)
		sep := byte('{')
		member := func(name string) {
			b = append(b, sep)
			b = append(b, name...)
			sep = ','
		}
		if ic.MaxTokens != 0 {
			member(`"maxTokens":`)
			b = strconv.AppendInt(b, ic.MaxTokens, 10)
		}
		for _, f := range [...]struct {
			name string
			v    *float64
		}{{`"temperature":`, ic.Temperature}, {`"topP":`, ic.TopP}} {
			if f.v != nil {
				member(f.name)
				var fine bool
				if b, fine = rawjson.AppendFloat(b, *f.v); !fine {
					ok = false
				}
			}
		}
		if len(ic.StopSequences) > 0 {
			member(`"stopSequences":[`)
			for i, s := range ic.StopSequences {
				if i > 0 {
					b = append(b, ',')
				}
				b = jsonstr.Append(b, s)
			}
			b = append(b, ']')
		}
		if sep == '{' {
			b = append(b, '{')
		}
		b = append(b, '}')
	}
	if tc := r.ToolConfig; tc != nil {
		b = append(b, `,"toolConfig":{"tools":`...)
		if tc.Tools == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i, t := range tc.Tools {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"toolSpec":{"name":`...)
				b = jsonstr.Append(b, t.ToolSpec.Name)
				if t.ToolSpec.Description != "" {
					b = append(b, `,"description":`...)
					b = jsonstr.Append(b, t.ToolSpec.Description)
				}
				b = append(b, `,"inputSchema":`...)
				if len(t.ToolSpec.InputSchema) == 0 {
					b = append(b, "null"...)
				} else {
					raw(t.ToolSpec.InputSchema)
				}
				b = append(b, "}}"...)
			}
			b = append(b, ']')
		}
		if len(tc.ToolChoice) > 0 {
			b = append(b, `,"toolChoice":`...)
			raw(tc.ToolChoice)
		}
		b = append(b, '}')
	}
	if len(r.AdditionalModelRequestFields) > 0 {
		b = append(b, `,"additionalModelRequestFields":`...)
		raw(r.AdditionalModelRequestFields)
	}
	return append(b, '}'), ok
}

// appendCompletion appends c as encoding/json writes it.
func appendCompletion(b []byte, c *completion) []byte {
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
				b = appendMessage(b, ch.Message)
			}
			if ch.Delta != nil {
				b = append(b, `,"delta":`...)
				b = appendMessage(b, ch.Delta)
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
		b = append(b, "}}"...)
	}
	return append(b, '}')
}

func appendMessage(b []byte, m *chatMessage) []byte {
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
	if sep == '{' {
		b = append(b, '{')
	}
	return append(b, '}')
}
