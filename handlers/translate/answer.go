package translate

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// now is the clock of the answers' dates.
var now = time.Now

// ChatToResponses is the answer side of a translated Responses request: it
// sits between reverse_proxy (which writes the chat-only provider's answer)
// and the meter's writer, which then sees a Responses answer exactly as
// from a provider that speaks Responses.
//
//   - A stream is converted event by event as the provider flushes it: each
//     chat chunk becomes its Responses events (response.created,
//     response.in_progress, response.output_item.added,
//     response.content_part.added, response.output_text.delta,
//     response.output_text.annotation.added, function call events), and
//     the provider's [DONE] closes the items (response.output_text.done,
//     response.content_part.done, response.output_item.done) and the
//     response (response.completed, or response.incomplete when cut by
//     max_output_tokens), then [DONE]. Every event has a sequence_number.
//     A chunk carrying an error becomes an "error" event and
//     response.failed. A stream cut without [DONE] is left open for the
//     meter, which ends it with response.failed.
//   - A JSON answer is converted once complete (Finish), into the meter's
//     buffer.
//   - Error statuses and bodies that are not a chat completion pass
//     through unchanged, so that the meter's fallback and error rules
//     apply to them as to any provider's.
type ChatToResponses struct {
	sse.ChatAnswer
	echo  *Echo
	id    string // the response id: the gateway's generation id
	model string // the provider's model id, until the answer names one

	// Stream state.
	seq          int64
	created      int64
	started      bool // response.created sent
	closed       bool // response.completed, incomplete or failed sent
	msg          *streamMessage
	calls        []*streamCall // by first appearance
	callIdx      map[int64]*streamCall
	nextIndex    int // the next output_index
	finishReason string
	usage        gjson.Result
}

// streamMessage is the assistant message item being streamed.
type streamMessage struct {
	id          string
	index       int
	text        strings.Builder
	annotations []json.RawMessage
}

// streamCall is one function call item being streamed.
type streamCall struct {
	id, callID, name string
	index            int
	args             strings.Builder
}

// ProviderUsage is the last usage object the provider's chat answer
// reported (not an object: none), whether or not the answer got as far
// as carrying it to the client: a stream cut after the provider's usage
// chunk is charged by it.
func (cw *ChatToResponses) ProviderUsage() gjson.Result { return cw.usage }

// NewChatToResponses translates the chat answer written to it into the
// Responses answer with the given id, written to w; echo holds the
// request's fields the answer repeats (nil: their defaults), model the
// provider's model id until the answer names one. A held JSON answer is
// bounded by the Limit of the embedded sse.Writer.
func NewChatToResponses(w http.ResponseWriter, echo *Echo, id, model string) *ChatToResponses {
	cw := &ChatToResponses{echo: echo, id: id, model: model, callIdx: map[int64]*streamCall{}}
	cw.InitChat(w, cw)
	return cw
}

// Unfinished implements sse.ChatConverter.
func (cw *ChatToResponses) Unfinished() bool {
	return cw.started && !cw.closed && cw.finishReason != ""
}

// ConvertJSON implements sse.ChatConverter: a chat completion becomes a
// Responses object.
func (cw *ChatToResponses) ConvertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	cw.Produced = outputlen.Chat(body)
	c := gjson.ParseBytes(body)
	if !c.IsObject() || !c.Get("choices").IsArray() {
		return nil, false
	}
	if m := c.Get("model").Str; m != "" {
		cw.model = m
	}
	choice := c.Get("choices.0")
	msg := choice.Get("message")
	finish := choice.Get("finish_reason").Str
	status, incomplete := responseStatus(finish)
	var output []any
	text := msg.Get("content").Str
	calls := msg.Get("tool_calls").Array()
	if text != "" || len(calls) == 0 {
		var anns []json.RawMessage
		for _, a := range msg.Get("annotations").Array() {
			if flat, ok := flatAnnotation(a); ok {
				anns = append(anns, flat)
			}
		}
		output = append(output, messageItem(newID("msg_"), status, text, anns))
	}
	for _, tc := range calls {
		callID := tc.Get("id").Str
		output = append(output, functionCallItem("fc_"+strings.TrimPrefix(callID, "call_"), callID,
			tc.Get("function.name").Str, tc.Get("function.arguments").Str, "completed"))
	}
	created := c.Get("created").Int()
	if created == 0 {
		created = now().Unix()
	}
	obj := cw.responseObject(created, status, incomplete, output, c.Get("usage"))
	out, err := json.Marshal(obj)
	return out, err == nil
}

// responseStatus maps a chat finish_reason to a Responses status.
func responseStatus(finish string) (string, map[string]string) {
	switch finish {
	case "length":
		return "incomplete", map[string]string{"reason": "max_output_tokens"}
	case "content_filter":
		return "incomplete", map[string]string{"reason": "content_filter"}
	}
	return "completed", nil
}

