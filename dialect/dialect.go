// Package dialect is the seam between the gateway and a provider's API:
// one Dialect per API a provider block's `style` names. The gateway
// normalizes every request into the public API's form (chat completions,
// Responses or Messages, the route Kind) and meters every answer in the
// chat completions form; a dialect says which of those forms its provider
// takes as they are, builds the upstream request (body, URI, headers,
// credential, output-limit field) and reads the provider's answers and
// errors back into the gateway's form.
//
// A dialect is a Caddy guest module in namespace tollgate.dialects
// (Module): a new one is a package that registers its module from its
// init, built in with one blank import (or xcaddy's --with).
package dialect

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Kind is an inference route, the API the client speaks.
type Kind string

// The inference routes.
const (
	Chat      Kind = "chat"      // POST /chat/completions
	Responses Kind = "responses" // POST /responses
	Messages  Kind = "messages"  // POST /messages (Anthropic's Messages API)
	Other     Kind = "other"     // any other inference path (/completions, /embeddings)
)

// Path is the route's path below /api/v1 ("" for Other).
func (k Kind) Path() string {
	switch k {
	case Chat:
		return "/chat/completions"
	case Responses, Messages:
		return "/" + string(k)
	}
	return ""
}

// Dialect is one provider's API, for one provider block (its options are
// the dialect's own). Every method is safe for concurrent use and, on the
// hot path, allocation-free unless it rewrites the body.
type Dialect interface {
	// Name is the provider block's style that selects the dialect.
	Name() string

	// Native reports whether a request of route k reaches the provider
	// in the client's API (normalized, then Adapt). A request the
	// dialect does not take natively is translated to chat completions
	// (a Responses or Messages request), then sent through FromChat
	// unless chat is native.
	Native(k Kind) bool
	// Serves reports whether the provider serves route k at all,
	// natively or from chat completions.
	Serves(k Kind) bool

	// Adapt fits a natively sent body of route k to the provider (a
	// renamed output-limit field, a required one: maxTokens is the
	// limit to send when the request sets none).
	Adapt(k Kind, body []byte, maxTokens int64) ([]byte, error)
	// FromChat builds the provider's request body from a chat
	// completions body, for a dialect whose chat is not native.
	FromChat(chat []byte, maxTokens int64) ([]byte, error)
	// ToChat returns a writer that hands w the provider's answers to
	// FromChat requests (plain or streamed) as chat completions, with
	// their usage (cache and reasoning tokens); nil when chat is native.
	ToChat(w http.ResponseWriter, model string, limit int) AnswerReader

	// URI is the request URI below the provider's base path for a
	// request of route k, sent natively or (native false) as translated
	// from chat; uri is the client's path below /api/v1 with its query.
	// stream says whether the client asked for a stream.
	URI(k Kind, native bool, uri string, stream bool) string
	// SetHeaders sets the dialect's request headers but the credential,
	// and removes every credential header, so that a fallback never
	// carries another provider's. Names are canonical.
	SetHeaders(h http.Header)
	// SetKey adds the credential to the copy of the request sent.
	SetKey(h http.Header, key string)

	// OutputLimitField is the body member that bounds the output of a
	// request of route k as the provider receives it (translated: chat's).
	OutputLimitField(k Kind, native bool) string
	// RequiresOutputLimit: the provider refuses a request without one,
	// so the gateway always sends one (and bounds the charge by it).
	RequiresOutputLimit() bool
	// Parameters are the request parameters the provider takes by
	// default (a provider's supported_parameters override them).
	Parameters() []string
	// SearchFamily is the family of the native web search the dialect
	// has ("anthropic"), "" when it has none of its own.
	SearchFamily() string

	// Failure reads an error answer: the provider's own code (nil:
	// none) and message ("" : none).
	Failure(status int, h http.Header, body []byte) (code any, message string)
}

// AnswerReader is the writer ToChat returns. Finish runs once the
// provider's answer has ended; OutputProduced is the model output the
// provider produced (the charge's basis without usage).
type AnswerReader interface {
	http.ResponseWriter
	Finish()
	OutputProduced() int
}

