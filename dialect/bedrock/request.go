package bedrock

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/messages"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

// converse is a Converse request, as the gateway writes it: only members
// the API defines (it refuses any other).
type converse struct {
	Messages                     []message        `json:"messages"`
	System                       []block          `json:"system,omitempty"`
	InferenceConfig              *inferenceConfig `json:"inferenceConfig,omitempty"`
	ToolConfig                   *toolConfig      `json:"toolConfig,omitempty"`
	AdditionalModelRequestFields json.RawMessage  `json:"additionalModelRequestFields,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type block struct {
	Text             *string           `json:"text,omitempty"`
	Image            *image            `json:"image,omitempty"`
	ToolUse          *toolUse          `json:"toolUse,omitempty"`
	ToolResult       *toolResult       `json:"toolResult,omitempty"`
	CachePoint       *cachePoint       `json:"cachePoint,omitempty"`
	ReasoningContent *reasoningContent `json:"reasoningContent,omitempty"`
}

// cachePoint ends the prompt's prefix to cache (automatic caching): for
// Bedrock's default five minutes, or (TTL "1h") for an hour.
type cachePoint struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// reasoningContent is a thinking block an answer gave, sent back as it
// was: its text with the signature, or its redacted content.
type reasoningContent struct {
	ReasoningText   *reasoningText `json:"reasoningText,omitempty"`
	RedactedContent string         `json:"redactedContent,omitempty"`
}

type reasoningText struct {
	Text      string `json:"text"`
	Signature string `json:"signature"`
}

type image struct {
	Format string      `json:"format"`
	Source imageSource `json:"source"`
}

type imageSource struct {
	Bytes string `json:"bytes"`
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string            `json:"toolUseId"`
	Content   []json.RawMessage `json:"content"`
}

type inferenceConfig struct {
	MaxTokens     int64    `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type toolConfig struct {
	Tools      []toolSpecOf    `json:"tools"`
	ToolChoice json.RawMessage `json:"toolChoice,omitempty"`
}

type toolSpecOf struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

func fieldError(path, msg string) error { return fmt.Errorf("%s: %s", path, msg) }

// fromChat translates a chat completions body into a Converse request;
// thinks: the model is Anthropic's, which takes a reasoning effort as
// extended thinking.
func fromChat(chat []byte, thinks bool) ([]byte, error) {
	req := gjson.Parse(rawjson.View(chat)) // nothing kept: out is copied
	if !req.IsObject() {
		return nil, fieldError("body", "expected a JSON object")
	}
	var out converse
	ic := &inferenceConfig{}
	var choice, effort, topK gjson.Result
	var err error
	var cache *cachePoint
	rawjson.ForEach(req, func(name string, v gjson.Result) bool {
		switch name {
		case "cache_control":
			// Automatic caching (the public API's top-level
			// cache_control): a cache point after the whole prompt, with
			// the hour's TTL when it asks for one (the default, and any
			// other value, Bedrock's five minutes).
			if v.IsObject() {
				cache = &cachePoint{Type: "default"}
				if v.Get("ttl").Str == "1h" {
					cache.TTL = "1h"
				}
			}
		case "reasoning_effort":
			effort = v
		case "messages":
			out.System, out.Messages, err = messagesOf(v)
		case "tools":
			var tools []toolSpecOf
			for i, t := range v.Array() {
				if t.Get("type").Str != "function" {
					err = fieldError(fmt.Sprintf("tools[%d].type", i), "Bedrock providers take function tools only")
					return false
				}
				f := t.Get("function")
				schema := f.Get("parameters").Raw
				if schema == "" {
					schema = `{"type":"object"}`
				}
				tools = append(tools, toolSpecOf{toolSpec{Name: f.Get("name").Str, Description: f.Get("description").Str,
					InputSchema: json.RawMessage(`{"json":` + schema + `}`)}})
			}
			if len(tools) > 0 {
				out.ToolConfig = &toolConfig{Tools: tools}
			}
		case "tool_choice":
			choice = v
		case "max_tokens", "max_completion_tokens":
			ic.MaxTokens = max(ic.MaxTokens, v.Int())
		case "temperature":
			// Converse takes 0 to 1; chat's hotter values are sent as 1,
			// as for Anthropic-style providers.
			f := min(v.Float(), 1)
			ic.Temperature = &f
		case "top_p":
			f := v.Float()
			ic.TopP = &f
		case "stop":
			if v.Type == gjson.String {
				ic.StopSequences = []string{v.Str}
			} else {
				for _, s := range v.Array() {
					ic.StopSequences = append(ic.StopSequences, s.Str)
				}
			}
		case "top_k":
			topK = v
		case "n":
			if v.Int() > 1 {
				err = fieldError("n", "Bedrock providers answer one choice")
			}
		case "functions", "function_call":
			err = fieldError(name, "not served by Bedrock providers; send tools")
		}
		// Any other field (penalties, seed, logprobs, response_format,
		// user, stream_options, ...) has no Converse member: dropped.
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if choice.Exists() && out.ToolConfig != nil {
		switch {
		case choice.Str == "auto":
			out.ToolConfig.ToolChoice = json.RawMessage(`{"auto":{}}`)
		case choice.Str == "required":
			out.ToolConfig.ToolChoice = json.RawMessage(`{"any":{}}`)
		case choice.Str == "none" && hasToolBlocks(out.Messages):
			// Converse needs the tools of a conversation's toolUse and
			// toolResult blocks, and has no "none" to go with them.
			return nil, fieldError("tool_choice", "none is not served by Bedrock providers in a conversation with tool calls; send auto")
		case choice.Str == "none":
			out.ToolConfig = nil // Converse has no "none": no tools offered
		case choice.Get("type").Str == "function":
			name := jsonstr.Quote(choice.Get("function.name").Str)
			out.ToolConfig.ToolChoice = json.RawMessage(`{"tool":{"name":` + string(name) + `}}`)
		default:
			return nil, fieldError("tool_choice", "expected auto, none, required or a function")
		}
	}
	// The model's own fields, passed through Converse: top_k, and an
	// Anthropic model's extended thinking, which (as Anthropic's API)
	// takes neither top_k nor a temperature or top_p.
	var thinking []byte
	if thinks && effort.Type == gjson.String {
		thinking = messages.ThinkingFor(effort.Str, ic.MaxTokens, choice)
	}
	switch {
	case thinking != nil:
		out.AdditionalModelRequestFields = json.RawMessage(`{"thinking":` + string(thinking) + `}`)
		ic.Temperature, ic.TopP = nil, nil
	case topK.Exists():
		out.AdditionalModelRequestFields = json.RawMessage(`{"top_k":` + topK.Raw + `}`)
	}
	if ic.MaxTokens > 0 || ic.Temperature != nil || ic.TopP != nil || ic.StopSequences != nil {
		out.InferenceConfig = ic
	}
	if len(out.Messages) == 0 {
		return nil, fieldError("messages", "needs a user message")
	}
	if last := &out.Messages[len(out.Messages)-1]; cache != nil {
		last.Content = append(last.Content, block{CachePoint: cache})
	}
	if b, ok := appendConverse(make([]byte, 0, len(chat)+256), &out); ok {
		return b, nil
	}
	return json.Marshal(out) // for its error
}

// messageMembers are the members of a message messagesOf reads.
var messageMembers = []string{"role", "content", "tool_calls", "tool_call_id", "reasoning_details"}

// messagesOf translates the messages: system and developer messages into
// system blocks, tool results into toolResult blocks of a user message,
// consecutive messages of one role merged (Converse alternates roles).
func messagesOf(msgs gjson.Result) ([]block, []message, error) {
	var system []block
	var out []message
	add := func(role string, blocks ...block) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	for i, m := range rawjson.Array(msgs) {
		path := "messages[" + strconv.Itoa(i) + "]"
		var f [5]gjson.Result // one walk of the message for its members
		if m.IsObject() {
			rawjson.Lookup(m.Raw, messageMembers, f[:])
		}
		mrole, mcontent, mcalls, mid, mdetails := f[0], f[1], f[2], f[3], f[4]
		switch role := mrole.Str; role {
		case "system", "developer":
			b, err := textBlocks(mcontent, path, false)
			if err != nil {
				return nil, nil, err
			}
			system = append(system, nonBlank(b)...)
		case "user":
			b, err := textBlocks(mcontent, path, true)
			if err != nil {
				return nil, nil, err
			}
			add("user", b...)
		case "assistant":
			blocks, err := reasoningBlocks(mdetails, path)
			if err != nil {
				return nil, nil, err
			}
			if c := mcontent; c.Exists() && c.Type != gjson.Null {
				b, err := textBlocks(c, path, false)
				if err != nil {
					return nil, nil, err
				}
				// Converse refuses a blank text block, which chat
				// clients send beside tool calls ("content": "").
				blocks = append(blocks, nonBlank(b)...)
			}
			for j, call := range mcalls.Array() {
				args := call.Get("function.arguments").Str
				if args == "" {
					args = "{}"
				}
				if !gjson.Valid(args) || !gjson.Parse(args).IsObject() {
					return nil, nil, fieldError(fmt.Sprintf("%s.tool_calls[%d].function.arguments", path, j), "expected a JSON object")
				}
				blocks = append(blocks, block{ToolUse: &toolUse{ToolUseID: call.Get("id").Str, Name: call.Get("function.name").Str, Input: json.RawMessage(args)}})
			}
			if len(blocks) > 0 {
				add("assistant", blocks...)
			}
		case "tool":
			c := mcontent
			text := c.Str
			if c.IsArray() {
				var b strings.Builder
				for _, p := range c.Array() {
					b.WriteString(p.Get("text").Str)
				}
				text = b.String()
			}
			var content json.RawMessage
			if gjson.Valid(text) && gjson.Parse(text).IsObject() {
				content = json.RawMessage(`{"json":` + text + `}`)
			} else {
				content = json.RawMessage(`{"text":` + string(jsonstr.Quote(text)) + `}`)
			}
			add("user", block{ToolResult: &toolResult{ToolUseID: mid.Str, Content: []json.RawMessage{content}}})
		default:
			return nil, nil, fieldError(path+".role", fmt.Sprintf("unsupported role %q", role))
		}
	}
	return system, out, nil
}

// reasoningBlocks turns an assistant's reasoning_details, as a chat answer
// gave them, back into reasoningContent blocks, signatures and redacted
// content unchanged, to come first in its message as Converse wants
// them. Details of other providers' formats and text without a
// signature, which Bedrock would refuse, are left out, as are summaries.
func reasoningBlocks(details gjson.Result, path string) ([]block, error) {
	if !details.Exists() {
		return nil, nil
	}
	ds, bad := chatform.ReadReasoningDetails(details)
	if bad != nil {
		return nil, fieldError(path+".reasoning_details"+bad.Field, bad.Problem)
	}
	var out []block
	for _, d := range ds {
		if d.Format != "" && d.Format != chatform.FormatAnthropic && d.Format != "unknown" {
			continue
		}
		switch {
		case d.Type == chatform.ReasoningEncrypted:
			out = append(out, block{ReasoningContent: &reasoningContent{RedactedContent: d.Data}})
		case d.Signature != "":
			out = append(out, block{ReasoningContent: &reasoningContent{ReasoningText: &reasoningText{Text: d.Text, Signature: d.Signature}}})
		}
	}
	return out, nil
}

// hasToolBlocks reports whether a conversation has toolUse or toolResult
// blocks.
func hasToolBlocks(msgs []message) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.ToolUse != nil || b.ToolResult != nil {
				return true
			}
		}
	}
	return false
}

