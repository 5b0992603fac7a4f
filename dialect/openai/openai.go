// Package openai is the OpenAI dialect: Chat Completions and Responses,
// spoken by OpenAI and by most compatible servers. Azure OpenAI is a
// variant with its own URLs and key header (Azure).
package openai

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

func init() {
	caddy.RegisterModule(Module{})
	caddy.RegisterModule(AzureModule{})
}

// Style is the dialect's name in a provider block: OpenAI's Chat
// Completions (and Responses) API, and the default style.
const Style = "openai"

// Parameters are the request parameters an OpenAI-style provider
// takes by default (the gateway's own fields aside). reasoning is not
// one: most chat models refuse reasoning_effort (OpenAI's gpt-4o and
// gpt-4.1 with a 400), so the provider of a reasoning model (o3, gpt-5)
// lists it in its supported_parameters. Without it, a Messages request's
// thinking is not sent as reasoning_effort.
var Parameters = []string{
	"max_tokens", "temperature", "top_p", "stop", "frequency_penalty", "presence_penalty",
	"seed", "logit_bias", "logprobs", "top_logprobs", "response_format", "structured_outputs",
	"tools", "tool_choice", "parallel_tool_calls", "include_reasoning",
}

// Dialect is one OpenAI-style provider.
type Dialect struct {
	chatOnly bool // api chat: Responses requests are translated
	// chatLimit is the output-limit field of chat requests: the
	// provider's max_tokens_field, else max_completion_tokens on OpenAI's
	// own API (its reasoning models refuse max_tokens) and max_tokens
	// elsewhere, as every compatible server reads it.
	chatLimit string
	// rename: the provider takes only max_completion_tokens, so a
	// client's max_tokens is renamed.
	rename bool
}

// New is the dialect of one provider block.
func New(o dialect.Options) (dialect.Dialect, error) {
	return newDialect(o), nil
}

// Module is the openai dialect as a guest module: it has no options of
// its own (api and max_tokens_field are the provider block's).
type Module struct{}

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: dialect.Namespace + "." + Style, New: func() caddy.Module { return new(Module) }}
}

// UnmarshalCaddyfile reads `openai`, which takes no options.
func (*Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return dialect.UnmarshalOptions(d, Style, nil)
}

// New implements dialect.Module.
func (*Module) New(o dialect.Options) (dialect.Dialect, error) { return New(o) }

var (
	_ dialect.Module        = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)

func newDialect(o dialect.Options) *Dialect {
	d := &Dialect{chatOnly: o.API == dialect.APIChat, chatLimit: "max_tokens"}
	switch {
	case o.MaxTokensField != "":
		d.chatLimit = o.MaxTokensField
	case o.Name == "openai" || o.Host == "api.openai.com":
		d.chatLimit = "max_completion_tokens"
	}
	d.rename = o.MaxTokensField == "max_completion_tokens"
	return d
}

// Name implements dialect.Dialect.
func (d *Dialect) Name() string { return Style }

// Native implements dialect.Dialect: every route but Messages, and
// Responses unless the provider speaks only chat.
func (d *Dialect) Native(k dialect.Kind) bool {
	switch k {
	case dialect.Messages:
		return false
	case dialect.Responses:
		return !d.chatOnly
	}
	return true
}

// Serves implements dialect.Dialect.
func (d *Dialect) Serves(dialect.Kind) bool { return true }

// Adapt implements dialect.Dialect: the public effort max becomes
// OpenAI's highest, xhigh, a chat body's assistant messages lose the
// reasoning another provider's answer gave them, and a chat body's
// max_tokens becomes max_completion_tokens for a provider that takes only
// that.
func (d *Dialect) Adapt(k dialect.Kind, body []byte, _ int64) ([]byte, error) {
	body = WithOwnEffort(k, body)
	if k != dialect.Chat {
		return body, nil
	}
	body = WithoutReasoning(body)
	if !d.rename {
		return body, nil
	}
	return WithMaxCompletionTokens(body), nil
}

// reasoningMembers are the members of a chat answer's message that carry
// its thinking (the public API's): a client sends them back with the
// message, and OpenAI's chat API, which defines neither, refuses them.
var reasoningMembers = [...]string{"reasoning", "reasoning_details"}

