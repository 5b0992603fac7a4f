package kernel

import (
	"errors"
	"sort"
	"strings"
	"time"
)

// The domain stores' reads and writes of per-account records (Records),
// each one lock site.

// ErrConflict: the change contradicts the current state (a duplicate, or
// a workspace that still holds keys).
var ErrConflict = errors.New("conflict")

// Removable gives a kind of per-account records the Remove that drops a
// record another replica deleted (Kernel.RemoveRecord), each store its
// own.
func Removable[T AccountRecord](kind Kind, r Records[T]) Kind {
	kind.Remove = func(key string) {
		accountID, id, _ := strings.Cut(key[len(kind.Prefix):], "/")
		r.Remove(accountID, id)
	}
	return kind
}

// Lookup returns a copy of an account's record, read under RLock: the one
// lock site of the stores' reads of a record by id.
func Lookup[T AccountRecord](k *Kernel, r Records[T], accountID, id string) (T, bool) {
	k.RLock()
	defer k.RUnlock()
	v, ok := r[accountID][id]
	if !ok {
		var zero T
		return zero, false
	}
	return *v, true
}

// Collect returns copies of an account's records that keep admits (nil:
// all), in no order, read under RLock: the one lock site of the stores'
// lists of an account's records. Their slices and maps are the published
// records', never modified: a caller that hands them out clones them.
func Collect[T AccountRecord](k *Kernel, r Records[T], accountID string, keep func(*T) bool) []T {
	k.RLock()
	defer k.RUnlock()
	m := r[accountID]
	out := make([]T, 0, len(m))
	for _, v := range m {
		if keep == nil || keep(v) {
			out = append(out, *v)
		}
	}
	k.Visited(len(m))
	return out
}

// Create publishes the new record that prepare makes under Lock (it may
// refuse with an error: nothing written) and waits until it is durable:
// the one lock site of the stores' new per-account records that publish
// nothing else.
func Create[T AccountRecord](k *Kernel, r Records[T], prefix string, prepare func() (*T, error)) error {
	k.Lock()
	v, err := prepare()
	if err != nil {
		k.Unlock()
		return err
	}
	return Publish(k, r, prefix, v)
}

// NewestFirstPage sorts records by descending creation sequence and
// returns the page at offset (limit 0: all the rest; never nil) and how
// many records there are in all.
func NewestFirstPage[T any](all []T, seq func(*T) uint64, offset, limit int) ([]T, int) {
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

// SortOldestFirst sorts records by creation time, then by id (what key
// returns), so that records created in one clock tick keep a stable order.
func SortOldestFirst[T any](rs []T, key func(*T) (created time.Time, id string)) {
	sort.Slice(rs, func(i, j int) bool {
		ti, idi := key(&rs[i])
		tj, idj := key(&rs[j])
		if ti.Equal(tj) {
			return idi < idj
		}
		return ti.Before(tj)
	})
}
