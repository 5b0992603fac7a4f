package storage

import (
	"slices"

	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
)

// sortKeyIndex sorts the key lists a load left unsorted (Open, before
// any reader). Callers hold Lock, or run in Open.
func (s *AccountStore) sortKeyIndex() { s.keyIdx.Sort() }

// putKey publishes a key's record and keeps the account index in step.
// Callers hold Lock.
func (s *AccountStore) putKey(k *APIKey) {
	slot, oldAccount, oldSeq, replaced := s.keys.Put(k)
	if replaced {
		if oldAccount == k.AccountID && oldSeq == k.Seq {
			return
		}
		s.keyIdx.Remove(oldAccount, oldSeq, slot)
	}
	s.keyIdx.Add(k.AccountID, k.Seq, slot)
}

// dropKey unpublishes a key and returns its account; false when there was
// none. Callers hold Lock.
func (s *AccountStore) dropKey(hash string) (string, bool) {
	slot, account, seq, ok := s.keys.Remove(hash)
	if !ok {
		return "", false
	}
	s.keyIdx.Remove(account, seq, slot)
	return account, true
}

// accountKeysRLocked returns the account's key list, sorted, holding
// RLock when it returns (nil when the account has no keys). A list a load
// left unsorted is sorted once under Lock. Callers hold RLock; it may be
// released and taken again meanwhile.
func (s *AccountStore) accountKeysRLocked(accountID string) *keytable.AccountKeys {
	for {
		ak := s.keyIdx[accountID]
		if ak == nil || ak.Sorted() {
			return ak
		}
		s.k.RUnlock()
		s.k.Lock()
		if ak := s.keyIdx[accountID]; ak != nil {
			ak.Sort()
		}
		s.k.Unlock()
		s.k.RLock()
	}
}

// eachAccountKey calls fn with each of an account's keys, in no
// particular order, until it returns false. Callers hold the kernel's lock.
func (s *AccountStore) eachAccountKey(accountID string, fn func(keytable.Ref) bool) {
	s.eachAccountSlot(accountID, func(slot uint32) bool { return fn(keytable.Ref{T: s.keys, Slot: slot}) })
}

// eachAccountSlot calls fn with each of an account's keys' slots, in no
// particular order, until it returns false. Callers hold the kernel's lock.
func (s *AccountStore) eachAccountSlot(accountID string, fn func(slot uint32) bool) {
	ak := s.keyIdx[accountID]
	if ak == nil {
		return
	}
	s.k.Visited(ak.Len())
	for i := range ak.Len() {
		if !fn(ak.Slot(i)) {
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
