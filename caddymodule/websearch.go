package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/handlers"

	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
)

// parseWebSearchOption parses the web_search block of the tollgate option:
//
//	web_search {
//		default_engine <name>
//		native_price   <credits per result>
//		engine <exa|firecrawl|parallel|searxng> {
//			base_url         <url>
//			api_key          <key or {env.VAR}>
//			username         <user>
//			price_per_result <credits>
//			max_results      <1..25>
//			timeout          <duration>
//		}
//	}
func parseWebSearchOption(d *caddyfile.Dispenser) (*handlers.WebSearchConfig, error) {
	cfg := &handlers.WebSearchConfig{}
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
			var name string
			if !d.NextArg() {
				return nil, d.ArgErr()
			}
			name = d.Val()
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			switch name {
			case "exa", "firecrawl", "parallel", "searxng":
			default:
				return nil, d.Errf("engine: expected exa, firecrawl, parallel or searxng, got %q", name)
			}
			ec := new(handlers.SearchEngineConfig)
			for inner := d.Nesting(); d.NextBlock(inner); {
				opt := d.Val()
				switch opt {
				case "base_url":
					if !d.AllArgs(&ec.BaseURL) {
						return nil, d.ArgErr()
					}
				case "api_key":
					if !d.AllArgs(&ec.APIKey) {
						return nil, d.ArgErr()
					}
				case "username":
					if !d.AllArgs(&ec.Username) {
						return nil, d.ArgErr()
					}
				case "price_per_result":
					if !d.AllArgs(&ec.PricePerResult) {
						return nil, d.ArgErr()
					}
				case "max_results":
					var s string
					if !d.AllArgs(&s) {
						return nil, d.ArgErr()
					}
					n, err := strconv.Atoi(s)
					if err != nil || n < 1 || n > 25 {
						return nil, d.Errf("max_results: expected an integer from 1 to 25, got %q", s)
					}
					ec.MaxResults = n
				case "timeout":
					dur, err := durationArg(d)
					if err != nil {
						return nil, err
					}
					ec.Timeout = caddy.Duration(dur)
				default:
					return nil, suggest.UnknownOption(d, "web_search engine", []string{"base_url", "api_key", "username", "price_per_result", "max_results", "timeout"})
				}
			}
			if cfg.Engines == nil {
				cfg.Engines = map[string]*handlers.SearchEngineConfig{}
			}
			cfg.Engines[name] = ec
		default:
			return nil, suggest.UnknownOption(d, "web_search", []string{"default_engine", "native_price", "engine"})
		}
	}
	return cfg, nil
}
