// Package translate serves the Responses API with providers that speak only
// Chat Completions: it translates a Responses request into a chat request
// (ResponsesToChat) and the chat answer, plain or streamed, back into a
// Responses answer (ChatToResponses).
package translate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// Responses -> Chat Completions, the request side of serving
// POST /responses with a provider that speaks only Chat Completions
// (dialect.APIChat). The answer is translated back by ChatToResponses.
//
// Translated: instructions (a system message first), input (a string, or
// message items with roles user, system, developer (sent as system) and
// assistant, whose input_text, input_image, input_file and output_text
// parts become chat content; function_call and function_call_output
// items), max_output_tokens (max_tokens), stream (with
// stream_options.include_usage, so that the answer reports usage),
// temperature, top_p, seed, user, presence_penalty, frequency_penalty,
// parallel_tool_calls, service_tier, prompt_cache_key, safety_identifier,
// reasoning.effort (reasoning_effort), function tools and tool_choice,
// text.format (response_format). Tools of other types (the gateway's own)
// are passed on untouched. Reasoning items and earlier web_search_call items
// carry nothing a chat provider can use and are left out; fields without a
// chat equivalent (store, include, truncation, background, ...) are
// dropped. What cannot be expressed (previous_response_id, unknown input
// items or parts) is an error naming the field.

// chatRequestOut is the translated chat completions body. Raw fields are
// copied byte for byte from the Responses request.
type chatRequestOut struct {
	Model             json.RawMessage   `json:"model,omitempty"`
	Messages          []chatMessageOut  `json:"messages"`
	MaxTokens         json.RawMessage   `json:"max_tokens,omitempty"`
	Temperature       json.RawMessage   `json:"temperature,omitempty"`
	TopP              json.RawMessage   `json:"top_p,omitempty"`
	Seed              json.RawMessage   `json:"seed,omitempty"`
	User              json.RawMessage   `json:"user,omitempty"`
	PresencePenalty   json.RawMessage   `json:"presence_penalty,omitempty"`
	FrequencyPenalty  json.RawMessage   `json:"frequency_penalty,omitempty"`
	ParallelToolCalls json.RawMessage   `json:"parallel_tool_calls,omitempty"`
	ServiceTier       json.RawMessage   `json:"service_tier,omitempty"`
	PromptCacheKey    json.RawMessage   `json:"prompt_cache_key,omitempty"`
	SafetyIdentifier  json.RawMessage   `json:"safety_identifier,omitempty"`
	ReasoningEffort   json.RawMessage   `json:"reasoning_effort,omitempty"`
	Tools             []json.RawMessage `json:"tools,omitempty"`
	ToolChoice        json.RawMessage   `json:"tool_choice,omitempty"`
	ResponseFormat    json.RawMessage   `json:"response_format,omitempty"`
	Stream            bool              `json:"stream,omitempty"`
	StreamOptions     *chatStreamOpts   `json:"stream_options,omitempty"`
}

type chatStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessageOut struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"` // string, []chatPartOut or nil
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatPartOut struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	ImageURL json.RawMessage `json:"image_url,omitempty"`
	File     json.RawMessage `json:"file,omitempty"`
	// CacheControl is the part's prompt-caching breakpoint, passed on
	// (Anthropic-style providers honour it).
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type chatToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// copied are request fields with the same name and meaning in both APIs.
var copiedFields = []struct {
	name string
	dst  func(*chatRequestOut) *json.RawMessage
}{
	{"model", func(c *chatRequestOut) *json.RawMessage { return &c.Model }},
	{"temperature", func(c *chatRequestOut) *json.RawMessage { return &c.Temperature }},
	{"top_p", func(c *chatRequestOut) *json.RawMessage { return &c.TopP }},
	{"seed", func(c *chatRequestOut) *json.RawMessage { return &c.Seed }},
	{"user", func(c *chatRequestOut) *json.RawMessage { return &c.User }},
	{"presence_penalty", func(c *chatRequestOut) *json.RawMessage { return &c.PresencePenalty }},
	{"frequency_penalty", func(c *chatRequestOut) *json.RawMessage { return &c.FrequencyPenalty }},
	{"parallel_tool_calls", func(c *chatRequestOut) *json.RawMessage { return &c.ParallelToolCalls }},
	{"service_tier", func(c *chatRequestOut) *json.RawMessage { return &c.ServiceTier }},
	{"prompt_cache_key", func(c *chatRequestOut) *json.RawMessage { return &c.PromptCacheKey }},
	{"safety_identifier", func(c *chatRequestOut) *json.RawMessage { return &c.SafetyIdentifier }},
	{"max_output_tokens", func(c *chatRequestOut) *json.RawMessage { return &c.MaxTokens }},
	{"reasoning.effort", func(c *chatRequestOut) *json.RawMessage { return &c.ReasoningEffort }},
}

