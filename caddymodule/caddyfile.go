// Package caddymodule registers the tollgate Caddy modules, parses their
// Caddyfile syntax and holds the tollgate app.
package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/handlers"
	"github.com/tollgate-dev/caddy-tollgate/handlers/mockprovider"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// The directives are registered from this one init so that their order is
// the order of the request path: authenticate, serve the admin routes,
// route the inference request, hold and meter its cost, then reverse_proxy. Each
// "before reverse_proxy" lands right in front of it, after the earlier ones.
func init() {
	caddy.RegisterModule(new(handlers.Auth))
	caddy.RegisterModule(new(handlers.Admin))
	caddy.RegisterModule(new(handlers.WebSearch))
	caddy.RegisterModule(new(handlers.Router))
	caddy.RegisterModule(new(handlers.Meter))

	httpcaddyfile.RegisterGlobalOption("tollgate", parseGlobalOption)

	for _, d := range []struct {
		name  string
		parse httpcaddyfile.UnmarshalHandlerFunc
	}{
		{"tollgate_auth", parseAuth},
		{"tollgate_admin", parseAdmin},
		{"tollgate_websearch", parseWebSearch},
		{"tollgate_router", parseRouter},
		{"tollgate_meter", parseMeter},
	} {
		httpcaddyfile.RegisterHandlerDirective(d.name, d.parse)
		httpcaddyfile.RegisterDirectiveOrder(d.name, httpcaddyfile.Before, "reverse_proxy")
	}
	// The mock provider registers its own module and directive; it answers
	// after the pipeline, as the upstream it stands in for would.
	httpcaddyfile.RegisterDirectiveOrder(mockprovider.Directive, httpcaddyfile.Before, "reverse_proxy")
}

// parseAuth parses:
//
//	tollgate_auth {
//		per_ip  <requests> <window> [<burst>]
//		per_key <requests> <window> [<burst>]
//	}
func parseAuth(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	a := new(handlers.Auth)
	h.Next()
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	for h.NextBlock(0) {
		var dst **handlers.RateCeiling
		switch h.Val() {
		case "per_ip":
			dst = &a.PerIP
		case "per_key":
			dst = &a.PerKey
		default:
			return nil, h.Errf("unrecognized subdirective %q", h.Val())
		}
		c, err := rateCeilingArgs(h.Dispenser)
		if err != nil {
			return nil, err
		}
		*dst = c
	}
	return a, nil
}

// rateCeilingArgs reads `<requests> <window> [<burst>]`.
func rateCeilingArgs(d *caddyfile.Dispenser) (*handlers.RateCeiling, error) {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) < 2 || len(args) > 3 {
		return nil, d.Errf("%s: expected <requests> <window> [<burst>]", name)
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n <= 0 {
		return nil, d.Errf("%s: requests must be a positive integer, got %q", name, args[0])
	}
	win, err := caddy.ParseDuration(args[1])
	if err != nil || win <= 0 {
		return nil, d.Errf("%s: invalid window %q", name, args[1])
	}
	c := &handlers.RateCeiling{Requests: n, Window: caddy.Duration(win)}
	if len(args) == 3 {
		b, err := strconv.Atoi(args[2])
		if err != nil || b <= 0 {
			return nil, d.Errf("%s: burst must be a positive integer, got %q", name, args[2])
		}
		c.Burst = b
	}
	return c, nil
}

// parseAdmin parses `tollgate_admin`, which takes no arguments.
func parseAdmin(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	return new(handlers.Admin), noArgs(h)
}

// parseMeter parses `tollgate_meter`, which takes no arguments; its limits
// are the tollgate app's in_flight options and each key's cap.
func parseMeter(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	return new(handlers.Meter), noArgs(h)
}

// parseRouter parses:
//
//	tollgate_router {
//		max_body_bytes     <n>
//		upstream_base_path <path>
//		media_part_tokens  <n>
//	}
func parseRouter(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rt := new(handlers.Router)
	h.Next()
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	for h.NextBlock(0) {
		switch h.Val() {
		case "max_body_bytes":
			n, err := positiveIntArg(h.Dispenser)
			if err != nil {
				return nil, err
			}
			rt.MaxBodyBytes = n
		case "media_part_tokens":
			n, err := positiveIntArg(h.Dispenser)
			if err != nil {
				return nil, err
			}
			rt.MediaPartTokens = n
		case "upstream_base_path":
			if !h.AllArgs(&rt.UpstreamBasePath) {
				return nil, h.ArgErr()
			}
		default:
			return nil, h.Errf("unrecognized subdirective %q", h.Val())
		}
	}
	return rt, nil
}

func noArgs(h httpcaddyfile.Helper) error {
	h.Next()
	if h.NextArg() {
		return h.ArgErr()
	}
	if h.NextBlock(0) {
		return h.Errf("unrecognized subdirective %q", h.Val())
	}
	return nil
}

func durationArg(d *caddyfile.Dispenser) (caddy.Duration, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, d.Errf("%s: invalid duration %q", name, s)
	}
	return caddy.Duration(dur), nil
}

func positiveIntArg(d *caddyfile.Dispenser) (int64, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, d.Errf("%s: expected a positive integer, got %q", name, s)
	}
	return n, nil
}

func amountArg(d *caddyfile.Dispenser) (money.Amount, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	a, err := money.ParseAmount(s)
	if err != nil || a < 0 {
		return 0, d.Errf("%s: expected a non-negative decimal, got %q", name, s)
	}
	return a, nil
}
