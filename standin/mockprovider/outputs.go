package mockprovider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Output kinds and usage faults, chosen by substrings of the model name as
// the other faults are (Chat Completions and Responses; see serveAnthropic
// for the Messages API):
//
//	out-text               the answer as text (the default)
//	out-tools              as the arguments of a call of the tool mock_tool
//	                       (the request must define tools, as with OpenAI)
//	out-function_call      chat: as a legacy function_call of mock_fn (the
//	                       request must define functions); Responses: as
//	                       out-tools
//	out-reasoning          as reasoning (chat: delta.reasoning; Responses: a
//	                       reasoning item's reasoning_text deltas)
//	out-reasoning_content  chat: as delta.reasoning_content; Responses: as
//	                       out-reasoning
//	out-refusal            as a refusal
//	out-audio              chat only: as audio (its transcript, and its
//	                       "data" the transcript in base64); the request
//	                       must ask for modalities ["text","audio"]
//	out-image              chat only: as images (data URLs of the text in
//	                       base64); the request must ask for modalities
//	                       with "image"
//	stream-stall           streamed: after three output chunks, nothing
//	                       more until the client leaves (all sent in one
//	                       write, so that a gateway reads them together)
//	stall-before-output    streamed: the first event (no output yet), then
//	                       nothing more until the client leaves
//	usage-over             usage reports 1,000,000 prompt and completion
//	                       tokens
//	usage-negative         usage reports -3 prompt and -7 completion tokens
//	usage-nonnumeric       usage reports both counts as strings
//	usage-zero             usage reports 0 prompt and 0 completion tokens
//	empty                  200 with no output and no usage: chat
//	                       "choices": [], Responses "output": [] with
//	                       "usage": null; streamed, the same events with no
//	                       output and no usage
//	empty-object           200 with {}
//
// stream-break cuts these streams after three output chunks too. Each
// output chunk is one word of the answer (the first as is, the others
// after a space); tools and function calls first announce the call (its
// name), and their arguments are a JSON object {"q": <the answer>}: the
// first chunk opens it, a last one closes it.

// outputKinds are the kinds of output, longest names first (one may be a
// prefix of another).
var outputKinds = []string{"reasoning_content", "function_call", "reasoning", "refusal", "tools", "audio", "image", "text"}

// mockShape is what the model name asks of the answer.
type mockShape struct {
	kind    string // one of outputKinds
	stall   bool
	stallAt int // the output chunks sent before a stall
	brk     bool
	usage   string // "", "over", "negative", "nonnumeric", "zero"
	empty   string // "", "empty", "object"
}

// shapeOf reads the model name; ok is false when it asks for none of
// these (the plain answers of ServeHTTP serve it).
func shapeOf(model string) (s mockShape, ok bool) {
	s.kind = "text"
	for _, k := range outputKinds {
		if strings.Contains(model, "out-"+k) {
			s.kind, ok = k, true
			break
		}
	}
	for _, u := range []string{"over", "negative", "nonnumeric", "zero"} {
		if strings.Contains(model, "usage-"+u) {
			s.usage, ok = u, true
		}
	}
	switch {
	case strings.Contains(model, "empty-object"):
		s.empty, ok = "object", true
	case strings.Contains(model, "empty"):
		s.empty, ok = "empty", true
	}
	if strings.Contains(model, "stream-stall") {
		s.stall, s.stallAt, ok = true, mockBreakAfter, true
	}
	if strings.Contains(model, "stall-before-output") {
		s.stall, s.stallAt, ok = true, 0, true
	}
	s.brk = strings.Contains(model, "stream-break")
	return s, ok
}

