package storage

import (
	"slices"
	"sort"
)

// keyIndex lists each account's API keys in creation order (Seq), so that
// reading one account's keys walks that account's keys only, never the
// gateway's. It holds the keys' slots in the key table (keyTable), not
// records: a change of a key's record (counters, name, disabled) rewrites
// its slot and leaves the index alone; only a key's arrival or removal
// changes it.
// Callers hold the kernel's lock (Lock to change it, RLock to read a
// sorted account's list).
type keyIndex map[string]*accountKeys

// accountKeys is one account's keys by Seq, ascending once sorted.
type accountKeys struct {
	entries []keyEntry
	// sorted is false after a load appended keys out of order (a scan
	// reads them in hash order); the first reader sorts them, once.
	sorted bool
}

type keyEntry struct {
	seq  uint64
	slot uint32
}

// add indexes a key. A new key has the highest Seq and is appended in
// order; a loaded one may not, and leaves the list to be sorted.
func (x keyIndex) add(accountID string, seq uint64, slot uint32) {
	ak := x[accountID]
	if ak == nil {
		ak = &accountKeys{sorted: true}
		x[accountID] = ak
	}
	if n := len(ak.entries); n > 0 && ak.entries[n-1].seq >= seq {
		ak.sorted = false
	}
	ak.entries = append(ak.entries, keyEntry{seq, slot})
}

// remove drops a key from its account's list.
func (x keyIndex) remove(accountID string, seq uint64, slot uint32) {
	ak := x[accountID]
	if ak == nil {
		return
	}
	i := -1
	if ak.sorted {
		j, found := sort.Find(len(ak.entries), func(j int) int {
			switch e := ak.entries[j].seq; {
			case seq < e:
				return -1
			case seq > e:
				return 1
			}
			return 0
		})
		// Seqs are unique, but a record loaded from an older version
		// could repeat one: fall back to the slot.
		if found && ak.entries[j].slot == slot {
			i = j
		}
	}
	if i < 0 {
		i = slices.IndexFunc(ak.entries, func(e keyEntry) bool { return e.slot == slot })
	}
	if i < 0 {
		return
	}
	ak.entries = slices.Delete(ak.entries, i, i+1)
	if len(ak.entries) == 0 {
		delete(x, accountID)
	}
}

// sort orders every account's list that a load left unsorted. Callers
// hold Lock.
func (x keyIndex) sort() {
	for _, ak := range x {
		ak.sort()
	}
}

// indexTable builds the index of a whole table (restored from its
// snapshot): the keys counted by account (the table's interned id), placed
// account by account in one array, each account's run sorted by Seq, and
// one map entry per account. Adding them one at a time walked the map in
// slot order, which, for a table once filled from the key records (read
// in hash order), is another account at every key: at a million keys
// 0.59 s of a start's CPU, against 0.16 s for slots in creation order.
func indexTable(t *keyTable) keyIndex {
	starts := make([]int, len(t.strs.list)+1)
	t.each(func(slot uint32) bool {
		starts[t.slots[slot].account+1]++
		return true
	})
	accounts := 0
	for id := 1; id < len(starts); id++ {
		if starts[id] > 0 {
			accounts++
		}
		starts[id] += starts[id-1]
	}
	all := make([]keyEntry, starts[len(starts)-1])
	next := slices.Clone(starts[:len(starts)-1])
	t.each(func(slot uint32) bool {
		id := t.slots[slot].account
		all[next[id]] = keyEntry{t.slots[slot].seq, slot}
		next[id]++
		return true
	})
	x := make(keyIndex, accounts)
	for id := range len(starts) - 1 {
		from, to := starts[id], starts[id+1]
		if from == to {
			continue
		}
		// Capped: an account's next key reallocates its list rather
		// than overwrite the next account's.
		ak := &accountKeys{entries: all[from:to:to]}
		ak.sort()
		x[t.strs.get(uint32(id))] = ak
	}
	return x
}

// sortKeyIndex sorts the key lists a load left unsorted (Open, before
// any reader). Callers hold Lock, or run in Open.
func (s *AccountStore) sortKeyIndex() { s.keyIdx.sort() }

