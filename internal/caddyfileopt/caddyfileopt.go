// Package caddyfileopt reads the values of Caddyfile options that the
// gateway's modules share a form for (a positive duration, an on/off
// switch), so that each option of a kind refuses bad input with the same
// message.
package caddyfileopt

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Duration reads the current option's one argument, a positive
// duration ("90s", "5m"); the error names the option.
func Duration(d *caddyfile.Dispenser) (caddy.Duration, error) {
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

// Switch reads the current option as a switch, `name [on|off]`: alone or
// with on it is on.
func Switch(d *caddyfile.Dispenser) (bool, error) {
	name := d.Val()
	on := true
	if d.NextArg() {
		switch d.Val() {
		case "on":
		case "off":
			on = false
		default:
			return false, d.Errf("%s: expected on or off, got %q", name, d.Val())
		}
	}
	if d.NextArg() {
		return false, d.ArgErr()
	}
	return on, nil
}
