package messages

// The chat -> Messages translation as it was written with encoding/json,
// kept as the reference the hand-written one must equal byte for byte
// (TestChatToAnthropicEqualsTheReference).

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// refChatToAnthropic translates a chat completions request body into a
// Messages request body; maxTokens is the max_tokens sent when the body
// sets none (Anthropic requires it). The body was checked by the router.
func refChatToAnthropic(chat []byte, maxTokens int64) ([]byte, error) {
	req := gjson.ParseBytes(chat)
	if !req.IsObject() {
		return nil, fieldErr("messages", "expected a JSON object body")
	}
	out := make([]byte, 0, len(chat)+64)
	out = append(out, '{')
	add := func(name string, raw []byte) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = jsonstr.Append(out, name)
		out = append(out, ':')
		out = append(out, raw...)
	}
	if m := req.Get("model"); m.Exists() {
		add("model", []byte(m.Raw))
	}
	if n := req.Get("n"); n.Exists() && n.Type != gjson.Null && n.Int() != 1 {
		return nil, fieldErr("n", "Anthropic-style providers give one choice; n must be 1")
	}
	for _, name := range []string{"functions", "function_call"} {
		if v := req.Get(name); v.Exists() && v.Type != gjson.Null {
			return nil, fieldErr(name, "not supported by Anthropic-style providers; use tools")
		}
	}
	system, msgs, err := refTranslateMessages(req.Get("messages"))
	if err != nil {
		return nil, err
	}
	if system != nil {
		add("system", system)
	}
	add("messages", msgs)
	limit := req.Get("max_tokens")
	if limit.Type != gjson.Number {
		limit = req.Get("max_completion_tokens")
	}
	if limit.Type == gjson.Number {
		maxTokens = limit.Int()
		add("max_tokens", []byte(limit.Raw))
	} else {
		if maxTokens <= 0 {
			maxTokens = DefaultMaxTokens
		}
		add("max_tokens", fmt.Appendf(nil, "%d", maxTokens))
	}
	thinking := ThinkingFor(req.Get("reasoning_effort").Str, maxTokens, req.Get("tool_choice"))
	if thinking != nil && !req.Get("thinking").Exists() {
		add("thinking", thinking)
	} else {
		thinking = nil
	}
	if stop := req.Get("stop"); stop.Type == gjson.String {
		add("stop_sequences", append(append([]byte{'['}, stop.Raw...), ']'))
	} else if stop.IsArray() {
		add("stop_sequences", []byte(stop.Raw))
	}
	// Extended thinking refuses sampling changes: they are dropped.
	if t := req.Get("temperature"); t.Type == gjson.Number && thinking == nil {
		if t.Float() > 1 {
			add("temperature", []byte("1"))
		} else {
			add("temperature", []byte(t.Raw))
		}
	}
	if p := req.Get("top_p"); p.Type == gjson.Number && (thinking == nil || p.Float() >= 0.95) {
		add("top_p", []byte(p.Raw))
	}
	if s := req.Get("stream"); s.Type == gjson.True {
		add("stream", []byte("true"))
	}
	if u := req.Get("user"); u.Type == gjson.String && u.Str != "" {
		add("metadata", append(append([]byte(`{"user_id":`), u.Raw...), '}'))
	}
	tools, err := refTranslateTools(req.Get("tools"))
	if err != nil {
		return nil, err
	}
	if tools != nil {
		add("tools", tools)
	}
	choice, err := translateToolChoice(req.Get("tool_choice"), req.Get("parallel_tool_calls"))
	if err != nil {
		return nil, err
	}
	if choice != nil && tools != nil {
		add("tool_choice", choice)
	}
	var rest error
	req.ForEach(func(k, v gjson.Result) bool {
		switch {
		case mappedChatFields[k.Str], droppedChatFields[k.Str]:
		case k.Str == "system":
			rest = fieldErr("system", "not a chat completions field; send a system message")
			return false
		case k.Str == "top_k" && thinking != nil:
		default:
			// Anthropic's own fields (thinking, top_k, ...), and anything
			// the provider may know better than the gateway.
			add(k.Str, []byte(v.Raw))
		}
		return true
	})
	if rest != nil {
		return nil, rest
	}
	return append(out, '}'), nil
}

