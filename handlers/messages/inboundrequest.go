// Package messages serves Anthropic's Messages API (POST /messages) with
// providers that speak Chat Completions: it translates a Messages request
// into a chat request (MessagesToChat) and the chat answer, plain or
// streamed, back into a Messages answer (ChatToMessages). The files named
// inbound* hold that direction.
package messages

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// Messages -> Chat Completions, the request side of serving POST /messages
// with a provider that speaks Chat Completions. The answer is translated
// back by ChatToMessages.
//
// Translated: model, max_tokens, system (a string or text blocks: one
// system message first), messages (content a string or blocks: text,
// image with a base64 or URL source, document with a base64 PDF or plain
// text source, tool_use on assistant turns as tool_calls, tool_result on
// user turns as tool messages), tools (name, description, input_schema as
// function tools), tool_choice (auto, any as required, tool, none;
// disable_parallel_tool_use as parallel_tool_calls false), stop_sequences
// (stop), temperature, top_p, metadata.user_id (user, unless the request
// sets user), stream (with stream_options.include_usage, so that the
// answer reports usage). Dropped, having no chat form: cache_control,
// top_k, thinking and the thinking blocks of earlier turns, earlier
// server tool records (server_tool_use, web_search_tool_result),
// service_tier and the gateway's own fields. What cannot be expressed (an
// Anthropic-defined tool such as bash_20250124, an unknown block type) is
// an error naming the field.

// chatRequest is the translated chat completions body. Raw fields are
// copied byte for byte from the Messages request.
type chatRequest struct {
	Model             json.RawMessage   `json:"model,omitempty"`
	Messages          []chatMessage     `json:"messages"`
	MaxTokens         json.RawMessage   `json:"max_tokens,omitempty"`
	Temperature       json.RawMessage   `json:"temperature,omitempty"`
	TopP              json.RawMessage   `json:"top_p,omitempty"`
	Stop              json.RawMessage   `json:"stop,omitempty"`
	User              json.RawMessage   `json:"user,omitempty"`
	Tools             []json.RawMessage `json:"tools,omitempty"`
	ToolChoice        json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
	Stream            bool              `json:"stream,omitempty"`
	StreamOptions     *streamOptions    `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string     `json:"role"`
	Content    any        `json:"content"` // string, []chatPart or nil
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	File     *chatFile `json:"file,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatFile struct {
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// FieldError is a request field the translation cannot take; its text
// names the field.
type FieldError struct{ Field, Problem string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// MessagesToChat translates a Messages request body into a chat
// completions body. An error names the field that has no chat form.
func MessagesToChat(body []byte) ([]byte, error) {
	req := gjson.ParseBytes(body)
	if !req.IsObject() {
		return nil, fieldErr("body", "must be a JSON object")
	}
	out := chatRequest{Messages: []chatMessage{}}
	for _, f := range [...]struct {
		name string
		dst  *json.RawMessage
	}{
		{"model", &out.Model}, {"max_tokens", &out.MaxTokens}, {"temperature", &out.Temperature},
		{"top_p", &out.TopP}, {"user", &out.User},
	} {
		if v := req.Get(f.name); v.Exists() && v.Type != gjson.Null {
			*f.dst = json.RawMessage(v.Raw)
		}
	}
	if out.User == nil {
		if v := req.Get("metadata.user_id"); v.Type == gjson.String && v.Str != "" {
			out.User = json.RawMessage(v.Raw)
		}
	}
	system, err := systemText(req.Get("system"))
	if err != nil {
		return nil, err
	}
	if system != "" {
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: system})
	}
	msgs, err := chatMessages(req.Get("messages"))
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	if out.Stop, err = stopSequences(req.Get("stop_sequences")); err != nil {
		return nil, err
	}
	if out.Tools, err = chatTools(req.Get("tools")); err != nil {
		return nil, err
	}
	parallel := true
	if out.ToolChoice, parallel, err = chatToolChoice(req.Get("tool_choice")); err != nil {
		return nil, err
	}
	if !parallel && len(out.Tools) > 0 {
		// OpenAI refuses parallel_tool_calls without tools.
		out.ParallelToolCalls = &parallel
	}
	if req.Get("stream").Bool() {
		out.Stream = true
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	return json.Marshal(out)
}

// systemText is the system prompt: a string, or text blocks joined by
// blank lines.
func systemText(v gjson.Result) (string, error) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return "", nil
	case v.Type == gjson.String:
		return v.Str, nil
	case !v.IsArray():
		return "", fieldErr("system", "a string or an array of text blocks")
	}
	var texts []string
	for i, b := range v.Array() {
		if b.Get("type").Str != "text" {
			return "", fieldErr(fmt.Sprintf("system[%d].type", i), "expected text")
		}
		texts = append(texts, b.Get("text").Str)
	}
	return strings.Join(texts, "\n\n"), nil
}

