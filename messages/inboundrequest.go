// Package messages serves Anthropic's Messages API (POST /messages) with
// providers that speak Chat Completions: it translates a Messages request
// into a chat request (MessagesToChat) and the chat answer, plain or
// streamed, back into a Messages answer (ChatToMessages). The files named
// inbound* hold that direction.
package messages

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// Messages -> Chat Completions, the request side of serving POST /messages
// with a provider that speaks Chat Completions. The answer is translated
// back by ChatToMessages.
//
// Translated: model, max_tokens, system (a string or text blocks: one
// system message first), messages (roles user and assistant, and system
// messages anywhere in the conversation as chat system messages at their
// place; content a string or blocks: text, image with a base64 or URL
// source, document with a base64 PDF or plain text source, tool_use on
// assistant turns as tool_calls, tool_result on user turns as tool
// messages), tools (name, description, input_schema and strict as
// function tools), tool_choice (auto, any as required, tool, none;
// disable_parallel_tool_use as parallel_tool_calls false), stop_sequences
// (stop), temperature, top_p, metadata.user_id (user, unless the request
// sets user), thinking and output_config.effort (reasoning_effort; left
// out with ToChat's noImplied, or later by WithoutReasoningEffort, for
// providers whose models take no reasoning effort),
// output_config.format (response_format), stream (with
// stream_options.include_usage, so that the answer reports usage).
// Dropped, having no chat form and changing nothing the answer means:
// cache_control, context_management, top_k, service_tier, speed,
// unsigned thinking blocks of earlier turns (a signed one, or a
// redacted one, is the assistant message's reasoning_details, which
// Bedrock's Claude models take back and other chat providers leave
// out), earlier server tool records (server_tool_use,
// web_search_tool_result), a tool's defer_loading and the gateway's own
// fields. What cannot be expressed (an Anthropic-defined tool such as
// bash_20250124, an unknown block type or top-level field, a tool_result
// that answers no tool_use) is an error naming the field.

