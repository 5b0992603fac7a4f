package storage

import (
	"fmt"
	"time"
)

// UsageFilter keeps cells whose dimension Dim is (or, Negate, is not) one of
// Values. An unset dimension ("") matches only when IncludeUnset is true.
type UsageFilter struct {
	Dim          string
	Values       []string
	Negate       bool
	IncludeUnset bool
}

func (f *UsageFilter) match(v string) bool {
	if v == "" && f.Dim != DimBYOK {
		return f.IncludeUnset
	}
	in := false
	for _, x := range f.Values {
		if x == v {
			in = true
			break
		}
	}
	return in != f.Negate
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
	d      [3]string
}

// QueryUsage aggregates an account's rollup cells. Rows come in no
// particular order.
func (s *Store) QueryUsage(accountID string, q UsageQuery) ([]UsageRow, error) {
	if len(q.GroupBy) > 3 {
		return nil, fmt.Errorf("%w: at most 3 dimensions", ErrInvalid)
	}
	known := func(d string) bool {
		for _, x := range Dims {
			if x == d {
				return true
			}
		}
		return false
	}
	for _, d := range q.GroupBy {
		if !known(d) {
			return nil, fmt.Errorf("%w: unknown dimension %q", ErrInvalid, d)
		}
	}
	for _, f := range q.Filters {
		if !known(f.Dim) {
			return nil, fmt.Errorf("%w: unknown dimension %q", ErrInvalid, f.Dim)
		}
	}
	groups := map[groupKey]*Sums{}
	// Buckets are computed once per distinct hour.
	lastHour, lastBucket := time.Time{}, int64(0)
	s.ScanUsage(accountID, q.From, q.To, func(c *Cell) {
		for i := range q.Filters {
			if !q.Filters[i].match(c.Dim(q.Filters[i].Dim)) {
				return
			}
		}
		var k groupKey
		if q.Granularity != GranularityNone {
			if !c.Hour.Equal(lastHour) {
				lastHour, lastBucket = c.Hour, BucketStart(c.Hour, q.Granularity).Unix()
			}
			k.bucket = lastBucket
		}
		for i, d := range q.GroupBy {
			k.d[i] = c.Dim(d)
		}
		g := groups[k]
		if g == nil {
			g = &Sums{}
			groups[k] = g
		}
		g.add(c.Sums)
	})
	rows := make([]UsageRow, 0, len(groups))
	for k, sums := range groups {
		r := UsageRow{Dims: append([]string(nil), k.d[:len(q.GroupBy)]...), Sums: *sums}
		if q.Granularity != GranularityNone {
			r.Bucket = time.Unix(k.bucket, 0).UTC()
		}
		rows = append(rows, r)
	}
	return rows, nil
}