// refAnthropicMessage is one message being built: its role and blocks.
type refAnthropicMessage struct {
	role   string
	blocks []json.RawMessage
}

// refTranslateMessages turns chat messages into the system blocks and the
// Messages API's messages, consecutive messages of a role merged.
func refTranslateMessages(messages gjson.Result) (system, msgs []byte, err error) {
	if !messages.IsArray() {
		return nil, nil, fieldErr("messages", "expected an array of messages")
	}
	var sys []json.RawMessage
	var out []*refAnthropicMessage
	push := func(role string, blocks ...json.RawMessage) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].blocks = append(out[n-1].blocks, blocks...)
			return
		}
		out = append(out, &refAnthropicMessage{role: role, blocks: blocks})
	}
	for i, m := range messages.Array() {
		path := fmt.Sprintf("messages[%d]", i)
		role := m.Get("role").Str
		switch role {
		case "system", "developer":
			blocks, err := refOutContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), false)
			if err != nil {
				return nil, nil, err
			}
			sys = append(sys, blocks...)
		case "user":
			blocks, err := refOutContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), true)
			if err != nil {
				return nil, nil, err
			}
			push("user", blocks...)
		case "assistant":
			thinking, err := thinkingBlocks(m.Get("reasoning_details"), func() string { return path })
			if err != nil {
				return nil, nil, err
			}
			blocks, err := refOutContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), false)
			if err != nil {
				return nil, nil, err
			}
			calls, err := refToolUseBlocks(m.Get("tool_calls"), path+".tool_calls")
			if err != nil {
				return nil, nil, err
			}
			all := make([]json.RawMessage, 0, len(thinking)+len(blocks)+len(calls))
			for _, b := range thinking {
				all = append(all, b)
			}
			push("assistant", append(append(all, blocks...), calls...)...)
		case "tool":
			block, err := refToolResultBlock(m, path)
			if err != nil {
				return nil, nil, err
			}
			push("user", block)
		default:
			return nil, nil, fieldErr(path+".role", "expected system, developer, user, assistant or tool")
		}
	}
	if len(out) == 0 {
		return nil, nil, fieldErr("messages", "Anthropic-style providers need at least one user or assistant message")
	}
	if len(sys) > 0 {
		system, _ = json.Marshal(sys)
	}
	type wire struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	ws := make([]wire, len(out))
	for i, m := range out {
		ws[i] = wire{Role: m.role, Content: m.blocks}
	}
	msgs, err = json.Marshal(ws)
	return system, msgs, err
}

type refOutTextBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type refImageBlock struct {
	Type         string          `json:"type"`
	Source       outImageSource  `json:"source"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// refOutContentBlocks turns a message's content into blocks: a string is one
// text block (with the message's cache_control, if any); parts are text
// blocks, and with images, image blocks. Empty texts are left out, as the
// API refuses empty text blocks.
func refOutContentBlocks(content gjson.Result, path string, cache gjson.Result, images bool) ([]json.RawMessage, error) {
	cc := func(v gjson.Result) json.RawMessage {
		if v.IsObject() {
			return json.RawMessage(v.Raw)
		}
		return nil
	}
	switch {
	case content.Type == gjson.Null || !content.Exists():
		return nil, nil
	case content.Type == gjson.String:
		if content.Str == "" {
			return nil, nil
		}
		b, err := json.Marshal(refOutTextBlock{Type: "text", Text: content.Str, CacheControl: cc(cache)})
		return []json.RawMessage{b}, err
	case !content.IsArray():
		return nil, fieldErr(path, "expected a string or an array of content parts")
	}
	var out []json.RawMessage
	for j, part := range content.Array() {
		ppath := fmt.Sprintf("%s[%d]", path, j)
		var block any
		switch typ := part.Get("type").Str; typ {
		case "text":
			if part.Get("text").Str == "" {
				continue
			}
			block = refOutTextBlock{Type: "text", Text: part.Get("text").Str, CacheControl: cc(part.Get("cache_control"))}
		case "image_url":
			if !images {
				return nil, fieldErr(ppath+".type", "images are allowed only in user messages")
			}
			u := part.Get("image_url.url").Str
			if iu := part.Get("image_url"); iu.Type == gjson.String {
				u = iu.Str // the short form some clients send
			}
			src, err := imageSourceOf(u, ppath+".image_url.url")
			if err != nil {
				return nil, err
			}
			block = refImageBlock{Type: "image", Source: src, CacheControl: cc(part.Get("cache_control"))}
		case "file":
			if !images {
				return nil, fieldErr(ppath+".type", "files are allowed only in user messages")
			}
			src, err := documentSourceOf(part.Get("file.file_data").Str, ppath+".file.file_data")
			if err != nil {
				return nil, err
			}
			block = refImageBlock{Type: "document", Source: src, CacheControl: cc(part.Get("cache_control"))}
		default:
			return nil, fieldErr(ppath+".type", "%q parts are not supported by Anthropic-style providers (text, image_url and PDF files are)", typ)
		}
		b, err := json.Marshal(block)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

type refToolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// refToolUseBlocks turns an assistant's tool_calls into tool_use blocks.
func refToolUseBlocks(calls gjson.Result, path string) ([]json.RawMessage, error) {
	if !calls.Exists() || calls.Type == gjson.Null {
		return nil, nil
	}
	if !calls.IsArray() {
		return nil, fieldErr(path, "expected an array of tool calls")
	}
	var out []json.RawMessage
	for j, c := range calls.Array() {
		cpath := fmt.Sprintf("%s[%d]", path, j)
		id, name := c.Get("id").Str, c.Get("function.name").Str
		if id == "" || name == "" {
			return nil, fieldErr(cpath, "expected an id and a function name")
		}
		input := gjson.Parse(c.Get("function.arguments").Str)
		args := c.Get("function.arguments").Str
		if strings.TrimSpace(args) == "" {
			input = gjson.Parse("{}")
		} else if !gjson.Valid(args) || !input.IsObject() {
			return nil, fieldErr(cpath+".function.arguments", "expected a JSON object")
		}
		b, err := json.Marshal(refToolUseBlock{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input.Raw)})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

type refToolResultOut struct {
	Type      string            `json:"type"`
	ToolUseID string            `json:"tool_use_id"`
	Content   []json.RawMessage `json:"content,omitempty"`
}

// refToolResultBlock turns a tool message into a tool_result block.
func refToolResultBlock(m gjson.Result, path string) (json.RawMessage, error) {
	id := m.Get("tool_call_id").Str
	if id == "" {
		return nil, fieldErr(path+".tool_call_id", "required string")
	}
	blocks, err := refOutContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), true)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(refToolResultOut{Type: "tool_result", ToolUseID: id, Content: blocks})
	return b, err
}

type refToolOut struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// refTranslateTools turns function tools into Anthropic's tool definitions;
// other tool types (Anthropic's server tools) pass as written.
func refTranslateTools(tools gjson.Result) ([]byte, error) {
	if !tools.Exists() || tools.Type == gjson.Null {
		return nil, nil
	}
	if !tools.IsArray() {
		return nil, fieldErr("tools", "expected an array of tools")
	}
	var out []json.RawMessage
	for i, t := range tools.Array() {
		if t.Get("type").Str != "function" {
			out = append(out, json.RawMessage(t.Raw))
			continue
		}
		fn := t.Get("function")
		if fn.Get("name").Str == "" {
			return nil, fieldErr(fmt.Sprintf("tools[%d].function.name", i), "required string")
		}
		schema := json.RawMessage(`{"type":"object"}`)
		if p := fn.Get("parameters"); p.IsObject() {
			schema = json.RawMessage(p.Raw)
		}
		to := refToolOut{Name: fn.Get("name").Str, Description: fn.Get("description").Str, InputSchema: schema}
		if cc := t.Get("cache_control"); cc.IsObject() {
			to.CacheControl = json.RawMessage(cc.Raw)
		}
		b, err := json.Marshal(to)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return json.Marshal(out)
}