// Chunk implements sse.ChatConverter: it converts one chat stream event.
func (cw *ChatToResponses) Chunk(data []byte) {
	if data == nil || cw.Failed() {
		return
	}
	if sse.IsDone(data) {
		if !cw.closed {
			cw.complete()
		}
		cw.Out = append(cw.Out, "data: [DONE]\n\n"...)
		return
	}
	if cw.closed {
		return
	}
	c := gjson.ParseBytes(data)
	if !cw.started {
		cw.start(c)
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
		cw.finishReason = f
	}
	delta := choice.Get("delta")
	if t := delta.Get("content").Str; t != "" {
		m := cw.message()
		m.text.WriteString(t)
		cw.send(map[string]any{"type": "response.output_text.delta", "item_id": m.id, "output_index": m.index,
			"content_index": 0, "delta": t, "logprobs": []any{}})
	}
	for _, a := range delta.Get("annotations").Array() {
		flat, ok := flatAnnotation(a)
		if !ok {
			continue
		}
		m := cw.message()
		m.annotations = append(m.annotations, flat)
		cw.send(map[string]any{"type": "response.output_text.annotation.added", "item_id": m.id, "output_index": m.index,
			"content_index": 0, "annotation_index": len(m.annotations) - 1, "annotation": flat})
	}
	for _, tc := range delta.Get("tool_calls").Array() {
		cw.toolCallDelta(tc)
	}
}

// start sends response.created and response.in_progress, dated by the
// first chunk.
func (cw *ChatToResponses) start(first gjson.Result) {
	if m := first.Get("model").Str; m != "" {
		cw.model = m
	}
	cw.created = first.Get("created").Int()
	if cw.created == 0 {
		cw.created = now().Unix()
	}
	cw.started = true
	pending := cw.responseObject(cw.created, "in_progress", nil, []any{}, gjson.Result{})
	cw.send(map[string]any{"type": "response.created", "response": pending})
	cw.send(map[string]any{"type": "response.in_progress", "response": pending})
}