// check refuses what the provider refuses: an output kind the request did
// not ask for (api "chat" or "responses").
func (s mockShape) check(body []byte, api string) *apiError {
	modalities := func(m string) bool {
		return slices.ContainsFunc(gjson.GetBytes(body, "modalities").Array(), func(v gjson.Result) bool { return v.Str == m })
	}
	switch {
	case (s.kind == "tools" || api == "responses" && s.kind == "function_call") && !gjson.GetBytes(body, "tools").IsArray():
		return badRequest("the model can call tools only when the request defines tools")
	case api == "chat" && s.kind == "function_call" && !gjson.GetBytes(body, "functions").IsArray():
		return badRequest("the model can call functions only when the request defines functions")
	case api == "responses" && (s.kind == "audio" || s.kind == "image"):
		return badRequest("the Responses API gives no " + s.kind + " output")
	case s.kind == "audio" && (!modalities("audio") || !gjson.GetBytes(body, "audio").IsObject()):
		return badRequest(`audio output requires modalities ["text","audio"] and the audio parameter`)
	case s.kind == "image" && !modalities("image"):
		return badRequest(`image output requires modalities with "image"`)
	}
	return nil
}

// Names and framing of the calls.
const (
	mockToolName     = "mock_tool"
	mockFunctionName = "mock_fn"
	mockArgsOpen     = `{"q":"`
	mockArgsClose    = `"}`
	mockImagePrefix  = "data:image/png;base64,"
)

// usageCounts are the usage members the shape reports for prompt and
// completion tokens.
func (s mockShape) usageCounts(prompt, completion int) (p, c any) {
	switch s.usage {
	case "over":
		return 1_000_000, 1_000_000
	case "negative":
		return -3, -7
	case "zero":
		return 0, 0
	case "nonnumeric":
		return "lots", "many"
	}
	return prompt, completion
}

// chunks are the pieces the answer streams as: the words, the arguments
// of a call framed as a JSON object.
func (s mockShape) chunks(a *mockAnswer) []string {
	out := make([]string, len(a.words))
	for i := range a.words {
		out[i] = a.delta(i)
	}
	if s.call() && len(out) > 0 {
		out[0] = mockArgsOpen + out[0]
		out = append(out, mockArgsClose)
	}
	return out
}

func (s mockShape) call() bool { return s.kind == "tools" || s.kind == "function_call" }

