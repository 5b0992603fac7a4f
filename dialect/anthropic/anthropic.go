// Package anthropic is Anthropic's Messages API as a provider dialect
// (style anthropic): Messages requests pass natively, chat completions
// (and Responses, through chat) are translated by package messages.
package anthropic

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/messages"
)

func init() { caddy.RegisterModule(Module{}) }

// Style is the dialect's name in a provider block: Anthropic's Messages
// API, at <base_url>/v1/messages; chat completions and Responses requests
// are translated.
const Style = "anthropic"

// Parameters are those the Messages API takes, directly or by the
// gateway's translation of a chat request.
var Parameters = []string{
	"max_tokens", "temperature", "top_p", "top_k", "stop", "tools", "tool_choice",
	"reasoning", "include_reasoning",
}

// Dialect is one Anthropic-style provider.
type Dialect struct {
	// foldSystem: the provider takes system messages only as the
	// top-level system (system_messages fold).
	foldSystem bool
}

// New is the dialect of one provider block.
func New(o dialect.Options) (dialect.Dialect, error) {
	return &Dialect{foldSystem: o.SystemMessages == dialect.SystemFold}, nil
}

// Module is the anthropic dialect as a guest module: it has no options
// of its own (system_messages is the provider block's).
type Module struct{}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: dialect.Namespace + "." + Style, New: func() caddy.Module { return new(Module) }}
}

// UnmarshalCaddyfile reads `anthropic`, which takes no options.
func (*Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return dialect.UnmarshalOptions(d, Style, nil)
}

// New implements dialect.Module.
func (*Module) New(o dialect.Options) (dialect.Dialect, error) { return New(o) }

var (
	_ dialect.Module        = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)

// Name implements dialect.Dialect.
func (d *Dialect) Name() string { return Style }

// Native implements dialect.Dialect: Messages only.
func (d *Dialect) Native(k dialect.Kind) bool { return k == dialect.Messages }

// Serves implements dialect.Dialect: the generation routes; not
// /completions or /embeddings.
func (d *Dialect) Serves(k dialect.Kind) bool { return k != dialect.Other }

// Adapt implements dialect.Dialect: a Messages request is sent as it is
// but for the max_tokens Anthropic requires, without a tool_choice when it
// has no tools, and its system messages
// folded for a provider that takes only the top-level system.
func (d *Dialect) Adapt(_ dialect.Kind, body []byte, maxTokens int64) ([]byte, error) {
	if f := gjson.GetManyBytes(body, "tool_choice", "tools"); f[0].Exists() && len(f[1].Array()) == 0 {
		// Without tools it means nothing, and Anthropic refuses it.
		body, _ = sjson.DeleteBytes(body, "tool_choice") // body was read as JSON: deleting a member cannot fail
	}
	body, err := messages.WithMaxTokens(body, maxTokens)
	if err == nil && d.foldSystem {
		body, err = messages.FoldSystem(body)
	}
	return body, err
}

// FromChat implements dialect.Dialect (messages.ChatToAnthropic).
func (d *Dialect) FromChat(chat []byte, maxTokens int64) ([]byte, error) {
	return messages.ChatToAnthropic(chat, maxTokens)
}

// FoldsSystem reports whether the provider takes system messages only as
// the top-level system, so that the mid-conversation-system beta is not
// sent to it.
func (d *Dialect) FoldsSystem() bool { return d.foldSystem }

// WithExtra adds members (JSON text without braces) of the client's
// request that the chat body cannot carry (top_k, a top-level
// cache_control) to a Messages body made by FromChat; top_k not when it
// enables thinking, which refuses it.
func WithExtra(body []byte, members string) []byte {
	if members == "" {
		return body
	}
	out := dialect.WithMembers(body, members)
	if strings.Contains(members, `"top_k":`) && gjson.GetBytes(body, "thinking").Exists() {
		// Anthropic refuses top_k with extended thinking; the public API
		// ignores a parameter a provider lacks.
		out, _ = sjson.DeleteBytes(out, "top_k")
	}
	return out
}

// ToChat implements dialect.Dialect (messages.AnthropicToChat).
func (d *Dialect) ToChat(w http.ResponseWriter, model string, limit int) dialect.AnswerReader {
	aw := messages.NewAnthropicToChat(w, model)
	aw.Limit = limit
	return reader{aw}
}

// reader is the translation as a dialect.AnswerReader.
type reader struct{ *messages.AnthropicToChat }

func (r reader) OutputProduced() int { return r.Produced }

// URI implements dialect.Dialect: every request goes to the Messages
// endpoint, without the client's query.
func (d *Dialect) URI(dialect.Kind, bool, string, bool) string { return messages.Path }

// SetHeaders implements dialect.Dialect: anthropic-version.
func (d *Dialect) SetHeaders(h http.Header) {
	dialect.ClearCredentials(h)
	h["Anthropic-Version"] = []string{messages.Version}
}

// SetKey implements dialect.Dialect: KeyEntry's header.
func (d *Dialect) SetKey(h http.Header, key string) {
	name, value := d.KeyEntry(key)
	h[name] = []string{value}
}

// KeyEntry implements dialect.KeyEntry: x-api-key, never Authorization.
func (d *Dialect) KeyEntry(key string) (string, string) { return "X-Api-Key", key }

// OutputLimitField implements dialect.Dialect: max_tokens, in the
// Messages body and in the chat body it is made from.
func (d *Dialect) OutputLimitField(dialect.Kind, bool) string { return "max_tokens" }

// RequiresOutputLimit implements dialect.Dialect: the Messages API
// requires max_tokens.
func (d *Dialect) RequiresOutputLimit() bool { return true }

// Parameters implements dialect.Dialect.
func (d *Dialect) Parameters() []string { return Parameters }

// SearchFamily implements dialect.Dialect: Anthropic's web search tool.
func (d *Dialect) SearchFamily() string { return "anthropic" }

// Failure implements dialect.Dialect: {"type":"error","error":{type,message}}.
func (d *Dialect) Failure(_ int, _ http.Header, body []byte) (any, string) {
	return dialect.ErrorBody(body)
}
