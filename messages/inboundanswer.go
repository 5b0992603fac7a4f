package messages

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// ChatToMessages is the answer side of a translated Messages request: it
// sits between reverse_proxy (which writes the chat provider's answer) and
// the meter's writer, which then sees a Messages answer as from a provider
// that speaks Messages.
//
//   - A stream is converted event by event as the provider flushes it, each
//     event named by an "event:" line as Anthropic's SDKs require: the first
//     chunk opens the message (message_start, ping); text deltas open a
//     text block (content_block_start, content_block_delta text_delta,
//     citations_delta for url_citation annotations), tool call deltas a
//     tool_use block each (input_json_delta); a new block closes the one
//     before (content_block_stop). The provider's [DONE] closes the last
//     block and the message: message_delta with stop_reason and the usage,
//     then message_stop. A chunk carrying an error becomes an "error"
//     event. A stream cut without [DONE] is left open for the meter, which
//     ends it with an error event.
//   - A JSON answer is converted once complete (Finish), into the meter's
//     buffer.
//   - Error statuses and bodies that are not a chat completion pass
//     through unchanged, so that the meter's fallback and error rules
//     apply to them as to any provider's.
//
// The message's id is the gateway's generation id and its model the
// catalog model that served, as on the chat route. Usage is Anthropic's:
// input_tokens excludes the cached prompt tokens, which
// cache_read_input_tokens (and cache_creation_input_tokens) report.
type ChatToMessages struct {
	sse.ChatAnswer
	id, model, provider string

	// Stream state.
	started  bool // message_start sent
	closed   bool // message_stop or error sent
	blocks   int  // content blocks started
	open     int  // the index of the open block; -1: none
	text     *textBlock
	thinking int                  // the index of the thinking block; -1: none
	calls    map[int64]*toolBlock // by the chat tool call index
	finish   string
	stopSeq  *string // the stop sequence that ended the answer, when the provider says
	usage    gjson.Result
}

// textBlock is the text block being streamed.
type textBlock struct {
	index int
	text  strings.Builder
}

// toolBlock is one tool_use block being streamed.
type toolBlock struct{ index int }

// ProviderUsage is the last usage object the provider's chat answer
// reported (not an object: none), whether or not the answer got as far
// as carrying it to the client: a stream cut after the provider's usage
// chunk is charged by it.
func (cw *ChatToMessages) ProviderUsage() gjson.Result { return cw.usage }

// NewChatToMessages translates the chat answer written to it into the
// Messages answer with the given id (the generation id), model (the
// catalog model id) and provider, written to w. A held JSON answer is
// bounded by the Limit of the embedded sse.Writer.
func NewChatToMessages(w http.ResponseWriter, id, model, provider string) *ChatToMessages {
	cw := &ChatToMessages{id: id, model: model, provider: provider, open: -1, thinking: -1, calls: map[int64]*toolBlock{}}
	cw.InitChat(w, cw)
	return cw
}

// Unfinished implements sse.ChatConverter.
func (cw *ChatToMessages) Unfinished() bool { return cw.started && !cw.closed && cw.finish != "" }

