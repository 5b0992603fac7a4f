package handlers

import (
	"fmt"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/responsecache"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
)

// UnmarshalCaddyfile reads the handler's options:
//
//	tollgate {
//		per_ip  <requests> <window> [<burst>]
//		per_key <requests> <window> [<burst>]
//		max_body_bytes     <n>
//		media_part_tokens  <n>
//		anthropic_betas    <beta>...
//		load_balancing     price|ordered
//		sticky_idle        <duration>|off
//		web_fetch_price    <credits>
//		first_byte_timeout <duration>
//		retries            <n>
//		retry_budget       <duration>
//		retry_backoff      <duration>
//		circuit_breaker    [<failures> [<cooldown>]] | off
//		min_uptime         <percent>
//		response_cache {
//			<responsecache.Config's options>
//		}
//		plugins {
//			<plugin module name> [<its own directive's arguments and block>]
//		}
//	}
//
// The tollgate directive (package caddymodule) reads the same options with
// SetOption and UnmarshalPlugins and passes the others to reverse_proxy.
func (t *Tollgate) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		name := d.Val()
		if name == "plugins" {
			if err := t.UnmarshalPlugins(d); err != nil {
				return err
			}
			continue
		}
		if name == "response_cache" {
			if err := t.UnmarshalResponseCache(d); err != nil {
				return err
			}
			continue
		}
		known, err := t.SetOption(name, d.RemainingArgs())
		if !known {
			return suggest.UnknownOption(d, "tollgate", TollgateOptions)
		}
		if err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// TollgateOptions are the names SetOption knows, for the suggestions of
// configuration errors.
var TollgateOptions = []string{"per_ip", "per_key", "max_body_bytes", "media_part_tokens", "anthropic_betas", "load_balancing", "sticky_idle", "web_fetch_price", "first_byte_timeout", "retries", "retry_budget", "retry_backoff", "circuit_breaker", "min_uptime", "response_cache", "plugins"}

// UnmarshalPlugins reads the plugins block, d at its name: each line
// names a plugin module (tollgate.plugins.<name>), whose own
// UnmarshalCaddyfile reads the rest of the line and its block. A plugin
// not named keeps its defaults.
func (t *Tollgate) UnmarshalPlugins(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		if _, dup := t.PluginsRaw[name]; dup {
			return d.Errf("plugins: %s configured twice", name)
		}
		unm, err := caddyfile.UnmarshalModule(d, plugin.Namespace+"."+name)
		if err != nil {
			return err
		}
		if t.PluginsRaw == nil {
			t.PluginsRaw = caddy.ModuleMap{}
		}
		t.PluginsRaw[name] = caddyconfig.JSON(unm, nil)
	}
	return nil
}

// UnmarshalResponseCache reads the response_cache block, d at its name
// (responsecache.Config's UnmarshalCaddyfile).
func (t *Tollgate) UnmarshalResponseCache(d *caddyfile.Dispenser) error {
	if t.ResponseCache != nil {
		return d.Err("response_cache: configured twice")
	}
	c := new(responsecache.Config)
	if err := c.UnmarshalCaddyfile(d); err != nil {
		return err
	}
	t.ResponseCache = c
	return nil
}

