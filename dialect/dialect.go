// Package dialect is the seam between the gateway and a provider's API:
// one Dialect per API a provider block's `style` names. The gateway
// normalizes every request into the public API's form (chat completions,
// Responses or Messages, the route Kind) and meters every answer in the
// chat completions form; a dialect says which of those forms its provider
// takes as they are, builds the upstream request (body, URI, headers,
// credential, output-limit field) and reads the provider's answers and
// errors back into the gateway's form.
//
// A new dialect is a package that calls Register from its init, and one
// blank import in package handlers, beside the other dialects'.
package dialect

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
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
	// Settings are the dialect's own options (e.g. a deployment).
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

// Constructor builds a dialect for one provider block, or says which
// option is missing or wrong.
type Constructor func(Options) (Dialect, error)

var (
	mu       sync.RWMutex
	registry = map[string]Constructor{}
	settings = map[string][]string{}
)

// Register makes a dialect available as style name, with the names of
// its own provider options (Options.Settings). It panics on a duplicate.
func Register(name string, c Constructor, options ...string) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic("dialect: " + name + " registered twice")
	}
	registry[name] = c
	settings[name] = options
}

// New builds the dialect style names for a provider.
func New(style string, o Options) (Dialect, error) {
	mu.RLock()
	c, ok := registry[style]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("style: unsupported %q (%s)", style, choices())
	}
	for name := range o.Settings {
		if !slices.Contains(SettingsOf(style), name) {
			return nil, fmt.Errorf("%s: not an option of style %s", name, style)
		}
	}
	return c(o)
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
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Settings are the provider options of every registered dialect, sorted.
func Settings() []string {
	mu.RLock()
	defer mu.RUnlock()
	var all []string
	for _, s := range settings {
		for _, o := range s {
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
	mu.RLock()
	defer mu.RUnlock()
	return settings[style]
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
