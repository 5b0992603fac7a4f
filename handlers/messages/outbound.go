// Package messages speaks Anthropic's Messages API for the gateway.
//
// The outbound half (outbound*.go) serves chat completions (and, through
// the Responses->Chat translation, Responses requests) with providers of
// style anthropic: ChatToAnthropic translates the request body, and
// AnthropicToChat the answer, plain or streamed, back into a chat
// completion, so that the meter and the writers above it see a chat answer
// as from any provider. A Messages request for such a provider needs no
// translation: WithMaxTokens only makes sure it carries the max_tokens
// Anthropic requires.
package messages

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
)

// Version is the anthropic-version header every request carries.
const Version = "2023-06-01"

// Path is where a provider of style anthropic serves the Messages API,
// below its base URL.
const Path = "/v1/messages"

// DefaultMaxTokens is the max_tokens sent when neither the client nor the
// model's catalog entry gives an output limit: Anthropic requires one.
const DefaultMaxTokens = 4096

// Chat Completions -> Messages.
//
// Translated: system and developer messages (the top-level system, as
// text blocks in order), user messages (text and image_url parts: data
// URLs become base64 sources, http(s) URLs url sources; file parts with a
// base64 PDF become document blocks), assistant
// messages (text, tool_calls as tool_use blocks), tool messages (user
// tool_result blocks; consecutive messages of one role are merged, as the
// API alternates roles), cache_control on content parts, on a message's
// string content and on tools (passed as given), function tools and
// tool_choice (auto, none, required as any, a named function as tool;
// parallel_tool_calls false as disable_parallel_tool_use), max_tokens or
// max_completion_tokens (max_tokens, required: maxTokens when the client
// gave none), stop (stop_sequences), temperature (at most 1, Anthropic's
// range), top_p, stream, user (metadata.user_id). Tools of other types
// (Anthropic's server tools, such as the native web search's
// web_search_20250305) pass as written, as do Anthropic's own fields
// (thinking, top_k). reasoning_effort (the public reasoning.effort)
// enables extended thinking with that share of max_tokens as its budget
// (xhigh 95%, high 80%, medium 50%, low 20%, minimal 10%; at least 1,024
// tokens and below max_tokens, else none), which drops temperature, top_k
// and a top_p below 0.95, as Anthropic requires. Fields Anthropic does not define and that change no
// answer's meaning are dropped (penalties, seed, logprobs, stream_options,
// response_format, ...); n above 1, legacy functions, audio parts and
// files other than base64 PDFs are errors naming the field.

// droppedChatFields are chat fields the Messages API has no form for.
var droppedChatFields = map[string]bool{
	"frequency_penalty": true, "presence_penalty": true, "logit_bias": true, "logprobs": true,
	"top_logprobs": true, "seed": true, "service_tier": true, "store": true, "response_format": true,
	"modalities": true, "audio": true, "prediction": true, "prompt_cache_key": true,
	"prompt_cache_retention": true, "safety_identifier": true, "verbosity": true,
	"web_search_options": true, "search_parameters": true, "reasoning_effort": true,
	"stream_options": true, "metadata": true, "n": true,
}

// mappedChatFields are translated by ChatToAnthropic itself.
var mappedChatFields = map[string]bool{
	"model": true, "messages": true, "max_tokens": true, "max_completion_tokens": true,
	"stop": true, "temperature": true, "top_p": true, "stream": true, "user": true,
	"tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"functions": true, "function_call": true,
}