// FieldError is a request field the translation cannot take; its text
// names the field.
type FieldError struct{ Field, Problem string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// msgPath and blockPath name a message and a content block; built only
// for an error.
func msgPath(i int) string { return "messages[" + strconv.Itoa(i) + "]" }

func blockPath(i, j int) string { return msgPath(i) + ".content[" + strconv.Itoa(j) + "]" }

// inRequest holds the top-level fields of a Messages request the
// translation reads, found in one pass.
type inRequest struct {
	model, maxTokens, temperature, topP, user, metadata, system, messages gjson.Result
	stop, tools, toolChoice, stream, thinking, outputConfig, reasoning    gjson.Result
}

// readFields sorts a request's top-level fields; a field the translation
// does not know is an error naming it (only an Anthropic-style provider
// could take it).
func (q *inRequest) readFields(req gjson.Result) error {
	var err error
	eachMember(req.Raw, func(key, raw string) bool {
		v := member(raw, true)
		switch key {
		case "model":
			q.model = v
		case "max_tokens":
			q.maxTokens = v
		case "temperature":
			q.temperature = v
		case "top_p":
			q.topP = v
		case "user":
			q.user = v
		case "metadata":
			q.metadata = v
		case "system":
			q.system = v
		case "messages":
			q.messages = v
		case "stop_sequences":
			q.stop = v
		case "tools":
			q.tools = v
		case "tool_choice":
			q.toolChoice = v
		case "stream":
			q.stream = v
		case "thinking":
			q.thinking = v
		case "output_config":
			q.outputConfig = v
		case "reasoning": // the public API's, in its Responses form here
			q.reasoning = v
		case "top_k", "service_tier", "speed", "context_management", "cache_control",
			"fallbacks", "models", "provider", "plugins", "route", "session_id", "trace",
			"stop_server_tools_when", "usage", "transforms", "debug":
			// No chat form (see above), or the gateway's own.
		default:
			err = fieldErr(strings.Clone(key), "unknown field; only Anthropic-style providers take it, and this model's provider is not one")
			return false
		}
		return true
	})
	return err
}

// MessagesToChat translates a Messages request body into a chat
// completions body. An error names the field that has no chat form.
func MessagesToChat(body []byte) ([]byte, error) {
	c, err := ToChat(body, false)
	return c.Body, err
}

// Chat is a Messages request translated into Chat Completions.
type Chat struct {
	Body []byte
	// ImpliedEffort: Body's reasoning_effort comes from the request's
	// thinking or output_config.effort, which the client sends to any
	// model (Claude Code always does), not from a reasoning object it
	// named. A provider whose model takes no reasoning effort gets the
	// body without it (WithoutReasoningEffort).
	ImpliedEffort bool
}

// ToChat is MessagesToChat, telling where the body's reasoning_effort
// came from. With noImplied, a reasoning_effort that thinking or
// output_config.effort implies is left out: for a request none of whose
// providers take reasoning, which then costs no copy per attempt.
func ToChat(body []byte, noImplied bool) (Chat, error) {
	// A view of body, not a copy (gjson.ParseBytes copies): what is read
	// from it is copied into the result, which keeps no reference to it.
	req := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	if !req.IsObject() {
		return Chat{}, fieldErr("body", "must be a JSON object")
	}
	var q inRequest
	if err := q.readFields(req); err != nil {
		return Chat{}, err
	}
	out, implied, err := q.toChat(len(body), noImplied)
	return Chat{Body: out, ImpliedEffort: implied}, err
}

// effortMember is how toChat writes reasoning_effort: always after
// messages, so with a comma.
const effortMember = `,"reasoning_effort":`

// WithoutReasoningEffort is chat (a body of ToChat's, as it is or with
// messages added) less its top-level reasoning_effort: a copy, or chat
// itself when it has none.
func WithoutReasoningEffort(chat []byte) []byte {
	v := gjson.Get(unsafe.String(unsafe.SliceData(chat), len(chat)), "reasoning_effort")
	if !v.Exists() {
		return chat
	}
	from, to := v.Index-len(effortMember), v.Index+len(v.Raw)
	if v.Index <= 0 || from < 0 || string(chat[from:v.Index]) != effortMember {
		if out, err := sjson.DeleteBytes(chat, "reasoning_effort"); err == nil {
			return out
		}
		return chat
	}
	out := make([]byte, 0, len(chat)-(to-from))
	return append(append(out, chat[:from]...), chat[to:]...)
}

// toChat writes the chat body of the request's fields; size is the
// Messages body's, to size the result. implied reports a reasoning_effort
// from thinking or output_config.effort, which noImplied leaves out.
func (q *inRequest) toChat(size int, noImplied bool) (out []byte, implied bool, err error) {
	out = make([]byte, 0, size+size/4)
	out = append(out, '{')
	field := func(name string) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = append(out, name...)
		out = append(out, '"', ':')
	}
	for _, f := range [...]struct {
		name string
		v    gjson.Result
	}{{"model", q.model}, {"max_tokens", q.maxTokens}, {"temperature", q.temperature}, {"top_p", q.topP}, {"user", q.user}} {
		if f.v.Exists() && f.v.Type != gjson.Null {
			field(f.name)
			out = append(out, f.v.Raw...)
		}
	}
	if !q.user.Exists() || q.user.Type == gjson.Null {
		if v := q.metadata.Get("user_id"); v.Type == gjson.String && v.Str != "" {
			field("user")
			out = append(out, v.Raw...)
		}
	}
	field("messages")
	if out, err = appendChatMessages(out, q.system, q.messages); err != nil {
		return nil, false, err
	}
	stop, err := stopSequences(q.stop)
	if err != nil {
		return nil, false, err
	}
	if stop != "" {
		field("stop")
		out = append(out, stop...)
	}
	effort, err := reasoningEffort(q.thinking, q.outputConfig, q.reasoning, q.maxTokens)
	if err != nil {
		return nil, false, err
	}
	if effort != "" {
		// Not implied: the public reasoning object, which counts only
		// without thinking and output_config.effort.
		implied = q.thinking.Exists() && q.thinking.Type != gjson.Null ||
			q.outputConfig.Get("effort").Exists() && q.outputConfig.Get("effort").Type != gjson.Null
		if implied && noImplied {
			effort, implied = "", false
		}
	}
	if effort != "" {
		out = append(out, effortMember...)
		out = append(append(append(out, '"'), effort...), '"')
	}
	if format := q.outputConfig.Get("format"); format.Exists() && format.Type != gjson.Null {
		field("response_format")
		if out, err = appendResponseFormat(out, format); err != nil {
			return nil, false, err
		}
	}
	ntools := 0
	if q.tools.Exists() && q.tools.Type != gjson.Null {
		field("tools")
		if out, ntools, err = appendChatTools(out, q.tools); err != nil {
			return nil, false, err
		}
	}
	choice, parallel, err := chatToolChoice(q.toolChoice)
	if err != nil {
		return nil, false, err
	}
	if choice != "" && ntools > 0 {
		// Without tools it means nothing, and OpenAI refuses it.
		field("tool_choice")
		out = append(out, choice...)
	}
	if !parallel && ntools > 0 {
		// OpenAI refuses parallel_tool_calls without tools.
		field("parallel_tool_calls")
		out = append(out, "false"...)
	}
	if q.stream.Bool() {
		field("stream")
		out = append(out, `true,"stream_options":{"include_usage":true}`...)
	}
	return append(out, '}'), implied, nil
}