// CacheTTLReporter is an AnswerReader whose provider says how long its
// cache writes are kept, which the chat usage does not carry: the meter
// asks it once the answer has ended.
type CacheTTLReporter interface {
	// CacheWrites1h is, of the chat usage's cache_write_tokens, those
	// kept for an hour; unknown: the usage held a cache count of a form
	// the reader does not read (metered as an anomaly, never an error).
	CacheWrites1h() (tokens int64, unknown bool)
}

// Options are a provider block's settings a dialect reads.
type Options struct {
	Name string // the provider's name
	Host string // its host (and port)
	// Model is the provider's model id, for a dialect that names it in
	// the URL rather than the body.
	Model string
	// API: APIResponses (or empty) or APIChat, for OpenAI-style dialects.
	API string
	// MaxTokensField: "max_tokens" (or empty) or "max_completion_tokens".
	MaxTokensField string
	// SystemMessages: SystemPass (or empty) or SystemFold, for Anthropic's.
	SystemMessages string
	// Settings are the dialect's own options (e.g. a deployment), for New;
	// a Module's New reads its own fields instead.
	Settings map[string]string
}

// Values of Options.API, for OpenAI-style dialects.
const (
	// APIResponses: the provider speaks Chat Completions and Responses;
	// both routes pass through.
	APIResponses = "responses"
	// APIChat: the provider speaks only Chat Completions; the gateway
	// serves /responses by translating the request and the answer.
	APIChat = "chat"
)

// Values of Options.SystemMessages: what an Anthropic-style provider gets
// of the system messages inside a Messages request's messages.
const (
	// SystemPass: the messages as they are, with the client's
	// mid-conversation-system beta.
	SystemPass = "pass"
	// SystemFold: their text is appended to the top-level system, in
	// order, for a provider that does not take that beta.
	SystemFold = "fold"
)

// Namespace is the Caddy module namespace of the dialects: style X is
// the guest module tollgate.dialects.X, which a provider's config names
// with its inline key "style".
const Namespace = "tollgate.dialects"

// Module is a dialect as a Caddy guest module. Its fields are the
// dialect's own provider options, under their JSON names, which are
// also their Caddyfile names (its UnmarshalCaddyfile reads them from
// `style X { ... }` or the provider block); its Validate, if any,
// checks them. New builds the dialect of one provider block.
type Module interface {
	caddy.Module
	New(Options) (Dialect, error)
}

