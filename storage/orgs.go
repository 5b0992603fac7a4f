package storage

import (
	"sync"
	"sync/atomic"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// OrgStore keeps organizations' workspaces, members and guardrails, and
// caches each key's effective rules derived from them.
type OrgStore struct {
	k *kernel.Kernel
	// by account id, then id (members.go, workspaces.go, guardrails.go)
	members    kernel.Records[Member]
	workspaces kernel.Records[Workspace]
	guardrails kernel.Records[Guardrail]
	// rules caches each key's effective rules (rules.go); rulesGen
	// invalidates them.
	rules    sync.Map
	rulesGen atomic.Uint64
	// the domain stores it reads or updates, under the same lock
	acct *AccountStore
	sec  *SecretStore
}

// kinds are the organizations' kinds of record; the usage counters come
// after the workspaces and members they decorate (and are emptied with
// them: their Reset does nothing).
func (s *OrgStore) kinds() []kernel.Kind {
	return []kernel.Kind{
		s.members.Kind(prefixMember, nil),
		s.workspaces.Kind(prefixWorkspace, (*Workspace).initMaps),
		s.guardrails.Kind(prefixGuardrail, (*Guardrail).loaded),
		{Prefix: prefixWorkspaceUsage, Load: func(k, v []byte) error { return s.loadUsage(prefixWorkspaceUsage, k, v) }, Reset: func() {}, Snapshot: s.usageSnapshot},
		{Prefix: prefixMemberUsage, Load: func(k, v []byte) error { return s.loadUsage(prefixMemberUsage, k, v) }, Reset: func() {}, Snapshot: s.usageSnapshot},
	}
}
