package prompt

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"image"
	_ "image/gif" // image sizes of data: URLs, for the tile rule
	_ "image/jpeg"
	_ "image/png"
	"math"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// A model whose tokenizer is known (catalog.Model.Tokenizer) has its
// prompt counted as OpenAI bills a chat request (its cookbook's rules for
// gpt-4o and later):
//
//   - each message: 3 tokens, plus its role's and content's tokens, plus
//     1 and the name's tokens when it has a name; each tool call of an
//     assistant message: 3 tokens plus its function's name and arguments;
//     3 more tokens prime the reply;
//   - tools: each function 7 tokens, its "name:description", 3 for its
//     parameters, each property 3 and its "key:type:description" (an enum
//     -3, and 3 and the value's tokens per item; a nested schema its
//     JSON), and 12 to close;
//   - response_format (Responses: text.format) with a JSON schema: 8
//     tokens and the schema's JSON;
//   - images: 85 tokens at detail "low"; at "high" or "auto" with a size
//     the gateway can read (a data: URL), OpenAI's tile rule (fit in
//     2048×2048, the short side at most 768, 85 + 170 per 512-pixel
//     tile); otherwise, and for audio, media_part_tokens.
//
// Parts the body does not hold (files, stored prompts...) leave the
// prompt bounded only by the context window, as with the byte bound.
const (
	tokensPerMessage   = 3
	tokensPerName      = 1
	ReplyPrimingTokens = 3
	funcInitTokens     = 7
	funcParamsTokens   = 3
	propKeyTokens      = 3
	enumInitTokens     = -3
	enumItemTokens     = 3
	funcEndTokens      = 12
	schemaTokens       = 8
	imageBaseTokens    = 85
	imageTileTokens    = 170
)

// Counter counts one request's prompt with one encoding.
type Counter struct {
	Enc       *tokenizer.Encoding
	MediaPart int64
	Tokens    int64
	Unbounded bool
	// ctx stops the counting when the request ends; the count is then
	// not to be used.
	Ctx context.Context
	// limit stops the counting once the count passes it (0: never): a
	// prompt larger than every context window it could go to is refused
	// whatever its exact count. partial says the count stopped, a lower
	// bound.
	Limit   int64
	Partial bool
}

func (c *Counter) text(s string) {
	if c.Limit > 0 && c.Tokens > c.Limit {
		c.Partial = c.Partial || s != ""
		return
	}
	left := 0
	if c.Limit > 0 {
		left = int(min(c.Limit-c.Tokens, math.MaxInt32))
	}
	n, err := c.Enc.CountUpTo(c.Ctx, s, left)
	c.Tokens += int64(n)
	c.Partial = c.Partial || errors.Is(err, tokenizer.ErrOverLimit)
}

// CountChat counts a chat completions body.
func CountChat(enc *tokenizer.Encoding, body []byte, mediaPart int64) (int64, bool) {
	c := Counter{Enc: enc, MediaPart: mediaPart, Tokens: ReplyPrimingTokens, Ctx: context.Background()}
	c.ChatBody(body)
	return c.Tokens, c.Unbounded
}

// ChatBody counts a chat completions body into c.
func (c *Counter) ChatBody(body []byte) {
	// One pass over the top-level members (a Get each would scan the
	// body once per field).
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "messages":
			eachOf(v, c.Message)
		case "tools", "functions":
			c.tools(v)
		case "response_format":
			c.schema(v.Get("json_schema"))
		case "prediction":
			// Predicted output the provider reads with the prompt.
			c.content(v.Get("content"))
		}
		return true
	})
}

// eachOf calls fn with each element of an array; nothing for another
// value (gjson's ForEach would call it once with the value itself).
func eachOf(list gjson.Result, fn func(gjson.Result)) {
	if !list.IsArray() {
		return
	}
	list.ForEach(func(_, v gjson.Result) bool {
		fn(v)
		return true
	})
}

// CountResponses counts a Responses body: instructions and a string
// input as messages, function calls and their outputs as tool calls and
// tool messages.
func CountResponses(enc *tokenizer.Encoding, body []byte, mediaPart int64) (int64, bool) {
	c := Counter{Enc: enc, MediaPart: mediaPart, Tokens: ReplyPrimingTokens, Ctx: context.Background()}
	c.ResponsesBody(body)
	return c.Tokens, c.Unbounded
}

// ResponsesBody counts a Responses body into c.
func (c *Counter) ResponsesBody(body []byte) {
	doc := gjson.ParseBytes(body)
	if ins := doc.Get("instructions"); ins.Type == gjson.String {
		c.Tokens += tokensPerMessage
		c.text("system")
		c.text(ins.Str)
	}
	input := doc.Get("input")
	if input.Type == gjson.String {
		c.Tokens += tokensPerMessage
		c.text("user")
		c.text(input.Str)
	}
	eachOf(input, func(it gjson.Result) {
		switch it.Get("type").Str {
		case "", "message":
			c.Message(it)
		case "function_call", "custom_tool_call":
			c.Tokens += tokensPerMessage
			c.text(it.Get("name").Str)
			c.text(it.Get("arguments").Str)
			c.text(it.Get("input").Str)
		case "function_call_output", "custom_tool_call_output":
			c.Tokens += tokensPerMessage
			c.text("tool")
			c.content(it.Get("output"))
		default:
			// Reasoning and other records: their JSON bounds their text.
			c.Tokens += tokensPerMessage
			c.text(it.Raw)
		}
	})
	c.tools(doc.Get("tools"))
	if f := doc.Get("text.format"); f.Get("type").Str == "json_schema" {
		c.schema(f)
	}
}