// nonBlank is blocks without the text blocks that are empty or only
// white space.
func nonBlank(blocks []block) []block {
	out := blocks[:0]
	for _, b := range blocks {
		if b.Text == nil || strings.TrimSpace(*b.Text) != "" {
			out = append(out, b)
		}
	}
	return out
}

// textBlocks are a content's text (and, for user messages, base64 images).
func textBlocks(c gjson.Result, path string, images bool) ([]block, error) {
	if c.Type == gjson.String {
		s := c.Str
		return []block{{Text: &s}}, nil
	}
	var out []block
	for j, p := range c.Array() {
		at := fmt.Sprintf("%s.content[%d]", path, j)
		switch typ := p.Get("type").Str; {
		case typ == "text":
			s := p.Get("text").Str
			out = append(out, block{Text: &s})
		case typ == "image_url" && images:
			u := p.Get("image_url.url").Str
			rest, ok := strings.CutPrefix(u, "data:image/")
			format, data, ok2 := strings.Cut(rest, ";base64,")
			if !ok || !ok2 || !strings.Contains("png jpeg gif webp", format) {
				return nil, fieldError(at+".image_url.url", "Bedrock providers take base64 data: URLs of PNG, JPEG, GIF or WebP images")
			}
			out = append(out, block{Image: &image{Format: format, Source: imageSource{Bytes: data}}})
		default:
			return nil, fieldError(at+".type", fmt.Sprintf("unsupported part %q for Bedrock providers", typ))
		}
	}
	return out, nil
}