// SetOption sets the option name from its arguments; known is false when
// name is not an option of the handler.
func (t *Tollgate) SetOption(name string, args []string) (known bool, err error) {
	switch name {
	case "per_ip":
		t.PerIP, err = parseRateCeiling(name, args)
	case "per_key":
		t.PerKey, err = parseRateCeiling(name, args)
	case "max_body_bytes":
		t.MaxBodyBytes, err = positiveIntOption(name, args)
	case "media_part_tokens":
		t.MediaPartTokens, err = positiveIntOption(name, args)
	case "anthropic_betas":
		if len(args) == 0 {
			return true, fmt.Errorf("%s: expected one or more beta names", name)
		}
		if _, err = upstream.BetaSet(args); err == nil {
			t.AnthropicBetas = append(t.AnthropicBetas, args...)
		}
	case "load_balancing":
		if len(args) != 1 || (args[0] != routing.LoadBalancingPrice && args[0] != routing.LoadBalancingOrdered) {
			return true, fmt.Errorf("%s: expected %s or %s", name, routing.LoadBalancingPrice, routing.LoadBalancingOrdered)
		}
		t.LoadBalancing = args[0]
	case "web_fetch_price":
		if len(args) != 1 {
			return true, fmt.Errorf("%s: expected a price in credits", name)
		}
		t.WebFetchPrice = args[0]
		_, err = t.webFetchPrice()
	case "first_byte_timeout":
		var d time.Duration
		if len(args) == 1 {
			d, err = caddy.ParseDuration(args[0])
		}
		if len(args) != 1 || err != nil || d <= 0 {
			return true, fmt.Errorf("%s: expected a positive duration", name)
		}
		t.FirstByteTimeout = caddy.Duration(d)
	case "sticky_idle":
		var d time.Duration
		switch {
		case len(args) == 1 && args[0] == "off":
			d = -1
		case len(args) == 1:
			d, err = caddy.ParseDuration(args[0])
		}
		if len(args) != 1 || err != nil || d == 0 || d < -1 {
			return true, fmt.Errorf("%s: expected a positive duration or off", name)
		}
		t.StickyIdle = caddy.Duration(d)
	case "retries":
		var n int64
		if len(args) == 1 {
			n, err = strconv.ParseInt(args[0], 10, 32)
		}
		if len(args) != 1 || err != nil || n < 0 {
			return true, fmt.Errorf("%s: expected a number of retries, 0 or more", name)
		}
		r := int(n)
		t.Retries = &r
	case "retry_budget", "retry_backoff":
		var d time.Duration
		if len(args) == 1 {
			d, err = caddy.ParseDuration(args[0])
		}
		if len(args) != 1 || err != nil || d <= 0 {
			return true, fmt.Errorf("%s: expected a positive duration", name)
		}
		if name == "retry_budget" {
			t.RetryBudget = caddy.Duration(d)
		} else {
			t.RetryBackoff = caddy.Duration(d)
		}
	case "circuit_breaker":
		t.CircuitBreaker, err = parseCircuitBreaker(name, args)
	case "min_uptime":
		var v float64
		if len(args) == 1 {
			v, err = strconv.ParseFloat(args[0], 64)
		}
		if len(args) != 1 || err != nil || v < 0 || v > 100 {
			return true, fmt.Errorf("%s: expected a percentage from 0 to 100", name)
		}
		t.MinUptime = v
	case "upstream_base_path":
		// Only requests routed by model reach a provider, each under its
		// own base_url: the option had nothing left to set.
		return true, fmt.Errorf("%s: removed; each provider's base_url sets its path", name)
	default:
		return false, nil
	}
	return true, err
}

// parseCircuitBreaker reads `[<failures> [<cooldown>]]` or `off` (nil).
func parseCircuitBreaker(name string, args []string) (*CircuitBreaker, error) {
	if len(args) == 1 && args[0] == "off" {
		return nil, nil
	}
	if len(args) > 2 {
		return nil, fmt.Errorf("%s: expected [<failures> [<cooldown>]] or off", name)
	}
	cb := &CircuitBreaker{}
	if len(args) == 0 {
		return cb, nil
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("%s: failures must be a positive integer, got %q", name, args[0])
	}
	cb.Failures = &n
	if len(args) == 2 {
		d, err := caddy.ParseDuration(args[1])
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%s: invalid cooldown %q", name, args[1])
		}
		cb.Cooldown = caddy.Duration(d)
	}
	return cb, nil
}

// parseRateCeiling reads `<requests> <window> [<burst>]`.
func parseRateCeiling(name string, args []string) (*RateCeiling, error) {
	if len(args) < 2 || len(args) > 3 {
		return nil, fmt.Errorf("%s: expected <requests> <window> [<burst>]", name)
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("%s: requests must be a positive integer, got %q", name, args[0])
	}
	win, err := caddy.ParseDuration(args[1])
	if err != nil || win <= 0 {
		return nil, fmt.Errorf("%s: invalid window %q", name, args[1])
	}
	c := &RateCeiling{Requests: n, Window: caddy.Duration(win)}
	if len(args) == 3 {
		b, err := strconv.Atoi(args[2])
		if err != nil || b <= 0 {
			return nil, fmt.Errorf("%s: burst must be a positive integer, got %q", name, args[2])
		}
		c.Burst = b
	}
	return c, nil
}

// positiveIntOption reads one positive integer argument.
func positiveIntOption(name string, args []string) (int64, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("%s: expected a positive integer", name)
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: expected a positive integer, got %q", name, args[0])
	}
	return n, nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Tollgate)(nil)
