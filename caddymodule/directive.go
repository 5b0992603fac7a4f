package caddymodule

import (
	"fmt"

	"strings"

	"encoding/json"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/tollgate-dev/caddy-tollgate/handlers"

	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
)

// replacedDirectives are the handler directives the tollgate directive
// replaced; a Caddyfile that still uses one fails to load.
var replacedDirectives = []string{"tollgate_auth", "tollgate_admin", "tollgate_websearch", "tollgate_router", "tollgate_meter"}

func replacedDirective(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	h.Next()
	return nil, h.Errf("%s was replaced by the tollgate directive, which runs authentication, administrative routes, web search, routing and metering in one pipeline in front of reverse_proxy: replace tollgate_auth, tollgate_admin, tollgate_websearch, tollgate_router, tollgate_meter and their reverse_proxy with one `tollgate` (their options are its sub-options)", h.Val())
}

// parseTollgate expands the site directive
//
//	tollgate {
//		per_ip  <requests> <window> [<burst>]
//		per_key <requests> <window> [<burst>]
//		max_body_bytes     <n>
//		media_part_tokens  <n>
//		anthropic_betas    <beta>...
//		load_balancing     price|ordered
//		sticky_idle        <duration>|off
//		response_cache {
//			<the response cache's options>
//		}
//		plugins {
//			<plugin module name> [...]
//		}
//		<any reverse_proxy subdirective>
//	}
//
// into the gateway's whole pipeline, as php_fastcgi expands into its
// routes: the tollgate handler, with inside it Caddy's reverse_proxy to the
// provider the handler chose for the attempt (one for HTTPS providers, with
// TLS to the provider's host name, and one for plain HTTP), streaming
// without buffering. It also adds an error route that writes the gateway's
// errors as the public API's JSON body. Subdirectives that are not the handler's
// go to both reverse_proxy handlers, e.g. `transport http {
// response_header_timeout 30s }`.
func parseTollgate(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
	h.Next() // directive name
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	h.Prev()
	tg := new(handlers.Tollgate)
	d := h.NewFromNextSegment()
	// A typo of the handler's options, such as max_body: reverse_proxy,
	// which gets what the handler does not know, refuses it without a
	// suggestion; this error says what was meant.
	var typo error
	var typoName string
	for d.Next() {
		for d.NextBlock(0) {
			if d.Nesting() != 1 {
				continue
			}
			name := d.Val()
			if name == "plugins" || name == "response_cache" {
				// The handler's; reverse_proxy never sees the block.
				seg := d.NextSegment()
				pd := caddyfile.NewDispenser(seg)
				pd.Next()
				unmarshal := tg.UnmarshalPlugins
				if name == "response_cache" {
					unmarshal = tg.UnmarshalResponseCache
				}
				if err := unmarshal(pd); err != nil {
					return nil, err
				}
				d.DeleteN(len(seg))
				continue
			}
			file, line := d.File(), d.Line()
			args := d.RemainingArgs()
			known, err := tg.SetOption(name, args)
			if err != nil {
				return nil, d.Err(err.Error())
			}
			if known {
				d.DeleteN(len(args) + 1)
			} else if s := suggest.Nearest(name, handlers.TollgateOptions); s != "" && typo == nil {
				typoName = name
				typo = fmt.Errorf("unrecognized tollgate subdirective %q; did you mean %s?, at %s:%d", name, s, file, line)
			}
		}
	}
	httpsProxy, err := providerProxy(h, d, true)
	if err != nil {
		if typo != nil && strings.Contains(err.Error(), "unrecognized subdirective "+typoName+",") {
			return nil, typo
		}
		return nil, err
	}
	httpProxy, err := providerProxy(h, d, false)
	if err != nil {
		return nil, err
	}
	tg.HTTPSProxyRaw = caddyconfig.JSONModuleObject(httpsProxy, "handler", "reverse_proxy", nil)
	tg.HTTPProxyRaw = caddyconfig.JSONModuleObject(httpProxy, "handler", "reverse_proxy", nil)
	errorRoute := &caddyhttp.Subroute{Routes: caddyhttp.RouteList{{
		MatcherSetsRaw: []caddy.ModuleMap{{"vars": h.JSON(handlers.ErrorRouteMatcher())}},
		HandlersRaw:    []json.RawMessage{caddyconfig.JSONModuleObject(handlers.ErrorWriter{}, "handler", "tollgate_error", nil)},
	}}}
	return append(h.NewRoute(nil, tg), httpcaddyfile.ConfigValue{Class: "error_route", Value: errorRoute}), nil
}

// providerProxy is a reverse_proxy of the pipeline
// (handlers.ConfigureProviderProxy), from the subdirectives in d that are
// not the tollgate handler's.
func providerProxy(h httpcaddyfile.Helper, d *caddyfile.Dispenser, https bool) (*reverseproxy.Handler, error) {
	d.Reset()
	d.Next() // directive name
	rp := new(reverseproxy.Handler)
	if err := rp.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	if err := rp.FinalizeUnmarshalCaddyfile(h); err != nil {
		return nil, err
	}
	if err := handlers.ConfigureProviderProxy(rp, https); err != nil {
		return nil, d.Errf("tollgate: %v", err)
	}
	return rp, nil
}
