package contentfilter

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// API is an inbound API: it decides where a request body's text is.
type API uint8

const (
	// AnyAPI is a body sent as it is to a path below an inference route:
	// every API's places are looked at.
	AnyAPI API = iota
	Chat
	Completions
	Responses
	Messages
	Embeddings
)

// Field is one piece of what a provider shows the model, found by Fields.
type Field struct {
	// Value is the JSON string (its Index is its place in the body); for
	// media, the JSON value holding it.
	Value gjson.Result
	// User says the text is the user's (scan_scope user_only): user
	// messages and items, a string input or prompt.
	User bool
	// Ident marks an identifier the request's meaning depends on (a tool
	// or function name, a message's name): it can be matched, not
	// rewritten.
	Ident bool
	// Media is what the gateway cannot read ("image", "audio", "video",
	// "file", "tokens"); "" for text.
	Media string
	// JSON marks a tool call's arguments: text that holds JSON, whose
	// escapes (\u0050) the model reads through.
	JSON bool

	path []seg
}

// seg is one step of a field's path: a member or (key "") an index.
type seg struct {
	key string
	idx int
}

// Path is the field's place, as an error names a field
// (messages[1].content[0].text). It is valid during the visit only.
func (f *Field) Path() string {
	var b strings.Builder
	for i, s := range f.path {
		switch {
		case s.key == "":
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.idx))
			b.WriteByte(']')
		case i > 0:
			b.WriteByte('.')
			fallthrough
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// Fields calls visit with every piece of text of body that a provider
// shows the model under api, and every piece of media it cannot read,
// in body order, until visit returns false (then Fields does too). The
// places, per API:
//
//   - chat: messages (string or parts, a part's text and refusal, the
//     assistant's reasoning, reasoning details' text and summary, tool
//     call arguments and names, tool results, the message's name),
//     tools and functions (names, descriptions, every string of the
//     parameters' schema), tool_choice, response_format (its JSON
//     schema's name, description and strings), prediction;
//   - completions: prompt (a string or strings; token ids are media of
//     kind "tokens"), suffix;
//   - Responses: instructions, input (a string or items: message parts,
//     function and custom tool calls and outputs, reasoning summaries
//     and text), tools, tool_choice, text.format, prompt.variables;
//   - Messages: system, messages (text, tool_use input and name,
//     tool_result content, thinking, document title, context and a text
//     or content source, search results), tools, tool_choice,
//     output_config.format;
//   - embeddings: input (strings, or parts with text).
//
// Ids, roles, types, signatures, encrypted reasoning, cache controls and
// URLs are not text the model reads as such and are not visited;
// images, audio, files (a PDF is text only once the gateway's parser has
// read it) and token ids are visited as media.
func Fields(api API, body []byte, visit func(*Field) bool) bool {
	w := walker{visit: visit}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return true
	}
	roots := apiRoots[api]
	ok := true
	root.ForEach(func(k, v gjson.Result) bool {
		r, in := roots[k.Str]
		if !in {
			return true
		}
		w.path = append(w.path[:0], seg{key: k.Str})
		switch r {
		case rootItems:
			ok = w.items(v)
		case rootUser:
			ok = w.walk(v, ctx{user: true})
		case rootTokens:
			ok = w.prompt(v)
		case rootIdent:
			// A mode ("auto", "required") is no text; a choice's names
			// are identifiers.
			if v.IsObject() {
				ok = w.walk(v, ctx{ident: true})
			}
		case rootFormat:
			if f := v.Get("format"); f.Exists() {
				w.path = append(w.path, seg{key: "format"})
				ok = w.walk(f, ctx{})
			}
		case rootPromptRef:
			// A stored prompt's variables fill its template.
			if vars := v.Get("variables"); vars.Exists() {
				w.path = append(w.path, seg{key: "variables"})
				ok = w.walk(vars, ctx{user: true, data: true})
			}
		default:
			ok = w.walk(v, ctx{})
		}
		return ok
	})
	return ok
}

// How a top-level member is read.
type rootKind uint8