// Load is the dialect module raw configures ({"style": X, options...}),
// checked by its Validate: the form a provider's config carries, loaded
// without a caddy.Context (the Caddyfile adapter's check, a models
// file). The app loads it with ctx.LoadModule instead.
func Load(raw json.RawMessage) (Module, error) {
	var head struct {
		Style string `json:"style"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, err
	}
	info, err := moduleInfo(head.Style)
	if err != nil {
		return nil, err
	}
	var opts map[string]json.RawMessage
	if err := json.Unmarshal(raw, &opts); err != nil {
		return nil, err
	}
	delete(opts, "style")
	return build(info, head.Style, opts)
}

// moduleInfo is the module of style.
func moduleInfo(style string) (caddy.ModuleInfo, error) {
	info, err := caddy.GetModule(Namespace + "." + style)
	if err != nil {
		return info, fmt.Errorf("style: unsupported %q (%s)", style, choices())
	}
	return info, nil
}

// build makes style's module with opts, each one of its options.
func build(info caddy.ModuleInfo, style string, opts map[string]json.RawMessage) (Module, error) {
	mod := info.New()
	m, ok := mod.(Module)
	if !ok {
		return nil, fmt.Errorf("module %s is not a dialect (%T)", info.ID, mod)
	}
	names := optionNames(mod)
	for name := range opts {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("%s: not an option of style %s", name, style)
		}
	}
	if len(opts) > 0 {
		b, err := json.Marshal(opts)
		if err != nil {
			return nil, err
		}
		if err := caddy.StrictUnmarshalJSON(b, mod); err != nil {
			return nil, fmt.Errorf("style %s: %v", style, err)
		}
	}
	if v, ok := mod.(caddy.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// New builds the dialect style names for a provider, o.Settings its
// options.
func New(style string, o Options) (Dialect, error) {
	info, err := moduleInfo(style)
	if err != nil {
		return nil, err
	}
	opts := make(map[string]json.RawMessage, len(o.Settings))
	for name, v := range o.Settings {
		opts[name], _ = json.Marshal(v)
	}
	m, err := build(info, style, opts)
	if err != nil {
		return nil, err
	}
	return m.New(o)
}

// choices lists the styles for an error: "openai" (the default) first,
// then the others, e.g. "openai", "anthropic" or "azure".
func choices() string {
	var q []string
	for _, n := range Names() {
		if n == "openai" {
			q = append([]string{`"openai"`}, q...)
		} else {
			q = append(q, `"`+n+`"`)
		}
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// Names are the registered styles, sorted.
func Names() []string {
	var names []string
	for _, info := range caddy.GetModules(Namespace) {
		names = append(names, info.ID.Name())
	}
	sort.Strings(names)
	return names
}

// Settings are the provider options of every registered dialect, sorted.
func Settings() []string {
	var all []string
	for _, info := range caddy.GetModules(Namespace) {
		for _, o := range optionNames(info.New()) {
			if !slices.Contains(all, o) {
				all = append(all, o)
			}
		}
	}
	sort.Strings(all)
	return all
}

// SettingsOf are the provider options of style.
func SettingsOf(style string) []string {
	info, err := caddy.GetModule(Namespace + "." + style)
	if err != nil {
		return nil
	}
	return optionNames(info.New())
}

// optionNames are the JSON names of a module's options: its struct's
// exported fields.
func optionNames(mod caddy.Module) []string {
	t := reflect.TypeOf(mod)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// UnmarshalOptions reads a dialect module's Caddyfile, `<style> { name
// value ... }`, into its options of one argument each, named in opts;
// any other is refused as not an option of style.
func UnmarshalOptions(d *caddyfile.Dispenser, style string, opts map[string]*string) error {
	d.Next() // the style
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		dst, ok := opts[d.Val()]
		if !ok {
			return d.Errf("%s: not an option of style %s", d.Val(), style)
		}
		if !d.AllArgs(dst) {
			return d.ArgErr()
		}
	}
	return nil
}

// KeyRequirer is implemented by a dialect whose provider block must name
// an api_key (a provider of another dialect may be keyless, serving
// BYOK credentials only).
type KeyRequirer interface {
	RequiresKey() bool
}

// KeyEntry is implemented by a dialect whose SetKey(h, key) is
// h[name] = []string{value}, name and value depending on the key alone:
// the entry can be made once for a key used on every request.
type KeyEntry interface {
	KeyEntry(key string) (name, value string)
}

// Signer is implemented by a dialect whose credential signs the whole
// request (AWS Signature V4) instead of being a header: the transport
// calls Sign on the copy of the request it sends, with its body, in place
// of SetKey.
type Signer interface {
	Sign(req *http.Request, body []byte, key string) error
}

// Embedder is implemented by a dialect that serves POST /embeddings in
// its provider's own API: the public embeddings request translated into
// it, and the answer back in the public form, which the meter reads as
// an OpenAI-style provider's.
type Embedder interface {
	// EmbeddingsURI is the request URI below the provider's base path.
	EmbeddingsURI() string
	// FromEmbeddings builds the provider's request from the public
	// embeddings body; an input the provider does not take is an error
	// naming the client's field (its 400).
	FromEmbeddings(body []byte) ([]byte, error)
	// ToEmbeddings returns a writer that hands w the provider's answer to
	// the client's request (its encoding_format) as the public embeddings
	// answer for model; promptTokens is the gateway's count of the input,
	// the usage of a provider whose answer has no token count.
	ToEmbeddings(w http.ResponseWriter, request []byte, model string, promptTokens int64, limit int) AnswerReader
}
