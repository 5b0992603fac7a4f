// Package caddymodule registers the tollgate Caddy modules, parses their
// Caddyfile syntax and holds the tollgate app.
package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/tollgate-dev/caddy-tollgate/dashboard"
	"github.com/tollgate-dev/caddy-tollgate/handlers"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// The tollgate directive expands into the whole pipeline (parseTollgate);
// the directives it replaced fail with an error that says so.
func init() {
	caddy.RegisterModule(new(handlers.Tollgate))
	caddy.RegisterModule(handlers.ErrorWriter{})

	httpcaddyfile.RegisterGlobalOption("tollgate", parseGlobalOption)

	httpcaddyfile.RegisterDirective("tollgate", parseTollgate)
	httpcaddyfile.RegisterDirectiveOrder("tollgate", httpcaddyfile.Before, "reverse_proxy")
	for _, name := range replacedDirectives {
		httpcaddyfile.RegisterDirective(name, replacedDirective)
		httpcaddyfile.RegisterDirectiveOrder(name, httpcaddyfile.Before, "reverse_proxy")
	}
	// The dashboard registers its own module and directive; it serves
	// its prefix, which the pipeline passes on.
	httpcaddyfile.RegisterDirectiveOrder(dashboard.Directive, httpcaddyfile.Before, "reverse_proxy")
	// The mock provider (package standin) registers its own module,
	// directive and place in the order, after those above.
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