// Message counts one chat message (or Responses message item), reading
// its members in one pass.
func (c *Counter) Message(m gjson.Result) {
	c.Tokens += tokensPerMessage
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			c.text(v.Str)
		case "content":
			c.content(v)
		case "name":
			if v.Type == gjson.String {
				c.Tokens += tokensPerName
				c.text(v.Str)
			}
		case "tool_calls":
			eachOf(v, func(call gjson.Result) {
				c.Tokens += tokensPerMessage
				fn := call.Get("function")
				c.text(fn.Get("name").Str)
				c.text(fn.Get("arguments").Str)
			})
		case "function_call": // the legacy form
			if v.IsObject() {
				c.Tokens += tokensPerMessage
				c.text(v.Get("name").Str)
				c.text(v.Get("arguments").Str)
			}
		case "refusal", "reasoning":
			// Text the model reads back, as the content filters see it.
			if v.Type == gjson.String {
				c.text(v.Str)
			}
		case "reasoning_details":
			// Their JSON bounds their text, as Responses reasoning items'.
			c.text(v.Raw)
		case "audio":
			if v.Type != gjson.Null {
				c.Unbounded = true // an earlier audio answer, by id
			}
		}
		return true
	})
}

// content counts a message's content: a string, or parts.
func (c *Counter) content(v gjson.Result) {
	if v.Type == gjson.String {
		c.text(v.Str)
		return
	}
	eachOf(v, func(p gjson.Result) {
		if p.Type == gjson.String {
			c.text(p.Str)
			return
		}
		switch typ := p.Get("type").Str; typ {
		case "text", "input_text", "output_text":
			c.text(p.Get("text").Str)
		case "refusal":
			c.text(p.Get("refusal").Str)
		case "image_url":
			u := p.Get("image_url")
			if u.Type == gjson.String { // some clients send the URL alone
				c.Tokens += c.image(u.Str, "")
			} else {
				c.Tokens += c.image(u.Get("url").Str, u.Get("detail").Str)
			}
		case "input_image":
			c.Tokens += c.image(p.Get("image_url").Str, p.Get("detail").Str)
		case "input_audio", "audio":
			c.Tokens += c.MediaPart
		default:
			// file, input_file, video and unknown parts: content the body
			// does not hold.
			c.Unbounded = true
		}
	})
}

// image counts an image part by OpenAI's rule when its detail and size
// are known, else as media_part_tokens.
func (c *Counter) image(url, detail string) int64 {
	if detail == "low" {
		return imageBaseTokens
	}
	w, h, ok := dataURLImageSize(url)
	if !ok {
		return c.MediaPart
	}
	return imageTiles(w, h)
}

// imageTiles is OpenAI's high-detail cost of a w×h image.
func imageTiles(w, h int) int64 {
	fw, fh := float64(w), float64(h)
	if m := max(fw, fh); m > 2048 {
		fw, fh = fw*2048/m, fh*2048/m
	}
	if m := min(fw, fh); m > 768 {
		fw, fh = fw*768/m, fh*768/m
	}
	tiles := int64((int(fw)+511)/512) * int64((int(fh)+511)/512)
	return imageBaseTokens + imageTileTokens*tiles
}

// dataURLImageSize reads the size of a PNG, JPEG or GIF image given as a
// base64 data: URL, decoding only its header.
func dataURLImageSize(url string) (w, h int, ok bool) {
	rest, found := strings.CutPrefix(url, "data:")
	if !found {
		return 0, 0, false
	}
	_, data, found := strings.Cut(rest, ";base64,")
	if !found {
		return 0, 0, false
	}
	// A JPEG's size can follow its metadata: read up to 64 KiB.
	data = data[:min(len(data), 64<<10)]
	data = data[:len(data)/4*4]
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return 0, 0, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(raw))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return 0, 0, false
	}
	return cfg.Width, cfg.Height, true
}

// tools counts function definitions: chat's {type, function:{...}},
// the legacy functions list, and Responses' flat {type, name, ...}.
func (c *Counter) tools(list gjson.Result) {
	funcs := false
	eachOf(list, func(t gjson.Result) {
		fn := t
		if f := t.Get("function"); f.IsObject() {
			fn = f
		}
		if fn.Get("name").Type != gjson.String {
			// A hosted tool (web search...): its JSON bounds its text.
			c.text(t.Raw)
			return
		}
		funcs = true
		c.Tokens += funcInitTokens
		c.text(fn.Get("name").Str + ":" + fn.Get("description").Str)
		params := fn.Get("parameters")
		if !params.Exists() {
			return
		}
		c.Tokens += funcParamsTokens
		params.Get("properties").ForEach(func(k, p gjson.Result) bool {
			c.Tokens += propKeyTokens
			c.text(k.Str + ":" + p.Get("type").Str + ":" + p.Get("description").Str)
			if e := p.Get("enum"); e.IsArray() {
				c.Tokens += enumInitTokens
				eachOf(e, func(v gjson.Result) {
					c.Tokens += enumItemTokens
					c.text(v.String())
				})
			}
			for _, nested := range []string{"properties", "items", "anyOf", "oneOf", "allOf", "$defs"} {
				if n := p.Get(nested); n.Exists() {
					c.text(n.Raw)
				}
			}
			return true
		})
	})
	if funcs {
		c.Tokens += funcEndTokens
	}
}

// schema counts a structured-output format: its JSON schema.
func (c *Counter) schema(f gjson.Result) {
	if s := f.Get("schema"); s.Exists() {
		c.Tokens += schemaTokens
		c.text(f.Get("name").Str)
		c.text(s.Raw)
	}
}
