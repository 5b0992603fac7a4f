package contentfilter

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/rawjson"
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
	// Rerank is POST /rerank: the query and the documents are the
	// user's text.
	Rerank
	// Images is POST /images: the prompt is the user's text.
	Images
	// Speech is POST /audio/speech: the input is the user's text.
	Speech
	// Transcriptions is POST /audio/transcriptions: no text, the audio
	// is not read.
	Transcriptions
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
	// The walk keeps nothing of body's text past the visit: it is read
	// in place, not copied.
	root := gjson.Parse(rawjson.View(body))
	if !root.IsObject() {
		return true
	}
	roots := apiRoots[api]
	ok := true
	w.forEach(root, func(k string, v gjson.Result) bool {
		r, in := roots[k]
		if !in {
			return true
		}
		w.path = append(w.path[:0], seg{key: k})
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
			if f := w.get(v, "format"); f.Exists() {
				w.path = append(w.path, seg{key: "format"})
				ok = w.walk(f, ctx{})
			}
		case rootPromptRef:
			// A stored prompt's variables fill its template.
			if vars := w.get(v, "variables"); vars.Exists() {
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
	Rerank:     {"query": rootUser, "documents": rootUser},
	Images:     {"prompt": rootUser},
	Speech:     {"input": rootUser},
	AnyAPI: {"messages": rootItems, "input": rootItems, "instructions": rootOther, "system": rootOther,
		"prompt": rootTokens, "suffix": rootUser, "tools": rootOther, "functions": rootOther,
		"tool_choice": rootIdent, "function_call": rootIdent, "response_format": rootOther,
		"prediction": rootOther, "text": rootFormat, "output_config": rootFormat},
	// The audio is not read.
	Transcriptions: {},
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
		// Its members read once for its role and its walk: a second
		// reading would scan a long text again.
		base, top, ok := w.read(el)
		if !ok {
			return w.walk(el, ctx{user: el.Get("role").Str == "user"})
		}
		defer func() { w.members = w.members[:base] }()
		role := ""
		for m := base; m < top; m++ {
			if w.members[m].key == "role" {
				role = w.members[m].val.Str
				break
			}
		}
		return w.objectMembers(base, top, ctx{user: role == "user"})
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
		if first := w.get(v, ""); first.Type == gjson.Number {
			return w.emit(v, ctx{user: true}, "tokens")
		}
		return w.each(v, w.prompt)
	}
	return w.walk(v, ctx{user: true})
}

// each walks an array's elements with their indexes on the path.
func (w *walker) each(v gjson.Result, fn func(gjson.Result) bool) bool {
	ok, i, depth := true, 0, len(w.path)
	w.forEach(v, func(_ string, el gjson.Result) bool {
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
		w.forEach(v, func(k string, el gjson.Result) bool {
			w.path = append(w.path[:depth], seg{key: k})
			ok = w.walk(el, c)
			return ok
		})
		w.path = w.path[:depth]
		return ok
	}
	// The members are read once: the type (its first "type", as Get
	// finds it) decides how the others are walked, and a second reading
	// would scan a long text again.
	base, top := w.readAll(v)
	defer func() { w.members = w.members[:base] }()
	return w.objectMembers(base, top, c)
}

// readAll puts v's members on w.members[base:top], read by gjson when
// v is malformed.
func (w *walker) readAll(v gjson.Result) (base, top int) {
	base, top, read := w.read(v)
	if !read {
		v.ForEach(func(k, el gjson.Result) bool {
			w.members = append(w.members, member{k.Str, el})
			return true
		})
		top = len(w.members)
	}
	return base, top
}

// objectMembers walks the members w.members[base:top] of an object.
func (w *walker) objectMembers(base, top int, c ctx) bool {
	typ := ""
	for m := base; m < top; m++ {
		if w.members[m].key == "type" {
			typ = w.members[m].val.Str
			break
		}
	}
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
	switch w.get(src, "type").Str {
	case "text":
		w.path = append(w.path, seg{key: "data"})
		return w.walk(w.get(src, "data"), c)
	case "content":
		w.path = append(w.path, seg{key: "content"})
		return w.walk(w.get(src, "content"), c)
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
			out = append(out, strings.Clone(f.Value.Str)) // not body's bytes
		}
		return true
	})
	return out
}

