package messages

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// now is the clock of the answers' created times.
var now = time.Now

// AnthropicToChat is the answer side of a request sent to a provider of
// style anthropic: it sits between reverse_proxy (which writes the
// Messages answer) and the writer above (the meter's, or the Responses
// translation's), which then sees a chat completion exactly as from an
// OpenAI-style provider.
//
//   - A stream is converted event by event as the provider flushes it
//     (message_start, content_block_start/delta/stop, message_delta,
//     message_stop; ping dropped) into chat chunks: text deltas as
//     delta.content, thinking as delta.reasoning and, with its signature,
//     delta.reasoning_details (redacted thinking as reasoning.encrypted
//     details), tool_use blocks as delta.tool_calls, a text block's
//     citations as delta.annotations once the block ends, the stop reason
//     as finish_reason, then a usage chunk and [DONE] at message_stop. An
//     error event becomes a chunk with error and finish_reason "error";
//     the stream is left open for the meter, which ends it.
//   - A JSON answer is converted once complete (Finish).
//   - Error statuses and bodies that are not a message pass unchanged, so
//     that the meter's fallback and error rules apply to them.
//
// Usage: prompt_tokens = input_tokens + cache_read_input_tokens +
// cache_creation_input_tokens, with prompt_tokens_details.cached_tokens
// (reads) and cache_write_tokens (writes); server_tool_use passes as is.
type AnthropicToChat struct {
	sse.Writer
	model string // until the answer names one

	// Stream state.
	out        []byte
	id         string
	created    int64
	usage      anthropicUsage
	finish     string
	blocks     map[int64]*streamBlock
	toolCalls  int   // tool calls announced so far (their chat index)
	details    int   // thinking blocks announced so far (their detail index)
	textRunes  int64 // code points of text sent so far
	err        error
	sawMessage bool
	textPrefix []byte // a content chunk's bytes before the text

	// Produced is the model output of the provider's answer (outputlen),
	// what the meter charges for when no usage comes: the translation
	// may carry less of it to the client.
	Produced int
}

// streamBlock is one content block being streamed.
type streamBlock struct {
	typ       string // text, tool_use, server_tool_use, ...
	toolIndex int    // tool_use: its chat tool call index; thinking: its detail index
	start     int64  // text: its first code point in the message text
	citations []gjson.Result
}

// anthropicUsage is what the provider reported, merged across events.
type anthropicUsage struct {
	input, output, cacheRead, cacheWrite int64
	// cacheWrite1h: of cacheWrite, kept for an hour (cache_creation);
	// cacheUnknown: cache_creation held a count of a form not read.
	cacheWrite1h  int64
	cacheUnknown  bool
	serverToolUse string // raw server_tool_use, if any
	seen          bool
}

func (u *anthropicUsage) merge(v gjson.Result) {
	if !v.IsObject() {
		return
	}
	u.seen = true
	for name, dst := range map[string]*int64{
		"input_tokens": &u.input, "output_tokens": &u.output,
		"cache_read_input_tokens": &u.cacheRead, "cache_creation_input_tokens": &u.cacheWrite,
	} {
		if n := v.Get(name); n.Type == gjson.Number {
			*dst = n.Int()
		}
	}
	if s := v.Get("server_tool_use"); s.IsObject() {
		u.serverToolUse = s.Raw
	}
	if c := v.Get("cache_creation"); c.Exists() {
		var unknown bool
		u.cacheWrite1h, unknown = CacheCreation(c)
		u.cacheUnknown = u.cacheUnknown || unknown
	}
}

// CacheCreation reads a Messages usage's cache_creation, the split of its
// cache writes by TTL: hour is ephemeral_1h_input_tokens (the rest,
// ephemeral_5m_input_tokens, are charged as the default writes); unknown
// reports a member or a value of a form not read (a new TTL), which
// leaves those tokens at the default write's price. null is no split.
func CacheCreation(c gjson.Result) (hour int64, unknown bool) {
	if c.Type == gjson.Null {
		return 0, false
	}
	if !c.IsObject() {
		return 0, true
	}
	c.ForEach(func(k, v gjson.Result) bool {
		switch {
		case v.Type != gjson.Number || v.Num < 0 || v.Num != float64(v.Int()):
			unknown = true
		case k.Str == "ephemeral_1h_input_tokens":
			hour = v.Int()
		case k.Str != "ephemeral_5m_input_tokens":
			unknown = true
		}
		return true
	})
	return hour, unknown
}

