// Package prompt bounds and counts a request's prompt tokens: the byte
// bound admission holds on (Bound, NewBound) and, for a model whose
// tokenizer is known, the count as the provider bills it (Counter).
package prompt

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// The admission estimate of a request's prompt tokens is an upper bound, so
// that a hold covers the real cost and a cap is never exceeded:
//
//   - Text: one token per byte of the request body. A byte-level BPE
//     tokenizer (OpenAI's, Llama 3's, Qwen's...) never makes more tokens
//     than the UTF-8 bytes of the text, and the body holds every byte of
//     text plus JSON syntax; escapes only lengthen it.
//   - Chat templates: the JSON of a message is at least 28 bytes
//     ({"role":"user","content":""}), more than the 3 to 5 tokens a template
//     wraps a message in, and a "name" adds 10 bytes for its 1 extra token;
//     PromptOverheadTokens covers what a template adds once per request
//     (the reply's priming, a default system header).
//   - Tools and structured output: providers add a fixed preamble (for
//     example Anthropic's 346-token tool-use system prompt):
//     toolsOverheadTokens when the request has tools or a response_format.
//   - Images and audio: a short URL can cost thousands of tokens; each such
//     part adds the handler's media_part_tokens (DefaultMediaPartTokens).
//   - Content the body does not hold (a file or video part, a part of a
//     type the gateway does not know, an item_reference, a
//     previous_response_id, conversation or stored prompt): only the
//     model's context window bounds it.
//
// Whatever the parts, the prompt never exceeds the model's context_length
// when the catalog states it, so the estimate is at most that.
const (
	PromptOverheadTokens = 64
	toolsOverheadTokens  = 512
	// DefaultMediaPartTokens bounds the prompt tokens of one image or audio
	// part: above OpenAI's high-detail tiles (at most 1,445), its patch
	// models (at most 3,779), Claude's (about 1,600) and Gemini's
	// (258 a tile, 1,120 at high resolution). gpt-4o-mini bills up to
	// 48,169 and Qwen-VL up to 16,384 for one image: raise media_part_tokens
	// for such models.
	DefaultMediaPartTokens = 8192
)

// Bound is the admission estimate of a request's prompt tokens.
type Bound struct {
	Tokens int64
	// unbounded: the prompt holds content the body does not (a file by
	// reference, a previous response...); only the context window bounds it.
	Unbounded bool
	// counted are the prompt's counts by the tokenizers of the attempts'
	// models (Counter), which replace the byte bound for them.
	Counted []Count
}

// Count is a prompt counted with one tokenizer.
type Count struct {
	Enc       *tokenizer.Encoding
	Tokens    int64
	Unbounded bool
	// partial: counted no further than every context window it could go
	// to (tokens is then a lower bound, above them all).
	Partial bool
}

// Add keeps a count, the larger for a tokenizer counted twice (on two
// forms of the body).
func (b *Bound) Add(c Count) {
	for i := range b.Counted {
		if b.Counted[i].Enc == c.Enc {
			b.Counted[i].Tokens = max(b.Counted[i].Tokens, c.Tokens)
			b.Counted[i].Unbounded = b.Counted[i].Unbounded || c.Unbounded
			b.Counted[i].Partial = b.Counted[i].Partial || c.Partial
			return
		}
	}
	b.Counted = append(b.Counted, c)
}

// Of is the prompt's count with m's tokenizer, if it was counted.
func (b *Bound) Of(m *catalog.Model) (Count, bool) {
	for _, c := range b.Counted {
		if m.Tokenizer != nil && c.Enc == m.Tokenizer {
			return c, true
		}
	}
	return Count{}, false
}

// NewBound bounds the prompt of a request whose largest body (as any of
// its providers receives it) is bodyBytes long; f holds its top-level
// fields.
func NewBound(f *reqbody.Fields, bodyBytes int, mediaPartTokens int64) Bound {
	b := Bound{Tokens: int64(bodyBytes) + PromptOverheadTokens}
	for _, name := range []string{"previous_response_id", "conversation"} {
		if v, ok := f.Get(name); ok && v.Type != gjson.Null {
			b.Unbounded = true
		}
	}
	// A Responses stored prompt by id; the text prompt of /completions (a
	// string, or token ids) is in the body.
	if v, ok := f.Get("prompt"); ok && v.IsObject() {
		b.Unbounded = true
	}
	for _, name := range []string{"tools", "functions", "response_format"} {
		if v, ok := f.Get(name); ok && v.Type != gjson.Null {
			b.Tokens += toolsOverheadTokens
			break
		}
	}
	var parts partCount
	if v, ok := f.Get("messages"); ok {
		parts.items(v)
	}
	if v, ok := f.Get("input"); ok {
		parts.items(v)
	}
	b.Tokens += parts.media * mediaPartTokens
	b.Unbounded = b.Unbounded || parts.unbounded
	return b
}