// WithoutReasoning is a chat body whose messages have no reasoning or
// reasoning_details member; a body without any is returned as it is.
func WithoutReasoning(body []byte) []byte {
	if !bytes.Contains(body, []byte(`"reasoning"`)) && !bytes.Contains(body, []byte(`"reasoning_details"`)) {
		return body
	}
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return body
	}
	changed := false
	out := make([]byte, 0, len(msgs.Raw))
	out = append(out, '[')
	first := true
	rawjson.EachElem(msgs.Raw, func(m string) bool {
		if !first {
			out = append(out, ',')
		}
		first = false
		if !hasReasoning(m) {
			out = append(out, m...)
			return true
		}
		changed = true
		out = append(out, '{')
		sep := false
		rawjson.EachMember(m, func(key, val string) bool {
			if key == reasoningMembers[0] || key == reasoningMembers[1] {
				return true
			}
			if sep {
				out = append(out, ',')
			}
			sep = true
			out = append(out, '"')
			out = append(out, key...)
			out = append(out, `":`...)
			out = append(out, val...)
			return true
		})
		out = append(out, '}')
		return true
	})
	if !changed {
		return body
	}
	out = append(out, ']')
	b, err := sjson.SetRawBytes(body, "messages", out)
	if err != nil {
		return body
	}
	return b
}

// hasReasoning reports whether the message m (JSON text) has a member of
// reasoningMembers.
func hasReasoning(m string) bool {
	found := false
	rawjson.EachMember(m, func(key, _ string) bool {
		found = key == reasoningMembers[0] || key == reasoningMembers[1]
		return !found
	})
	return found
}

// WithOwnEffort is body with a reasoning effort of max (chat's
// reasoning_effort, Responses' reasoning.effort) as xhigh, the highest
// effort OpenAI takes; other bodies are returned as they are.
func WithOwnEffort(k dialect.Kind, body []byte) []byte {
	if !bytes.Contains(body, []byte(`"max"`)) {
		return body
	}
	path := "reasoning_effort"
	switch k {
	case dialect.Chat:
	case dialect.Responses:
		path = "reasoning.effort"
	default:
		return body
	}
	if gjson.GetBytes(body, path).Str != "max" {
		return body
	}
	if out, err := sjson.SetBytes(body, path, "xhigh"); err == nil {
		return out
	}
	return body
}

// FromChat implements dialect.Dialect: chat is native.
func (d *Dialect) FromChat(chat []byte, _ int64) ([]byte, error) { return chat, nil }

// ToChat implements dialect.Dialect: chat is native.
func (d *Dialect) ToChat(http.ResponseWriter, string, int) dialect.AnswerReader { return nil }

// URI implements dialect.Dialect: the client's path, or a translated
// request's chat completions path.
func (d *Dialect) URI(k dialect.Kind, native bool, uri string, _ bool) string {
	switch {
	case native:
		return uri
	case k == dialect.Messages:
		// Anthropic's query parameters (Claude Code's beta=true) mean
		// nothing to a chat provider; Caddy's rewrite clears the query
		// for a URI ending in "?".
		return "/chat/completions?"
	}
	return "/chat/completions" + strings.TrimPrefix(uri, "/responses")
}

// SetHeaders implements dialect.Dialect.
func (d *Dialect) SetHeaders(h http.Header) { dialect.ClearCredentials(h) }

// SetKey implements dialect.Dialect: KeyEntry's header.
func (d *Dialect) SetKey(h http.Header, key string) {
	name, value := d.KeyEntry(key)
	h[name] = []string{value}
}

// KeyEntry implements dialect.KeyEntry: a bearer token.
func (d *Dialect) KeyEntry(key string) (string, string) { return "Authorization", "Bearer " + key }

// OutputLimitField implements dialect.Dialect: max_output_tokens for
// Responses, the chat field for chat completions, and max_tokens for a
// request translated to chat.
func (d *Dialect) OutputLimitField(k dialect.Kind, native bool) string {
	switch {
	case k == dialect.Responses && native:
		return "max_output_tokens"
	case k == dialect.Chat:
		return d.chatLimit
	}
	return "max_tokens"
}

// RequiresOutputLimit implements dialect.Dialect.
func (d *Dialect) RequiresOutputLimit() bool { return false }

// Parameters implements dialect.Dialect.
func (d *Dialect) Parameters() []string { return Parameters }

// SearchFamily implements dialect.Dialect: OpenAI's search models are
// known by the model id's vendor, not by the dialect.
func (d *Dialect) SearchFamily() string { return "" }

// Failure implements dialect.Dialect.
func (d *Dialect) Failure(_ int, _ http.Header, body []byte) (any, string) {
	return dialect.ErrorBody(body)
}

// WithMaxCompletionTokens renames a chat body's max_tokens to
// max_completion_tokens (a max_completion_tokens the body has wins).
func WithMaxCompletionTokens(body []byte) []byte {
	if !bytes.Contains(body, []byte(`"max_tokens"`)) {
		return body
	}
	mt := gjson.GetBytes(body, "max_tokens")
	if !mt.Exists() {
		return body
	}
	out, err := sjson.DeleteBytes(body, "max_tokens")
	if err != nil {
		return body
	}
	if !gjson.GetBytes(out, "max_completion_tokens").Exists() {
		if out, err = sjson.SetRawBytes(out, "max_completion_tokens", []byte(mt.Raw)); err != nil {
			return body
		}
	}
	return out
}