const (
	rootOther     rootKind = iota // not the user's: system, instructions, tools
	rootUser                      // the user's text
	rootItems                     // messages or items, each the user's by its role
	rootTokens                    // the user's strings, or token ids
	rootPromptRef                 // a stored prompt reference
	rootIdent                     // a choice of tool: its strings are identifiers
	rootFormat                    // Responses text, Messages output_config: the format's schema
)

var chatRoots = map[string]rootKind{"messages": rootItems, "tools": rootOther, "functions": rootOther,
	"tool_choice": rootIdent, "function_call": rootIdent, "response_format": rootOther, "prediction": rootOther}

var apiRoots = [...]map[string]rootKind{
	Chat:        chatRoots,
	Completions: {"prompt": rootTokens, "suffix": rootUser},
	Responses: {"instructions": rootOther, "input": rootItems, "tools": rootOther, "tool_choice": rootIdent,
		"text": rootFormat, "prompt": rootPromptRef},
	Messages: {"system": rootOther, "messages": rootItems, "tools": rootOther, "tool_choice": rootIdent,
		"output_config": rootFormat},
	Embeddings: {"input": rootTokens},
	AnyAPI: {"messages": rootItems, "input": rootItems, "instructions": rootOther, "system": rootOther,
		"prompt": rootTokens, "suffix": rootUser, "tools": rootOther, "functions": rootOther,
		"tool_choice": rootIdent, "function_call": rootIdent, "response_format": rootOther,
		"prediction": rootOther, "text": rootFormat, "output_config": rootFormat},
}

// ctx is what a value's place says about it.
type ctx struct {
	user  bool
	ident bool
	// data: the value is arguments or values whose member names are the
	// caller's own (a tool call's input, a stored prompt's variables, a
	// schema's default): every string in it is text.
	data bool
}

type walker struct {
	visit func(*Field) bool
	path  []seg
	f     Field
	// members is a stack of the objects' members being walked (each
	// object's above its parent's).
	members []member
}

type member struct {
	key string
	val gjson.Result
}

func (w *walker) emit(v gjson.Result, c ctx, media string) bool {
	w.f = Field{Value: v, User: c.user, Ident: c.ident, Media: media, path: w.path}
	return w.visit(&w.f)
}

// items walks messages or items: a string (a Responses input) is the
// user's; each item's role decides whether it is.
func (w *walker) items(v gjson.Result) bool {
	if !v.IsArray() {
		return w.walk(v, ctx{user: true})
	}
	return w.each(v, func(el gjson.Result) bool {
		if !el.IsObject() {
			return w.prompt(el) // a list of inputs (embeddings under AnyAPI)
		}
		return w.walk(el, ctx{user: el.Get("role").Str == "user"})
	})
}

// prompt walks a completions prompt or embeddings input: strings, token
// ids (media: the gateway does not know the model's vocabulary), or
// lists of either or of parts.
func (w *walker) prompt(v gjson.Result) bool {
	switch {
	case v.Type == gjson.Number:
		return w.emit(v, ctx{user: true}, "tokens")
	case v.IsArray():
		if first := v.Get("0"); first.Type == gjson.Number {
			return w.emit(v, ctx{user: true}, "tokens")
		}
		return w.each(v, w.prompt)
	}
	return w.walk(v, ctx{user: true})
}

// each walks an array's elements with their indexes on the path.
func (w *walker) each(v gjson.Result, fn func(gjson.Result) bool) bool {
	ok, i, depth := true, 0, len(w.path)
	v.ForEach(func(_, el gjson.Result) bool {
		w.path = append(w.path[:depth], seg{idx: i})
		i++
		ok = fn(el)
		return ok
	})
	w.path = w.path[:depth]
	return ok
}

// walk visits the strings of v, and its media.
func (w *walker) walk(v gjson.Result, c ctx) bool {
	switch {
	case v.Type == gjson.String:
		return w.emit(v, c, "")
	case v.IsArray():
		return w.each(v, func(el gjson.Result) bool { return w.walk(el, c) })
	case v.IsObject():
		return w.object(v, c)
	}
	return true
}