// writeShaped answers a request whose model asks for a shape.
func (m *Handler) writeShaped(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, s mockShape, api string) {
	if s.empty == "object" {
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	if api == "chat" {
		m.writeShapedChat(ctx, w, q, a, s)
		return
	}
	m.writeShapedResponses(ctx, w, q, a, s)
}

// streamChunks sends each chunk with send, waiting ChunkDelay between
// them; a stall or break stops after mockBreakAfter chunks. A stall sends
// what came before it in one write (buffered by b) and waits for the
// client to leave. It reports whether the stream goes on.
func (m *Handler) streamChunks(ctx context.Context, s *sseWriter, sh mockShape, chunks []string, b *stallBuffer, send func(string)) bool {
	for i, c := range chunks {
		if sh.stall && i == sh.stallAt || !sh.stall && sh.brk && i == mockBreakAfter {
			break
		}
		if i > 0 && !sh.stall && !sleepCtx(ctx, time.Duration(m.ChunkDelay)) {
			return false
		}
		send(c)
		if s.err != nil {
			return false
		}
	}
	switch {
	case sh.stall:
		b.flush()
		<-ctx.Done()
		return false
	case sh.brk:
		abortResponse()
	}
	return true
}

// stallBuffer collects a stalling stream's events so that they leave in
// one write.
type stallBuffer struct {
	s   *sseWriter
	on  bool
	buf []byte
}

func (b *stallBuffer) send(event string, v any) {
	if !b.on {
		b.s.send(event, v)
		return
	}
	data, _ := json.Marshal(v)
	if event != "" {
		b.buf = append(append(append(b.buf, "event: "...), event...), '\n')
	}
	b.buf = append(append(append(b.buf, "data: "...), data...), "\n\n"...)
}

func (b *stallBuffer) flush() {
	if _, b.s.err = b.s.w.Write(b.buf); b.s.err == nil {
		_ = b.s.rc.Flush()
	}
	b.buf, b.on = nil, false
}

// chatDelta is the delta of one chunk c of the shape's kind; first marks
// the first chunk of a call (which names it).
func (s mockShape) chatDelta(c string, first bool) map[string]any {
	switch s.kind {
	case "tools":
		call := map[string]any{"index": 0, "function": map[string]any{"arguments": c}}
		if first {
			call["id"], call["type"] = newID("call_"), "function"
			call["function"].(map[string]any)["name"] = mockToolName
		}
		return map[string]any{"tool_calls": []any{call}}
	case "function_call":
		fc := map[string]any{"arguments": c}
		if first {
			fc["name"] = mockFunctionName
		}
		return map[string]any{"function_call": fc}
	case "reasoning", "reasoning_content", "refusal":
		return map[string]any{s.kind: c}
	case "audio":
		return map[string]any{"audio": map[string]any{"id": "audio_mock", "data": base64.StdEncoding.EncodeToString([]byte(c)), "transcript": c}}
	case "image":
		return map[string]any{"images": []any{map[string]any{"type": "image_url",
			"image_url": map[string]any{"url": mockImagePrefix + base64.StdEncoding.EncodeToString([]byte(c))}}}}
	}
	return map[string]any{"content": c}
}

// chatMessage is the whole answer's message.
func (s mockShape) chatMessage(a *mockAnswer) map[string]any {
	text := strings.Join(s.chunks(a), "")
	msg := s.chatDelta(text, true)
	msg["role"] = "assistant"
	if _, ok := msg["content"]; !ok {
		msg["content"] = nil
	}
	if s.kind == "audio" {
		msg["audio"].(map[string]any)["expires_at"] = time.Now().Add(time.Hour).Unix()
	}
	return msg
}

func (s mockShape) finish(a *mockAnswer) string {
	switch {
	case a.truncated:
		return "length"
	case s.kind == "tools":
		return "tool_calls"
	case s.kind == "function_call":
		return "function_call"
	}
	return "stop"
}

func (m *Handler) writeShapedChat(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, s mockShape) {
	p, c := s.usageCounts(a.prompt, a.completion())
	usage := map[string]any{"prompt_tokens": p, "completion_tokens": c, "total_tokens": a.total()}
	base := func(object string) map[string]any {
		return map[string]any{"id": newID("chatcmpl-"), "object": object, "created": time.Now().Unix(),
			"model": q.answerModel, "system_fingerprint": mockFingerprint}
	}
	finish := s.finish(a)
	if !q.stream {
		ans := base("chat.completion")
		ans["choices"] = []any{map[string]any{"index": 0, "message": s.chatMessage(a), "logprobs": nil, "finish_reason": finish}}
		ans["usage"] = usage
		if s.empty != "" {
			ans["choices"] = []any{}
			delete(ans, "usage")
		}
		writeJSON(w, http.StatusOK, ans)
		return
	}
	id := newID("chatcmpl-")
	chunk := func(choices []any) map[string]any {
		ch := base("chat.completion.chunk")
		ch["id"], ch["choices"] = id, choices
		return ch
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}
	}
	sw := newSSEWriter(w)
	b := &stallBuffer{s: sw, on: s.stall}
	if s.empty != "" {
		sw.send("", chunk([]any{}))
		sw.raw("", []byte("[DONE]"))
		return
	}
	b.send("", chunk(choice(map[string]any{"role": "assistant", "content": ""}, nil)))
	first := true
	ok := m.streamChunks(ctx, sw, s, s.chunks(a), b, func(c string) {
		b.send("", chunk(choice(s.chatDelta(c, first), nil)))
		first = false
	})
	if !ok {
		return
	}
	sw.send("", chunk(choice(map[string]any{}, finish)))
	if q.streamUsage {
		final := chunk([]any{})
		final["usage"] = usage
		sw.send("", final)
	}
	sw.raw("", []byte("[DONE]"))
}