// stopSequences translates stop_sequences into stop.
func stopSequences(v gjson.Result) (json.RawMessage, error) {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return nil, nil
	case !v.IsArray():
		return nil, fieldErr("stop_sequences", "an array of strings")
	}
	for i, s := range v.Array() {
		if s.Type != gjson.String {
			return nil, fieldErr(fmt.Sprintf("stop_sequences[%d]", i), "a string")
		}
	}
	if len(v.Array()) == 0 {
		return nil, nil
	}
	return json.RawMessage(v.Raw), nil
}

// chatMessages translates `messages`.
func chatMessages(msgs gjson.Result) ([]chatMessage, error) {
	if !msgs.IsArray() {
		return nil, fieldErr("messages", "an array of messages")
	}
	var out []chatMessage
	for i, m := range msgs.Array() {
		name := fmt.Sprintf("messages[%d]", i)
		if !m.IsObject() {
			return nil, fieldErr(name, "a message object")
		}
		var err error
		switch role := m.Get("role").Str; role {
		case "user":
			out, err = appendUserTurn(out, name, m.Get("content"))
		case "assistant":
			out, err = appendAssistantTurn(out, name, m.Get("content"))
		default:
			err = fieldErr(name+".role", "expected user or assistant")
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// contentBlocks returns a message's content as blocks: a string is one
// text block.
func contentBlocks(name string, content gjson.Result) ([]gjson.Result, string, error) {
	switch {
	case content.Type == gjson.String:
		return nil, content.Str, nil
	case !content.IsArray():
		return nil, "", fieldErr(name+".content", "a string or an array of content blocks")
	}
	return content.Array(), "", nil
}

// appendUserTurn translates a user message: its tool results become tool
// messages, which chat wants right after the assistant's calls, and the
// rest one user message after them.
func appendUserTurn(out []chatMessage, name string, content gjson.Result) ([]chatMessage, error) {
	blocks, text, err := contentBlocks(name, content)
	if err != nil {
		return nil, err
	}
	if blocks == nil {
		return append(out, chatMessage{Role: "user", Content: text}), nil
	}
	var parts []chatPart
	for j, b := range blocks {
		bname := fmt.Sprintf("%s.content[%d]", name, j)
		switch typ := b.Get("type").Str; typ {
		case "tool_result":
			msg, media, err := toolResult(bname, b)
			if err != nil {
				return nil, err
			}
			out = append(out, msg)
			// Chat tool messages carry text only: the images a tool
			// returned follow in the user message.
			parts = append(parts, media...)
		default:
			p, keep, err := userPart(bname, b)
			if err != nil {
				return nil, err
			}
			if keep {
				parts = append(parts, p)
			}
		}
	}
	if len(parts) > 0 {
		out = append(out, chatMessage{Role: "user", Content: userContent(parts)})
	}
	return out, nil
}

// userContent is a user message's content: a string when it is one text.
func userContent(parts []chatPart) any {
	if len(parts) == 1 && parts[0].Type == "text" {
		return parts[0].Text
	}
	return parts
}

// userPart translates one block of a user message; keep is false for a
// block with no chat form that carries nothing the model needs.
func userPart(name string, b gjson.Result) (chatPart, bool, error) {
	switch typ := b.Get("type").Str; typ {
	case "text":
		return chatPart{Type: "text", Text: b.Get("text").Str}, true, nil
	case "image":
		url, err := imageSource(name, b.Get("source"))
		return chatPart{Type: "image_url", ImageURL: &imageURL{URL: url}}, err == nil, err
	case "document":
		return documentPart(name, b)
	case "search_result":
		return chatPart{Type: "text", Text: searchResultText(b)}, true, nil
	case "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result":
		return chatPart{}, false, nil
	case "":
		return chatPart{}, false, fieldErr(name+".type", "required")
	default:
		return chatPart{}, false, fieldErr(name+".type", "%q is not supported by this model's provider", typ)
	}
}

// imageSource is an image block's source as a URL (a data URL for base64).
func imageSource(name string, src gjson.Result) (string, error) {
	switch src.Get("type").Str {
	case "base64":
		mt, data := src.Get("media_type").Str, src.Get("data").Str
		if mt == "" || data == "" {
			return "", fieldErr(name+".source", "a base64 source needs media_type and data")
		}
		return "data:" + mt + ";base64," + data, nil
	case "url":
		if u := src.Get("url").Str; u != "" {
			return u, nil
		}
		return "", fieldErr(name+".source.url", "required")
	}
	return "", fieldErr(name+".source.type", "expected base64 or url")
}

// documentPart translates a document block: a base64 PDF becomes a file
// part, a plain text document its text.
func documentPart(name string, b gjson.Result) (chatPart, bool, error) {
	src := b.Get("source")
	switch src.Get("type").Str {
	case "base64":
		mt, data := src.Get("media_type").Str, src.Get("data").Str
		if mt == "" || data == "" {
			return chatPart{}, false, fieldErr(name+".source", "a base64 source needs media_type and data")
		}
		filename := b.Get("title").Str
		if filename == "" {
			filename = "document.pdf"
		}
		return chatPart{Type: "file", File: &chatFile{Filename: filename, FileData: "data:" + mt + ";base64," + data}}, true, nil
	case "text":
		text := src.Get("data").Str
		if t := b.Get("title").Str; t != "" {
			text = t + "\n\n" + text
		}
		return chatPart{Type: "text", Text: text}, true, nil
	}
	return chatPart{}, false, fieldErr(name+".source.type", "expected base64 or text for this model's provider")
}

// searchResultText renders a search_result block as text.
func searchResultText(b gjson.Result) string {
	var sb strings.Builder
	sb.WriteString(b.Get("title").Str)
	if s := b.Get("source").Str; s != "" {
		sb.WriteString(" (" + s + ")")
	}
	for _, c := range b.Get("content").Array() {
		sb.WriteString("\n" + c.Get("text").Str)
	}
	return sb.String()
}

// toolResult translates a tool_result block into a tool message; the
// images it holds come back as parts for the user message.
func toolResult(name string, b gjson.Result) (chatMessage, []chatPart, error) {
	id := b.Get("tool_use_id").Str
	if id == "" {
		return chatMessage{}, nil, fieldErr(name+".tool_use_id", "required")
	}
	var text strings.Builder
	var media []chatPart
	switch c := b.Get("content"); {
	case !c.Exists() || c.Type == gjson.Null:
	case c.Type == gjson.String:
		text.WriteString(c.Str)
	case c.IsArray():
		for k, part := range c.Array() {
			pname := fmt.Sprintf("%s.content[%d]", name, k)
			p, keep, err := userPart(pname, part)
			if err != nil {
				return chatMessage{}, nil, err
			}
			switch {
			case !keep:
			case p.Type == "text":
				if text.Len() > 0 {
					text.WriteString("\n")
				}
				text.WriteString(p.Text)
			default:
				media = append(media, p)
			}
		}
	default:
		return chatMessage{}, nil, fieldErr(name+".content", "a string or an array of content blocks")
	}
	content := text.String()
	if b.Get("is_error").Bool() {
		content = "Error: " + content
	}
	return chatMessage{Role: "tool", ToolCallID: id, Content: content}, media, nil
}

// appendAssistantTurn translates an assistant message: its text, and its
// tool_use blocks as tool_calls.
func appendAssistantTurn(out []chatMessage, name string, content gjson.Result) ([]chatMessage, error) {
	blocks, text, err := contentBlocks(name, content)
	if err != nil {
		return nil, err
	}
	msg := chatMessage{Role: "assistant"}
	var sb strings.Builder
	sb.WriteString(text)
	for j, b := range blocks {
		bname := fmt.Sprintf("%s.content[%d]", name, j)
		switch typ := b.Get("type").Str; typ {
		case "text":
			sb.WriteString(b.Get("text").Str)
		case "tool_use":
			call, err := toolUseCall(bname, b)
			if err != nil {
				return nil, err
			}
			msg.ToolCalls = append(msg.ToolCalls, call)
		case "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result":
			// No chat form; the model's earlier reasoning and the
			// gateway's or Anthropic's search records are left out.
		case "":
			return nil, fieldErr(bname+".type", "required")
		default:
			return nil, fieldErr(bname+".type", "%q is not supported in an assistant message by this model's provider", typ)
		}
	}
	if sb.Len() > 0 || len(msg.ToolCalls) == 0 {
		msg.Content = sb.String()
	}
	return append(out, msg), nil
}

// toolUseCall translates a tool_use block into a chat tool call.
func toolUseCall(name string, b gjson.Result) (toolCall, error) {
	id, fn := b.Get("id").Str, b.Get("name").Str
	if id == "" || fn == "" {
		return toolCall{}, fieldErr(name, "a tool_use block needs id and name")
	}
	args := "{}"
	if in := b.Get("input"); in.Exists() && in.Type != gjson.Null {
		args = in.Raw
	}
	return toolCall{ID: id, Type: "function", Function: toolFunction{Name: fn, Arguments: args}}, nil
}

// chatTools translates client tools into function tools.
func chatTools(tools gjson.Result) ([]json.RawMessage, error) {
	switch {
	case !tools.Exists() || tools.Type == gjson.Null:
		return nil, nil
	case !tools.IsArray():
		return nil, fieldErr("tools", "an array of tools")
	}
	var out []json.RawMessage
	for i, t := range tools.Array() {
		name := fmt.Sprintf("tools[%d]", i)
		if typ := t.Get("type"); typ.Exists() && typ.Type != gjson.Null && typ.Str != "custom" {
			return nil, fieldErr(name+".type", "%q is not supported by this model's provider; define it as a client tool with input_schema", typ.String())
		}
		fnName := t.Get("name")
		if fnName.Type != gjson.String || fnName.Str == "" {
			return nil, fieldErr(name+".name", "required")
		}
		schema := t.Get("input_schema")
		if !schema.IsObject() {
			return nil, fieldErr(name+".input_schema", "required (a JSON schema object)")
		}
		fn := map[string]json.RawMessage{"name": json.RawMessage(fnName.Raw), "parameters": json.RawMessage(schema.Raw)}
		if d := t.Get("description"); d.Type == gjson.String {
			fn["description"] = json.RawMessage(d.Raw)
		}
		raw, err := json.Marshal(map[string]any{"type": "function", "function": fn})
		if err != nil {
			return nil, fieldErr(name, "%v", err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// chatToolChoice translates tool_choice; parallel is false when the
// client disabled parallel tool use.
func chatToolChoice(tc gjson.Result) (choice json.RawMessage, parallel bool, err error) {
	if !tc.Exists() || tc.Type == gjson.Null {
		return nil, true, nil
	}
	if !tc.IsObject() {
		return nil, true, fieldErr("tool_choice", "an object with a type")
	}
	parallel = !tc.Get("disable_parallel_tool_use").Bool()
	switch typ := tc.Get("type").Str; typ {
	case "auto":
		return json.RawMessage(`"auto"`), parallel, nil
	case "any":
		return json.RawMessage(`"required"`), parallel, nil
	case "none":
		return json.RawMessage(`"none"`), parallel, nil
	case "tool":
		name := tc.Get("name").Str
		if name == "" {
			return nil, true, fieldErr("tool_choice.name", "required for type tool")
		}
		raw, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
		return raw, parallel, nil
	}
	return nil, true, fieldErr("tool_choice.type", "expected auto, any, tool or none")
}