// object walks an object's members by what their names say they hold.
func (w *walker) object(v gjson.Result, c ctx) bool {
	if c.data {
		ok, depth := true, len(w.path)
		v.ForEach(func(k, el gjson.Result) bool {
			w.path = append(w.path[:depth], seg{key: k.Str})
			ok = w.walk(el, c)
			return ok
		})
		w.path = w.path[:depth]
		return ok
	}
	// The members are read once: the type (its first "type", as Get
	// finds it) decides how the others are walked, and a second reading
	// would scan a long text again.
	base := len(w.members)
	typ, typed := "", false
	v.ForEach(func(k, el gjson.Result) bool {
		if !typed && k.Str == "type" {
			typ, typed = el.Str, true
		}
		w.members = append(w.members, member{k.Str, el})
		return true
	})
	top := len(w.members)
	defer func() { w.members = w.members[:base] }()
	if typ == "tool_result" || strings.HasSuffix(typ, "_output") {
		// A tool's output is not the user's, whoever's turn carries it.
		c.user = false
	}
	ok, depth := true, len(w.path)
	for m := base; m < top && ok; m++ {
		key, el := w.members[m].key, w.members[m].val
		w.path = append(w.path[:depth], seg{key: key})
		switch {
		case skipKeys[key]:
		case mediaKeys[key] != "":
			ok = w.emit(el, c, mediaKeys[key])
		case key == "source" && el.IsObject():
			ok = w.source(el, typ, c)
		case dataKeys[key] || (key == "input" && strings.HasSuffix(typ, "tool_use")):
			ok = w.walk(el, ctx{user: c.user, data: true})
		case key == "name" && el.Type == gjson.String:
			ok = w.emit(el, ctx{user: c.user, ident: true}, "")
		case key == "arguments" && el.Type == gjson.String:
			w.f = Field{Value: el, User: c.user, JSON: true, path: w.path}
			ok = w.visit(&w.f)
		case c.ident:
			ok = w.walk(el, c)
		default:
			ok = w.walk(el, c)
		}
	}
	w.path = w.path[:depth]
	return ok
}

// source walks a Messages image or document source: a text source's data
// and a content source's blocks are text; the rest is media.
func (w *walker) source(src gjson.Result, parent string, c ctx) bool {
	media := "file"
	if parent == "image" {
		media = "image"
	}
	depth := len(w.path)
	defer func() { w.path = w.path[:depth] }()
	switch src.Get("type").Str {
	case "text":
		w.path = append(w.path, seg{key: "data"})
		return w.walk(src.Get("data"), c)
	case "content":
		w.path = append(w.path, seg{key: "content"})
		return w.walk(src.Get("content"), c)
	}
	return w.emit(src, c, media)
}

// skipKeys are members that hold no text the model reads as such: ids,
// roles, types, statuses, modes, signatures and encrypted reasoning,
// cache controls, links, and the answer's annotations sent back.
var skipKeys = setOf("role", "type", "id", "call_id", "tool_call_id", "tool_use_id", "status",
	"cache_control", "signature", "encrypted_content", "data", "detail", "media_type",
	"mime_type", "model", "url", "annotations", "logprobs", "container_id", "citations", "audio", "mode")

// dataKeys are a schema's members holding values (any JSON, whose
// member names are the caller's).
var dataKeys = setOf("default", "examples", "const", "enum")

// mediaKeys are members holding media, by kind.
var mediaKeys = map[string]string{
	"image_url": "image", "input_audio": "audio", "audio_url": "audio", "video_url": "video", "input_video": "video",
	"file_data": "file", "file_id": "file", "file_url": "file",
}

// Texts lists the text of a body that a moderation provider is asked
// about: every text field Fields visits (identifiers, blank strings and
// media aside).
func Texts(api API, body []byte) []string {
	var out []string
	Fields(api, body, func(f *Field) bool {
		if f.Media == "" && !f.Ident && strings.TrimSpace(f.Value.Str) != "" {
			out = append(out, f.Value.Str)
		}
		return true
	})
	return out
}
