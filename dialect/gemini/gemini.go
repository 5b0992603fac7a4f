// Package gemini is Google's Gemini API as a provider dialect (style
// gemini): generateContent and streamGenerateContent (SSE), on Google AI
// Studio with an API key, or on Vertex AI with a service account's OAuth
// tokens. Every route reaches it through chat completions.
package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// Style is the dialect's name in provider blocks.
const Style = "gemini"

func init() { caddy.RegisterModule(Module{}) }

// Auth modes (the auth option).
const (
	// AuthAPIKey: Google AI Studio's x-goog-api-key (the default).
	AuthAPIKey = "api_key"
	// AuthServiceAccount: Vertex AI; the api_key is a service account's
	// JSON key, exchanged for OAuth access tokens.
	AuthServiceAccount = "service_account"
)

// Parameters are the chat parameters Gemini takes.
var Parameters = []string{
	"max_tokens", "temperature", "top_p", "top_k", "stop", "seed", "frequency_penalty", "presence_penalty",
	"response_format", "structured_outputs", "tools", "tool_choice", "reasoning", "include_reasoning",
}

// Dialect is one Gemini provider.
type Dialect struct {
	model     string // the provider's model id, in the URL
	vertex    bool
	generate  string // URI of generateContent
	streamGen string // URI of streamGenerateContent?alt=sse
	embed     string // URI of batchEmbedContents
	// levels: the model (Gemini 3) takes a thinking level rather than
	// a budget.
	levels bool
	tokens sync.Map
}

// New is the dialect of one provider block, its auth in o.Settings.
func New(o dialect.Options) (dialect.Dialect, error) {
	m := &Module{Auth: o.Settings["auth"]}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m.New(o)
}

// Module is the gemini dialect as a guest module.
type Module struct {
	// Auth is how the api_key authenticates: api_key (the default, Google
	// AI Studio's key) or service_account (Vertex AI: a service
	// account's JSON key).
	Auth string `json:"auth,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: dialect.Namespace + "." + Style, New: func() caddy.Module { return new(Module) }}
}

// UnmarshalCaddyfile reads `gemini { auth api_key|service_account }`.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return dialect.UnmarshalOptions(d, Style, map[string]*string{"auth": &m.Auth})
}

// Validate checks the auth mode.
func (m *Module) Validate() error {
	switch m.Auth {
	case "", AuthAPIKey, AuthServiceAccount:
		return nil
	}
	return fmt.Errorf("auth: expected %s or %s, got %q", AuthAPIKey, AuthServiceAccount, m.Auth)
}

// New implements dialect.Module.
func (m *Module) New(o dialect.Options) (dialect.Dialect, error) {
	d := &Dialect{model: o.Model, vertex: m.Auth == AuthServiceAccount, levels: strings.HasPrefix(o.Model, "gemini-3")}
	if o.Model != "" {
		m := url.PathEscape(o.Model)
		d.generate = "/models/" + m + ":generateContent"
		d.streamGen = "/models/" + m + ":streamGenerateContent?alt=sse"
		d.embed = "/models/" + m + ":batchEmbedContents"
	}
	return d, nil
}

var (
	_ dialect.Module        = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)

// Name implements dialect.Dialect.
func (d *Dialect) Name() string { return Style }

// Native implements dialect.Dialect: no route; chat completions are
// translated (FromChat), Responses and Messages through chat.
func (d *Dialect) Native(dialect.Kind) bool { return false }

// Serves implements dialect.Dialect: the generation routes.
func (d *Dialect) Serves(k dialect.Kind) bool { return k != dialect.Other }

// Adapt implements dialect.Dialect (never native).
func (d *Dialect) Adapt(_ dialect.Kind, body []byte, _ int64) ([]byte, error) { return body, nil }

// FromChat implements dialect.Dialect.
func (d *Dialect) FromChat(chat []byte, maxTokens int64) ([]byte, error) {
	return fromChat(chat, 0, d.levels)
}

// ToChat implements dialect.Dialect.
func (d *Dialect) ToChat(w http.ResponseWriter, model string, limit int) dialect.AnswerReader {
	return newToChat(w, model, limit)
}

// URI implements dialect.Dialect: the model's generateContent, or
// streamGenerateContent with SSE for a stream.
func (d *Dialect) URI(_ dialect.Kind, _ bool, _ string, stream bool) string {
	if stream {
		return d.streamGen
	}
	return d.generate
}

// SetHeaders implements dialect.Dialect.
func (d *Dialect) SetHeaders(h http.Header) { dialect.ClearCredentials(h) }

// SetKey implements dialect.Dialect: x-goog-api-key on AI Studio; on
// Vertex AI, a bearer access token of the service account key (cached
// and refreshed by oauth2; a key that yields no token sends none, and
// the provider's 401 falls back).
func (d *Dialect) SetKey(h http.Header, key string) {
	if !d.vertex {
		h["X-Goog-Api-Key"] = []string{key}
		return
	}
	if tok, err := d.token(key); err == nil {
		h["Authorization"] = []string{"Bearer " + tok}
	}
}

// token is an access token of the service account JSON key.
func (d *Dialect) token(key string) (string, error) {
	src, ok := d.tokens.Load(key)
	if !ok {
		creds, err := google.CredentialsFromJSONWithType(context.Background(), []byte(key), google.ServiceAccount,
			"https://www.googleapis.com/auth/cloud-platform")
		if err != nil {
			return "", err
		}
		src, _ = d.tokens.LoadOrStore(key, oauth2.ReuseTokenSource(nil, creds.TokenSource)) // the loaded or the stored source: the same credentials
	}
	tok, err := src.(oauth2.TokenSource).Token()
	if err != nil {
		return "", err
	}
	if tok.AccessToken == "" {
		return "", errors.New("gemini: empty access token")
	}
	return tok.AccessToken, nil
}

// OutputLimitField implements dialect.Dialect: the chat body's
// max_tokens, sent as generationConfig.maxOutputTokens.
func (d *Dialect) OutputLimitField(dialect.Kind, bool) string { return "max_tokens" }

// RequiresOutputLimit implements dialect.Dialect.
func (d *Dialect) RequiresOutputLimit() bool { return false }

// Parameters implements dialect.Dialect.
func (d *Dialect) Parameters() []string { return Parameters }

// SearchFamily implements dialect.Dialect: Google Search grounding is
// not used by the gateway's web search.
func (d *Dialect) SearchFamily() string { return "" }

// Failure implements dialect.Dialect: {"error":{"code","message","status"}};
// the status (RESOURCE_EXHAUSTED, ...) is the provider's code.
func (d *Dialect) Failure(_ int, _ http.Header, body []byte) (any, string) {
	code, msg := dialect.ErrorBody(body)
	if s := gjson.GetBytes(body, "error.status").Str; s != "" {
		code = s
	}
	return code, msg
}
