package storage

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// accountRecord is a record kept per account: it names the account it
// belongs to and its own id within that account.
type accountRecord interface {
	recordIDs() (accountID, id string)
}

// accountRecords holds the in-memory copy of one record type, by account
// id, then record id; on disk each record is the JSON of T under
// <prefix><account id>/<id> (see recordKey). A published record is never
// modified: a change publishes a new pointer, so that a reader holding the
// old one (or a snapshot being encoded) sees a consistent record.
//
// It is a plain map, so lookups and ranges index it directly; its methods
// add the boilerplate around it. Callers hold s.mu (or run in Open).
type accountRecords[T accountRecord] map[string]map[string]*T

// recordKey is the database key of a per-account record.
func recordKey(prefix, accountID, id string) string { return prefix + accountID + "/" + id }

// put publishes v under the ids it names.
func (r accountRecords[T]) put(v *T) {
	accountID, id := (*v).recordIDs()
	m := r[accountID]
	if m == nil {
		m = map[string]*T{}
		r[accountID] = m
	}
	m[id] = v
}

// remove unpublishes a record, dropping the account's map once it is
// empty; false when there was no such record.
func (r accountRecords[T]) remove(accountID, id string) bool {
	if _, ok := r[accountID][id]; !ok {
		return false
	}
	delete(r[accountID], id)
	if len(r[accountID]) == 0 {
		delete(r, accountID)
	}
	return true
}

// load decodes one stored record at warm-up and publishes it.
func (r accountRecords[T]) load(v []byte) (*T, error) {
	rec := new(T)
	if err := json.Unmarshal(v, rec); err != nil {
		return nil, err
	}
	r.put(rec)
	return rec, nil
}

// snapshot is Store.snapshot for a key of this record type (prefix is the
// type's key prefix): a copy of the record, or nil when it is gone.
func (r accountRecords[T]) snapshot(prefix, key string) any {
	accountID, id, ok := strings.Cut(key[len(prefix):], "/")
	if !ok {
		return nil
	}
	if v, ok := r[accountID][id]; ok {
		return *v
	}
	return nil
}

// newestFirstPage sorts records by descending creation sequence and
// returns the page at offset (limit 0: all the rest; never nil) and how
// many records there are in all.
func newestFirstPage[T any](all []T, seq func(*T) uint64, offset, limit int) ([]T, int) {
	sort.Slice(all, func(i, j int) bool { return seq(&all[i]) > seq(&all[j]) })
	total := len(all)
	if offset >= len(all) {
		return []T{}, total
	}
	all = all[offset:]
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, total
}

// sortOldestFirst sorts records by creation time, then by id (what key
// returns), so that records created in one clock tick keep a stable order.
func sortOldestFirst[T any](rs []T, key func(*T) (created time.Time, id string)) {
	sort.Slice(rs, func(i, j int) bool {
		ti, idi := key(&rs[i])
		tj, idj := key(&rs[j])
		if ti.Equal(tj) {
			return idi < idj
		}
		return ti.Before(tj)
	})
}

// putDirty publishes a new or changed record and marks it dirty; the
// batch it returns is durable once the record is. Callers hold s.mu.
func putDirty[T accountRecord](s *Store, r accountRecords[T], prefix string, v *T) *batch {
	r.put(v)
	accountID, id := (*v).recordIDs()
	return s.markDirty(recordKey(prefix, accountID, id))
}

// publishRecord is putDirty, then releases s.mu and waits until the record
// is durable. Callers hold s.mu.
func publishRecord[T accountRecord](s *Store, r accountRecords[T], prefix string, v *T) error {
	b := putDirty(s, r, prefix, v)
	s.mu.Unlock()
	return b.wait()
}

// updateRecord replaces an account's record by what next derives from the
// current one (next runs under s.mu and may refuse with an error, nothing
// written), and waits until the change is durable. ErrNotFound when there
// is no such record.
func updateRecord[T accountRecord](s *Store, r accountRecords[T], prefix, accountID, id string, next func(cur *T) (*T, error)) (T, error) {
	var zero T
	s.mu.Lock()
	cur, ok := r[accountID][id]
	if !ok {
		s.mu.Unlock()
		return zero, ErrNotFound
	}
	v, err := next(cur)
	if err != nil {
		s.mu.Unlock()
		return zero, err
	}
	out := *v
	return out, publishRecord(s, r, prefix, v)
}

// deleteRecord removes an account's record and waits until the deletion is
// durable; ErrNotFound when there is no such record.
func deleteRecord[T accountRecord](s *Store, r accountRecords[T], prefix, accountID, id string) error {
	s.mu.Lock()
	if !r.remove(accountID, id) {
		s.mu.Unlock()
		return ErrNotFound
	}
	b := s.markDirty(recordKey(prefix, accountID, id))
	s.mu.Unlock()
	return b.wait()
}

// accountWorkspace resolves the workspace of a new record of an account
// that has only its default workspace: "" is the default, any other id
// must be it. Callers hold s.mu.
func (s *Store) accountWorkspace(accountID, workspaceID string) (string, error) {
	acct, ok := s.accounts[accountID]
	if !ok {
		return "", fmt.Errorf("%w: account", ErrNotFound)
	}
	if workspaceID != "" && workspaceID != acct.DefaultWorkspaceID {
		return "", fmt.Errorf("%w: workspace", ErrNotFound)
	}
	return acct.DefaultWorkspaceID, nil
}
