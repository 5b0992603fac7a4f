package bedrock

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// The Converse request written by hand (the chat answer is chatform's), byte for byte
// as encoding/json writes them (TestFromChatEqualsTheReference checks), without its
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
			if cp := bl.CachePoint; cp != nil {
				member(`"cachePoint":{"type":`)
				b = jsonstr.Append(b, cp.Type)
				if cp.TTL != "" {
					b = append(b, `,"ttl":`...)
					b = jsonstr.Append(b, cp.TTL)
				}
				b = append(b, '}')
			}
			if rc := bl.ReasoningContent; rc != nil {
				member(`"reasoningContent":`)
				inner := byte('{')
				if rt := rc.ReasoningText; rt != nil {
					b = append(b, `{"reasoningText":{"text":`...)
					b = jsonstr.Append(b, rt.Text)
					b = append(b, `,"signature":`...)
					b = jsonstr.Append(b, rt.Signature)
					b = append(b, '}')
					inner = ','
				}
				if rc.RedactedContent != "" {
					b = append(b, inner)
					b = append(b, `"redactedContent":`...)
					b = jsonstr.Append(b, rc.RedactedContent)
					inner = ','
				}
				if inner == '{' {
					b = append(b, '{')
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
