package storage

import (
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// The records' snapshot (writeRecordSnapshot) holds accounts, purchases,
// management keys and workspaces in a compact binary form, generated in
// package record from the records' declarations (its primitives are
// package codec's): each field in declaration order, strings
// length-prefixed, integers as varints, times as time.Time's binary
// form, a pointer as a presence byte and its value, a count before a
// slice's elements (or a map's entries, in no order) and a presence byte
// before a slice, so that nil and empty stay apart as in their JSON.
// Decoding it costs a fraction of reading their JSON.

// snapKinds are the kinds in the records' snapshot, in load order.
func (s *Store) snapKinds() []snapKind {
	a, o := s.AccountStore, s.OrgStore
	wsKind := o.workspaceKind()
	return []snapKind{
		{prefix: prefixAccount, collect: a.collectAccounts, encode: record.EncodeAccount,
			load: a.loadSnapAccount, dbLoad: a.loadAccount, reset: func() { clear(a.accounts) },
			grow: func(n int) { grow(&a.accounts, n) }},
		{prefix: prefixPurchase, collect: a.collectPurchases, keyOf: purchaseSnapKey, encode: record.EncodePurchase,
			load: a.loadSnapPurchase, dbLoad: a.loadPurchase, reset: func() { clear(a.purchases) },
			grow: func(n int) { grow(&a.purchases, n) }},
		{prefix: prefixMgmtKey, collect: a.collectMgmtKeys, encode: record.EncodeMgmtKey,
			load: a.loadSnapMgmtKey, dbLoad: a.loadMgmtKey, reset: func() { clear(a.mgmtKeys); clear(a.mgmtIdx) },
			grow: func(n int) { grow(&a.mgmtKeys, n); grow(&a.mgmtIdx, n) }},
		{prefix: prefixWorkspace, collect: o.collectWorkspaces, keyOf: workspaceSnapKey, encode: record.EncodeWorkspace,
			load: o.loadSnapWorkspace, dbLoad: wsKind.Load, reset: wsKind.Reset},
	}
}

// grow replaces an empty map (read through its field) by one sized for n
// entries.
func grow[M ~map[K]V, K comparable, V any](m *M, n int) {
	if len(*m) == 0 {
		*m = make(M, n)
	}
}

// The collect functions read the maps under RLock (writers wait, readers
// do not), each map in one pass but for the workspaces' per-account
// maps, read in steps of collectStep accounts: at 100,000 accounts one
// pass over a map took about 3 ms, over every account's workspaces 50.
// A record changed between two steps is tracked as changed, so the
// steps need not be one instant.

// collectStep is how many accounts' workspaces one step reads.
var collectStep = 512

func (s *AccountStore) collectAccounts(k *kernel.Kernel) []snapRecord {
	return collectMap(k, s.accounts)
}

// collectMap takes a map of published records (never changed in place)
// in one pass under the read lock.
func collectMap[V any](k *kernel.Kernel, m map[string]*V) []snapRecord {
	k.RLock()
	defer k.RUnlock()
	out := make([]snapRecord, 0, len(m))
	for key, v := range m {
		out = append(out, snapRecord{key, v})
	}
	return out
}

// collectPurchases takes each account's purchases, as a slice (append-
// only: the elements a slice covers never change), then lists them
// without the lock.
func (s *AccountStore) collectPurchases(k *kernel.Kernel) []snapRecord {
	type account struct{ ps []Purchase }
	k.RLock()
	lists := make([]account, 0, len(s.purchases))
	n := 0
	for _, ps := range s.purchases {
		lists = append(lists, account{ps})
		n += len(ps)
	}
	k.RUnlock()
	out := make([]snapRecord, 0, n)
	for _, l := range lists {
		for i := range l.ps {
			out = append(out, snapRecord{"", &l.ps[i]})
		}
	}
	return out
}

func (s *AccountStore) collectMgmtKeys(k *kernel.Kernel) []snapRecord {
	return collectMap(k, s.mgmtKeys)
}

// collectWorkspaces lists the accounts that have workspaces, then reads
// their workspaces (maps changed in place) in steps.
func (s *OrgStore) collectWorkspaces(k *kernel.Kernel) []snapRecord {
	k.RLock()
	ids := make([]string, 0, len(s.workspaces))
	for id := range s.workspaces {
		ids = append(ids, id)
	}
	k.RUnlock()
	out := make([]snapRecord, 0, len(ids))
	for at := 0; at < len(ids); at += collectStep {
		k.RLock()
		for _, id := range ids[at:min(at+collectStep, len(ids))] {
			for _, w := range s.workspaces[id] {
				out = append(out, snapRecord{"", w})
			}
		}
		k.RUnlock()
	}
	return out
}

// purchaseSnapKey and workspaceSnapKey are a record's key after its prefix, made
// outside the lock.
func purchaseSnapKey(v any) string {
	p := v.(*Purchase)
	return p.AccountID + "/" + p.ID
}

func workspaceSnapKey(v any) string {
	w := v.(*Workspace)
	return w.AccountID + "/" + w.ID
}

func (s *AccountStore) loadSnapAccount(_, v []byte, strs *codec.StrArena) error {
	a := new(Account)
	if err := record.DecodeAccount(v, a, strs); err != nil {
		return err
	}
	s.accounts[a.ID] = a
	return nil
}

func (s *AccountStore) loadSnapPurchase(_, v []byte, strs *codec.StrArena) error {
	var r Purchase
	if err := record.DecodePurchase(v, &r, strs); err != nil {
		return err
	}
	s.purchases[r.AccountID] = append(s.purchases[r.AccountID], r)
	return nil
}

func (s *AccountStore) loadSnapMgmtKey(_, v []byte, strs *codec.StrArena) error {
	m := new(ManagementKey)
	if err := record.DecodeMgmtKey(v, m, strs); err != nil {
		return err
	}
	s.putMgmtKey(m)
	return nil
}

// loadSnapWorkspace publishes a workspace as the kind's Load does.
func (s *OrgStore) loadSnapWorkspace(_, v []byte, strs *codec.StrArena) error {
	w := new(Workspace)
	if err := record.DecodeWorkspace(v, w, strs); err != nil {
		return err
	}
	s.workspaces.Put(w)
	return nil
}
