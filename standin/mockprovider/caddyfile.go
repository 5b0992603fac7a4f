package mockprovider

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Directive is the Caddyfile directive of the mock provider. Its place in
// the handler order is set by package standin, after the tollgate
// pipeline, as an upstream's would be.
const Directive = "tollgate_mock_provider"

func init() {
	caddy.RegisterModule(new(Handler))
	httpcaddyfile.RegisterHandlerDirective(Directive, parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the mock upstream from Caddyfile tokens:
//
//	tollgate_mock_provider {
//	    latency       <duration>
//	    chunk_delay   <duration>
//	    prompt_tokens words|bytes|o200k_base|cl100k_base
//	    strict
//	    non_reasoning_models <prefix>...  # strict: refuse reasoning_effort for these models
//	    no_system_messages  # Messages mode: refuse system messages inside messages
//	}
//
// The block is optional.
func (m *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var dst *caddy.Duration
		switch d.Val() {
		case "prompt_tokens":
			if !d.AllArgs(&m.PromptTokens) {
				return d.ArgErr()
			}
			if m.PromptTokens == "" || !validPromptTokens(m.PromptTokens) {
				return d.Errf(`prompt_tokens must be "words", "bytes", "o200k_base" or "cl100k_base": %q`, m.PromptTokens)
			}
			continue
		case "strict":
			if d.NextArg() {
				return d.ArgErr()
			}
			m.Strict = true
			continue
		case "non_reasoning_models":
			m.NonReasoningModels = append(m.NonReasoningModels, d.RemainingArgs()...)
			if len(m.NonReasoningModels) == 0 {
				return d.ArgErr()
			}
			continue
		case "no_system_messages":
			if d.NextArg() {
				return d.ArgErr()
			}
			m.NoSystemMessages = true
			continue
		case "latency":
			dst = &m.Latency
		case "chunk_delay":
			dst = &m.ChunkDelay
		default:
			return d.Errf("unrecognized subdirective %q", d.Val())
		}
		name := d.Val()
		var val string
		if !d.AllArgs(&val) {
			return d.ArgErr()
		}
		dur, err := caddy.ParseDuration(val)
		if err != nil {
			return d.Errf("%s: %v", name, err)
		}
		if dur < 0 {
			return d.Errf("%s must not be negative: %s", name, val)
		}
		*dst = caddy.Duration(dur)
	}
	return nil
}