// responsesItem is the output item of the shape's kind, as it starts
// (empty) or ends (with the whole text).
func (s mockShape) responsesItem(id, text, status string) map[string]any {
	switch s.kind {
	case "tools", "function_call":
		return map[string]any{"type": "function_call", "id": id, "call_id": "call_" + id, "name": mockToolName,
			"arguments": text, "status": status}
	case "reasoning", "reasoning_content":
		content := []any{}
		if text != "" {
			content = []any{map[string]any{"type": "reasoning_text", "text": text}}
		}
		return map[string]any{"type": "reasoning", "id": id, "summary": []any{}, "content": content}
	case "refusal":
		content := []any{}
		if text != "" {
			content = []any{map[string]any{"type": "refusal", "refusal": text}}
		}
		return map[string]any{"type": "message", "id": id, "status": status, "role": "assistant", "content": content}
	}
	content := []any{}
	if text != "" {
		content = []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}
	}
	return map[string]any{"type": "message", "id": id, "status": status, "role": "assistant", "content": content}
}

// responsesDelta is the type of the delta events of the shape's kind.
func (s mockShape) responsesDelta() string {
	switch s.kind {
	case "tools", "function_call":
		return "response.function_call_arguments.delta"
	case "reasoning", "reasoning_content":
		return "response.reasoning_text.delta"
	case "refusal":
		return "response.refusal.delta"
	}
	return "response.output_text.delta"
}

func (m *Handler) writeShapedResponses(ctx context.Context, w http.ResponseWriter, q *mockRequest, a *mockAnswer, s mockShape) {
	status, final := "completed", "response.completed"
	if a.truncated {
		status, final = "incomplete", "response.incomplete"
	}
	p, c := s.usageCounts(a.prompt, a.completion())
	var usage any = map[string]any{"input_tokens": p, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": c, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": a.total()}
	itemID := newID("item_")
	output := []any{s.responsesItem(itemID, strings.Join(s.chunks(a), ""), status)}
	if s.empty != "" {
		output, usage = []any{}, nil
	}
	resp := func(status string, output []any, usage any) map[string]any {
		r := map[string]any{"id": "resp_mock", "object": "response", "created_at": time.Now().Unix(), "model": q.answerModel,
			"status": status, "error": nil, "incomplete_details": nil, "instructions": q.instructions,
			"max_output_tokens": q.maxOutputTokens, "metadata": map[string]string{}, "output": output,
			"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "usage": usage}
		if status == "incomplete" {
			r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
		}
		return r
	}
	if !q.stream {
		writeJSON(w, http.StatusOK, resp(status, output, usage))
		return
	}
	sw := newSSEWriter(w)
	b := &stallBuffer{s: sw, on: s.stall}
	seq := 0
	send := func(send func(string, any), ev map[string]any) {
		ev["sequence_number"] = seq
		seq++
		send(ev["type"].(string), ev)
	}
	send(b.send, map[string]any{"type": "response.created", "response": resp("in_progress", []any{}, nil)})
	send(b.send, map[string]any{"type": "response.in_progress", "response": resp("in_progress", []any{}, nil)})
	if s.empty == "" {
		send(b.send, map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": s.responsesItem(itemID, "", "in_progress")})
		ok := m.streamChunks(ctx, sw, s, s.chunks(a), b, func(c string) {
			send(b.send, map[string]any{"type": s.responsesDelta(), "item_id": itemID, "output_index": 0,
				"content_index": 0, "delta": c})
		})
		if !ok {
			return
		}
		send(sw.send, map[string]any{"type": "response.output_item.done", "output_index": 0, "item": output[0]})
	}
	send(sw.send, map[string]any{"type": final, "response": resp(status, output, usage)})
}
