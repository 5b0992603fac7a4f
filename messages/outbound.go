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
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
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
// (max 98%, xhigh 95%, high 80%, medium 50%, low 20%, minimal 10%; at least 1,024
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
	req := gjson.Parse(rawjson.View(chat)) // nothing kept: out is copied
	if !req.IsObject() {
		return nil, fieldErr("messages", "expected a JSON object body")
	}
	// One walk of the body: the mapped members (a key's first occurrence,
	// as gjson's Get takes) and the others, in order.
	var f struct {
		model, n, functions, functionCall, messages, maxTokens, maxCompletionTokens,
		reasoningEffort, thinking, stop, temperature, topP, stream, user,
		tools, toolChoice, parallelToolCalls gjson.Result
	}
	type rawMember struct{ key, val string }
	var rest []rawMember
	eachMember(req.Raw, func(key, val string) bool {
		if strings.IndexByte(key, '\\') >= 0 {
			key = gjson.Parse(`"` + key + `"`).Str
		}
		var p *gjson.Result
		switch key {
		case "model":
			p = &f.model
		case "n":
			p = &f.n
		case "functions":
			p = &f.functions
		case "function_call":
			p = &f.functionCall
		case "messages":
			p = &f.messages
		case "max_tokens":
			p = &f.maxTokens
		case "max_completion_tokens":
			p = &f.maxCompletionTokens
		case "reasoning_effort":
			p = &f.reasoningEffort
		case "thinking":
			p = &f.thinking
		case "stop":
			p = &f.stop
		case "temperature":
			p = &f.temperature
		case "top_p":
			p = &f.topP
		case "stream":
			p = &f.stream
		case "user":
			p = &f.user
		case "tools":
			p = &f.tools
		case "tool_choice":
			p = &f.toolChoice
		case "parallel_tool_calls":
			p = &f.parallelToolCalls
		}
		if p != nil && !p.Exists() {
			*p = member(val, true)
		}
		if !mappedChatFields[key] && !droppedChatFields[key] {
			rest = append(rest, rawMember{key, val})
		}
		return true
	})
	out := make([]byte, 0, len(chat)+64)
	out = append(out, '{')
	add := func(name string, raw string) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = jsonstr.Append(out, name)
		out = append(out, ':')
		out = append(out, raw...)
	}
	addBytes := func(name string, raw []byte) {
		add(name, "")
		out = append(out, raw...)
	}
	if f.model.Exists() {
		add("model", f.model.Raw)
	}
	if n := f.n; n.Exists() && n.Type != gjson.Null && n.Int() != 1 {
		return nil, fieldErr("n", "Anthropic-style providers give one choice; n must be 1")
	}
	if v := f.functions; v.Exists() && v.Type != gjson.Null {
		return nil, fieldErr("functions", "not supported by Anthropic-style providers; use tools")
	}
	if v := f.functionCall; v.Exists() && v.Type != gjson.Null {
		return nil, fieldErr("function_call", "not supported by Anthropic-style providers; use tools")
	}
	system, msgs, err := translateMessages(f.messages)
	if err != nil {
		return nil, err
	}
	if system != nil {
		addBytes("system", system)
	}
	addBytes("messages", msgs)
	limit := f.maxTokens
	if limit.Type != gjson.Number {
		limit = f.maxCompletionTokens
	}
	if limit.Type == gjson.Number {
		maxTokens = limit.Int()
		add("max_tokens", limit.Raw)
	} else {
		if maxTokens <= 0 {
			maxTokens = DefaultMaxTokens
		}
		add("max_tokens", strconv.FormatInt(maxTokens, 10))
	}
	thinking := ThinkingFor(f.reasoningEffort.Str, maxTokens, f.toolChoice)
	if thinking != nil && !f.thinking.Exists() {
		addBytes("thinking", thinking)
	} else {
		thinking = nil
	}
	if stop := f.stop; stop.Type == gjson.String {
		add("stop_sequences", "["+stop.Raw+"]")
	} else if stop.IsArray() {
		add("stop_sequences", stop.Raw)
	}
	// Extended thinking refuses sampling changes: they are dropped.
	if t := f.temperature; t.Type == gjson.Number && thinking == nil {
		if t.Float() > 1 {
			add("temperature", "1")
		} else {
			add("temperature", t.Raw)
		}
	}
	if p := f.topP; p.Type == gjson.Number && (thinking == nil || p.Float() >= 0.95) {
		add("top_p", p.Raw)
	}
	if s := f.stream; s.Type == gjson.True {
		add("stream", "true")
	}
	if u := f.user; u.Type == gjson.String && u.Str != "" {
		add("metadata", `{"user_id":`+u.Raw+"}")
	}
	tools, err := translateTools(f.tools)
	if err != nil {
		return nil, err
	}
	if tools != nil {
		addBytes("tools", tools)
	}
	choice, err := translateToolChoice(f.toolChoice, f.parallelToolCalls)
	if err != nil {
		return nil, err
	}
	if choice != nil && tools != nil {
		addBytes("tool_choice", choice)
	}
	for _, m := range rest {
		switch {
		case m.key == "system":
			return nil, fieldErr("system", "not a chat completions field; send a system message")
		case m.key == "top_k" && thinking != nil:
		default:
			// Anthropic's own fields (thinking, top_k, ...), and anything
			// the provider may know better than the gateway.
			add(m.key, m.val)
		}
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
// extended thinking; max keeps a little for the answer, as Anthropic's
// budget must stay below max_tokens.
var thinkingEffort = map[string]float64{"max": 0.98, "xhigh": 0.95, "high": 0.8, "medium": 0.5, "low": 0.2, "minimal": 0.1}

// minThinkingBudget is the smallest budget_tokens Anthropic takes.
const minThinkingBudget = 1024

// ThinkingFor is the thinking object for a reasoning effort: a budget of
// the effort's share of maxTokens, at least minThinkingBudget and below
// maxTokens; nil for none, an unknown effort, a max_tokens too small for
// a budget, or a forced tool (which thinking does not allow).
func ThinkingFor(effort string, maxTokens int64, toolChoice gjson.Result) []byte {
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
	blocks [][]byte
}

// translateMessages turns chat messages into the system blocks and the
// Messages API's messages, consecutive messages of a role merged.
func translateMessages(messages gjson.Result) (system, msgs []byte, err error) {
	if !messages.IsArray() {
		return nil, nil, fieldErr("messages", "expected an array of messages")
	}
	var sys [][]byte
	var out []anthropicMessage
	push := func(role string, blocks ...[]byte) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].blocks = append(out[n-1].blocks, blocks...)
			return
		}
		out = append(out, anthropicMessage{role: role, blocks: blocks})
	}
	i := -1
	// The messages and their members in one walk, texts unescaped only
	// when they have escapes.
	eachElem(messages.Raw, func(raw string) bool {
		i++
		m := member(raw, true)
		path := func() string { return "messages[" + strconv.Itoa(i) + "]" }
		var fields struct{ role, content, cache, toolCalls, toolCallID, details gjson.Result }
		rawjson.ForEach(m, func(k string, v gjson.Result) bool {
			var f *gjson.Result
			switch k {
			case "role":
				f = &fields.role
			case "content":
				f = &fields.content
			case "cache_control":
				f = &fields.cache
			case "tool_calls":
				f = &fields.toolCalls
			case "tool_call_id":
				f = &fields.toolCallID
			case "reasoning_details":
				f = &fields.details
			default:
				return true
			}
			if !f.Exists() { // gjson's Get takes a key's first occurrence
				*f = v
			}
			return true
		})
		switch fields.role.Str {
		case "system", "developer":
			var blocks [][]byte
			blocks, err = outContentBlocks(fields.content, path, fields.cache, false)
			sys = append(sys, blocks...)
		case "user":
			var blocks [][]byte
			blocks, err = outContentBlocks(fields.content, path, fields.cache, true)
			push("user", blocks...)
		case "assistant":
			var thinking, blocks, calls [][]byte
			if thinking, err = thinkingBlocks(fields.details, path); err != nil {
				return false
			}
			if blocks, err = outContentBlocks(fields.content, path, fields.cache, false); err != nil {
				return false
			}
			if calls, err = toolUseBlocks(fields.toolCalls, path); err != nil {
				return false
			}
			blocks = append(blocks, calls...)
			if len(thinking) > 0 {
				// Thinking comes first, before the text and tool_use
				// blocks, as Anthropic requires.
				blocks = append(thinking, blocks...)
			}
			push("assistant", blocks...)
		case "tool":
			var block []byte
			block, err = toolResultBlock(fields.toolCallID, fields.content, fields.cache, path)
			push("user", block)
		default:
			err = fieldErr(path()+".role", "expected system, developer, user, assistant or tool")
		}
		return err == nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(out) == 0 {
		return nil, nil, fieldErr("messages", "Anthropic-style providers need at least one user or assistant message")
	}
	if len(sys) > 0 {
		system = appendBlocks(nil, sys)
	}
	size := 2
	for _, m := range out {
		size += 32
		for _, b := range m.blocks {
			size += len(b) + 1
		}
	}
	msgs = make([]byte, 0, size)
	msgs = append(msgs, '[')
	for i, m := range out {
		if i > 0 {
			msgs = append(msgs, ',')
		}
		msgs = append(msgs, `{"role":`...)
		msgs = jsonstr.Append(msgs, m.role)
		msgs = append(msgs, `,"content":`...)
		msgs = appendBlocks(msgs, m.blocks)
		msgs = append(msgs, '}')
	}
	return system, append(msgs, ']'), nil
}

// appendBlocks appends blocks as a JSON array.
func appendBlocks(b []byte, blocks [][]byte) []byte {
	b = append(b, '[')
	for i, block := range blocks {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, block...)
	}
	return append(b, ']')
}

