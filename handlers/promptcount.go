package handlers

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	_ "image/gif" // image sizes of data: URLs, for the tile rule
	_ "image/jpeg"
	_ "image/png"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
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
	replyPrimingTokens = 3
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

// promptCounter counts one request's prompt with one encoding.
type promptCounter struct {
	enc       *tokenizer.Encoding
	mediaPart int64
	tokens    int64
	unbounded bool
	// ctx stops the counting when the request ends; the count is then
	// not to be used.
	ctx context.Context
	// limit stops the counting once the count passes it (0: never): a
	// prompt larger than every context window it could go to is refused
	// whatever its exact count. partial says the count stopped, a lower
	// bound.
	limit   int64
	partial bool
}

func (c *promptCounter) text(s string) {
	if c.limit > 0 && c.tokens > c.limit {
		c.partial = c.partial || s != ""
		return
	}
	left := 0
	if c.limit > 0 {
		left = int(min(c.limit-c.tokens, math.MaxInt32))
	}
	n, err := c.enc.CountUpTo(c.ctx, s, left)
	c.tokens += int64(n)
	c.partial = c.partial || errors.Is(err, tokenizer.ErrOverLimit)
}

// countChatBody counts a chat completions body.
func countChatBody(enc *tokenizer.Encoding, body []byte, mediaPart int64) (int64, bool) {
	c := promptCounter{enc: enc, mediaPart: mediaPart, tokens: replyPrimingTokens, ctx: context.Background()}
	c.chatBody(body)
	return c.tokens, c.unbounded
}

// chatBody counts a chat completions body into c.
func (c *promptCounter) chatBody(body []byte) {
	// One pass over the top-level members (a Get each would scan the
	// body once per field).
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "messages":
			eachOf(v, c.message)
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

// countResponsesBody counts a Responses body: instructions and a string
// input as messages, function calls and their outputs as tool calls and
// tool messages.
func countResponsesBody(enc *tokenizer.Encoding, body []byte, mediaPart int64) (int64, bool) {
	c := promptCounter{enc: enc, mediaPart: mediaPart, tokens: replyPrimingTokens, ctx: context.Background()}
	c.responsesBody(body)
	return c.tokens, c.unbounded
}

// responsesBody counts a Responses body into c.
func (c *promptCounter) responsesBody(body []byte) {
	doc := gjson.ParseBytes(body)
	if ins := doc.Get("instructions"); ins.Type == gjson.String {
		c.tokens += tokensPerMessage
		c.text("system")
		c.text(ins.Str)
	}
	input := doc.Get("input")
	if input.Type == gjson.String {
		c.tokens += tokensPerMessage
		c.text("user")
		c.text(input.Str)
	}
	eachOf(input, func(it gjson.Result) {
		switch it.Get("type").Str {
		case "", "message":
			c.message(it)
		case "function_call", "custom_tool_call":
			c.tokens += tokensPerMessage
			c.text(it.Get("name").Str)
			c.text(it.Get("arguments").Str)
			c.text(it.Get("input").Str)
		case "function_call_output", "custom_tool_call_output":
			c.tokens += tokensPerMessage
			c.text("tool")
			c.content(it.Get("output"))
		default:
			// Reasoning and other records: their JSON bounds their text.
			c.tokens += tokensPerMessage
			c.text(it.Raw)
		}
	})
	c.tools(doc.Get("tools"))
	if f := doc.Get("text.format"); f.Get("type").Str == "json_schema" {
		c.schema(f)
	}
}

// message counts one chat message (or Responses message item), reading
// its members in one pass.
func (c *promptCounter) message(m gjson.Result) {
	c.tokens += tokensPerMessage
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			c.text(v.Str)
		case "content":
			c.content(v)
		case "name":
			if v.Type == gjson.String {
				c.tokens += tokensPerName
				c.text(v.Str)
			}
		case "tool_calls":
			eachOf(v, func(call gjson.Result) {
				c.tokens += tokensPerMessage
				fn := call.Get("function")
				c.text(fn.Get("name").Str)
				c.text(fn.Get("arguments").Str)
			})
		case "function_call": // the legacy form
			if v.IsObject() {
				c.tokens += tokensPerMessage
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
				c.unbounded = true // an earlier audio answer, by id
			}
		}
		return true
	})
}

// content counts a message's content: a string, or parts.
func (c *promptCounter) content(v gjson.Result) {
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
				c.tokens += c.image(u.Str, "")
			} else {
				c.tokens += c.image(u.Get("url").Str, u.Get("detail").Str)
			}
		case "input_image":
			c.tokens += c.image(p.Get("image_url").Str, p.Get("detail").Str)
		case "input_audio", "audio":
			c.tokens += c.mediaPart
		default:
			// file, input_file, video and unknown parts: content the body
			// does not hold.
			c.unbounded = true
		}
	})
}

