package testgw

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Gateway is the tollgate app as the handlers and the resources see it.
// Its fields are what its methods return.
type Gateway struct {
	Storage      *storage.Store
	BrandName    string
	Limits       gateway.FreeModelLimits
	ModelCatalog *catalog.Catalog
	InFlight     billing.InFlightPolicy
	Sealer       *storage.Sealer
	Egress       *egress.Policy
	// Rates are the accounts' default rate limits; nil: none.
	Rates *storage.RateLimits
}

func (g *Gateway) Store() (*storage.Store, error)           { return g.Storage, nil }
func (g *Gateway) Brand() string                            { return g.BrandName }
func (g *Gateway) FreeModelLimits() gateway.FreeModelLimits { return g.Limits }
func (g *Gateway) Catalog() *catalog.Catalog                { return g.ModelCatalog }
func (g *Gateway) InFlightPolicy() billing.InFlightPolicy   { return g.InFlight }
func (g *Gateway) BYOKSealer() *storage.Sealer              { return g.Sealer }
func (g *Gateway) EgressPolicy() *egress.Policy             { return g.Egress }
func (g *Gateway) DefaultRateLimits() *storage.RateLimits   { return g.Rates }

var _ gateway.Gateway = (*Gateway)(nil)

// New is a gateway over an in-memory store (closed when the test ends)
// with the default free-model caps and Catalog("/v1"), whose egress policy
// allows loopback only.
func New(t testing.TB) *Gateway {
	t.Helper()
	s, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing store: %v", err)
		}
	})
	// Fixture upstreams and endpoints are httptest servers on loopback.
	loopback := egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	return &Gateway{Storage: s, BrandName: "service", Limits: gateway.FreeModelLimits{}.WithDefaults(),
		ModelCatalog: Catalog("/v1"), Egress: loopback}
}

// Account creates an account of kind.
func (g *Gateway) Account(t testing.TB, kind storage.AccountKind) storage.Account {
	t.Helper()
	a, err := g.Storage.CreateAccount(storage.NewAccount{Name: "acct " + string(kind), Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// APIKey creates a regular key; n.AccountID is set from acct.
func (g *Gateway) APIKey(t testing.TB, acct storage.Account, n storage.NewAPIKey) (storage.APIKey, string) {
	t.Helper()
	n.AccountID = acct.ID
	if n.Name == "" {
		n.Name = "test key"
	}
	k, secret, err := g.Storage.CreateAPIKey(n)
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

// ManagementKey creates a management key of acct.
func (g *Gateway) ManagementKey(t testing.TB, acct storage.Account, expires *time.Time) (storage.ManagementKey, string) {
	t.Helper()
	k, secret, err := g.Storage.CreateManagementKey(storage.NewManagementKey{AccountID: acct.ID, Name: "mgmt", ExpiresAt: expires})
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

// NewSealer is a BYOK sealer whose key is fill repeated.
func NewSealer(t testing.TB, fill byte) *storage.Sealer {
	t.Helper()
	s, err := storage.NewSealer(bytes.Repeat([]byte{fill}, storage.SealerKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SetClock sets *clock to a clock stopped at at for the rest of the test.
func SetClock(t testing.TB, clock *func() time.Time, at time.Time) {
	t.Helper()
	prev := *clock
	*clock = func() time.Time { return at }
	t.Cleanup(func() { *clock = prev })
}
