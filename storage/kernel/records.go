package kernel

import (
	"encoding/json"
	"strings"
)

// AccountRecord is a record kept per account: it names the account it
// belongs to and its own id within that account.
type AccountRecord interface {
	RecordIDs() (accountID, id string)
}

// Records holds the in-memory copy of one record kind, by account id, then
// record id; in the database each record is the JSON of T under
// <prefix><account id>/<id> (see RecordKey). A published record is never
// modified: a change publishes a new pointer, so that a reader holding the
// old one (or a snapshot being encoded) sees a consistent record.
//
// It is a plain map, so lookups and ranges index it directly; its methods
// add the boilerplate around it. Callers hold the kernel's lock (or run in
// a Kind's Load).
type Records[T AccountRecord] map[string]map[string]*T

// RecordKey is the database key of a per-account record.
func RecordKey(prefix, accountID, id string) string { return prefix + accountID + "/" + id }

// Put publishes v under the ids it names.
func (r Records[T]) Put(v *T) {
	accountID, id := (*v).RecordIDs()
	m := r[accountID]
	if m == nil {
		m = map[string]*T{}
		r[accountID] = m
	}
	m[id] = v
}

// Remove unpublishes a record, dropping the account's map once it is
// empty; false when there was no such record.
func (r Records[T]) Remove(accountID, id string) bool {
	if _, ok := r[accountID][id]; !ok {
		return false
	}
	delete(r[accountID], id)
	if len(r[accountID]) == 0 {
		delete(r, accountID)
	}
	return true
}

// Load decodes one stored record at warm-up and publishes it.
func (r Records[T]) Load(v []byte) (*T, error) {
	rec := new(T)
	if err := json.Unmarshal(v, rec); err != nil {
		return nil, err
	}
	r.Put(rec)
	return rec, nil
}

// Snapshot is Kind.Snapshot for a key of this record kind (prefix is the
// kind's key prefix): a copy of the record, or nil when it is gone.
func (r Records[T]) Snapshot(prefix, key string) any {
	accountID, id, ok := strings.Cut(key[len(prefix):], "/")
	if !ok {
		return nil
	}
	if v, ok := r[accountID][id]; ok {
		return *v
	}
	return nil
}

// Kind is the kernel record kind of these records under prefix (its Reset
// empties r in place, the map its Load fills); load,
// when not nil, runs on each loaded record (to default its maps, or to
// observe its sequence number).
func (r Records[T]) Kind(prefix string, load func(*T)) Kind {
	return Kind{
		Prefix: prefix,
		Load: func(_, v []byte) error {
			rec, err := r.Load(v)
			if err == nil && load != nil {
				load(rec)
			}
			return err
		},
		Reset:    func() { clear(r) },
		Snapshot: func(key string) any { return r.Snapshot(prefix, key) },
	}
}

// PutDirty publishes a new or changed record and marks it dirty; the
// batch it returns is durable once the record is. Callers hold Lock.
func PutDirty[T AccountRecord](k *Kernel, r Records[T], prefix string, v *T) *Batch {
	r.Put(v)
	accountID, id := (*v).RecordIDs()
	return k.MarkDirty(RecordKey(prefix, accountID, id))
}

// Publish is PutDirty, then releases Lock and waits until the record is
// durable. Callers hold Lock.
func Publish[T AccountRecord](k *Kernel, r Records[T], prefix string, v *T) error {
	b := PutDirty(k, r, prefix, v)
	k.Unlock()
	return b.Wait()
}

// Update replaces an account's record by what next derives from the
// current one (next runs under Lock and may refuse with an error, nothing
// written), and waits until the change is durable. ErrNotFound when there
// is no such record.
func Update[T AccountRecord](k *Kernel, r Records[T], prefix, accountID, id string, next func(cur *T) (*T, error)) (T, error) {
	var zero T
	k.Lock()
	cur, ok := r[accountID][id]
	if !ok {
		k.Unlock()
		return zero, ErrNotFound
	}
	v, err := next(cur)
	if err != nil {
		k.Unlock()
		return zero, err
	}
	out := *v
	return out, Publish(k, r, prefix, v)
}

// Delete removes an account's record and waits until the deletion is
// durable; ErrNotFound when there is no such record.
func Delete[T AccountRecord](k *Kernel, r Records[T], prefix, accountID, id string) error {
	k.Lock()
	if !r.Remove(accountID, id) {
		k.Unlock()
		return ErrNotFound
	}
	b := k.MarkDirty(RecordKey(prefix, accountID, id))
	k.Unlock()
	return b.Wait()
}
