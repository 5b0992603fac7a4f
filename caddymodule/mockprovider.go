package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/handlers"
)

// parseMockProvider sets up the mock upstream from Caddyfile tokens:
//
//	tollgate_mock_provider {
//	    latency       <duration>
//	    chunk_delay   <duration>
//	    prompt_tokens words|bytes
//	}
//
// The block is optional.
func parseMockProvider(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h.Next() // consume directive name
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	m := new(handlers.MockProvider)
	for h.NextBlock(0) {
		var dst *caddy.Duration
		switch h.Val() {
		case "prompt_tokens":
			if !h.AllArgs(&m.PromptTokens) {
				return nil, h.ArgErr()
			}
			if m.PromptTokens != "words" && m.PromptTokens != "bytes" {
				return nil, h.Errf(`prompt_tokens must be "words" or "bytes": %q`, m.PromptTokens)
			}
			continue
		case "latency":
			dst = &m.Latency
		case "chunk_delay":
			dst = &m.ChunkDelay
		default:
			return nil, h.Errf("unrecognized subdirective %q", h.Val())
		}
		name := h.Val()
		var val string
		if !h.AllArgs(&val) {
			return nil, h.ArgErr()
		}
		d, err := caddy.ParseDuration(val)
		if err != nil {
			return nil, h.Errf("%s: %v", name, err)
		}
		if d < 0 {
			return nil, h.Errf("%s must not be negative: %s", name, val)
		}
		*dst = caddy.Duration(d)
	}
	return m, nil
}