// ResponsesToChat translates a Responses request body into a chat
// completions body. An error names the field that has no chat form.
func ResponsesToChat(body []byte) ([]byte, error) {
	req := gjson.ParseBytes(body)
	if !req.IsObject() {
		return nil, fmt.Errorf("request body must be a JSON object")
	}
	if v := req.Get("previous_response_id"); v.Exists() && v.Type != gjson.Null {
		return nil, fmt.Errorf("previous_response_id: not supported by this model's provider; send the conversation in input")
	}
	if v := req.Get("conversation"); v.Exists() && v.Type != gjson.Null {
		return nil, fmt.Errorf("conversation: not supported by this model's provider; send the conversation in input")
	}
	var out chatRequestOut
	for _, f := range copiedFields {
		if v := req.Get(f.name); v.Exists() && v.Type != gjson.Null {
			*f.dst(&out) = json.RawMessage(v.Raw)
		}
	}
	if v := req.Get("instructions"); v.Type == gjson.String && v.Str != "" {
		out.Messages = append(out.Messages, chatMessageOut{Role: "system", Content: v.Str})
	}
	msgs, err := chatMessages(req.Get("input"))
	if err != nil {
		return nil, err
	}
	out.Messages = append(out.Messages, msgs...)
	if out.Tools, err = chatTools(req.Get("tools")); err != nil {
		return nil, err
	}
	if out.ToolChoice, err = chatToolChoice(req.Get("tool_choice")); err != nil {
		return nil, err
	}
	if len(out.Tools) == 0 {
		// Without tools they mean nothing, and chat providers refuse them.
		out.ToolChoice, out.ParallelToolCalls = nil, nil
	}
	if out.ResponseFormat, err = chatResponseFormat(req.Get("text.format")); err != nil {
		return nil, err
	}
	if req.Get("stream").Bool() {
		out.Stream = true
		out.StreamOptions = &chatStreamOpts{IncludeUsage: true}
	}
	return json.Marshal(out)
}

// chatMessages translates `input`.
func chatMessages(input gjson.Result) ([]chatMessageOut, error) {
	switch {
	case !input.Exists() || input.Type == gjson.Null:
		return nil, nil
	case input.Type == gjson.String:
		return []chatMessageOut{{Role: "user", Content: input.Str}}, nil
	case !input.IsArray():
		return nil, fmt.Errorf("input: a string or an array of input items")
	}
	var out []chatMessageOut
	for i, item := range input.Array() {
		name := fmt.Sprintf("input[%d]", i)
		if !item.IsObject() {
			return nil, fmt.Errorf("%s: an input item object", name)
		}
		typ := item.Get("type").Str
		if typ == "" && item.Get("role").Exists() {
			typ = "message"
		}
		switch typ {
		case "message":
			m, err := itemToChatMessage(name, item)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		case "function_call":
			callID, fn := item.Get("call_id").Str, item.Get("name").Str
			if callID == "" || fn == "" {
				return nil, fmt.Errorf("%s: a function_call needs call_id and name", name)
			}
			call := chatToolCall{ID: callID, Type: "function", Function: chatToolFunction{Name: fn, Arguments: item.Get("arguments").Str}}
			// Calls of one turn share one assistant message.
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, call)
				continue
			}
			out = append(out, chatMessageOut{Role: "assistant", ToolCalls: []chatToolCall{call}})
		case "function_call_output":
			callID := item.Get("call_id").Str
			if callID == "" {
				return nil, fmt.Errorf("%s.call_id: required for a function_call_output", name)
			}
			o := item.Get("output")
			text := o.Str
			if o.IsArray() {
				text = partsText(o)
			} else if o.Type != gjson.String {
				text = o.Raw
			}
			out = append(out, chatMessageOut{Role: "tool", ToolCallID: callID, Content: text})
		case "reasoning", "web_search_call":
			// Nothing a chat provider can take.
		default:
			return nil, fmt.Errorf("%s.type: %q is not supported by this model's provider", name, typ)
		}
	}
	return out, nil
}