// CacheWrites1h implements dialect.CacheTTLReporter.
func (aw *AnthropicToChat) CacheWrites1h() (int64, bool) {
	return aw.usage.cacheWrite1h, aw.usage.cacheUnknown
}

func (u *anthropicUsage) chat() *chatform.Usage {
	prompt := u.input + u.cacheRead + u.cacheWrite
	c := chatform.WithCacheWrites(chatform.Usage{PromptTokens: prompt, CompletionTokens: u.output, TotalTokens: prompt + u.output,
		PromptTokensDetails: chatform.PromptDetails{CachedTokens: u.cacheRead}}, u.cacheWrite)
	if u.serverToolUse != "" {
		c.ServerToolUse = json.RawMessage(u.serverToolUse)
	}
	return c
}

// NewAnthropicToChat translates the Messages answer written to it into a
// chat completion written to w; model is the provider's model id until
// the answer names one. A held JSON answer is bounded by the Limit of the
// embedded sse.Writer.
func NewAnthropicToChat(w http.ResponseWriter, model string) *AnthropicToChat {
	aw := &AnthropicToChat{model: model, blocks: map[int64]*streamBlock{}}
	aw.Init(w, aw)
	return aw
}

// Decide implements sse.Hooks: streams are converted, JSON answers held,
// error statuses passed.
func (aw *AnthropicToChat) Decide(status int) sse.Mode { return aw.TranslateMode(status) }

// Event implements sse.Hooks: one Messages event becomes its chat chunks.
func (aw *AnthropicToChat) Event(ev []byte) ([]byte, error) {
	aw.out = aw.out[:0]
	if data := sse.Data(ev); data != nil && aw.err == nil {
		e := gjson.ParseBytes(data)
		aw.Produced += outputlen.MessagesEvent(e.Get("type").Str, data)
		aw.event(e)
	}
	return aw.out, aw.err
}

// Finish runs once reverse_proxy returned: it converts a held JSON answer;
// a body that is not a message passes unchanged (the meter reports it as
// an invalid answer).
func (aw *AnthropicToChat) Finish() {
	aw.FinishHeld(aw.convertJSON)
}

// FinishReason maps Anthropic's stop_reason to chat's finish_reason.
func FinishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

// citationsOf are a text block's web search citations as annotations of
// the span [start, end) of the message text (code points).
func citationsOf(citations []gjson.Result, start, end int64) []chatform.Annotation {
	var out []chatform.Annotation
	for _, c := range citations {
		if c.Get("type").Str != "web_search_result_location" || c.Get("url").Str == "" {
			continue
		}
		out = append(out, chatform.Annotation{Type: "url_citation", URLCitation: chatform.URLCitation{
			URL: c.Get("url").Str, Title: c.Get("title").Str, Content: c.Get("cited_text").Str,
			StartIndex: start, EndIndex: end,
		}})
	}
	return out
}