// chatEfforts maps Anthropic's output_config.effort to the chat
// reasoning_effort: max has no chat level above xhigh.
var chatEfforts = map[string]string{"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}

// reasoningEffort is the chat reasoning_effort of a request's thinking
// and output_config.effort ("" for none): output_config.effort when set,
// else, for thinking enabled, the budget's share of max_tokens (the
// inverse of what the chat->Messages translation does: 87.5% and up
// xhigh, 65% high, 35% medium, 15% low, below minimal), for adaptive
// thinking high (Anthropic's default effort). Thinking disabled sends
// none; so does a request with neither, unless the public reasoning
// object sets one.
func reasoningEffort(thinking, config, reasoning, maxTokens gjson.Result) (string, error) {
	if config.Exists() && config.Type != gjson.Null {
		if !config.IsObject() {
			return "", fieldErr("output_config", "an object")
		}
		var err error
		config.ForEach(func(k, _ gjson.Result) bool {
			if k.Str != "effort" && k.Str != "format" {
				err = fieldErr("output_config."+k.Str, "unknown field; only Anthropic-style providers take it, and this model's provider is not one")
			}
			return err == nil
		})
		if err != nil {
			return "", err
		}
	}
	effort := ""
	if e := config.Get("effort"); e.Exists() && e.Type != gjson.Null {
		if effort = chatEfforts[e.Str]; effort == "" || e.Type != gjson.String {
			return "", fieldErr("output_config.effort", "expected low, medium, high, xhigh or max")
		}
	}
	if !thinking.Exists() || thinking.Type == gjson.Null {
		if effort == "" {
			effort = reasoning.Get("effort").Str
		}
		return effort, nil
	}
	if !thinking.IsObject() {
		return "", fieldErr("thinking", "an object with a type")
	}
	switch thinking.Get("type").Str {
	case "disabled":
		return "", nil
	case "adaptive":
		if effort == "" {
			effort = "high"
		}
		return effort, nil
	case "enabled":
		budget := thinking.Get("budget_tokens")
		if budget.Type != gjson.Number || budget.Int() < 1 {
			return "", fieldErr("thinking.budget_tokens", "a positive integer")
		}
		if effort != "" {
			return effort, nil
		}
		share := 1.0
		if mt := maxTokens.Int(); mt > 0 {
			share = float64(budget.Int()) / float64(mt)
		}
		switch {
		case share >= 0.875:
			return "xhigh", nil
		case share >= 0.65:
			return "high", nil
		case share >= 0.35:
			return "medium", nil
		case share >= 0.15:
			return "low", nil
		}
		return "minimal", nil
	}
	return "", fieldErr("thinking.type", "expected enabled, adaptive or disabled")
}

// appendResponseFormat translates output_config.format (structured
// outputs: {"type":"json_schema","schema":{...}}) into a chat
// response_format.
func appendResponseFormat(out []byte, format gjson.Result) ([]byte, error) {
	if format.Get("type").Str != "json_schema" {
		return nil, fieldErr("output_config.format.type", "expected json_schema")
	}
	schema := format.Get("schema")
	if !schema.IsObject() {
		return nil, fieldErr("output_config.format.schema", "required (a JSON schema object)")
	}
	out = append(out, `{"type":"json_schema","json_schema":{"name":"output","strict":true,"schema":`...)
	out = append(out, schema.Raw...)
	return append(out, '}', '}'), nil
}

// stopSequences translates stop_sequences into stop's JSON ("" for none).
func stopSequences(v gjson.Result) (string, error) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return "", nil
	case !v.IsArray():
		return "", fieldErr("stop_sequences", "an array of strings")
	}
	n := 0
	var err error
	v.ForEach(func(_, s gjson.Result) bool {
		if s.Type != gjson.String {
			err = fieldErr("stop_sequences["+strconv.Itoa(n)+"]", "a string")
		}
		n++
		return err == nil
	})
	if err != nil || n == 0 {
		return "", err
	}
	return v.Raw, nil
}

