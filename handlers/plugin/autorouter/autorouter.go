// Package autorouter is the auto router, the Caddy module
// tollgate.plugins.auto_router: a request whose model is the brand's
// auto model ("<brand>/auto", or the public API's "openrouter/auto") is
// served by one of the candidate models the operator declares, chosen
// by what the request needs (Choose) and the cost setting; its plugins
// entry ("auto-router", or "auto-beta-router") narrows the candidates and
// sets the cost. No classifier reads the prompt: the rule is the one
// Choose writes down.
package autorouter

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
)

func init() {
	caddy.RegisterModule(new(AutoRouter))
}

// name is the plugin's id in a request's plugins array; betaName the
// public API's other id for it.
const (
	name     = "auto-router"
	betaName = "auto-beta-router"
)

// ReferenceModel is the public API's id of the auto model, which clients
// written for it send; the brand's own is Model.
const ReferenceModel = "openrouter/auto"

// Model is the brand's auto model id.
func Model(brand string) string { return brand + "/auto" }

// Preferences without a request's cost setting (AutoRouter.Prefer).
const (
	PreferOrder    = "order"
	PreferCheapest = "cheapest"
)

// AutoRouter is the auto router plugin.
type AutoRouter struct {
	// Models are the candidate models, catalog ids in the operator's
	// order; none: the auto model is unknown, as any other id.
	Models []string `json:"models,omitempty"`
	// Prefer chooses among the candidates that fit a request without a
	// cost setting: PreferOrder (the default, the first in Models) or
	// PreferCheapest.
	Prefer string `json:"prefer,omitempty"`

	brand string
}

// CaddyModule returns the Caddy module information.
func (*AutoRouter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tollgate.plugins.auto_router",
		New: func() caddy.Module { return new(AutoRouter) },
	}
}

// UnmarshalCaddyfile reads the plugin's directive:
//
//	auto_router {
//		models <model>...
//		prefer order|cheapest
//	}
func (p *AutoRouter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the plugin's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "models":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			p.Models = append(p.Models, args...)
		case "prefer":
			if !d.AllArgs(&p.Prefer) {
				return d.ArgErr()
			}
		default:
			return d.Errf("unknown option %q of the auto_router plugin (models, prefer)", d.Val())
		}
	}
	return nil
}

// Provision reads the gateway's brand.
func (p *AutoRouter) Provision(ctx caddy.Context) error {
	gw, err := gateway.Load(ctx)
	if err != nil {
		return err
	}
	p.brand = gw.Brand()
	return p.Validate()
}

// Validate checks the options: a candidate named twice or an unknown
// preference is an error. Candidates the catalog lacks are passed over
// per request (a catalog may lose a model on reload).
func (p *AutoRouter) Validate() error {
	switch p.Prefer {
	case "", PreferOrder, PreferCheapest:
	default:
		return fmt.Errorf("auto_router: prefer: expected %s or %s, got %q", PreferOrder, PreferCheapest, p.Prefer)
	}
	for i, m := range p.Models {
		if m == "" {
			return fmt.Errorf("auto_router: models: an empty model id")
		}
		for _, prev := range p.Models[:i] {
			if prev == m {
				return fmt.Errorf("auto_router: models: %s named twice", m)
			}
		}
	}
	return nil
}

// Name implements plugin.Plugin.
func (*AutoRouter) Name() string { return name }

// Aliases implements plugin.Aliased.
func (*AutoRouter) Aliases() []string { return []string{betaName} }

// Plan implements plugin.Plugin: the router's work is done at routing
// (ChooseModel), nothing after.
func (*AutoRouter) Plan(*plugin.Request) (plugin.Run, *apierror.Error) { return nil, nil }

// Chooses implements plugin.ModelChooser: the auto model ids, once the
// operator declared candidates.
func (p *AutoRouter) Chooses(id string) bool {
	if len(p.Models) == 0 || len(id) < len("/auto") || id[len(id)-len("/auto"):] != "/auto" {
		return false
	}
	return id == ReferenceModel || p.brand != "" && id == Model(p.brand)
}

// CheckEntry implements plugin.Plugin: the reference's members, each of
// its type and within its bounds. pin_model true is refused: the
// gateway's answers carry no model on the messages sent back.
func (*AutoRouter) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	_, apiErr := readOptions(path, entry)
	return apiErr
}