// convertJSON turns a Messages answer into a chat completion.
func (aw *AnthropicToChat) convertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	aw.Produced = outputlen.MessagesAnswer(body)
	m := gjson.Parse(rawjson.View(body)) // nothing kept: out is copied
	if !m.IsObject() {
		return nil, false
	}
	// The members read, each found in one walk of the answer.
	var top [6]gjson.Result
	rawjson.Lookup(m.Raw, answerMembers, top[:])
	typ, content, mmodel, stop, usage, id := top[0], top[1], top[2], top[3], top[4], top[5]
	if typ.Str != "message" || !content.IsArray() {
		return nil, false
	}
	model := mmodel.Str
	if model == "" {
		model = aw.model
	}
	var text, reasoning strings.Builder
	var first string // the text while there is one
	var texts int
	var runes int64
	msg := &chatform.Message{Role: "assistant"}
	for _, b := range rawjson.Array(content) {
		var f [9]gjson.Result
		if b.IsObject() {
			rawjson.Lookup(b.Raw, blockMembers, f[:])
		}
		switch f[0].Str {
		case "thinking":
			reasoning.WriteString(f[1].Str)
			msg.ReasoningDetails = append(msg.ReasoningDetails, chatform.ReasoningDetail{Type: chatform.ReasoningText,
				Text: f[1].Str, Signature: f[7].Str, Format: chatform.FormatAnthropic, Index: len(msg.ReasoningDetails)})
		case "redacted_thinking":
			msg.ReasoningDetails = append(msg.ReasoningDetails, chatform.ReasoningDetail{Type: chatform.ReasoningEncrypted,
				Data: f[8].Str, Format: chatform.FormatAnthropic, Index: len(msg.ReasoningDetails)})
		case "text":
			t := f[2].Str
			start := runes
			// The common answer has one text: used as it is, not copied.
			switch texts++; texts {
			case 1:
				first = t
			case 2:
				text.WriteString(first)
				fallthrough
			default:
				text.WriteString(t)
			}
			runes += int64(utf8.RuneCountInString(t))
			msg.Annotations = append(msg.Annotations, citationsOf(f[3].Array(), start, runes)...)
		case "tool_use":
			input := f[4].Raw
			if input == "" {
				input = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, chatform.ToolCall{ID: f[5].Str, Type: "function",
				Function: chatform.Function{Name: f[6].Str, Arguments: input}})
		}
	}
	s := first
	if texts > 1 {
		s = text.String()
	}
	if s != "" || len(msg.ToolCalls) == 0 {
		msg.Content = &s
	}
	msg.Reasoning = reasoning.String()
	finish := FinishReason(stop.Str)
	u := &aw.usage
	u.merge(usage)
	c := chatform.Completion{ID: id.Str, Object: "chat.completion", Created: now().Unix(), Model: model,
		Choices: []chatform.Choice{{Message: msg, FinishReason: &finish}}}
	if u.seen {
		c.Usage = u.chat()
	}
	if out, ok := c.AppendJSON(make([]byte, 0, len(body)+256)); ok {
		return out, true
	}
	out, err := json.Marshal(c) // for its error
	return out, err == nil
}

// answerMembers and blockMembers are the members convertJSON reads of the
// answer and of a content block.
var (
	answerMembers = []string{"type", "content", "model", "stop_reason", "usage", "id"}
	blockMembers  = []string{"type", "thinking", "text", "citations", "input", "id", "name", "signature", "data"}
)

// event converts one stream event.
func (aw *AnthropicToChat) event(e gjson.Result) {
	switch e.Get("type").Str {
	case "message_start":
		msg := e.Get("message")
		aw.id, aw.sawMessage, aw.created = msg.Get("id").Str, true, now().Unix()
		if m := msg.Get("model").Str; m != "" {
			aw.model = m
		}
		aw.usage.merge(msg.Get("usage"))
		empty := ""
		aw.chunk(&chatform.Message{Role: "assistant", Content: &empty}, nil)
	case "content_block_start":
		aw.blockStart(e.Get("index").Int(), e.Get("content_block"))
	case "content_block_delta":
		aw.blockDelta(e.Get("index").Int(), e.Get("delta"))
	case "content_block_stop":
		aw.blockStop(e.Get("index").Int())
	case "message_delta":
		if s := e.Get("delta.stop_reason"); s.Type == gjson.String {
			aw.finish = FinishReason(s.Str)
		}
		aw.usage.merge(e.Get("usage"))
	case "message_stop":
		finish := aw.finish
		if finish == "" {
			finish = "stop"
		}
		aw.chunk(&chatform.Message{}, &finish)
		if aw.usage.seen {
			aw.send(chatform.Completion{ID: aw.id, Object: "chat.completion.chunk", Created: aw.created, Model: aw.model,
				Choices: []chatform.Choice{}, Usage: aw.usage.chat()})
		}
		aw.out = append(aw.out, "data: [DONE]\n\n"...)
	case "error":
		aw.send(map[string]any{
			"id": aw.id, "object": "chat.completion.chunk", "created": now().Unix(), "model": aw.model,
			"error":   map[string]any{"code": errorCode(e.Get("error.type").Str), "message": e.Get("error.message").Str},
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": ""}, "finish_reason": "error"}},
		})
	}
}

// errorCode is the HTTP status of an Anthropic error type.
func errorCode(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	}
	return http.StatusBadGateway
}