// forEach calls fn with the elements of v, an array, or its members
// (with their unescaped keys), in order until fn returns false, as
// gjson's ForEach does. They are read onto w.members first by
// appendMembers, which skips a string with strings.IndexByte: gjson
// reads a long string byte by byte once for each container around it. A
// container that is not well-formed JSON at its level is read by gjson,
// as it always was.
func (w *walker) forEach(v gjson.Result, fn func(key string, el gjson.Result) bool) {
	base, top, ok := w.read(v)
	if !ok {
		v.ForEach(func(k, el gjson.Result) bool { return fn(k.Str, el) })
		return
	}
	defer func() { w.members = w.members[:base] }()
	for m := base; m < top; m++ {
		if !fn(w.members[m].key, w.members[m].val) {
			return
		}
	}
}

// read puts v's elements or members on w.members[base:top]; ok is false
// (nothing put) when v is malformed.
func (w *walker) read(v gjson.Result) (base, top int, ok bool) {
	base = len(w.members)
	w.members, ok = appendMembers(w.members, v)
	if !ok {
		w.members = w.members[:base]
	}
	return base, len(w.members), ok
}

// get is v.Get(key) for an object, or (key "") v.Get("0") for an array:
// its first member key, or its first element.
func (w *walker) get(v gjson.Result, key string) gjson.Result {
	base, top, ok := w.read(v)
	if !ok {
		if key == "" {
			key = "0"
		}
		return v.Get(key)
	}
	defer func() { w.members = w.members[:base] }()
	for m := base; m < top; m++ {
		if w.members[m].key == key {
			return w.members[m].val
		}
	}
	return gjson.Result{}
}

// appendMembers appends to ms the elements of v, an array, or the
// members of v, an object, each value with its place (Index); ok is
// false when v is not an array or object that is well-formed at its own
// level (its strings and its values' bounds: what is inside a value that
// is a container is read when it is walked).
func appendMembers(ms []member, v gjson.Result) (_ []member, ok bool) {
	raw := v.Raw
	i := rawjson.SkipSpace(raw, 0)
	if i >= len(raw) || (raw[i] != '{' && raw[i] != '[') {
		return ms, false
	}
	obj := raw[i] == '{'
	closing := byte(']')
	if obj {
		closing = '}'
	}
	i = rawjson.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == closing {
		return ms, rawjson.SkipSpace(raw, i+1) == len(raw)
	}
	for {
		key := ""
		if obj {
			if i >= len(raw) || raw[i] != '"' {
				return ms, false
			}
			end := rawjson.SkipString(raw, i)
			if end < 0 {
				return ms, false
			}
			key = raw[i+1 : end-1]
			if strings.IndexByte(key, '\\') >= 0 {
				key = gjson.Parse(raw[i:end]).Str
			}
			i = rawjson.SkipSpace(raw, end)
			if i >= len(raw) || raw[i] != ':' {
				return ms, false
			}
			i = rawjson.SkipSpace(raw, i+1)
		}
		end := valueEnd(raw, i)
		if end < 0 {
			return ms, false
		}
		el := rawjson.Member(raw[i:end], true)
		el.Index = v.Index + i
		ms = append(ms, member{key, el})
		i = rawjson.SkipSpace(raw, end)
		switch {
		case i < len(raw) && raw[i] == ',':
			i = rawjson.SkipSpace(raw, i+1)
		case i < len(raw) && raw[i] == closing:
			return ms, rawjson.SkipSpace(raw, i+1) == len(raw)
		default:
			return ms, false
		}
	}
}

// valueEnd is the end of the JSON value at s[i], or -1 when it is not
// one: a string, a container (its brackets counted as gjson counts
// them, parentheses too), a number or a literal.
func valueEnd(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch c := s[i]; {
	case c == '"':
		return rawjson.SkipString(s, i)
	case c == '{' || c == '[':
		depth := 0
		for ; i < len(s); i++ {
			switch s[i] {
			case '"':
				if i = rawjson.SkipString(s, i); i < 0 {
					return -1
				}
				i--
			case '{', '[', '(':
				depth++
			case '}', ']', ')':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if strings.HasPrefix(s[i:], lit) {
				return i + len(lit)
			}
		}
		return -1
	case c == '-' || isDigit(c):
		j := i + 1
		for j < len(s) && (isDigit(s[j]) || s[j] == '.' || s[j] == 'e' || s[j] == 'E' || s[j] == '+' || s[j] == '-') {
			j++
		}
		return j
	}
	return -1
}
