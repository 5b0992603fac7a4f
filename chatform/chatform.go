// Package chatform is the gateway's common answer form, a chat completion
// or chat completion chunk, and its encoder: the translations from other
// providers' answers (Anthropic, Gemini, Bedrock) all write it.
//
// AppendJSON writes a Completion byte for byte as encoding/json does
// (TestCompletionEncoderIsEncodingJSONs checks), without its reflection: a 4 KB answer's
// translation spent much of its time there.
package chatform

import (
	"encoding/json"
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// Completion is a chat completion (Object "chat.completion") or one chunk
// of a streamed one ("chat.completion.chunk").
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice holds a whole answer's Message or a chunk's Delta.
type Choice struct {
	Index        int      `json:"index"`
	Message      *Message `json:"message,omitempty"`
	Delta        *Message `json:"delta,omitempty"`
	FinishReason *string  `json:"finish_reason"`
}

// Message is a choice's message or delta.
type Message struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// Reasoning is the text of the answer's thinking (the public API's
	// message.reasoning).
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningDetails are the thinking's blocks as the provider gave
	// them (with their signatures, or encrypted), for the client to send
	// back with the assistant message; in a chunk, pieces merged by Index.
	ReasoningDetails []ReasoningDetail `json:"reasoning_details,omitempty"`
	ToolCalls        []ToolCall        `json:"tool_calls,omitempty"`
	Annotations      []Annotation      `json:"annotations,omitempty"`
}

// Reasoning detail types and the formats of Anthropic's blocks and
// Gemini's thought signatures.
const (
	ReasoningText      = "reasoning.text"
	ReasoningEncrypted = "reasoning.encrypted"
	FormatAnthropic    = "anthropic-claude-v1"
	FormatGemini       = "google-gemini-v1"
)

// ReasoningDetail is one block of an answer's thinking: its text and
// signature (reasoning.text), or data the provider encrypted
// (reasoning.encrypted).
type ReasoningDetail struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// ID is the id of the tool call whose part carried the detail
	// (Gemini's thought signature of a function call).
	ID     string `json:"id,omitempty"`
	Format string `json:"format,omitempty"`
	Index  int    `json:"index"`
}

// ToolCall is a call, or in a chunk a piece of one: later pieces carry
// only Index and arguments.
type ToolCall struct {
	Index    *int     `json:"index,omitempty"`
	ID       string   `json:"id,omitempty"`
	Type     string   `json:"type,omitempty"`
	Function Function `json:"function"`
}

// Function is a tool call's function.
type Function struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// Annotation is a url_citation of the answer's text.
type Annotation struct {
	Type        string      `json:"type"`
	URLCitation URLCitation `json:"url_citation"`
}

// URLCitation is where a cited text came from.
type URLCitation struct {
	URL        string `json:"url"`
	Title      string `json:"title"`
	Content    string `json:"content,omitempty"`
	StartIndex int64  `json:"start_index"`
	EndIndex   int64  `json:"end_index"`
}

// Usage is the answer's token count. The optional members are those only
// some providers report.
type Usage struct {
	PromptTokens        int64         `json:"prompt_tokens"`
	CompletionTokens    int64         `json:"completion_tokens"`
	TotalTokens         int64         `json:"total_tokens"`
	PromptTokensDetails PromptDetails `json:"prompt_tokens_details"`
	// CompletionTokensDetails is set by providers that count reasoning
	// tokens (even when 0); see WithReasoningTokens.
	CompletionTokensDetails *CompletionDetails `json:"completion_tokens_details,omitempty"`
	// ServerToolUse is a validated JSON value, copied compacted.
	ServerToolUse json.RawMessage `json:"server_tool_use,omitempty"`
}

// PromptDetails splits the prompt's tokens.
type PromptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
	// CacheWriteTokens is set by providers that bill cache writes apart
	// (even when 0); see WithCacheWrites.
	CacheWriteTokens *int64 `json:"cache_write_tokens,omitempty"`
}

// CompletionDetails splits the completion's tokens.
type CompletionDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// WithCacheWrites returns u counting written cache tokens, in one
// allocation for both.
func WithCacheWrites(u Usage, written int64) *Usage {
	box := &struct {
		u       Usage
		written int64
	}{u, written}
	box.u.PromptTokensDetails.CacheWriteTokens = &box.written
	return &box.u
}