// itemToChatMessage translates one message item.
func itemToChatMessage(name string, item gjson.Result) (chatMessageOut, error) {
	role := item.Get("role").Str
	switch role {
	case "user", "assistant", "system":
	case "developer":
		// Chat-only providers commonly know no developer role.
		role = "system"
	default:
		return chatMessageOut{}, fmt.Errorf("%s.role: expected user, assistant, system or developer", name)
	}
	content := item.Get("content")
	if content.Type == gjson.String {
		return chatMessageOut{Role: role, Content: content.Str}, nil
	}
	if !content.IsArray() {
		return chatMessageOut{}, fmt.Errorf("%s.content: a string or an array of content parts", name)
	}
	var parts []chatPartOut
	textOnly, cached := true, false
	for j, p := range content.Array() {
		n := len(parts)
		pname := fmt.Sprintf("%s.content[%d]", name, j)
		switch typ := p.Get("type").Str; typ {
		case "input_text", "output_text", "text":
			parts = append(parts, chatPartOut{Type: "text", Text: p.Get("text").Str})
		case "refusal":
			parts = append(parts, chatPartOut{Type: "text", Text: p.Get("refusal").Str})
		case "input_image":
			url := p.Get("image_url").Str
			if url == "" {
				return chatMessageOut{}, fmt.Errorf("%s.image_url: required (a URL or data URL)", pname)
			}
			img := map[string]string{"url": url}
			if d := p.Get("detail").Str; d != "" {
				img["detail"] = d
			}
			raw, _ := json.Marshal(img)
			parts = append(parts, chatPartOut{Type: "image_url", ImageURL: raw})
			textOnly = false
		case "input_file":
			file := map[string]string{}
			for _, k := range []string{"file_id", "file_data", "filename"} {
				if v := p.Get(k).Str; v != "" {
					file[k] = v
				}
			}
			if len(file) == 0 {
				return chatMessageOut{}, fmt.Errorf("%s: input_file needs file_id or file_data", pname)
			}
			raw, _ := json.Marshal(file)
			parts = append(parts, chatPartOut{Type: "file", File: raw})
			textOnly = false
		default:
			return chatMessageOut{}, fmt.Errorf("%s.type: %q is not supported by this model's provider", pname, typ)
		}
		if cc := p.Get("cache_control"); cc.IsObject() && len(parts) > n {
			parts[n].CacheControl, cached = json.RawMessage(cc.Raw), true
		}
	}
	// System and assistant messages take text only in many chat
	// providers; an assistant's earlier answer (output_text parts, whose
	// annotations chat has no input form for) becomes its text.
	if textOnly && !cached && (role != "user" || len(parts) == 1) {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return chatMessageOut{Role: role, Content: b.String()}, nil
	}
	if role != "user" && !textOnly {
		return chatMessageOut{}, fmt.Errorf("%s.content: only user messages may carry images or files", name)
	}
	return chatMessageOut{Role: role, Content: parts}, nil
}

// partsText joins the text of content parts.
func partsText(parts gjson.Result) string {
	var b strings.Builder
	for _, p := range parts.Array() {
		b.WriteString(p.Get("text").Str)
	}
	return b.String()
}

// chatTools translates function tools; other tool types are the gateway's
// own business and pass untouched.
func chatTools(tools gjson.Result) ([]json.RawMessage, error) {
	if !tools.Exists() || tools.Type == gjson.Null {
		return nil, nil
	}
	if !tools.IsArray() {
		return nil, fmt.Errorf("tools: an array of tools")
	}
	var out []json.RawMessage
	for i, t := range tools.Array() {
		if t.Get("type").Str != "function" {
			out = append(out, json.RawMessage(t.Raw))
			continue
		}
		if t.Get("function").IsObject() {
			// Already in the chat form.
			out = append(out, json.RawMessage(t.Raw))
			continue
		}
		name := t.Get("name")
		if name.Type != gjson.String || name.Str == "" {
			return nil, fmt.Errorf("tools[%d].name: required for a function tool", i)
		}
		fn := map[string]json.RawMessage{"name": json.RawMessage(name.Raw)}
		for _, k := range []string{"description", "parameters", "strict"} {
			if v := t.Get(k); v.Exists() && v.Type != gjson.Null {
				fn[k] = json.RawMessage(v.Raw)
			}
		}
		raw, err := json.Marshal(map[string]any{"type": "function", "function": fn})
		if err != nil {
			return nil, fmt.Errorf("tools[%d]: %v", i, err)
		}
		out = append(out, raw)
	}
	return out, nil
}

// chatToolChoice translates tool_choice: the modes are the same; a named
// function moves under "function".
func chatToolChoice(tc gjson.Result) (json.RawMessage, error) {
	switch {
	case !tc.Exists() || tc.Type == gjson.Null:
		return nil, nil
	case tc.Type == gjson.String:
		return json.RawMessage(tc.Raw), nil
	case tc.IsObject() && tc.Get("type").Str == "function" && !tc.Get("function").Exists():
		name := tc.Get("name").Str
		if name == "" {
			return nil, fmt.Errorf("tool_choice.name: required for a function")
		}
		raw, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": name}})
		return raw, nil
	}
	return json.RawMessage(tc.Raw), nil
}

// chatResponseFormat translates text.format.
func chatResponseFormat(f gjson.Result) (json.RawMessage, error) {
	if !f.Exists() || f.Type == gjson.Null {
		return nil, nil
	}
	switch f.Get("type").Str {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		schema := map[string]json.RawMessage{}
		for _, k := range []string{"name", "description", "schema", "strict"} {
			if v := f.Get(k); v.Exists() && v.Type != gjson.Null {
				schema[k] = json.RawMessage(v.Raw)
			}
		}
		if _, ok := schema["name"]; !ok {
			return nil, fmt.Errorf("text.format.name: required for json_schema")
		}
		raw, _ := json.Marshal(map[string]any{"type": "json_schema", "json_schema": schema})
		return raw, nil
	}
	return nil, fmt.Errorf("text.format.type: expected text, json_object or json_schema")
}