// block holds the members of a content block the translation reads,
// found in one pass over it.
type block struct {
	typ, text, source, title, toolUseID, content, isError, id, name, input gjson.Result
}

func readBlock(b gjson.Result) block {
	var k block
	eachMember(b.Raw, func(key, v string) bool {
		switch key {
		case "type":
			k.typ = member(v, true)
		case "text":
			k.text = member(v, false) // copied as JSON text
		case "source":
			k.source = member(v, true)
		case "title":
			k.title = member(v, true)
		case "tool_use_id":
			k.toolUseID = member(v, true)
		case "content":
			k.content = member(v, false)
		case "is_error":
			k.isError = member(v, true)
		case "id":
			k.id = member(v, true)
		case "name":
			k.name = member(v, true)
		case "input":
			k.input = member(v, true)
		}
		return true
	})
	return k
}

// rawText is the JSON text of a block's text member, checked to be a
// string.
func rawText(name string, v gjson.Result) (string, error) {
	if v.Type != gjson.String {
		return "", fieldErr(name+".text", "a string")
	}
	return v.Raw, nil
}

// inner is a JSON string's text without its quotes, still escaped: pieces
// of several strings join into one JSON string without unescaping them.
func inner(raw string) string { return raw[1 : len(raw)-1] }

// turns is the translation of messages into chat messages, written into
// out as it goes.
type turns struct {
	out   []byte
	n     int      // messages written
	parts []byte   // the pending user message's parts, comma separated
	np    int      // how many
	text1 string   // the raw text of the only part, when it is a text
	texts []string // scratch: raw texts to join
	// pending are the tool_use ids of the previous assistant message,
	// which the next user message must answer.
	pending, answered []string
	pendingAt         int
}

func (t *turns) open() {
	if t.n > 0 {
		t.out = append(t.out, ',')
	}
	t.n++
}

// joined appends the raw JSON strings of t.texts as one string, sep (JSON
// text) between them, with prefix (JSON text) first.
func (t *turns) joined(prefix, sep string) {
	t.out = append(t.out, '"')
	t.out = append(t.out, prefix...)
	for i, r := range t.texts {
		if i > 0 {
			t.out = append(t.out, sep...)
		}
		t.out = append(t.out, inner(r)...)
	}
	t.out = append(t.out, '"')
}