func (ak *accountKeys) sort() {
	if ak.sorted {
		return
	}
	slices.SortStableFunc(ak.entries, func(a, b keyEntry) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	ak.sorted = true
}

// putKey publishes a key's record and keeps the account index in step.
// Callers hold Lock.
func (s *AccountStore) putKey(k *APIKey) {
	slot, oldAccount, oldSeq, replaced := s.keys.put(k)
	if replaced {
		if oldAccount == k.AccountID && oldSeq == k.Seq {
			return
		}
		s.keyIdx.remove(oldAccount, oldSeq, slot)
	}
	s.keyIdx.add(k.AccountID, k.Seq, slot)
}

// dropKey unpublishes a key and returns its account; false when there was
// none. Callers hold Lock.
func (s *AccountStore) dropKey(hash string) (string, bool) {
	slot, account, seq, ok := s.keys.remove(hash)
	if !ok {
		return "", false
	}
	s.keyIdx.remove(account, seq, slot)
	return account, true
}

// accountKeysRLocked returns the account's key list, sorted, holding
// RLock when it returns (nil when the account has no keys). A list a load
// left unsorted is sorted once under Lock. Callers hold RLock; it may be
// released and taken again meanwhile.
func (s *AccountStore) accountKeysRLocked(accountID string) *accountKeys {
	for {
		ak := s.keyIdx[accountID]
		if ak == nil || ak.sorted {
			return ak
		}
		s.k.RUnlock()
		s.k.Lock()
		if ak := s.keyIdx[accountID]; ak != nil {
			ak.sort()
		}
		s.k.Unlock()
		s.k.RLock()
	}
}

// keyRef is one key of the table, read field by field from its slot
// without materializing the record; valid while the kernel's lock is held.
type keyRef struct {
	t    *keyTable
	slot uint32
}

func (r keyRef) hash() string            { return r.t.slotHash(r.slot) }
func (r keyRef) workspaceID() string     { return r.t.slotWorkspace(r.slot) }
func (r keyRef) creator() (string, bool) { return r.t.slotCreator(r.slot) }

// eachAccountKey calls fn with each of an account's keys, in no
// particular order, until it returns false. Callers hold the kernel's lock.
func (s *AccountStore) eachAccountKey(accountID string, fn func(keyRef) bool) {
	s.eachAccountSlot(accountID, func(slot uint32) bool { return fn(keyRef{s.keys, slot}) })
}

// eachAccountSlot calls fn with each of an account's keys' slots, in no
// particular order, until it returns false. Callers hold the kernel's lock.
func (s *AccountStore) eachAccountSlot(accountID string, fn func(slot uint32) bool) {
	ak := s.keyIdx[accountID]
	if ak == nil {
		return
	}
	s.k.Visited(len(ak.entries))
	for _, e := range ak.entries {
		if !fn(e.slot) {
			return
		}
	}
}

// mgmtKeyIndex holds each account's management key hashes: a slice, not
// a set, since an account has a few (a map per account cost about 300
// bytes at a hundred thousand accounts).
type mgmtKeyIndex map[string][]string

// add appends a hash the account's list does not hold.
func (x mgmtKeyIndex) add(accountID, hash string) {
	x[accountID] = append(x[accountID], hash)
}

func (x mgmtKeyIndex) remove(accountID, hash string) {
	if i := slices.Index(x[accountID], hash); i >= 0 {
		x[accountID] = slices.Delete(x[accountID], i, i+1)
	}
	if len(x[accountID]) == 0 {
		delete(x, accountID)
	}
}

// putMgmtKey publishes a management key's record and indexes it. Callers
// hold Lock.
func (s *AccountStore) putMgmtKey(m *ManagementKey) {
	cur, ok := s.mgmtKeys[m.Hash]
	if ok && cur.AccountID != m.AccountID {
		s.mgmtIdx.remove(cur.AccountID, cur.Hash)
		ok = false
	}
	s.mgmtKeys[m.Hash] = m
	if !ok {
		s.mgmtIdx.add(m.AccountID, m.Hash)
	}
}

// dropMgmtKey unpublishes a management key; false when there was none.
// Callers hold Lock.
func (s *AccountStore) dropMgmtKey(hash string) bool {
	cur, ok := s.mgmtKeys[hash]
	if !ok {
		return false
	}
	delete(s.mgmtKeys, hash)
	s.mgmtIdx.remove(cur.AccountID, hash)
	return true
}