// image counts an image part by OpenAI's rule when its detail and size
// are known, else as media_part_tokens.
func (c *promptCounter) image(url, detail string) int64 {
	if detail == "low" {
		return imageBaseTokens
	}
	w, h, ok := dataURLImageSize(url)
	if !ok {
		return c.mediaPart
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
func (c *promptCounter) tools(list gjson.Result) {
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
		c.tokens += funcInitTokens
		c.text(fn.Get("name").Str + ":" + fn.Get("description").Str)
		params := fn.Get("parameters")
		if !params.Exists() {
			return
		}
		c.tokens += funcParamsTokens
		params.Get("properties").ForEach(func(k, p gjson.Result) bool {
			c.tokens += propKeyTokens
			c.text(k.Str + ":" + p.Get("type").Str + ":" + p.Get("description").Str)
			if e := p.Get("enum"); e.IsArray() {
				c.tokens += enumInitTokens
				eachOf(e, func(v gjson.Result) {
					c.tokens += enumItemTokens
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
		c.tokens += funcEndTokens
	}
}

// schema counts a structured-output format: its JSON schema.
func (c *promptCounter) schema(f gjson.Result) {
	if s := f.Get("schema"); s.Exists() {
		c.tokens += schemaTokens
		c.text(f.Get("name").Str)
		c.text(s.Raw)
	}
}

// Forms of a request body that a provider receives, counted apart.
const (
	formChat      = iota // a chat body: the request's own
	formChatBody         // the request translated into a chat body
	formResponses        // a Responses body: the request's own
)

// countPrompt counts the prompt with the tokenizer of each attempt's
// model, on the body as that attempt's provider receives it, and drops
// the attempts whose model's context window the prompt alone exceeds;
// none left is a 400 naming the count and the limit. Attempts whose
// model has no tokenizer keep the byte bound. The counting stops when
// ctx ends (the client left).
func (rt *Route) countPrompt(ctx context.Context, mediaPart int64) *apierror.Error {
	type counted struct {
		enc  *tokenizer.Encoding
		form int
	}
	var done [4]counted
	seen := done[:0]
	var over *Attempt
	var overBy int64
	fits := func(a *Attempt) bool {
		c, ok := rt.prompt.count(a.Model)
		return !ok || c.unbounded || a.Model.ContextLength <= 0 || c.tokens <= a.Model.ContextLength
	}
	for i := range rt.Attempts {
		a := &rt.Attempts[i]
		enc := a.Model.Tokenizer
		form, body := rt.countedBody(a)
		if enc == nil || body == nil {
			continue
		}
		if key := (counted{enc, form}); !slices.Contains(seen, key) {
			seen = append(seen, key)
			c := promptCounter{enc: enc, mediaPart: mediaPart, tokens: replyPrimingTokens, ctx: ctx,
				limit: rt.windowOf(enc, form)}
			if form == formResponses {
				c.responsesBody(body)
			} else {
				c.chatBody(body)
			}
			if ctx.Err() != nil {
				return apierror.New(499, "Client closed the request")
			}
			// A previous response, a stored prompt...: as the byte bound.
			unbounded := c.unbounded || rt.prompt.unbounded
			rt.prompt.add(promptCount{enc: enc, tokens: c.tokens, unbounded: unbounded, partial: c.partial})
		}
		if over == nil && !fits(a) {
			c, _ := rt.prompt.count(a.Model)
			over, overBy = a, c.tokens
		}
	}
	if over == nil {
		return nil // the common case: no attempt dropped, nothing copied
	}
	kept := slices.DeleteFunc(slices.Clone(rt.Attempts), func(a Attempt) bool { return !fits(&a) })
	if len(kept) == 0 {
		field := "messages"
		if rt.Kind == dialect.Responses {
			field = "input"
		}
		has := strconv.FormatInt(overBy, 10)
		if c, _ := rt.prompt.count(over.Model); c.partial {
			has = "over " + has // counted no further than needed
		}
		return apierror.BadRequest(fmt.Sprintf("%s: the prompt has %s tokens, more than the %d of model %s's context_length",
			field, has, over.Model.ContextLength, over.Model.ID))
	}
	rt.Attempts = kept
	return nil
}

// windowOf is where counting the prompt with enc on the body of form may
// stop: past the largest context window of the attempts counted so, the
// count drops them all, however large it is. 0 (no stop) when one of
// them states no window.
func (rt *Route) windowOf(enc *tokenizer.Encoding, form int) int64 {
	var most int64
	for i := range rt.Attempts {
		a := &rt.Attempts[i]
		if f, body := rt.countedBody(a); a.Model.Tokenizer != enc || f != form || body == nil {
			continue
		}
		if a.Model.ContextLength <= 0 {
			return 0
		}
		most = max(most, a.Model.ContextLength)
	}
	return most
}

// countedBody is the body a's provider receives, in the form counted;
// nil when the attempt is not counted (a Messages request at an
// Anthropic-style provider, a route without messages).
func (rt *Route) countedBody(a *Attempt) (int, []byte) {
	switch rt.Kind {
	case dialect.Chat:
		return formChat, rt.body
	case dialect.Responses:
		if a.Provider.ChatOnly() && rt.chatBody != nil {
			return formChatBody, rt.chatBody
		}
		return formResponses, rt.body
	case dialect.Messages:
		if !a.Provider.D().Native(dialect.Messages) && rt.chatBody != nil {
			return formChatBody, rt.chatBody
		}
	}
	return 0, nil
}
