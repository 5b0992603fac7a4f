package storage

import (
	"fmt"
	"iter"
	"sync"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Domain stores kept outside this package.
//
// A domain store kept in its own package (SCIM's, package scim) registers
// itself here from its init, as a Caddy module does. Open makes one for
// each Store, registers its record kinds with the kernel after the
// built-in ones and loads them with the rest, so that it is a domain store
// like the others: reads from memory under the kernel's lock, writes
// through Kernel.MarkDirty and Batch.Wait.
//
// When one of its changes must change another domain's records in the
// same atomic step (SCIM deactivating a member takes it out of every
// workspace; a sync job adds and removes workspace memberships), it holds
// the kernel's lock and goes through Locked: the few reads and
// publications of accounts, members, workspaces and keys that such a
// store needs, each keeping the invariants of the store that owns the
// record (a published member or workspace invalidates the effective-rules
// cache).

// Domain is a domain store kept outside this package.
type Domain interface {
	// Kinds are its kinds of record, registered after the built-in ones.
	Kinds() []kernel.Kind
}

// DomainInfo registers a domain store kept outside this package.
type DomainInfo struct {
	// Name identifies the domain; Store.Domain finds it by this name.
	Name string
	// New makes the domain store of s; Open calls it before loading.
	New func(s *Store) Domain
}

var (
	domainsMu sync.RWMutex
	domains   []DomainInfo
)

// RegisterDomain registers a domain store kept outside this package; call
// it from the package's init. It panics on an empty or repeated name.
func RegisterDomain(d DomainInfo) {
	if d.Name == "" || d.New == nil {
		panic("storage: a domain needs a name and a constructor")
	}
	domainsMu.Lock()
	defer domainsMu.Unlock()
	for _, o := range domains {
		if o.Name == d.Name {
			panic(fmt.Sprintf("storage: domain %q already registered", d.Name))
		}
	}
	domains = append(domains, d)
}

// newDomains makes the registered outside domain stores of s.
func (s *Store) newDomains() {
	domainsMu.RLock()
	defer domainsMu.RUnlock()
	s.domains = make(map[string]Domain, len(domains))
	for _, d := range domains {
		s.domains[d.Name] = d.New(s)
	}
}

// domainKinds returns the outside domain stores' kinds, in registration
// order.
func (s *Store) domainKinds() []kernel.Kind {
	domainsMu.RLock()
	defer domainsMu.RUnlock()
	var out []kernel.Kind
	for _, d := range domains {
		out = append(out, s.domains[d.Name].Kinds()...)
	}
	return out
}

// Domain returns the store's instance of a registered outside domain
// store; nil when none is registered under name.
func (s *Store) Domain(name string) Domain { return s.domains[name] }

// Kernel is the kernel under the store, for the outside domain stores.
func (s *Store) Kernel() *kernel.Kernel { return s.k }

// Locked is what an outside domain store may read and change of the
// accounts, members, workspaces and keys, in the same atomic step as its
// own records. Callers hold the kernel's lock (Lock to change, RLock to
// read). Records returned by pointer are published: read them, never
// change them; publish a changed copy.
type Locked struct{ s *Store }

// Locked returns the store's view for outside domain stores.
func (s *Store) Locked() Locked { return Locked{s} }

// Account returns an account.
func (l Locked) Account(id string) (Account, bool) {
	a, ok := l.s.AccountStore.accountOf(id)
	if !ok {
		return Account{}, false
	}
	return *a, true
}

// Members ranges over an organization's members, in no order.
func (l Locked) Members(accountID string) iter.Seq[*Member] {
	return l.s.OrgStore.membersOf(accountID)
}

// Member returns an organization's member by user id.
func (l Locked) Member(accountID, id string) (*Member, bool) {
	return l.s.OrgStore.memberOf(accountID, id)
}

// MemberByEmail returns the member with an email normalized by
// NormalizeEmail; nil when there is none.
func (l Locked) MemberByEmail(accountID, email string) *Member {
	return l.s.OrgStore.memberByEmail(accountID, email)
}

// PutMember publishes a new or changed member; the batch is durable once
// the record is.
func (l Locked) PutMember(m *Member) *kernel.Batch {
	l.s.OrgStore.putMember(m)
	return l.s.k.MarkDirty(memberKey(m.AccountID, m.ID))
}

// LeaveWorkspaces removes a member from every workspace of its account,
// as deactivating it does.
func (l Locked) LeaveWorkspaces(accountID, userID string) {
	l.s.OrgStore.leaveWorkspaces(accountID, userID)
}

// Workspace returns a workspace by id.
func (l Locked) Workspace(accountID, id string) (*Workspace, bool) {
	return l.s.OrgStore.workspaceOf(accountID, id)
}

// ResolveWorkspace returns a workspace by id or slug.
func (l Locked) ResolveWorkspace(accountID, ref string) (*Workspace, bool) {
	return l.s.OrgStore.resolveWorkspace(accountID, ref)
}

// WorkspaceCopy returns a writable copy of a workspace (by id), to change
// and publish with PutWorkspace; nil when there is none.
func (l Locked) WorkspaceCopy(accountID, id string) *Workspace {
	w, ok := l.s.OrgStore.workspaceOf(accountID, id)
	if !ok {
		return nil
	}
	return w.Clone()
}

// PutWorkspace publishes a changed workspace; the batch is durable once
// the record is.
func (l Locked) PutWorkspace(w *Workspace) *kernel.Batch {
	return l.s.OrgStore.putWorkspace(w)
}

// HasKeysIn reports whether the user created API keys in the workspace
// (such a member cannot be removed from it).
func (l Locked) HasKeysIn(workspaceID, userID string) bool {
	return l.s.AccountStore.creatorHasKeysIn(workspaceID, userID)
}

// NormalizeEmail checks an email address and returns it lowercased, the
// form members are stored and found by.
func NormalizeEmail(e string) (string, error) { return normalizeEmail(e) }

// NewUserID returns a fresh member (user) id.
func NewUserID() string { return newID("user_") }

// NewUUID returns a random RFC 4122 version 4 UUID, the id of most
// records.
func NewUUID() string { return record.NewUUID() }

// NewSecret returns a fresh bearer secret (256 random bits) starting with
// prefix, with its hash (HashSecret) and masked label.
func NewSecret(prefix string) (secret, hash, label string) { return newSecret(prefix) }