// TokensFor is the estimate on model m: at most its context window.
func (b Bound) TokensFor(m *catalog.Model) int64 {
	tokens, unbounded := b.Tokens, b.Unbounded
	if n, ok := b.Of(m); ok {
		tokens, unbounded = n.Tokens, n.Unbounded
	}
	if c := m.ContextLength; c > 0 && (unbounded || tokens > c) {
		return c
	}
	return tokens
}

// partCount counts the parts of a prompt whose tokens its bytes do not
// bound.
type partCount struct {
	media     int64
	unbounded bool
}

// items counts the parts of chat messages or Responses input items,
// reading each item's keys in one pass. The walk skips a text's bytes
// eight at a time; gjson's iteration parsed every string it passed,
// most of a long prompt's cost at admission.
func (c *partCount) items(list gjson.Result) {
	if !list.IsArray() {
		return
	}
	raw := list.Raw
	doc := jsonpeek.ViewBytes(raw)
	jsonpeek.EachElement(doc, 0, func(start int) (int, bool) {
		if doc[start] != '{' {
			return jsonpeek.SkipValue(doc, start), true
		}
		var typ string
		end, _ := jsonpeek.WalkObject(doc, start, func(keyStart, keyEnd int, escaped bool, vs, ve int) bool {
			switch jsonpeek.MemberKey(raw, keyStart, keyEnd, escaped) {
			case "type":
				typ = gjson.Parse(raw[vs:ve]).Str
			case "content", "output": // a message's parts, a tool output's
				c.parts(raw[vs:ve])
			case "audio":
				// A chat assistant message's earlier audio answer, by id.
				c.unbounded = c.unbounded || raw[vs:ve] != "null"
			}
			return true
		})
		c.item(typ)
		return end, true
	})
}

// item counts a Responses input item of the type by what it carries
// itself (its parts are counted apart).
func (c *partCount) item(typ string) {
	switch typ {
	case "", "message", "function_call", "function_call_output", "reasoning",
		"custom_tool_call", "custom_tool_call_output":
		// Text and JSON in the body, or parts counted apart.
	case "computer_call_output":
		c.media++ // a screenshot
	default:
		// item_reference and the records of hosted tools: content the
		// body does not hold.
		c.unbounded = true
	}
}

// parts counts the parts of one message content or tool output, given as
// its JSON text; a string holds no parts.
func (c *partCount) parts(content string) {
	doc := jsonpeek.ViewBytes(content)
	jsonpeek.EachElement(doc, 0, func(start int) (int, bool) {
		if doc[start] != '{' {
			c.part("") // as gjson reads a part that is not an object
			return jsonpeek.SkipValue(doc, start), true
		}
		var typ, inner string
		end, _ := jsonpeek.WalkObject(doc, start, func(keyStart, keyEnd int, escaped bool, vs, ve int) bool {
			switch jsonpeek.MemberKey(content, keyStart, keyEnd, escaped) {
			case "type":
				typ = gjson.Parse(content[vs:ve]).Str
			case "content":
				inner = content[vs:ve]
			}
			return true
		})
		c.part(typ)
		if typ == "tool_result" {
			// A Messages tool result's own blocks (text, images).
			c.parts(inner)
		}
		return end, true
	})
}

// part counts one content part of the type.
func (c *partCount) part(typ string) {
	switch typ {
	case "text", "input_text", "output_text", "refusal", "summary_text", "reasoning_text",
		// Messages blocks whose text and JSON are in the body.
		"tool_use", "tool_result", "thinking", "redacted_thinking", "search_result":
	case "image_url", "input_image", "image", "input_audio", "audio":
		c.media++
	default:
		// file, input_file, video_url and types the gateway does not know.
		c.unbounded = true
	}
}