// Message is a Messages answer object.
type Message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Provider     string  `json:"provider,omitempty"`
	Content      []any   `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        *Usage  `json:"usage"`
}

// Usage is a Messages usage object.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// UsageFromChat is the Messages usage of a chat usage object: the cached
// prompt tokens (prompt_tokens_details.cached_tokens, and cache_write_tokens
// where a provider reports them) apart from input_tokens, so that the
// three add up to prompt_tokens.
func UsageFromChat(u gjson.Result) *Usage {
	prompt := u.Get("prompt_tokens").Int()
	read := u.Get("prompt_tokens_details.cached_tokens").Int()
	write := u.Get("prompt_tokens_details.cache_write_tokens").Int()
	if read < 0 || write < 0 || read+write > prompt {
		read, write = 0, 0
	}
	return &Usage{
		InputTokens:              prompt - read - write,
		OutputTokens:             u.Get("completion_tokens").Int(),
		CacheCreationInputTokens: write,
		CacheReadInputTokens:     read,
	}
}

// StopReason maps a chat finish_reason to a Messages stop_reason; seq is
// the stop sequence that ended the answer, when the provider names it.
func StopReason(finish string, seq *string) string {
	if finish == "stop" && seq != nil {
		return "stop_sequence"
	}
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// stopSequence is the stop sequence a chat choice names as its end: vLLM
// and compatible servers report the matched stop string as stop_reason
// (OpenAI reports none, and its "stop" is end_turn).
func stopSequence(choice gjson.Result) *string {
	if s := choice.Get("stop_reason"); s.Type == gjson.String && s.Str != "" && choice.Get("finish_reason").Str == "stop" {
		return &s.Str
	}
	return nil
}

// ConvertJSON implements sse.ChatConverter: a chat completion becomes a
// Messages object.
func (cw *ChatToMessages) ConvertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	cw.Produced = outputlen.Chat(body)
	c := gjson.ParseBytes(body)
	if !c.IsObject() || !c.Get("choices").IsArray() {
		return nil, false
	}
	choice := c.Get("choices.0")
	msg := choice.Get("message")
	content := thinkingContent(msg.Get("reasoning_details"))
	if r := reasoning(msg); r != "" && len(content) == 0 {
		content = append(content, map[string]any{"type": "thinking", "thinking": r, "signature": ""})
	}
	if text := msg.Get("content").Str; text != "" {
		content = append(content, textContent(text, citations(text, msg.Get("annotations"))))
	}
	for _, tc := range msg.Get("tool_calls").Array() {
		content = append(content, map[string]any{"type": "tool_use", "id": tc.Get("id").Str,
			"name": tc.Get("function.name").Str, "input": toolInput(tc.Get("function.arguments").Str)})
	}
	seq := stopSequence(choice)
	stop := StopReason(choice.Get("finish_reason").Str, seq)
	m := &Message{ID: cw.id, Type: "message", Role: "assistant", Model: cw.model, Provider: cw.provider,
		Content: content, StopReason: &stop, StopSequence: seq}
	if u := c.Get("usage"); u.IsObject() {
		m.Usage = UsageFromChat(u)
	}
	out, err := json.Marshal(m)
	return out, err == nil
}

// thinkingContent is the thinking blocks of a chat message's
// reasoning_details in Anthropic's format (a provider of Anthropic's
// models through chat: Bedrock): each signed text a thinking block with
// its signature, each encrypted entry a redacted_thinking block, so that
// a client sends them back unchanged; empty (not nil) when there is none.
func thinkingContent(details gjson.Result) []any {
	content := []any{}
	ds, bad := chatform.ReadReasoningDetails(details)
	if bad != nil {
		return content
	}
	for _, d := range ds {
		switch {
		case d.Format != chatform.FormatAnthropic:
		case d.Type == chatform.ReasoningText && d.Signature != "":
			content = append(content, map[string]any{"type": "thinking", "thinking": d.Text, "signature": d.Signature})
		case d.Type == chatform.ReasoningEncrypted:
			content = append(content, map[string]any{"type": "redacted_thinking", "data": d.Data})
		}
	}
	return content
}

// textContent is a text block; citations nil when it has none.
func textContent(text string, cites []any) map[string]any {
	var c any
	if len(cites) > 0 {
		c = cites
	}
	return map[string]any{"type": "text", "text": text, "citations": c}
}

// toolInput is a tool call's arguments as the tool_use block's input
// object; arguments that are not a JSON object are kept under "arguments".
func toolInput(args string) json.RawMessage {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage(`{}`)
	}
	if v := gjson.Parse(args); jsoncheck.Valid([]byte(args)) && v.IsObject() {
		return json.RawMessage(args)
	}
	raw, _ := json.Marshal(map[string]string{"arguments": args})
	return raw
}

// citations turns chat url_citation annotations of text into Messages
// web_search_result_location citations.
func citations(text string, anns gjson.Result) []any {
	var out []any
	for _, a := range anns.Array() {
		if c, ok := citation(text, a); ok {
			out = append(out, c)
		}
	}
	return out
}

// citation is one url_citation annotation as a web_search_result_location
// citation, its cited_text the annotated span of text (the annotation's
// content when the span is out of range).
func citation(text string, a gjson.Result) (map[string]any, bool) {
	if a.Get("type").Str != "url_citation" {
		return nil, false
	}
	src := a
	if inner := a.Get("url_citation"); inner.IsObject() {
		src = inner
	}
	cited := src.Get("content").Str
	start, end := src.Get("start_index").Int(), src.Get("end_index").Int()
	if r := []rune(text); start >= 0 && start < end && end <= int64(len(r)) {
		cited = string(r[start:end])
	}
	return map[string]any{"type": "web_search_result_location", "url": src.Get("url").Str,
		"title": src.Get("title").Str, "cited_text": cited, "encrypted_index": ""}, true
}

// Chunk implements sse.ChatConverter: it converts one chat stream event.
func (cw *ChatToMessages) Chunk(data []byte) {
	if data == nil || cw.Failed() || cw.closed {
		return
	}
	if sse.IsDone(data) {
		cw.complete()
		return
	}
	c := gjson.ParseBytes(data)
	if !cw.started {
		cw.start()
	}
	if e := c.Get("error"); e.Exists() && e.Type != gjson.Null {
		cw.fail(e)
		return
	}
	if u := c.Get("usage"); u.IsObject() {
		cw.usage = u
	}
	choice := c.Get("choices.0")
	if f := choice.Get("finish_reason").Str; f != "" {
		cw.finish = f
		cw.stopSeq = stopSequence(choice)
	}
	delta := choice.Get("delta")
	if r := reasoning(delta); r != "" {
		cw.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": cw.thinkingBlock(),
			"delta": map[string]any{"type": "thinking_delta", "thinking": r}})
	}
	// Anthropic-format reasoning_details pieces: a signature ends the
	// thinking block (signature_delta), encrypted content is a
	// redacted_thinking block.
	for _, d := range delta.Get("reasoning_details").Array() {
		if d.Get("format").Str != chatform.FormatAnthropic {
			continue
		}
		switch typ := d.Get("type").Str; {
		case typ == chatform.ReasoningText && d.Get("signature").Str != "":
			cw.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": cw.thinkingBlock(),
				"delta": map[string]any{"type": "signature_delta", "signature": d.Get("signature").Str}})
		case typ == chatform.ReasoningEncrypted && d.Get("data").Str != "":
			cw.startBlock(map[string]any{"type": "redacted_thinking", "data": d.Get("data").Str})
		}
	}
	if t := delta.Get("content"); t.Type == gjson.String && t.Str != "" {
		b := cw.textBlock()
		b.text.WriteString(t.Str)
		cw.textDelta(b.index, t.Raw)
	}
	for _, a := range delta.Get("annotations").Array() {
		b := cw.textBlock()
		if cite, ok := citation(b.text.String(), a); ok {
			cw.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": b.index,
				"delta": map[string]any{"type": "citations_delta", "citation": cite}})
		}
	}
	for _, tc := range delta.Get("tool_calls").Array() {
		cw.toolCallDelta(tc)
	}
}

// start sends message_start and a ping.
func (cw *ChatToMessages) start() {
	cw.started = true
	m := &Message{ID: cw.id, Type: "message", Role: "assistant", Model: cw.model, Provider: cw.provider,
		Content: []any{}, Usage: &Usage{}}
	cw.send("message_start", map[string]any{"type": "message_start", "message": m})
	cw.send("ping", map[string]any{"type": "ping"})
}

// textBlock returns the open text block, starting one (and closing the
// block before) when none is open.
func (cw *ChatToMessages) textBlock() *textBlock {
	if cw.text != nil && cw.open == cw.text.index {
		return cw.text
	}
	cw.text = &textBlock{index: cw.startBlock(map[string]any{"type": "text", "text": "", "citations": nil})}
	return cw.text
}

// thinkingBlock returns the index of the open thinking block, starting
// one (and closing the block before) when none is open.
func (cw *ChatToMessages) thinkingBlock() int {
	if cw.thinking < 0 || cw.open != cw.thinking {
		cw.thinking = cw.startBlock(map[string]any{"type": "thinking", "thinking": "", "signature": ""})
	}
	return cw.thinking
}

// reasoning is the reasoning text of a chat message or delta, as
// providers name it: reasoning (OpenRouter-style) or reasoning_content
// (DeepSeek, vLLM).
func reasoning(m gjson.Result) string {
	if r := m.Get("reasoning").Str; r != "" {
		return r
	}
	return m.Get("reasoning_content").Str
}

// startBlock closes the open block and starts the next one.
func (cw *ChatToMessages) startBlock(block map[string]any) int {
	cw.stopBlock()
	i := cw.blocks
	cw.blocks++
	cw.open = i
	cw.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": block})
	return i
}

// stopBlock closes the open block, if any.
func (cw *ChatToMessages) stopBlock() {
	if cw.open < 0 {
		return
	}
	cw.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": cw.open})
	cw.open = -1
}

// toolCallDelta handles one element of delta.tool_calls: its first
// delta starts a tool_use block, its arguments are input_json_delta.
func (cw *ChatToMessages) toolCallDelta(tc gjson.Result) {
	idx := tc.Get("index").Int()
	call, ok := cw.calls[idx]
	if !ok {
		call = &toolBlock{index: cw.startBlock(map[string]any{"type": "tool_use", "id": tc.Get("id").Str,
			"name": tc.Get("function.name").Str, "input": map[string]any{}})}
		cw.calls[idx] = call
	}
	if a := tc.Get("function.arguments").Str; a != "" {
		cw.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": call.index,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": a}})
	}
}

// complete closes the open block and the message: message_delta with the
// stop reason and the usage (null when the provider reported none: the
// meter puts in what it charged), then message_stop.
func (cw *ChatToMessages) complete() {
	if !cw.started {
		// [DONE] without any chunk: nothing was generated.
		cw.start()
	}
	cw.stopBlock()
	var usage any
	if cw.usage.IsObject() {
		usage = UsageFromChat(cw.usage)
	}
	cw.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": StopReason(cw.finish, cw.stopSeq), "stop_sequence": cw.stopSeq}, "usage": usage})
	cw.send("message_stop", map[string]any{"type": "message_stop"})
	cw.closed = true
}

// fail ends the stream after an error chunk with an error event.
func (cw *ChatToMessages) fail(e gjson.Result) {
	msg := e.Get("message").Str
	if msg == "" {
		msg = "Provider error"
	}
	cw.Out = append(cw.Out, ErrorEvent(http.StatusBadGateway, msg)...)
	cw.closed = true
}

// ErrorEvent is the Messages stream's error event for an error with the
// gateway's status after the stream started: Anthropic's
// {"type":"error","error":{"type","message"}}, with the code as on the
// gateway's other errors.
func ErrorEvent(status int, msg string) []byte {
	data, _ := json.Marshal(map[string]any{"type": "error",
		"error": map[string]any{"type": ErrorType(status), "code": status, "message": msg}})
	return append(append([]byte("event: error\ndata: "), data...), "\n\n"...)
}

// ErrorType is the Anthropic error type of a status.
func ErrorType(status int) string {
	switch {
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge:
		return "invalid_request_error"
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusPaymentRequired:
		return "billing_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status == http.StatusRequestTimeout:
		return "timeout_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusServiceUnavailable || status == 529:
		return "overloaded_error"
	case status >= 400 && status < 500:
		return "invalid_request_error"
	}
	return "api_error"
}

// textDelta adds the commonest event, a text_delta, to out without
// encoding/json: raw is the chunk's text as the provider quoted it.
func (cw *ChatToMessages) textDelta(index int, raw string) {
	if cw.Err != nil {
		return
	}
	b := append(cw.Out, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"delta":{"type":"text_delta","text":`...)
	b = append(b, raw...)
	cw.Out = append(b, "}}\n\n"...)
}

// send adds one named event to out.
func (cw *ChatToMessages) send(typ string, ev map[string]any) {
	if cw.Err != nil {
		return
	}
	data, err := json.Marshal(ev)
	if err != nil {
		cw.Err = err
		return
	}
	b := append(append(cw.Out, "event: "...), typ...)
	b = append(append(append(b, "\ndata: "...), data...), "\n\n"...)
	cw.Out = b
}