// appendChatMessages appends the chat messages of system and messages as
// a JSON array.
func appendChatMessages(out []byte, system, msgs gjson.Result) ([]byte, error) {
	t := &turns{out: append(out, '[')}
	if err := t.systemMessage("system", system); err != nil {
		return nil, err
	}
	if !msgs.IsArray() {
		return nil, fieldErr("messages", "an array of messages")
	}
	i := 0
	var err error
	eachElem(msgs.Raw, func(raw string) bool {
		m := gjson.Result{Type: gjson.JSON, Raw: raw}
		err = t.message(i, m)
		i++
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.pending) > 0 {
		return nil, fieldErr(msgPath(t.pendingAt), "tool_use %s has no tool_result in a next user message", t.pending[0])
	}
	return append(t.out, ']'), nil
}

// systemMessage appends a system prompt (a string or text blocks joined
// by blank lines) as a chat system message; name is the field, for
// errors.
func (t *turns) systemMessage(name string, v gjson.Result) error {
	t.texts = t.texts[:0]
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return nil
	case v.Type == gjson.String:
		if len(v.Raw) > 2 {
			t.texts = append(t.texts, v.Raw)
		}
	case !v.IsArray():
		return fieldErr(name, "a string or an array of text blocks")
	default:
		j := 0
		var err error
		eachElem(v.Raw, func(raw string) bool {
			b := gjson.Result{Type: gjson.JSON, Raw: raw}
			bname := name + "[" + strconv.Itoa(j) + "]"
			j++
			k := readBlock(b)
			if k.typ.Str != "text" {
				err = fieldErr(bname+".type", "expected text")
				return false
			}
			var text string
			if text, err = rawText(bname, k.text); err == nil && len(text) > 2 {
				t.texts = append(t.texts, text)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	if len(t.texts) == 0 {
		return nil
	}
	t.open()
	t.out = append(t.out, `{"role":"system","content":`...)
	t.joined("", `\n\n`)
	t.out = append(t.out, '}')
	return nil
}

// message translates one message.
func (t *turns) message(i int, m gjson.Result) error {
	if !m.IsObject() {
		return fieldErr(msgPath(i), "a message object")
	}
	var role, content gjson.Result
	eachMember(m.Raw, func(k, v string) bool {
		switch k {
		case "role":
			role = member(v, true)
		case "content":
			content = member(v, false)
		}
		return true
	})
	if content.Type != gjson.String && !content.IsArray() {
		return fieldErr(msgPath(i)+".content", "a string or an array of content blocks")
	}
	if len(t.pending) > 0 && role.Str != "user" {
		return fieldErr(msgPath(t.pendingAt), "tool_use %s has no tool_result in the next message, which must be a user message", t.pending[0])
	}
	switch role.Str {
	case "user":
		return t.userTurn(i, content)
	case "assistant":
		return t.assistantTurn(i, content)
	case "system":
		// Claude Code's mid-conversation system messages: chat takes
		// system messages anywhere.
		return t.systemMessage(msgPath(i)+".content", content)
	}
	return fieldErr(msgPath(i)+".role", "expected user, assistant or system")
}

// userTurn translates a user message: its tool results become tool
// messages, which chat wants right after the assistant's calls, and the
// rest one user message after them.
func (t *turns) userTurn(i int, content gjson.Result) error {
	pending := t.pending
	t.answered = t.answered[:0]
	if content.Type == gjson.String {
		t.pending = nil
		if len(pending) > 0 {
			return fieldErr(msgPath(i-1), "tool_use %s has no tool_result in the next message", pending[0])
		}
		t.open()
		t.out = append(append(t.out, `{"role":"user","content":`...), content.Raw...)
		t.out = append(t.out, '}')
		return nil
	}
	t.parts, t.np, t.text1 = t.parts[:0], 0, ""
	j := 0
	var err error
	eachElem(content.Raw, func(raw string) bool {
		b := gjson.Result{Type: gjson.JSON, Raw: raw}
		k := readBlock(b)
		if k.typ.Str == "tool_result" {
			err = t.toolResult(i, j, k, pending)
		} else {
			err = t.userPart(blockPath(i, j), k)
		}
		j++
		return err == nil
	})
	if err != nil {
		return err
	}
	for _, id := range pending {
		if !containsStr(t.answered, id) {
			return fieldErr(msgPath(i)+".content", "no tool_result for tool_use %s of %s", id, msgPath(t.pendingAt))
		}
	}
	t.pending = nil
	if t.np == 0 {
		return nil
	}
	t.open()
	t.out = append(t.out, `{"role":"user","content":`...)
	if t.np == 1 && t.text1 != "" {
		t.out = append(t.out, t.text1...)
	} else {
		t.out = append(append(append(t.out, '['), t.parts...), ']')
	}
	t.out = append(t.out, '}')
	return nil
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// addPart adds a part (JSON) to the pending user message; text is its raw
// text when it is a text part.
func (t *turns) addPart(part []byte, text string) {
	if t.np > 0 {
		t.parts = append(t.parts, ',')
	}
	t.parts = append(t.parts, part...)
	t.np++
	if t.np == 1 {
		t.text1 = text
	}
}

// userPart translates one block of a user message into a part of the
// pending user message; a block with no chat form that carries nothing
// the model needs is left out.
func (t *turns) userPart(name string, k block) error {
	switch typ := k.typ.Str; typ {
	case "text":
		raw, err := rawText(name, k.text)
		if err != nil {
			return err
		}
		t.addPart(append(append([]byte(`{"type":"text","text":`), raw...), '}'), raw)
	case "image":
		url, err := imageSource(name, k.source)
		if err != nil {
			return err
		}
		t.addPart(append(append([]byte(`{"type":"image_url","image_url":{"url":`), url...), '}', '}'), "")
	case "document":
		part, err := documentPart(name, k)
		if err != nil {
			return err
		}
		t.addPart(part, "")
	case "search_result":
		t.addPart(append(jsonstr.Append([]byte(`{"type":"text","text":`), searchResultText(k)), '}'), "")
	case "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result":
	case "":
		return fieldErr(name+".type", "required")
	default:
		return fieldErr(name+".type", "%q is not supported by this model's provider", typ)
	}
	return nil
}

// dataURL is the JSON string of a data URL for a base64 source.
func dataURL(name string, src gjson.Result) ([]byte, error) {
	mt, data := src.Get("media_type"), src.Get("data")
	if mt.Type != gjson.String || data.Type != gjson.String || mt.Str == "" || data.Str == "" {
		return nil, fieldErr(name+".source", "a base64 source needs media_type and data")
	}
	url := make([]byte, 0, len(mt.Raw)+len(data.Raw)+16)
	url = append(append(url, `"data:`...), inner(mt.Raw)...)
	url = append(append(url, ";base64,"...), inner(data.Raw)...)
	return append(url, '"'), nil
}

// imageSource is an image block's source as the JSON string of a URL (a
// data URL for base64).
func imageSource(name string, src gjson.Result) ([]byte, error) {
	switch src.Get("type").Str {
	case "base64":
		return dataURL(name, src)
	case "url":
		if u := src.Get("url"); u.Type == gjson.String && u.Str != "" {
			return []byte(u.Raw), nil
		}
		return nil, fieldErr(name+".source.url", "required")
	}
	return nil, fieldErr(name+".source.type", "expected base64 or url")
}

// documentPart translates a document block: a base64 PDF becomes a file
// part, a plain text document its text.
func documentPart(name string, k block) ([]byte, error) {
	switch k.source.Get("type").Str {
	case "base64":
		data, err := dataURL(name, k.source)
		if err != nil {
			return nil, err
		}
		filename := k.title.Str
		if filename == "" {
			filename = "document.pdf"
		}
		part := jsonstr.Append([]byte(`{"type":"file","file":{"filename":`), filename)
		part = append(append(part, `,"file_data":`...), data...)
		return append(part, '}', '}'), nil
	case "text":
		text := k.source.Get("data").Str
		if t := k.title.Str; t != "" {
			text = t + "\n\n" + text
		}
		return append(jsonstr.Append([]byte(`{"type":"text","text":`), text), '}'), nil
	}
	return nil, fieldErr(name+".source.type", "expected base64 or text for this model's provider")
}

// searchResultText renders a search_result block as text.
func searchResultText(k block) string {
	var sb strings.Builder
	sb.WriteString(k.title.Str)
	if s := k.source.Str; s != "" {
		sb.WriteString(" (" + s + ")")
	}
	for _, c := range k.content.Array() {
		sb.WriteString("\n" + c.Get("text").Str)
	}
	return sb.String()
}

// toolResult translates a tool_result block into a tool message; the
// images it holds follow in the user message (chat tool messages carry
// text only). It must answer a tool_use of the previous message.
func (t *turns) toolResult(i, j int, k block, pending []string) error {
	id := k.toolUseID
	switch {
	case id.Type != gjson.String || id.Str == "":
		return fieldErr(blockPath(i, j)+".tool_use_id", "required")
	case !containsStr(pending, id.Str):
		return fieldErr(blockPath(i, j)+".tool_use_id", "%s answers no tool_use of the previous (assistant) message", id.Str)
	case containsStr(t.answered, id.Str):
		return fieldErr(blockPath(i, j)+".tool_use_id", "%s is answered twice", id.Str)
	}
	t.answered = append(t.answered, id.Str)
	t.texts = t.texts[:0]
	switch c := k.content; {
	case !c.Exists() || c.Type == gjson.Null:
	case c.Type == gjson.String:
		t.texts = append(t.texts, c.Raw)
	case c.IsArray():
		n := 0
		var err error
		eachElem(c.Raw, func(raw string) bool {
			part := gjson.Result{Type: gjson.JSON, Raw: raw}
			name := blockPath(i, j) + ".content[" + strconv.Itoa(n) + "]"
			n++
			pk := readBlock(part)
			if pk.typ.Str == "text" {
				var raw string
				if raw, err = rawText(name, pk.text); err == nil {
					t.texts = append(t.texts, raw)
				}
				return err == nil
			}
			err = t.userPart(name, pk)
			return err == nil
		})
		if err != nil {
			return err
		}
	default:
		return fieldErr(blockPath(i, j)+".content", "a string or an array of content blocks")
	}
	t.open()
	t.out = append(t.out, `{"role":"tool","tool_call_id":`...)
	t.out = append(t.out, id.Raw...)
	t.out = append(t.out, `,"content":`...)
	prefix := ""
	if k.isError.Bool() {
		prefix = "Error: "
	}
	t.joined(prefix, `\n`)
	t.out = append(t.out, '}')
	return nil
}

// assistantTurn translates an assistant message: its text, and its
// tool_use blocks as tool_calls.
func (t *turns) assistantTurn(i int, content gjson.Result) error {
	t.pending = t.pending[:0]
	t.pendingAt = i
	t.open()
	t.out = append(t.out, `{"role":"assistant"`...)
	if content.Type == gjson.String {
		t.out = append(append(t.out, `,"content":`...), content.Raw...)
		t.out = append(t.out, '}')
		return nil
	}
	t.texts = t.texts[:0]
	calls := 0
	j := 0
	var err error
	var details []byte // the signed thinking, as reasoning_details entries
	eachElem(content.Raw, func(raw string) bool {
		b := gjson.Result{Type: gjson.JSON, Raw: raw}
		name := ""
		k := readBlock(b)
		switch typ := k.typ.Str; typ {
		case "thinking", "redacted_thinking":
			// Signed thinking goes back as reasoning_details, which a
			// provider of Anthropic's models through chat (Bedrock) sends
			// back as its own thinking blocks, unchanged, and the others
			// leave out; unsigned thinking has no chat form.
			details = appendThinkingDetail(details, typ, b)
		case "text":
			var raw string
			if raw, err = rawText(blockPath(i, j), k.text); err == nil {
				t.texts = append(t.texts, raw)
			}
		case "tool_use":
			if k.id.Type != gjson.String || k.name.Type != gjson.String || k.id.Str == "" || k.name.Str == "" {
				err = fieldErr(blockPath(i, j), "a tool_use block needs id and name")
				break
			}
			if calls == 0 {
				t.out = append(t.out, `,"tool_calls":[`...)
			} else {
				t.out = append(t.out, ',')
			}
			calls++
			t.pending = append(t.pending, k.id.Str)
			t.out = append(t.out, `{"id":`...)
			t.out = append(t.out, k.id.Raw...)
			t.out = append(t.out, `,"type":"function","function":{"name":`...)
			t.out = append(t.out, k.name.Raw...)
			t.out = append(t.out, `,"arguments":`...)
			args := "{}"
			if k.input.Exists() && k.input.Type != gjson.Null {
				args = k.input.Raw
			}
			t.out = jsonstr.Append(t.out, args)
			t.out = append(t.out, '}', '}')
		case "server_tool_use", "web_search_tool_result":
			// No chat form; the gateway's or Anthropic's search records
			// are left out.
		case "":
			name = blockPath(i, j) + ".type"
			err = fieldErr(name, "required")
		default:
			err = fieldErr(blockPath(i, j)+".type", "%q is not supported in an assistant message by this model's provider", typ)
		}
		j++
		return err == nil
	})
	if err != nil {
		return err
	}
	if calls > 0 {
		t.out = append(t.out, ']')
	}
	if len(details) > 0 {
		t.out = append(append(append(t.out, `,"reasoning_details":[`...), details...), ']')
	}
	t.out = append(t.out, `,"content":`...)
	switch {
	case len(t.texts) > 0:
		t.joined("", "")
	case calls > 0:
		t.out = append(t.out, "null"...)
	default:
		t.out = append(t.out, `""`...)
	}
	t.out = append(t.out, '}')
	return nil
}

// appendThinkingDetail appends to details (a reasoning_details array's
// entries) an assistant's thinking block b of type typ: a thinking
// block with its signature as reasoning.text, a redacted_thinking block's
// data as reasoning.encrypted, each in Anthropic's format; a block
// without them is left out.
func appendThinkingDetail(details []byte, typ string, b gjson.Result) []byte {
	sep := func() {
		if len(details) > 0 {
			details = append(details, ',')
		}
	}
	if typ == "redacted_thinking" {
		if data := b.Get("data"); data.Type == gjson.String && data.Str != "" {
			sep()
			details = append(details, `{"type":"reasoning.encrypted","data":`...)
			details = jsonstr.Append(details, data.Str)
			details = append(details, `,"format":"anthropic-claude-v1"}`...)
		}
		return details
	}
	if sig := b.Get("signature"); sig.Type == gjson.String && sig.Str != "" {
		sep()
		details = append(details, `{"type":"reasoning.text","text":`...)
		details = jsonstr.Append(details, b.Get("thinking").Str)
		details = append(details, `,"signature":`...)
		details = jsonstr.Append(details, sig.Str)
		details = append(details, `,"format":"anthropic-claude-v1"}`...)
	}
	return details
}

// appendChatTools translates client tools into function tools; n is how
// many.
func appendChatTools(out []byte, tools gjson.Result) (_ []byte, n int, err error) {
	if !tools.IsArray() {
		return nil, 0, fieldErr("tools", "an array of tools")
	}
	out = append(out, '[')
	eachElem(tools.Raw, func(raw string) bool {
		tool := gjson.Result{Type: gjson.JSON, Raw: raw}
		name := "tools[" + strconv.Itoa(n) + "]"
		var typ, fnName, schema, desc, strict gjson.Result
		eachMember(tool.Raw, func(k, v string) bool {
			switch k {
			case "type":
				typ = member(v, true)
			case "name":
				fnName = member(v, true)
			case "input_schema":
				schema = member(v, true)
			case "description":
				desc = member(v, false) // copied as JSON text
			case "strict":
				strict = member(v, true)
			}
			return true
		})
		switch {
		case typ.Exists() && typ.Type != gjson.Null && typ.Str != "custom":
			err = fieldErr(name+".type", "%q is not supported by this model's provider; define it as a client tool with input_schema", typ.String())
		case fnName.Type != gjson.String || fnName.Str == "":
			err = fieldErr(name+".name", "required")
		case !schema.IsObject():
			err = fieldErr(name+".input_schema", "required (a JSON schema object)")
		}
		if err != nil {
			return false
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, `{"type":"function","function":{"name":`...)
		out = append(out, fnName.Raw...)
		if desc.Type == gjson.String {
			out = append(append(out, `,"description":`...), desc.Raw...)
		}
		if strict.Type == gjson.True {
			out = append(out, `,"strict":true`...)
		}
		out = append(append(out, `,"parameters":`...), schema.Raw...)
		out = append(out, '}', '}')
		return true
	})
	if err != nil {
		return nil, 0, err
	}
	return append(out, ']'), n, nil
}

// chatToolChoice translates tool_choice (JSON, "" for none); parallel is
// false when the client disabled parallel tool use.
func chatToolChoice(tc gjson.Result) (choice string, parallel bool, err error) {
	if !tc.Exists() || tc.Type == gjson.Null {
		return "", true, nil
	}
	if !tc.IsObject() {
		return "", true, fieldErr("tool_choice", "an object with a type")
	}
	parallel = !tc.Get("disable_parallel_tool_use").Bool()
	switch typ := tc.Get("type").Str; typ {
	case "auto":
		return `"auto"`, parallel, nil
	case "any":
		return `"required"`, parallel, nil
	case "none":
		return `"none"`, parallel, nil
	case "tool":
		name := tc.Get("name")
		if name.Type != gjson.String || name.Str == "" {
			return "", true, fieldErr("tool_choice.name", "required for type tool")
		}
		return `{"type":"function","function":{"name":` + name.Raw + `}}`, parallel, nil
	}
	return "", true, fieldErr("tool_choice.type", "expected auto, any, tool or none")
}