// message starts the message item on first use.
func (cw *ChatToResponses) message() *streamMessage {
	if cw.msg != nil {
		return cw.msg
	}
	m := &streamMessage{id: newID("msg_"), index: cw.nextIndex}
	cw.msg = m
	cw.nextIndex++
	cw.send(map[string]any{"type": "response.output_item.added", "output_index": m.index,
		"item": map[string]any{"type": "message", "id": m.id, "status": "in_progress", "role": "assistant", "content": []any{}}})
	cw.send(map[string]any{"type": "response.content_part.added", "item_id": m.id, "output_index": m.index, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	return m
}

// toolCallDelta handles one element of delta.tool_calls.
func (cw *ChatToResponses) toolCallDelta(tc gjson.Result) {
	idx := tc.Get("index").Int()
	call, ok := cw.callIdx[idx]
	if !ok {
		call = &streamCall{id: newID("fc_"), callID: tc.Get("id").Str, name: tc.Get("function.name").Str, index: cw.nextIndex}
		cw.nextIndex++
		cw.callIdx[idx] = call
		cw.calls = append(cw.calls, call)
		cw.send(map[string]any{"type": "response.output_item.added", "output_index": call.index,
			"item": functionCallItem(call.id, call.callID, call.name, "", "in_progress")})
	}
	if a := tc.Get("function.arguments").Str; a != "" {
		call.args.WriteString(a)
		cw.send(map[string]any{"type": "response.function_call_arguments.delta", "item_id": call.id,
			"output_index": call.index, "delta": a})
	}
}

// complete closes the open items and the response.
func (cw *ChatToResponses) complete() {
	if !cw.started {
		// [DONE] without any chunk: nothing was generated.
		cw.start(gjson.Result{})
	}
	status, incomplete := responseStatus(cw.finishReason)
	output := make([]any, cw.nextIndex)
	if m := cw.msg; m != nil {
		text := m.text.String()
		part := map[string]any{"type": "output_text", "text": text, "annotations": nonNil(m.annotations)}
		cw.send(map[string]any{"type": "response.output_text.done", "item_id": m.id, "output_index": m.index,
			"content_index": 0, "text": text, "logprobs": []any{}})
		cw.send(map[string]any{"type": "response.content_part.done", "item_id": m.id, "output_index": m.index,
			"content_index": 0, "part": part})
		item := messageItem(m.id, status, text, m.annotations)
		cw.send(map[string]any{"type": "response.output_item.done", "output_index": m.index, "item": item})
		output[m.index] = item
	}
	for _, call := range cw.calls {
		args := call.args.String()
		cw.send(map[string]any{"type": "response.function_call_arguments.done", "item_id": call.id,
			"output_index": call.index, "name": call.name, "arguments": args})
		item := functionCallItem(call.id, call.callID, call.name, args, "completed")
		cw.send(map[string]any{"type": "response.output_item.done", "output_index": call.index, "item": item})
		output[call.index] = item
	}
	if cw.msg == nil && len(cw.calls) == 0 {
		output = []any{}
	}
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	cw.send(map[string]any{"type": typ, "response": cw.responseObject(cw.created, status, incomplete, output, cw.usage)})
	cw.closed = true
}

// fail ends the stream after an error chunk: an error event, then
// response.failed (with the usage, if the provider reported it).
func (cw *ChatToResponses) fail(e gjson.Result) {
	// The event's code is a string (the schema's); a chat error's code
	// may be a number.
	code := "server_error"
	if c := e.Get("code"); c.Type == gjson.String || c.Type == gjson.Number {
		code = c.String()
	}
	msg := e.Get("message").Str
	if msg == "" {
		msg = "Provider error"
	}
	cw.send(map[string]any{"type": "error", "code": code, "message": msg, "param": nil})
	obj := cw.responseObject(cw.created, "failed", nil, []any{}, cw.usage)
	obj.Error = map[string]any{"code": "server_error", "message": msg}
	cw.send(map[string]any{"type": "response.failed", "response": obj})
	cw.closed = true
}

// send adds one event, with the next sequence number, to out.
func (cw *ChatToResponses) send(ev map[string]any) {
	if cw.Err != nil {
		return
	}
	ev["sequence_number"] = cw.seq
	cw.seq++
	data, err := json.Marshal(ev)
	if err != nil {
		cw.Err = err
		return
	}
	typ, _ := ev["type"].(string)
	b := append(append(cw.Out, "event: "...), typ...)
	b = append(append(append(b, "\ndata: "...), data...), "\n\n"...)
	cw.Out = b
}

// Echo are the request's fields a Responses object repeats.
type Echo struct {
	Instructions      json.RawMessage
	MaxOutputTokens   json.RawMessage
	Metadata          json.RawMessage
	ParallelToolCalls json.RawMessage
	Temperature       json.RawMessage
	TopP              json.RawMessage
	ToolChoice        json.RawMessage
	Tools             json.RawMessage
	Text              json.RawMessage
}

// NewEcho reads the echoed fields of a Responses request.
func NewEcho(body []byte) *Echo {
	get := func(path, def string) json.RawMessage {
		if v := gjson.GetBytes(body, path); v.Exists() && v.Type != gjson.Null {
			return json.RawMessage(v.Raw)
		}
		return json.RawMessage(def)
	}
	return &Echo{
		Instructions:      get("instructions", "null"),
		MaxOutputTokens:   get("max_output_tokens", "null"),
		Metadata:          get("metadata", "{}"),
		ParallelToolCalls: get("parallel_tool_calls", "true"),
		Temperature:       get("temperature", "null"),
		TopP:              get("top_p", "null"),
		ToolChoice:        get("tool_choice", `"auto"`),
		Tools:             get("tools", "[]"),
		Text:              get("text", `{"format":{"type":"text"}}`),
	}
}

// Response is the Responses object of a translated answer, with every
// field the public SDKs' schemas require.
type Response struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	CompletedAt        *int64          `json:"completed_at"`
	Model              string          `json:"model"`
	Status             string          `json:"status"`
	Error              any             `json:"error"`
	IncompleteDetails  any             `json:"incomplete_details"`
	Instructions       json.RawMessage `json:"instructions"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	Metadata           json.RawMessage `json:"metadata"`
	Output             []any           `json:"output"`
	ParallelToolCalls  json.RawMessage `json:"parallel_tool_calls"`
	Temperature        json.RawMessage `json:"temperature"`
	TopP               json.RawMessage `json:"top_p"`
	PresencePenalty    any             `json:"presence_penalty"`
	FrequencyPenalty   any             `json:"frequency_penalty"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	Text               json.RawMessage `json:"text"`
	Usage              *respUsage      `json:"usage,omitempty"`
	PreviousResponseID any             `json:"previous_response_id"`
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
		// CacheWriteTokens: written to the provider's prompt cache (the
		// public usage's prompt_tokens_details.cache_write_tokens).
		CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
	// XSearchUsage is the X vendor's count of items its X search fetched,
	// which the gateway charges.
	XSearchUsage json.RawMessage `json:"x_search_usage,omitempty"`
	// ServerToolUse is Anthropic's count of the server tools it ran
	// (web_search_requests), which the gateway charges.
	ServerToolUse json.RawMessage `json:"server_tool_use,omitempty"`
}

// responseObject builds the Responses object; u is the chat usage, if any.
func (cw *ChatToResponses) responseObject(created int64, status string, incomplete map[string]string, output []any, u gjson.Result) *Response {
	e := cw.echo
	if e == nil {
		e = NewEcho(nil)
	}
	obj := &Response{
		ID: cw.id, Object: "response", CreatedAt: created, Model: cw.model, Status: status,
		Instructions: e.Instructions, MaxOutputTokens: e.MaxOutputTokens, Metadata: e.Metadata, Output: output,
		ParallelToolCalls: e.ParallelToolCalls, Temperature: e.Temperature, TopP: e.TopP,
		ToolChoice: e.ToolChoice, Tools: e.Tools, Text: e.Text,
	}
	if incomplete != nil {
		obj.IncompleteDetails = incomplete
	}
	if status == "completed" {
		t := now().Unix()
		obj.CompletedAt = &t
	}
	if u.IsObject() {
		ru := &respUsage{
			InputTokens:  u.Get("prompt_tokens").Int(),
			OutputTokens: u.Get("completion_tokens").Int(),
			TotalTokens:  u.Get("total_tokens").Int(),
		}
		if ru.TotalTokens == 0 {
			ru.TotalTokens = ru.InputTokens + ru.OutputTokens
		}
		ru.InputTokensDetails.CachedTokens = u.Get("prompt_tokens_details.cached_tokens").Int()
		ru.InputTokensDetails.CacheWriteTokens = u.Get("prompt_tokens_details.cache_write_tokens").Int()
		ru.OutputTokensDetails.ReasoningTokens = u.Get("completion_tokens_details.reasoning_tokens").Int()
		if x := u.Get("x_search_usage"); x.IsObject() {
			ru.XSearchUsage = json.RawMessage(x.Raw)
		}
		if s := u.Get("server_tool_use"); s.IsObject() {
			ru.ServerToolUse = json.RawMessage(s.Raw)
		}
		obj.Usage = ru
	}
	return obj
}

// FailedResponse is the Responses object of a response.failed event the
// gateway sends itself when a stream breaks, with every field the SDKs'
// schemas require.
func FailedResponse(echo *Echo, id, model string, created int64, msg string) *Response {
	cw := &ChatToResponses{echo: echo, id: id, model: model}
	obj := cw.responseObject(created, "failed", nil, []any{}, gjson.Result{})
	obj.Error = map[string]any{"code": "server_error", "message": msg}
	return obj
}

func messageItem(id, status, text string, anns []json.RawMessage) map[string]any {
	return map[string]any{
		"type": "message", "id": id, "status": status, "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": nonNil(anns)}},
	}
}

