package testgw

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// AdminAccounts are an organization and a personal account, each with a
// management key and a regular key.
type AdminAccounts struct {
	Org, Personal           storage.Account
	OrgMgmt, PersMgmt       string // management key secrets
	OrgKey, PersKey         string // regular key secrets
	OrgHash, PersHash       string // regular key hashes
	OrgMgmtKey              storage.ManagementKey
	OrgRegular, PersRegular storage.APIKey
}

// NewAdminAccounts creates the accounts and keys of AdminAccounts in g.
func NewAdminAccounts(t testing.TB, g *Gateway) AdminAccounts {
	t.Helper()
	var a AdminAccounts
	a.Org = g.Account(t, storage.AccountOrganization)
	a.Personal = g.Account(t, storage.AccountPersonal)
	a.OrgMgmtKey, a.OrgMgmt = g.ManagementKey(t, a.Org, nil)
	_, a.PersMgmt = g.ManagementKey(t, a.Personal, nil)
	a.OrgRegular, a.OrgKey = g.APIKey(t, a.Org, storage.NewAPIKey{Name: "org regular"})
	a.PersRegular, a.PersKey = g.APIKey(t, a.Personal, storage.NewAPIKey{Name: "personal regular"})
	a.OrgHash, a.PersHash = a.OrgRegular.Hash, a.PersRegular.Hash
	return a
}

// BYOKAccounts are two organization accounts, each with a management and
// a regular key, on a gateway with BYOK on and the routed catalog.
type BYOKAccounts struct {
	Acct, Other        storage.Account
	Mgmt, OtherMgmt    string // management key secrets
	Regular, OtherReg  string // regular key secrets
	RegHash, OtherHash string // regular key hashes
}

// NewBYOKAccounts turns BYOK on in g (sealer key 9...), gives it
// RoutedCatalog and creates the accounts and keys of BYOKAccounts.
func NewBYOKAccounts(t testing.TB, g *Gateway) BYOKAccounts {
	t.Helper()
	g.ModelCatalog = RoutedCatalog()
	g.Sealer = NewSealer(t, 9)
	a := BYOKAccounts{Acct: g.Account(t, storage.AccountOrganization), Other: g.Account(t, storage.AccountOrganization)}
	_, a.Mgmt = g.ManagementKey(t, a.Acct, nil)
	_, a.OtherMgmt = g.ManagementKey(t, a.Other, nil)
	k, regular := g.APIKey(t, a.Acct, storage.NewAPIKey{})
	o, otherReg := g.APIKey(t, a.Other, storage.NewAPIKey{})
	a.Regular, a.OtherReg, a.RegHash, a.OtherHash = regular, otherReg, k.Hash, o.Hash
	return a
}
