package analytics

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// UsageFilter keeps cells whose dimension Dim is (or, Negate, is not) one of
// Values. An unset dimension ("") matches only when IncludeUnset is true.
type UsageFilter struct {
	Dim          string
	Values       []string
	Negate       bool
	IncludeUnset bool
}

// Time bucket granularities of QueryUsage; the rollup's resolution is one hour.
const (
	GranularityNone  = ""
	GranularityHour  = "hour"
	GranularityDay   = "day"
	GranularityWeek  = "week" // weeks start on Monday, UTC
	GranularityMonth = "month"
)

// UsageQuery selects rollup cells and groups them.
type UsageQuery struct {
	From, To    time.Time // [From, To), whole hours
	Granularity string
	GroupBy     []string // at most 3 of Dims
	Filters     []UsageFilter
}

// UsageRow is one group of a query: its time bucket (zero without a
// granularity), its dimension values in GroupBy order, and its sums.
type UsageRow struct {
	Bucket time.Time
	Dims   []string
	Sums   Sums
}

// BucketStart returns the start of t's bucket at granularity g (UTC).
func BucketStart(t time.Time, g string) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	switch g {
	case GranularityHour:
		return t.Truncate(time.Hour)
	case GranularityDay:
		return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	case GranularityWeek:
		day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	case GranularityMonth:
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

type groupKey struct {
	bucket int64
	d      [3]uint32
}

// KeyCreators maps an account's key hashes to the org member who created
// each (the `user` dimension).
func (s *Store) KeyCreators(accountID string) map[string]string {
	s.k.RLock()
	defer s.k.RUnlock()
	out := map[string]string{}
	s.Keys.EachKeyCreator(accountID, func(hash, creator string) { out[hash] = creator })
	return out
}

// QueryUsage aggregates an account's rollup cells; the work per cell is a
// few integer comparisons and one map update. Rows come in no particular
// order.
func (s *Store) QueryUsage(accountID string, q UsageQuery) ([]UsageRow, error) {
	if len(q.GroupBy) > 3 {
		return nil, fmt.Errorf("%w: at most 3 dimensions", record.ErrInvalid)
	}
	known := func(d string) bool { return d == DimUser || slices.Contains(Dims, d) }
	for _, d := range q.GroupBy {
		if !known(d) {
			return nil, fmt.Errorf("%w: unknown dimension %q", record.ErrInvalid, d)
		}
	}
	for _, f := range q.Filters {
		if !known(f.Dim) {
			return nil, fmt.Errorf("%w: unknown dimension %q", record.ErrInvalid, f.Dim)
		}
	}
	a := s.analytics.account(accountID, false)
	if a == nil {
		return []UsageRow{}, nil
	}
	var creators map[string]string
	for _, d := range append(slices.Clone(q.GroupBy), filterDims(q.Filters)...) {
		if d == DimUser && creators == nil {
			creators = s.KeyCreators(accountID)
		}
	}
	// Query-local strings: the creators of keys (DimUser).
	local := []string{""}
	localID := map[string]uint32{"": 0}

	lo, hi := hourOf(q.From), hourOf(q.To)
	if q.To.Unix()%3600 != 0 {
		hi++
	}
	buckets := map[int32]int64{}
	groups := map[groupKey]*Sums{}
	var userOf []uint32 // by key id: creator's local id
	lastHour, lastBucket := int32(-1), int64(0)
	var lastKey groupKey
	var lastGroup *Sums
	a.mu.RLock()
	n := len(a.cells)
	a.mu.RUnlock()
	for start := 0; start < n; start += scanChunk {
		a.mu.RLock()
		if creators != nil {
			for len(userOf) < len(a.strs) {
				c := creators[a.strs[len(userOf)]]
				id, ok := localID[c]
				if !ok {
					id = uint32(len(local))
					local = append(local, c)
					localID[c] = id
				}
				userOf = append(userOf, id)
			}
		}
		// Filters as sets of ids; values this account never saw match nothing.
		sets := make([]idSet, len(q.Filters))
		for i := range q.Filters {
			sets[i] = a.idSet(&q.Filters[i], localID)
		}
		dim := func(x *cell, d string) uint32 {
			switch d {
			case DimModel:
				return x.k.model
			case DimProvider:
				return x.k.provider
			case DimAPIKey:
				return x.k.key
			case DimEndUser:
				return x.k.user
			case DimWorkspace:
				return x.k.workspace
			case DimStatus:
				return x.k.st
			case DimBYOK:
				if x.k.byok {
					return 1
				}
				return 0
			case DimUser:
				return userOf[x.k.key]
			}
			return 0
		}
	cells:
		for i := start; i < min(start+scanChunk, n, len(a.cells)); i++ { // dropBefore may shrink cells between chunks
			x := &a.cells[i]
			if x.k.hour < lo || x.k.hour >= hi {
				continue
			}
			for j := range sets {
				if !sets[j].match(dim(x, q.Filters[j].Dim)) {
					continue cells
				}
			}
			var k groupKey
			if q.Granularity != GranularityNone {
				// Cells mostly come in hour order: the last hour's
				// bucket saves a map lookup per cell.
				if x.k.hour != lastHour {
					b, ok := buckets[x.k.hour]
					if !ok {
						b = BucketStart(time.Unix(int64(x.k.hour)*3600, 0), q.Granularity).Unix()
						buckets[x.k.hour] = b
					}
					lastHour, lastBucket = x.k.hour, b
				}
				k.bucket = lastBucket
			}
			for j, d := range q.GroupBy {
				k.d[j] = dim(x, d)
			}
			// Likewise the last group (every cell of a day, without GroupBy).
			if lastGroup == nil || k != lastKey {
				lastGroup = groups[k]
				if lastGroup == nil {
					lastGroup = &Sums{}
					groups[k] = lastGroup
				}
				lastKey = k
			}
			lastGroup.Add(x.s)
		}
		a.mu.RUnlock()
	}
	a.mu.RLock()
	name := func(d string, id uint32) string {
		switch d {
		case DimBYOK:
			return strconv.FormatBool(id == 1)
		case DimUser:
			return local[id]
		}
		return a.strs[id]
	}
	rows := make([]UsageRow, 0, len(groups))
	for k, sums := range groups {
		r := UsageRow{Dims: make([]string, len(q.GroupBy)), Sums: *sums}
		for j, d := range q.GroupBy {
			r.Dims[j] = name(d, k.d[j])
		}
		if q.Granularity != GranularityNone {
			r.Bucket = time.Unix(k.bucket, 0).UTC()
		}
		rows = append(rows, r)
	}
	a.mu.RUnlock()
	return rows, nil
}

func filterDims(fs []UsageFilter) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Dim
	}
	return out
}

// idSet is a filter over ids.
type idSet struct {
	ids          map[uint32]bool
	negate       bool
	includeUnset bool
	byok         bool // ids are 0/1, never unset
}

func (f idSet) match(id uint32) bool {
	if id == 0 && !f.byok {
		return f.includeUnset
	}
	return f.ids[id] != f.negate
}

// idSet resolves a filter's values to ids. Callers hold a.mu.
func (a *acctRollup) idSet(f *UsageFilter, local map[string]uint32) idSet {
	set := idSet{ids: map[uint32]bool{}, negate: f.Negate, includeUnset: f.IncludeUnset, byok: f.Dim == DimBYOK}
	for _, v := range f.Values {
		switch f.Dim {
		case DimBYOK:
			if b, err := strconv.ParseBool(v); err == nil && b {
				set.ids[1] = true
			} else if err == nil {
				set.ids[0] = true
			}
		case DimUser:
			if id, ok := local[v]; ok && v != "" {
				set.ids[id] = true
			}
		default:
			if id, ok := a.ids[v]; ok && v != "" {
				set.ids[id] = true
			}
		}
	}
	return set
}