// ChatToAnthropic translates a chat completions request body into a
// Messages request body; maxTokens is the max_tokens sent when the body
// sets none (Anthropic requires it). The body was checked by the router.
func ChatToAnthropic(chat []byte, maxTokens int64) ([]byte, error) {
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
	system, msgs, err := translateMessages(req.Get("messages"))
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
	thinking := thinkingFor(req.Get("reasoning_effort").Str, maxTokens, req.Get("tool_choice"))
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
	tools, err := translateTools(req.Get("tools"))
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

// WithMaxTokens returns a Messages request body with max_tokens set to
// maxTokens (DefaultMaxTokens when not positive) if it has none; a body
// that has one is returned as it is.
func WithMaxTokens(body []byte, maxTokens int64) ([]byte, error) {
	if gjson.GetBytes(body, "max_tokens").Exists() {
		return body, nil
	}
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	return sjson.SetBytes(body, "max_tokens", maxTokens)
}

// thinkingEffort is the share of max_tokens each reasoning effort gives
// extended thinking.
var thinkingEffort = map[string]float64{"xhigh": 0.95, "high": 0.8, "medium": 0.5, "low": 0.2, "minimal": 0.1}

// minThinkingBudget is the smallest budget_tokens Anthropic takes.
const minThinkingBudget = 1024

// thinkingFor is the thinking object for a reasoning effort: a budget of
// the effort's share of maxTokens, at least minThinkingBudget and below
// maxTokens; nil for none, an unknown effort, a max_tokens too small for
// a budget, or a forced tool (which thinking does not allow).
func thinkingFor(effort string, maxTokens int64, toolChoice gjson.Result) []byte {
	share, ok := thinkingEffort[effort]
	if !ok || toolChoice.Str == "required" || toolChoice.IsObject() {
		return nil
	}
	budget := max(int64(float64(maxTokens)*share), minThinkingBudget)
	if budget >= maxTokens {
		return nil
	}
	return fmt.Appendf(nil, `{"type":"enabled","budget_tokens":%d}`, budget)
}

// anthropicMessage is one message being built: its role and blocks.
type anthropicMessage struct {
	role   string
	blocks []json.RawMessage
}

// translateMessages turns chat messages into the system blocks and the
// Messages API's messages, consecutive messages of a role merged.
func translateMessages(messages gjson.Result) (system, msgs []byte, err error) {
	if !messages.IsArray() {
		return nil, nil, fieldErr("messages", "expected an array of messages")
	}
	var sys []json.RawMessage
	var out []*anthropicMessage
	push := func(role string, blocks ...json.RawMessage) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].blocks = append(out[n-1].blocks, blocks...)
			return
		}
		out = append(out, &anthropicMessage{role: role, blocks: blocks})
	}
	for i, m := range messages.Array() {
		path := fmt.Sprintf("messages[%d]", i)
		role := m.Get("role").Str
		switch role {
		case "system", "developer":
			blocks, err := outContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), false)
			if err != nil {
				return nil, nil, err
			}
			sys = append(sys, blocks...)
		case "user":
			blocks, err := outContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), true)
			if err != nil {
				return nil, nil, err
			}
			push("user", blocks...)
		case "assistant":
			blocks, err := outContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), false)
			if err != nil {
				return nil, nil, err
			}
			calls, err := toolUseBlocks(m.Get("tool_calls"), path+".tool_calls")
			if err != nil {
				return nil, nil, err
			}
			push("assistant", append(blocks, calls...)...)
		case "tool":
			block, err := toolResultBlock(m, path)
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

type outTextBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type imageBlock struct {
	Type         string          `json:"type"`
	Source       outImageSource  `json:"source"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type outImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// outContentBlocks turns a message's content into blocks: a string is one
// text block (with the message's cache_control, if any); parts are text
// blocks, and with images, image blocks. Empty texts are left out, as the
// API refuses empty text blocks.
func outContentBlocks(content gjson.Result, path string, cache gjson.Result, images bool) ([]json.RawMessage, error) {
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
		b, err := json.Marshal(outTextBlock{Type: "text", Text: content.Str, CacheControl: cc(cache)})
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
			block = outTextBlock{Type: "text", Text: part.Get("text").Str, CacheControl: cc(part.Get("cache_control"))}
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
			block = imageBlock{Type: "image", Source: src, CacheControl: cc(part.Get("cache_control"))}
		case "file":
			if !images {
				return nil, fieldErr(ppath+".type", "files are allowed only in user messages")
			}
			src, err := documentSourceOf(part.Get("file.file_data").Str, ppath+".file.file_data")
			if err != nil {
				return nil, err
			}
			block = imageBlock{Type: "document", Source: src, CacheControl: cc(part.Get("cache_control"))}
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

// anthropicImageTypes are the media types the Messages API takes.
var anthropicImageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// imageSourceOf is the image source of a chat image URL: a base64 data URL
// becomes a base64 source, an http(s) URL a url source.
func imageSourceOf(u, path string) (outImageSource, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		meta, data, found := strings.Cut(rest, ",")
		mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
		if !found || !isBase64 || data == "" {
			return outImageSource{}, fieldErr(path, "expected a base64 data URL (data:image/png;base64,...)")
		}
		if !anthropicImageTypes[mediaType] {
			return outImageSource{}, fieldErr(path, "media type %q not supported (image/jpeg, image/png, image/gif or image/webp)", mediaType)
		}
		return outImageSource{Type: "base64", MediaType: mediaType, Data: data}, nil
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return outImageSource{Type: "url", URL: u}, nil
	}
	return outImageSource{}, fieldErr(path, "expected an http(s) URL or a base64 data URL")
}

// documentSourceOf is the document source of a chat file part's
// file_data: a base64 PDF data URL (Anthropic's document blocks take PDFs;
// a file_id means nothing to it).
func documentSourceOf(u, path string) (outImageSource, error) {
	data, ok := strings.CutPrefix(u, "data:application/pdf;base64,")
	if !ok || data == "" {
		return outImageSource{}, fieldErr(path, "expected a base64 PDF data URL (data:application/pdf;base64,...)")
	}
	return outImageSource{Type: "base64", MediaType: "application/pdf", Data: data}, nil
}

type toolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// toolUseBlocks turns an assistant's tool_calls into tool_use blocks.
func toolUseBlocks(calls gjson.Result, path string) ([]json.RawMessage, error) {
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
		b, err := json.Marshal(toolUseBlock{Type: "tool_use", ID: id, Name: name, Input: json.RawMessage(input.Raw)})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

type toolResultOut struct {
	Type      string            `json:"type"`
	ToolUseID string            `json:"tool_use_id"`
	Content   []json.RawMessage `json:"content,omitempty"`
}

// toolResultBlock turns a tool message into a tool_result block.
func toolResultBlock(m gjson.Result, path string) (json.RawMessage, error) {
	id := m.Get("tool_call_id").Str
	if id == "" {
		return nil, fieldErr(path+".tool_call_id", "required string")
	}
	blocks, err := outContentBlocks(m.Get("content"), path+".content", m.Get("cache_control"), true)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(toolResultOut{Type: "tool_result", ToolUseID: id, Content: blocks})
	return b, err
}

type toolOut struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// translateTools turns function tools into Anthropic's tool definitions;
// other tool types (Anthropic's server tools) pass as written.
func translateTools(tools gjson.Result) ([]byte, error) {
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
		to := toolOut{Name: fn.Get("name").Str, Description: fn.Get("description").Str, InputSchema: schema}
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

// translateToolChoice maps chat's tool_choice (and parallel_tool_calls)
// to Anthropic's; nil for the default.
func translateToolChoice(choice, parallel gjson.Result) ([]byte, error) {
	typ := ""
	name := ""
	switch {
	case !choice.Exists() || choice.Type == gjson.Null:
	case choice.Type == gjson.String:
		switch choice.Str {
		case "auto":
			typ = "auto"
		case "none":
			typ = "none"
		case "required":
			typ = "any"
		default:
			return nil, fieldErr("tool_choice", "expected auto, none, required or a function")
		}
	case choice.IsObject() && choice.Get("function.name").Str != "":
		typ, name = "tool", choice.Get("function.name").Str
	default:
		return nil, fieldErr("tool_choice", "expected auto, none, required or a function")
	}
	noParallel := parallel.Type == gjson.False
	if typ == "" && !noParallel {
		return nil, nil
	}
	if typ == "" {
		typ = "auto"
	}
	out := map[string]any{"type": typ}
	if name != "" {
		out["name"] = name
	}
	if noParallel && typ != "none" {
		out["disable_parallel_tool_use"] = true
	}
	return json.Marshal(out)
}