// appendCacheControl appends a block's cache_control member, if v is an
// object.
func appendCacheControl(b []byte, v gjson.Result) ([]byte, error) {
	if !v.IsObject() {
		return b, nil
	}
	return rawjson.AppendRaw(append(b, `,"cache_control":`...), v.Raw)
}

// appendTextBlock appends a text block.
func appendTextBlock(b []byte, text string, cache gjson.Result) ([]byte, error) {
	b = append(b, `{"type":"text","text":`...)
	b = jsonstr.Append(b, text)
	b, err := appendCacheControl(b, cache)
	return append(b, '}'), err
}

// outContentBlocks turns a message's content into blocks: a string is one
// text block (with the message's cache_control, if any); parts are text
// blocks, and with images, image blocks. Empty texts are left out, as the
// API refuses empty text blocks. path names the message.
func outContentBlocks(content gjson.Result, path func() string, cache gjson.Result, images bool) ([][]byte, error) {
	switch {
	case content.Type == gjson.Null || !content.Exists():
		return nil, nil
	case content.Type == gjson.String:
		if content.Str == "" {
			return nil, nil
		}
		b, err := appendTextBlock(make([]byte, 0, len(content.Raw)+48), content.Str, cache)
		return [][]byte{b}, err
	case !content.IsArray():
		return nil, fieldErr(path()+".content", "expected a string or an array of content parts")
	}
	var out [][]byte
	var err error
	j := -1
	content.ForEach(func(_, part gjson.Result) bool {
		j++
		ppath := func() string { return path() + ".content[" + strconv.Itoa(j) + "]" }
		var b []byte
		switch typ := part.Get("type").Str; typ {
		case "text":
			text := part.Get("text").Str
			if text == "" {
				return true
			}
			b, err = appendTextBlock(nil, text, part.Get("cache_control"))
		case "image_url":
			if !images {
				err = fieldErr(ppath()+".type", "images are allowed only in user messages")
				return false
			}
			u := part.Get("image_url.url").Str
			if iu := part.Get("image_url"); iu.Type == gjson.String {
				u = iu.Str // the short form some clients send
			}
			var src outImageSource
			if src, err = imageSourceOf(u, ppath()+".image_url.url"); err != nil {
				return false
			}
			b, err = appendSourceBlock(nil, "image", src, part.Get("cache_control"))
		case "file":
			if !images {
				err = fieldErr(ppath()+".type", "files are allowed only in user messages")
				return false
			}
			var src outImageSource
			if src, err = documentSourceOf(part.Get("file.file_data").Str, ppath()+".file.file_data"); err != nil {
				return false
			}
			b, err = appendSourceBlock(nil, "document", src, part.Get("cache_control"))
		default:
			err = fieldErr(ppath()+".type", "%q parts are not supported by Anthropic-style providers (text, image_url and PDF files are)", typ)
		}
		out = append(out, b)
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendSourceBlock appends an image or document block.
func appendSourceBlock(b []byte, typ string, src outImageSource, cache gjson.Result) ([]byte, error) {
	b = append(b, `{"type":`...)
	b = jsonstr.Append(b, typ)
	b = append(b, `,"source":{"type":`...)
	b = jsonstr.Append(b, src.Type)
	for _, f := range [...]struct{ name, v string }{{"media_type", src.MediaType}, {"data", src.Data}, {"url", src.URL}} {
		if f.v != "" {
			b = append(b, ',', '"')
			b = append(b, f.name...)
			b = append(b, '"', ':')
			b = jsonstr.Append(b, f.v)
		}
	}
	b = append(b, '}')
	b, err := appendCacheControl(b, cache)
	return append(b, '}'), err
}

type outImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
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

// thinkingBlocks turns an assistant's reasoning_details, as a chat answer
// gave them, back into thinking blocks with their signatures unchanged
// (redacted_thinking for encrypted ones). Details from other providers'
// formats and text without a signature, which Anthropic would refuse,
// are left out, as are summaries.
func thinkingBlocks(details gjson.Result, path func() string) ([][]byte, error) {
	if !details.Exists() {
		return nil, nil
	}
	ds, bad := chatform.ReadReasoningDetails(details)
	if bad != nil {
		return nil, fieldErr(path()+".reasoning_details"+bad.Field, "%s", bad.Problem)
	}
	var out [][]byte
	for _, d := range ds {
		if d.Format != "" && d.Format != chatform.FormatAnthropic && d.Format != "unknown" {
			continue
		}
		var b []byte
		switch {
		case d.Type == chatform.ReasoningEncrypted:
			b = append(make([]byte, 0, len(d.Data)+40), `{"type":"redacted_thinking","data":`...)
			b = jsonstr.Append(b, d.Data)
		case d.Signature != "":
			b = append(make([]byte, 0, len(d.Text)+len(d.Signature)+48), `{"type":"thinking","thinking":`...)
			b = jsonstr.Append(b, d.Text)
			b = append(b, `,"signature":`...)
			b = jsonstr.Append(b, d.Signature)
		default:
			continue
		}
		out = append(out, append(b, '}'))
	}
	return out, nil
}

// toolUseBlocks turns an assistant's tool_calls into tool_use blocks.
func toolUseBlocks(calls gjson.Result, path func() string) ([][]byte, error) {
	if !calls.Exists() || calls.Type == gjson.Null {
		return nil, nil
	}
	if !calls.IsArray() {
		return nil, fieldErr(path()+".tool_calls", "expected an array of tool calls")
	}
	var out [][]byte
	var err error
	j := -1
	calls.ForEach(func(_, c gjson.Result) bool {
		j++
		cpath := func() string { return path() + ".tool_calls[" + strconv.Itoa(j) + "]" }
		id, name := c.Get("id").Str, c.Get("function.name").Str
		if id == "" || name == "" {
			err = fieldErr(cpath(), "expected an id and a function name")
			return false
		}
		args := c.Get("function.arguments").Str
		input := "{}"
		if strings.TrimSpace(args) != "" {
			in := gjson.Parse(args)
			if !gjson.Valid(args) || !in.IsObject() {
				err = fieldErr(cpath()+".function.arguments", "expected a JSON object")
				return false
			}
			input = in.Raw
		}
		b := append(make([]byte, 0, len(id)+len(name)+len(input)+48), `{"type":"tool_use","id":`...)
		b = jsonstr.Append(b, id)
		b = append(b, `,"name":`...)
		b = jsonstr.Append(b, name)
		b = append(b, `,"input":`...)
		if b, err = rawjson.AppendRaw(b, input); err != nil {
			return false
		}
		out = append(out, append(b, '}'))
		return true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// toolResultBlock turns a tool message into a tool_result block.
func toolResultBlock(id, content, cache gjson.Result, path func() string) ([]byte, error) {
	if id.Str == "" {
		return nil, fieldErr(path()+".tool_call_id", "required string")
	}
	blocks, err := outContentBlocks(content, path, cache, true)
	if err != nil {
		return nil, err
	}
	b := append([]byte(`{"type":"tool_result","tool_use_id":`), nil...)
	b = jsonstr.Append(b, id.Str)
	if len(blocks) > 0 {
		b = append(b, `,"content":`...)
		b = appendBlocks(b, blocks)
	}
	return append(b, '}'), nil
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
	out := []byte{'['}
	var err error
	i := -1
	tools.ForEach(func(_, t gjson.Result) bool {
		i++
		if len(out) > 1 {
			out = append(out, ',')
		}
		if t.Get("type").Str != "function" {
			out, err = rawjson.AppendRaw(out, t.Raw)
			return err == nil
		}
		fn := t.Get("function")
		name := fn.Get("name").Str
		if name == "" {
			err = fieldErr("tools["+strconv.Itoa(i)+"].function.name", "required string")
			return false
		}
		out = append(out, `{"name":`...)
		out = jsonstr.Append(out, name)
		if d := fn.Get("description").Str; d != "" {
			out = append(out, `,"description":`...)
			out = jsonstr.Append(out, d)
		}
		out = append(out, `,"input_schema":`...)
		if p := fn.Get("parameters"); p.IsObject() {
			if out, err = rawjson.AppendRaw(out, p.Raw); err != nil {
				return false
			}
		} else {
			out = append(out, `{"type":"object"}`...)
		}
		if out, err = appendCacheControl(out, t.Get("cache_control")); err != nil {
			return false
		}
		out = append(out, '}')
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 1 {
		return nil, nil
	}
	return append(out, ']'), nil
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
