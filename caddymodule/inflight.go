package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// InFlightConfig configures the in-flight spending budget: how much of a
// prepaid account's balance its running requests may hold at once.
// Amounts are credits as decimal strings.
type InFlightConfig struct {
	// Fraction of the balance that may be held at once. Default "0.5".
	Fraction string `json:"fraction,omitempty"`
	// Ceiling bounds the budget. Default "50".
	Ceiling string `json:"ceiling,omitempty"`
	// PerRequestCap bounds one request's estimate and is the estimate of a
	// request without max_tokens. Default "0.25".
	PerRequestCap string `json:"per_request_cap,omitempty"`
	// SettlementWindow keeps a finished request's cost held. Default 10s.
	SettlementWindow caddy.Duration `json:"settlement_window,omitempty"`
	// BalanceThreshold: at or above it the budget does not apply. Default "100".
	BalanceThreshold string `json:"balance_threshold,omitempty"`
	// EstablishedUsage: accounts that spent this much all time are exempt
	// (the rollout rule); empty or "0" applies the budget to all accounts.
	EstablishedUsage string `json:"established_usage,omitempty"`
}

// Defaults of the in-flight budget.
var defaultInFlight = billing.InFlightPolicy{
	FractionPPM:      500_000,
	Ceiling:          50 * money.AmountScale,
	PerRequestCap:    money.AmountScale / 4,
	SettlementWindow: 10 * time.Second,
	BalanceThreshold: 100 * money.AmountScale,
}

// policy converts the config, with defaults for unset fields. Values were
// checked by validate.
func (c *InFlightConfig) policy() billing.InFlightPolicy {
	p := defaultInFlight
	if c == nil {
		return p
	}
	if c.Fraction != "" {
		f, _ := money.ParseAmount(c.Fraction) // nano: 1e9 = 1.0
		p.FractionPPM = int64(f) / 1000
	}
	for _, f := range []struct {
		s   string
		dst *money.Amount
	}{{c.Ceiling, &p.Ceiling}, {c.PerRequestCap, &p.PerRequestCap}, {c.BalanceThreshold, &p.BalanceThreshold}, {c.EstablishedUsage, &p.EstablishedUsage}} {
		if f.s != "" {
			*f.dst, _ = money.ParseAmount(f.s) // checked by validate
		}
	}
	if c.SettlementWindow > 0 {
		p.SettlementWindow = time.Duration(c.SettlementWindow)
	}
	return p
}
