package caddymodule

import (
	"fmt"
	"net/netip"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/egress"

	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
)

// EgressConfig is the policy for URLs that customers supply (private
// endpoints, observability destinations): public unicast addresses, and
// those in Allow.
type EgressConfig struct {
	// Allow are extra CIDRs (or single addresses) customer URLs may
	// reach, e.g. "10.20.0.0/16" for a network of private model servers.
	Allow []string `json:"allow,omitempty"`
}

// policy builds the egress policy; nil config: public addresses only.
func (c *EgressConfig) policy() (*egress.Policy, error) {
	if c == nil {
		return egress.New(nil), nil
	}
	var allow []netip.Prefix
	for _, s := range c.Allow {
		p, err := egress.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("customer_egress: allow %q: expected a CIDR or an IP address", s)
		}
		allow = append(allow, p)
	}
	return egress.New(allow), nil
}

// EgressPolicy is the policy of customer-supplied URLs.
func (a *App) EgressPolicy() *egress.Policy { return a.egress }

// parseEgress parses
//
//	customer_egress {
//		allow <cidr>...
//	}
func parseEgress(d *caddyfile.Dispenser) (*EgressConfig, error) {
	cfg := &EgressConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "allow":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return nil, d.ArgErr()
			}
			for _, a := range args {
				if _, err := egress.ParsePrefix(a); err != nil {
					return nil, d.Errf("customer_egress: allow %q: expected a CIDR or an IP address", a)
				}
			}
			cfg.Allow = append(cfg.Allow, args...)
		default:
			return nil, suggest.UnknownOption(d, "customer_egress", []string{"allow"})
		}
	}
	return cfg, nil
}