// options are a request's plugins entry for the router.
type options struct {
	path     string // the entry's place, "plugins[0]"
	allowed  []string
	excluded []string
	tier     string // cost_tier; "": unset
	tradeoff int64  // cost_quality_tradeoff; -1: unset
}

// Pattern bounds of allowed_models and excluded_models.
const (
	maxPatterns     = 1024
	maxPatternLen   = 1024
	maxPatternBytes = 65536
)

// costTiers are the cost_tier values and the lower edge of each one's
// band of cost percentiles.
var costTiers = map[string]int{"low": 0, "medium": 20, "high": 40, "xhigh": 60, "max": 80}

// readOptions reads and checks an entry at path.
func readOptions(path string, entry gjson.Result) (options, *apierror.Error) {
	o := options{path: path, tradeoff: -1}
	apiErr := plugin.CheckMembers(path, name, entry, func(member string, v gjson.Result) (bool, *apierror.Error) {
		field := path + "." + member
		switch member {
		case "allowed_models", "excluded_models":
			list, apiErr := patterns(field, v)
			if member == "allowed_models" {
				o.allowed = list
			} else {
				o.excluded = list
			}
			return true, apiErr
		case "cost_tier":
			if v.Type == gjson.Null {
				return true, nil
			}
			if _, ok := costTiers[v.Str]; v.Type != gjson.String || !ok {
				return true, apierror.BadRequest(field + ": expected one of low, medium, high, xhigh, max")
			}
			o.tier = v.Str
		case "cost_quality_tradeoff":
			if v.Type == gjson.Null {
				return true, nil
			}
			n, err := strconv.ParseInt(v.Raw, 10, 64)
			if v.Type != gjson.Number || err != nil || n < 0 || n > 10 {
				return true, apierror.BadRequest(field + ": expected an integer from 0 to 10")
			}
			o.tradeoff = n
		case "pin_model":
			switch v.Type {
			case gjson.False, gjson.Null:
			case gjson.True:
				return true, apierror.BadRequest(field + ": not offered by this gateway (its answers' messages carry no model to pin)")
			default:
				return true, apierror.BadRequest(field + ": expected a boolean")
			}
		default:
			return false, nil
		}
		return true, nil
	})
	return o, apiErr
}

// patterns reads a list of model patterns (field names it).
func patterns(field string, v gjson.Result) ([]string, *apierror.Error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	if !v.IsArray() {
		return nil, apierror.BadRequest(field + ": expected an array of model patterns")
	}
	var list []string
	total := 0
	var apiErr *apierror.Error
	v.ForEach(func(i, p gjson.Result) bool {
		switch {
		case p.Type != gjson.String:
			apiErr = apierror.BadRequest(fmt.Sprintf("%s[%d]: expected a string", field, i.Int()))
		case len(p.Str) > maxPatternLen:
			apiErr = apierror.BadRequest(fmt.Sprintf("%s[%d]: at most %d characters", field, i.Int(), maxPatternLen))
		case len(list) == maxPatterns:
			apiErr = apierror.BadRequest(fmt.Sprintf("%s: at most %d patterns", field, maxPatterns))
		}
		total += len(p.Str)
		if apiErr == nil && total > maxPatternBytes {
			apiErr = apierror.BadRequest(fmt.Sprintf("%s: at most %d characters in all", field, maxPatternBytes))
		}
		list = append(list, p.Str)
		return apiErr == nil
	})
	return list, apiErr
}

// match reports whether id matches pattern, whose "*" stands for any run
// of characters (also "/"); the rest is compared as it is. Each star
// backtracks once per character of id: no pattern takes longer than
// their product.
func match(pattern, id string) bool {
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(id) {
		switch {
		case pi < len(pattern) && pattern[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(pattern) && pattern[pi] == id[si]:
			pi++
			si++
		case star >= 0:
			pi, mark = star+1, mark+1
			si = mark
		default:
			return false
		}
	}
	for pi < len(pattern) && pattern[pi] == '*' {
		pi++
	}
	return pi == len(pattern)
}

// Interface guards.
var (
	_ plugin.Plugin         = (*AutoRouter)(nil)
	_ plugin.ModelChooser   = (*AutoRouter)(nil)
	_ plugin.Aliased        = (*AutoRouter)(nil)
	_ caddy.Provisioner     = (*AutoRouter)(nil)
	_ caddy.Validator       = (*AutoRouter)(nil)
	_ caddyfile.Unmarshaler = (*AutoRouter)(nil)
)
