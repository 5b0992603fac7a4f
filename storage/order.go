package storage

import (
	"sort"
	"time"
)

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