func (aw *AnthropicToChat) blockStart(i int64, cb gjson.Result) {
	b := &streamBlock{typ: cb.Get("type").Str, start: aw.textRunes}
	aw.blocks[i] = b
	switch b.typ {
	case "text":
		if t := cb.Get("text").Str; t != "" {
			aw.text(t)
		}
	case "tool_use":
		b.toolIndex = aw.toolCalls
		aw.toolCalls++
		idx := b.toolIndex
		aw.chunk(&chatform.Message{ToolCalls: []chatform.ToolCall{{Index: &idx, ID: cb.Get("id").Str, Type: "function",
			Function: chatform.Function{Name: cb.Get("name").Str}}}}, nil)
	case "thinking":
		b.toolIndex = aw.details
		aw.details++
		if t := cb.Get("thinking").Str; t != "" {
			aw.thinking(b, chatform.ReasoningDetail{Text: t})
		}
	case "redacted_thinking":
		b.toolIndex = aw.details
		aw.details++
		aw.chunk(&chatform.Message{ReasoningDetails: []chatform.ReasoningDetail{{Type: chatform.ReasoningEncrypted,
			Data: cb.Get("data").Str, Format: chatform.FormatAnthropic, Index: b.toolIndex}}}, nil)
	}
}

// thinking sends a piece of a thinking block: its text (also as the
// reasoning) or its signature.
func (aw *AnthropicToChat) thinking(b *streamBlock, d chatform.ReasoningDetail) {
	d.Type, d.Format, d.Index = chatform.ReasoningText, chatform.FormatAnthropic, b.toolIndex
	aw.chunk(&chatform.Message{Reasoning: d.Text, ReasoningDetails: []chatform.ReasoningDetail{d}}, nil)
}

func (aw *AnthropicToChat) blockDelta(i int64, d gjson.Result) {
	b := aw.blocks[i]
	if b == nil {
		return
	}
	switch d.Get("type").Str {
	case "text_delta":
		aw.text(d.Get("text").Str)
	case "input_json_delta":
		if b.typ == "tool_use" {
			idx := b.toolIndex
			aw.chunk(&chatform.Message{ToolCalls: []chatform.ToolCall{{Index: &idx,
				Function: chatform.Function{Arguments: d.Get("partial_json").Str}}}}, nil)
		}
	case "citations_delta":
		b.citations = append(b.citations, d.Get("citation"))
	case "thinking_delta":
		if t := d.Get("thinking").Str; t != "" {
			aw.thinking(b, chatform.ReasoningDetail{Text: t})
		}
	case "signature_delta":
		if s := d.Get("signature").Str; s != "" && b.typ == "thinking" {
			aw.thinking(b, chatform.ReasoningDetail{Signature: s})
		}
	}
}

// blockStop sends a text block's citations, now that its span is known.
func (aw *AnthropicToChat) blockStop(i int64) {
	b := aw.blocks[i]
	delete(aw.blocks, i)
	if b == nil || b.typ != "text" || len(b.citations) == 0 {
		return
	}
	if anns := citationsOf(b.citations, b.start, aw.textRunes); len(anns) > 0 {
		empty := ""
		aw.chunk(&chatform.Message{Content: &empty, Annotations: anns}, nil)
	}
}

// text sends a content delta: the commonest chunk, written without
// reflection after a prefix made once per stream.
func (aw *AnthropicToChat) text(t string) {
	if t == "" {
		return
	}
	aw.textRunes += int64(utf8.RuneCountInString(t))
	if aw.textPrefix == nil {
		head, err := json.Marshal(chatform.Completion{ID: aw.id, Object: "chat.completion.chunk", Created: aw.created, Model: aw.model})
		if err != nil {
			aw.err = err
			return
		}
		// {"id":...,"model":"...","choices":null} -> ..."choices":[{...
		head = head[:len(head)-len(`null}`)]
		aw.textPrefix = append([]byte("data: "), head...)
		aw.textPrefix = append(aw.textPrefix, `[{"index":0,"delta":{"content":`...)
	}
	q, err := json.Marshal(t)
	if err != nil {
		aw.err = err
		return
	}
	aw.out = append(aw.out, aw.textPrefix...)
	aw.out = append(aw.out, q...)
	aw.out = append(aw.out, "},\"finish_reason\":null}]}\n\n"...)
}

// chunk sends one chat chunk with delta and finish reason.
func (aw *AnthropicToChat) chunk(delta *chatform.Message, finish *string) {
	aw.send(chatform.Completion{ID: aw.id, Object: "chat.completion.chunk", Created: aw.created, Model: aw.model,
		Choices: []chatform.Choice{{Delta: delta, FinishReason: finish}}})
}

func (aw *AnthropicToChat) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		aw.err = err
		return
	}
	aw.out = append(aw.out, "data: "...)
	aw.out = append(aw.out, b...)
	aw.out = append(aw.out, "\n\n"...)
}
