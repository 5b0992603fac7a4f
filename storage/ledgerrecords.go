package storage

import (
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
)

// The records whose counters a ledger reads and changes belong to the
// account store (accounts, keys) and the org store (workspaces, members).
// Ledgers reach them only through these methods, which read the record
// in memory and replace it with its counters changed; they never mark a
// record dirty (the in-process ledger does, for the records it charged; a
// shared ledger's counters live in its own database). Callers hold the
// kernel's lock.

// ledgerAccount is the account's record; nil when there is none.
func (s *AccountStore) ledgerAccount(id string) *Account { return s.accounts[id] }

// ledgerKey is the API key's record; nil when there is none.
// It is a copy, made for the caller: small enough to inline, so that a
// caller that does not keep it has it on its stack.
func (s *AccountStore) ledgerKey(hash string) *APIKey {
	k := new(APIKey)
	if !s.keys.ReadInto(hash, k) {
		return nil
	}
	return k
}

// ledgerKeyUsage is the API key's usage counters, all a settlement reads
// of the key, and its slot, where setKeySlotCounters replaces them: one
// lookup of the hash, no record materialized. ok is false when there is
// no record.
func (s *AccountStore) ledgerKeyUsage(hash string) (usage, byok money.UsageCounters, slot uint32, ok bool) {
	if slot, ok = s.keys.Lookup(hash); ok {
		usage, byok = s.keys.SlotCounters(slot)
	}
	return usage, byok, slot, ok
}

// setKeySlotCounters is setKeyCounters on the slot ledgerKeyUsage
// returned, under the same hold of the kernel's lock.
func (s *AccountStore) setKeySlotCounters(slot uint32, sc levels.Scope) {
	s.keys.StoreSlotCounters(slot, sc.Usage, sc.BYOKUsage)
}

// ledgerAccountIDs calls fn with every account's id.
func (s *AccountStore) ledgerAccountIDs(fn func(id string)) {
	for id := range s.accounts {
		fn(id)
	}
}

// setAccountCounters replaces the account's record with its usage and
// free-model counters taken from a; false when there is no record.
func (s *AccountStore) setAccountCounters(id string, a levels.Account) bool {
	acct, ok := s.accounts[id]
	if !ok {
		return false
	}
	c := *acct
	c.Usage, c.BYOKUsage, c.FreeModelRequests, c.FreeModelMinute = a.Usage, a.BYOKUsage, a.FreeDay, a.FreeMinute
	s.accounts[id] = &c
	return true
}

// setKeyCounters replaces the key's record with its usage counters taken
// from sc; false when there is no record.
func (s *AccountStore) setKeyCounters(hash string, sc levels.Scope) bool {
	return s.keys.SetCounters(hash, sc.Usage, sc.BYOKUsage)
}

// ledgerWorkspace is the workspace's record; nil when there is none.
func (s *OrgStore) ledgerWorkspace(accountID, id string) *Workspace {
	return s.workspaces[accountID][id]
}

// ledgerMember is the member's record; nil when there is none.
func (s *OrgStore) ledgerMember(accountID, id string) *Member {
	return s.members[accountID][id]
}

// setWorkspaceCounters replaces the workspace's record with its usage
// counters taken from sc; false when there is no record. These counters
// change no key's rules, so the rules cache stays valid.
func (s *OrgStore) setWorkspaceCounters(accountID, id string, sc levels.Scope) bool {
	ws, ok := s.workspaces[accountID][id]
	if !ok {
		return false
	}
	w := *ws
	w.Usage, w.BYOKUsage = sc.Usage, sc.BYOKUsage
	s.workspaces[accountID][id] = &w
	return true
}

// setMemberCounters replaces the member's record with its usage counters
// taken from sc; false when there is no record.
func (s *OrgStore) setMemberCounters(accountID, id string, sc levels.Scope) bool {
	mem, ok := s.members[accountID][id]
	if !ok {
		return false
	}
	m := *mem
	m.Usage, m.BYOKUsage = sc.Usage, sc.BYOKUsage
	s.members[accountID][id] = &m
	return true
}

// ledgerRecords are the account and org stores as a shared ledger reaches
// them (ledger.Records). The in-process ledger calls the stores' methods
// directly: its snapshot's copy of a key stays on the caller's stack.
type ledgerRecords struct {
	acct *AccountStore
	org  *OrgStore
}

var _ ledger.Records = ledgerRecords{}

func (r ledgerRecords) LedgerAccount(id string) *Account { return r.acct.ledgerAccount(id) }
func (r ledgerRecords) LedgerKey(hash string) *APIKey    { return r.acct.ledgerKey(hash) }
func (r ledgerRecords) LedgerAccountIDs(fn func(id string)) {
	r.acct.ledgerAccountIDs(fn)
}
func (r ledgerRecords) SetAccountCounters(id string, a levels.Account) bool {
	return r.acct.setAccountCounters(id, a)
}
func (r ledgerRecords) SetKeyCounters(hash string, sc levels.Scope) bool {
	return r.acct.setKeyCounters(hash, sc)
}
func (r ledgerRecords) LedgerWorkspace(accountID, id string) *Workspace {
	return r.org.ledgerWorkspace(accountID, id)
}
func (r ledgerRecords) LedgerMember(accountID, id string) *Member {
	return r.org.ledgerMember(accountID, id)
}
func (r ledgerRecords) SetWorkspaceCounters(accountID, id string, sc levels.Scope) bool {
	return r.org.setWorkspaceCounters(accountID, id, sc)
}
func (r ledgerRecords) SetMemberCounters(accountID, id string, sc levels.Scope) bool {
	return r.org.setMemberCounters(accountID, id, sc)
}
