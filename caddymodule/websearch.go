package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/websearch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
)

// parseWebSearchOption parses the web_search block of the tollgate option:
//
//	web_search {
//		default_engine <name>
//		native_price   <credits per result>
//		engine <exa|firecrawl|parallel|searxng|another registered engine> {
//			base_url         <url>
//			api_key          <key or {env.VAR}>
//			username         <user>
//			price_per_result <credits>
//			max_results      <1..25>
//			timeout          <duration>
//		}
//	}
func parseWebSearchOption(d *caddyfile.Dispenser) (*websearch.Config, error) {
	cfg := &websearch.Config{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "default_engine":
			if !d.AllArgs(&cfg.DefaultEngine) {
				return nil, d.ArgErr()
			}
		case "native_price":
			if !d.AllArgs(&cfg.NativePrice) {
				return nil, d.ArgErr()
			}
		case "engine":
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			name := d.Val()
			info, err := engines.Registered(name)
			if err != nil {
				return nil, d.Errf("engine: expected %s, got %q", engines.Choices(), name)
			}
			// The engine's module reads its own block.
			d.Prev()
			seg := d.NextSegment()
			mod := info.New()
			unm, ok := mod.(caddyfile.Unmarshaler)
			if !ok {
				return nil, d.Errf("engine %s: its module %s reads no Caddyfile", name, info.ID)
			}
			if err := unm.UnmarshalCaddyfile(caddyfile.NewDispenser(seg[1:])); err != nil {
				return nil, err
			}
			if cfg.EnginesRaw == nil {
				cfg.EnginesRaw = caddy.ModuleMap{}
			}
			var warnings []caddyconfig.Warning
			cfg.EnginesRaw[name] = caddyconfig.JSON(mod, &warnings)
			if len(warnings) > 0 {
				return nil, d.Errf("engine %s: %s", name, warnings[0].Message)
			}
		default:
			return nil, suggest.UnknownOption(d, "web_search", []string{"default_engine", "native_price", "engine"})
		}
	}
	return cfg, nil
}
