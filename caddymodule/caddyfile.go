// Package caddymodule registers the tollgate Caddy modules, parses their
// Caddyfile syntax and holds the tollgate app.
package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/handlers"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The directives are registered from this one init so that their order is
// the order of the request path: authenticate, serve the admin routes,
// prepare the inference request, then reverse_proxy. Each
// "before reverse_proxy" lands right in front of it, after the earlier ones.
func init() {
	caddy.RegisterModule(new(handlers.Auth))
	caddy.RegisterModule(new(handlers.Admin))
	caddy.RegisterModule(new(handlers.Router))
	caddy.RegisterModule(new(handlers.MockProvider))

	httpcaddyfile.RegisterGlobalOption("tollgate", parseGlobalOption)

	for _, d := range []struct {
		name  string
		parse httpcaddyfile.UnmarshalHandlerFunc
	}{
		{"tollgate_auth", parseAuth},
		{"tollgate_admin", parseAdmin},
		{"tollgate_router", parseRouter},
		{"tollgate_mock_provider", parseMockProvider},
	} {
		httpcaddyfile.RegisterHandlerDirective(d.name, d.parse)
		httpcaddyfile.RegisterDirectiveOrder(d.name, httpcaddyfile.Before, "reverse_proxy")
	}
}

// parseGlobalOption parses the tollgate global option:
//
//	tollgate {
//		data_dir     <path>
//		brand        <name>
//		gc_interval  <duration>
//		free_model {
//			per_minute     <n>
//			per_day        <n>
//			per_day_paid   <n>
//			paid_threshold <credits>
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	d.Next() // option name
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "data_dir":
			if !d.AllArgs(&app.DataDir) {
				return nil, d.ArgErr()
			}
		case "brand":
			if !d.AllArgs(&app.BrandName) {
				return nil, d.ArgErr()
			}
		case "gc_interval":
			dur, err := durationArg(d)
			if err != nil {
				return nil, err
			}
			app.GCInterval = dur
		case "free_model":
			for inner := d.Nesting(); d.NextBlock(inner); {
				opt := d.Val()
				var err error
				switch opt {
				case "per_minute":
					app.FreeModel.PerMinute, err = positiveIntArg(d)
				case "per_day":
					app.FreeModel.PerDay, err = positiveIntArg(d)
				case "per_day_paid":
					app.FreeModel.PerDayPaid, err = positiveIntArg(d)
				case "paid_threshold":
					app.FreeModel.PaidThreshold, err = amountArg(d)
				default:
					return nil, d.Errf("unrecognized free_model option %q", opt)
				}
				if err != nil {
					return nil, err
				}
			}
		default:
			return nil, d.Errf("unrecognized tollgate option %q", d.Val())
		}
	}
	return httpcaddyfile.App{
		Name:  handlers.AppName,
		Value: caddyconfig.JSON(app, nil),
	}, nil
}

// parseAuth parses `tollgate_auth`, which takes no arguments.
func parseAuth(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	return new(handlers.Auth), noArgs(h)
}

// parseAdmin parses `tollgate_admin`, which takes no arguments.
func parseAdmin(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	return new(handlers.Admin), noArgs(h)
}

// parseRouter parses:
//
//	tollgate_router {
//		max_body_bytes     <n>
//		upstream_base_path <path>
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

func amountArg(d *caddyfile.Dispenser) (storage.Amount, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	a, err := storage.ParseAmount(s)
	if err != nil || a < 0 {
		return 0, d.Errf("%s: expected a non-negative decimal, got %q", name, s)
	}
	return a, nil
}
