package storage

import (
	"sync"
	"sync/atomic"

	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// OrgStore keeps organizations' workspaces, members and guardrails, and
// caches each key's effective rules derived from them.
type OrgStore struct {
	k *kernel.Kernel
	// by account id, then id
	members    kernel.Records[Member]
	workspaces kernel.Records[Workspace]
	guardrails kernel.Records[Guardrail]
	// rules caches each key's effective rules (EffectiveRules); rulesGen
	// invalidates them.
	rules    sync.Map
	rulesGen atomic.Uint64
	// acct is the accounts and keys its records belong to (AccountStore);
	// sec the credentials that live in its workspaces (SecretStore).
	acct orgAccounts
	sec  orgSecrets
	// onDeactivate are called when a member is deactivated
	// (OnMemberDeactivated).
	onDeactivate []func(accountID, memberID string)
}

// orgAccounts is what the organizations ask of the accounts. Its methods
// run under the kernel's lock, which the caller holds, and never take it
// (see Store).
type orgAccounts interface {
	// accountOf is an account's published record.
	accountOf(id string) (*Account, bool)
	// keyOf is an API key's published record.
	keyOf(hash string) (*APIKey, bool)
	// eachAccountKey calls fn for each of an account's keys until it
	// returns false.
	eachAccountKey(accountID string, fn func(keytable.Ref) bool)
	// eachAccount calls fn with every account.
	eachAccount(fn func(*Account))
}

// orgSecrets is what the organizations ask of the BYOK credentials, under
// the kernel's lock.
type orgSecrets interface {
	// credentialsIn counts the account's credentials in a workspace.
	credentialsIn(accountID, workspaceID string) int
}

// isDefaultWorkspace reports whether id is the account's default
// workspace. Callers hold the kernel's lock.
func (s *OrgStore) isDefaultWorkspace(accountID, id string) bool {
	a, ok := s.acct.accountOf(accountID)
	return ok && a.DefaultWorkspaceID == id
}

// workspaceKind is the workspaces' kind, decoded by codec.Decode.
func (s *OrgStore) workspaceKind() kernel.Kind {
	kind := s.workspaces.Kind(prefixWorkspace, nil)
	kind.Load = func(_, v []byte) error {
		w := new(Workspace)
		if err := codec.Decode(v, w, record.FastWorkspace); err != nil {
			return err
		}
		s.workspaces.Put(w)
		return nil
	}
	return kind
}

// kinds are the organizations' kinds of record; the usage counters come
// after the workspaces and members they decorate (and are emptied with
// them: their Reset does nothing).
func (s *OrgStore) kinds() []kernel.Kind {
	return []kernel.Kind{
		kernel.Removable(s.members.Kind(prefixMember, nil), s.members),
		kernel.Removable(s.workspaceKind(), s.workspaces),
		kernel.Removable(s.guardrails.Kind(prefixGuardrail, (*Guardrail).loaded), s.guardrails),
		{Prefix: prefixWorkspaceUsage, Load: func(k, v []byte) error { return s.loadUsage(prefixWorkspaceUsage, k, v) }, Reset: func() {}, Snapshot: s.usageSnapshot},
		{Prefix: prefixMemberUsage, Load: func(k, v []byte) error { return s.loadUsage(prefixMemberUsage, k, v) }, Reset: func() {}, Snapshot: s.usageSnapshot},
	}
}
