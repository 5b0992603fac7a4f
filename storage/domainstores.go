package storage

import (
	"github.com/tollgate-dev/caddy-tollgate/storage/byok"
	"github.com/tollgate-dev/caddy-tollgate/storage/destinations"
	"github.com/tollgate-dev/caddy-tollgate/storage/endpoints"
	"github.com/tollgate-dev/caddy-tollgate/storage/endusers"
)

// The domain stores kept in packages of their own: the end users, the
// private endpoints, the observability destinations and the BYOK
// credentials. Each reaches the accounts (and the credentials the
// workspaces) only through the narrow interface it declares, which
// storeAccounts and storeWorkspaces implement over the account and org
// stores.
type (
	EndUserStore       = endusers.EndUserStore
	EndUser            = endusers.EndUser
	EndpointStore      = endpoints.EndpointStore
	PrivateEndpoint    = endpoints.PrivateEndpoint
	EndpointStatus     = endpoints.EndpointStatus
	EndpointPricing    = endpoints.EndpointPricing
	EndpointValidation = endpoints.EndpointValidation
	StateError         = endpoints.StateError
	DestinationStore   = destinations.DestinationStore
	Destination        = destinations.Destination
	SecretStore        = byok.SecretStore
	Credential         = byok.Credential
	NewBYOK            = byok.NewBYOK
	BYOKFilter         = byok.BYOKFilter
	BYOKUse            = byok.BYOKUse
)

// The private endpoint lifecycle (package endpoints).
const (
	EndpointDraft     = endpoints.EndpointDraft
	EndpointValidated = endpoints.EndpointValidated
	EndpointEnabled   = endpoints.EndpointEnabled
	EndpointDisabled  = endpoints.EndpointDisabled
)

const (
	// MaxEndUserLength bounds an end-user id (characters).
	MaxEndUserLength = endusers.MaxEndUserLength
	// MaxDestinationsPerType bounds an account's destinations of one type.
	MaxDestinationsPerType = destinations.MaxDestinationsPerType
)

// ErrExists is returned when creating a record that already exists.
var ErrExists = endusers.ErrExists

// The record kinds of the domain stores kept apart.
const (
	prefixEndUser         = endusers.Prefix
	prefixPrivateEndpoint = endpoints.Prefix
	prefixDestination     = destinations.Prefix
	prefixBYOK            = byok.Prefix
)

// ValidEndUser checks an end-user id.
func ValidEndUser(user string) error { return endusers.ValidEndUser(user) }

// NewEndpointID returns a fresh private endpoint id, for callers that seal
// a secret before CreatePrivateEndpoint.
func NewEndpointID() string { return endpoints.NewEndpointID() }

// storeAccounts are the accounts as the domain stores kept apart reach
// them. Callers hold the kernel's lock.
type storeAccounts struct{ s *AccountStore }

func (a storeAccounts) AccountOf(id string) (*Account, bool) { return a.s.accountOf(id) }
func (a storeAccounts) AccountWorkspace(accountID, workspaceID string) (string, error) {
	return a.s.accountWorkspace(accountID, workspaceID)
}
func (a storeAccounts) CheckKeyHashes(accountID string, hashes []string) error {
	return a.s.checkKeyHashes(accountID, hashes)
}

// storeWorkspaces are the workspaces as the credentials reach them.
// Callers hold the kernel's lock.
type storeWorkspaces struct{ s *OrgStore }

func (w storeWorkspaces) ResolveWorkspace(accountID, ref string) (*Workspace, bool) {
	return w.s.resolveWorkspace(accountID, ref)
}

// orgCredentials are the credentials as the organizations count them.
type orgCredentials struct{ s *SecretStore }

func (c orgCredentials) credentialsIn(accountID, workspaceID string) int {
	return byok.CredentialsIn(c.s, accountID, workspaceID)
}