// WithReasoningTokens returns u counting its completion's reasoning
// tokens, in one allocation for both.
func WithReasoningTokens(u Usage, reasoning int64) *Usage {
	box := &struct {
		u Usage
		d CompletionDetails
	}{u, CompletionDetails{ReasoningTokens: reasoning}}
	box.u.CompletionTokensDetails = &box.d
	return &box.u
}

// AppendJSON appends c as encoding/json writes it. ok is false when
// encoding/json would fail (a ServerToolUse that does not compact), for
// the caller to fall back to it for its error.
func (c *Completion) AppendJSON(b []byte) (_ []byte, ok bool) {
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
		if w := u.PromptTokensDetails.CacheWriteTokens; w != nil {
			b = append(b, `,"cache_write_tokens":`...)
			b = strconv.AppendInt(b, *w, 10)
		}
		b = append(b, '}')
		if d := u.CompletionTokensDetails; d != nil {
			b = append(b, `,"completion_tokens_details":{"reasoning_tokens":`...)
			b = strconv.AppendInt(b, d.ReasoningTokens, 10)
			b = append(b, '}')
		}
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

func appendMessage(b []byte, m *Message) []byte {
	sep := byte('{')
	if m.Role != "" {
		b = member(b, &sep, `"role":`)
		b = jsonstr.Append(b, m.Role)
	}
	if m.Content != nil {
		b = member(b, &sep, `"content":`)
		b = jsonstr.Append(b, *m.Content)
	}
	if m.Reasoning != "" {
		b = member(b, &sep, `"reasoning":`)
		b = jsonstr.Append(b, m.Reasoning)
	}
	if len(m.ReasoningDetails) > 0 {
		b = member(b, &sep, `"reasoning_details":[`)
		for i := range m.ReasoningDetails {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendReasoningDetail(b, &m.ReasoningDetails[i])
		}
		b = append(b, ']')
	}
	if len(m.ToolCalls) > 0 {
		b = member(b, &sep, `"tool_calls":[`)
		for i := range m.ToolCalls {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendToolCall(b, &m.ToolCalls[i])
		}
		b = append(b, ']')
	}
	if len(m.Annotations) > 0 {
		b = member(b, &sep, `"annotations":[`)
		for i := range m.Annotations {
			if i > 0 {
				b = append(b, ',')
			}
			a := &m.Annotations[i]
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

func appendToolCall(b []byte, c *ToolCall) []byte {
	sep := byte('{')
	if c.Index != nil {
		b = member(b, &sep, `"index":`)
		b = strconv.AppendInt(b, int64(*c.Index), 10)
	}
	if c.ID != "" {
		b = member(b, &sep, `"id":`)
		b = jsonstr.Append(b, c.ID)
	}
	if c.Type != "" {
		b = member(b, &sep, `"type":`)
		b = jsonstr.Append(b, c.Type)
	}
	b = member(b, &sep, `"function":`)
	if c.Function.Name != "" {
		b = append(b, `{"name":`...)
		b = jsonstr.Append(b, c.Function.Name)
		b = append(b, `,"arguments":`...)
	} else {
		b = append(b, `{"arguments":`...)
	}
	b = jsonstr.Append(b, c.Function.Arguments)
	return append(b, "}}"...)
}

// member appends an object's member name after the separator sep (the
// object's '{' before its first member, ',' after).
func member(b []byte, sep *byte, name string) []byte {
	b = append(b, *sep)
	*sep = ','
	return append(b, name...)
}

func appendReasoningDetail(b []byte, d *ReasoningDetail) []byte {
	b = append(b, `{"type":`...)
	b = jsonstr.Append(b, d.Type)
	for _, m := range [...]struct{ name, v string }{
		{`,"text":`, d.Text}, {`,"signature":`, d.Signature}, {`,"data":`, d.Data}, {`,"id":`, d.ID}, {`,"format":`, d.Format},
	} {
		if m.v != "" {
			b = append(b, m.name...)
			b = jsonstr.Append(b, m.v)
		}
	}
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(d.Index), 10)
	return append(b, '}')
}