// functionCallItem is a function_call output item.
func functionCallItem(id, callID, name, args, status string) map[string]any {
	return map[string]any{"type": "function_call", "id": id, "call_id": callID, "name": name, "arguments": args, "status": status}
}

func nonNil(anns []json.RawMessage) []json.RawMessage {
	if anns == nil {
		return []json.RawMessage{}
	}
	return anns
}

// flatAnnotation turns a chat annotation, {"type":"url_citation",
// "url_citation":{url,title,content,start_index,end_index}}, into the
// Responses form {type,url,title,start_index,end_index[,content]}; an
// annotation already flat is kept. Indices are copied unchanged.
func flatAnnotation(a gjson.Result) (json.RawMessage, bool) {
	typ := a.Get("type").Str
	if typ == "" {
		return nil, false
	}
	src := a
	if inner := a.Get(typ); inner.IsObject() {
		src = inner
	}
	if typ != "url_citation" {
		// Other kinds (file citations, ...) keep their own fields.
		if src.Raw == a.Raw {
			return json.RawMessage(a.Raw), true
		}
		m := map[string]json.RawMessage{"type": json.RawMessage(a.Get("type").Raw)}
		src.ForEach(func(k, v gjson.Result) bool { m[k.Str] = json.RawMessage(v.Raw); return true })
		raw, err := json.Marshal(m)
		return raw, err == nil
	}
	out := struct {
		Type       string  `json:"type"`
		URL        string  `json:"url"`
		Title      string  `json:"title"`
		StartIndex int64   `json:"start_index"`
		EndIndex   int64   `json:"end_index"`
		Content    *string `json:"content,omitempty"`
	}{Type: "url_citation", URL: src.Get("url").Str, Title: src.Get("title").Str,
		StartIndex: src.Get("start_index").Int(), EndIndex: src.Get("end_index").Int()}
	if c := src.Get("content"); c.Type == gjson.String {
		out.Content = &c.Str
	}
	raw, err := json.Marshal(out)
	return raw, err == nil
}

// newID returns a random identifier with a type prefix, e.g. "msg_...", for
// the items of a translated answer.
func newID(prefix string) string { return prefix + rand.Text() }
