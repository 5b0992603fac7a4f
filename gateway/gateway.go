// Package gateway is what the pipeline's stages and the administrative
// resources share about the gateway: the tollgate app as they see it
// (Gateway), the caps on free models, and the caller a request was
// authenticated as (Identity).
package gateway

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// AppName is the Caddy app that owns the gateway's state.
const AppName = "tollgate"

// Gateway is what the handler modules need from the tollgate app: the shared
// store and the operator's settings.
type Gateway interface {
	// Store returns the open store, opening it on first use.
	Store() (*storage.Store, error)
	// Brand is the prefix of limit_source values and server tool types.
	Brand() string
	// FreeModelLimits are the caps on ":free" models, defaults filled in.
	FreeModelLimits() FreeModelLimits
	// RateLimits are the rate limits of an account that sets none of its
	// own; nil: none.
	DefaultRateLimits() *storage.RateLimits
	// Catalog is the operator's model catalog.
	Catalog() *catalog.Catalog
	// InFlightPolicy configures the in-flight spending budget.
	InFlightPolicy() billing.InFlightPolicy
	// BYOKSealer seals and opens BYOK provider keys; nil when the operator
	// configured no byok_encryption_key (BYOK is then off).
	BYOKSealer() *storage.Sealer
	// EgressPolicy says which addresses customer-supplied URLs (private
	// endpoints, observability destinations) may reach; nil: public
	// unicast addresses only.
	EgressPolicy() *egress.Policy
}

// Load fetches the tollgate app from the Caddy context.
func Load(ctx caddy.Context) (Gateway, error) {
	app, err := ctx.App(AppName)
	if err != nil {
		return nil, fmt.Errorf("loading %s app: %v", AppName, err)
	}
	gw, ok := app.(Gateway)
	if !ok {
		return nil, fmt.Errorf("app %s is %T, not a tollgate gateway", AppName, app)
	}
	return gw, nil
}

// Identity is the authenticated caller of a request.
type Identity struct {
	storage.Principal
	// Account is the store's snapshot of the caller's account as of
	// authentication; it must not be modified.
	Account *storage.Account
}
