package storage

import (
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/analytics"
	"github.com/tollgate-dev/caddy-tollgate/storage/endusers"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
)

// The analytics rollup lives in package analytics; the store answers its
// queries and hands it the other stores' records through narrow
// adapters.

// Sums, Cell and the query's types are the analytics' (package analytics).
type (
	Sums        = analytics.Sums
	Cell        = analytics.Cell
	UsageFilter = analytics.UsageFilter
	UsageQuery  = analytics.UsageQuery
	UsageRow    = analytics.UsageRow
)

// Dimensions of a rollup cell, as query and activity code names them.
const (
	DimAPIKey    = analytics.DimAPIKey
	DimModel     = analytics.DimModel
	DimProvider  = analytics.DimProvider
	DimEndUser   = analytics.DimEndUser
	DimWorkspace = analytics.DimWorkspace
	DimStatus    = analytics.DimStatus
	DimBYOK      = analytics.DimBYOK
	DimUser      = analytics.DimUser
)

// Dims lists the rollup dimensions in a fixed order.
var Dims = analytics.Dims

// Time bucket granularities of QueryUsage.
const (
	GranularityNone  = analytics.GranularityNone
	GranularityHour  = analytics.GranularityHour
	GranularityDay   = analytics.GranularityDay
	GranularityWeek  = analytics.GranularityWeek
	GranularityMonth = analytics.GranularityMonth
)

// RollupRetention is how long the analytics rollup keeps an hour's sums.
const RollupRetention = analytics.RollupRetention

// BucketStart returns the start of t's bucket at granularity g (UTC).
func BucketStart(t time.Time, g string) time.Time { return analytics.BucketStart(t, g) }

// AnalyticsStore answers usage queries from the analytics rollup.
type AnalyticsStore struct{ a *analytics.Store }

// ScanUsage calls fn for every rollup cell of the account whose hour
// starts in [from, to) (see analytics.Store.ScanUsage).
func (s *AnalyticsStore) ScanUsage(accountID string, from, to time.Time, fn func(*Cell)) {
	s.a.ScanUsage(accountID, from, to, fn)
}

// EndUserUsage returns the totals of an end user's generations.
func (s *AnalyticsStore) EndUserUsage(accountID, user string) Sums {
	return s.a.EndUserUsage(accountID, user)
}

// UsageDimValues returns the distinct values seen for a dimension in an
// account's cells, sorted.
func (s *AnalyticsStore) UsageDimValues(accountID, dim string) []string {
	return s.a.UsageDimValues(accountID, dim)
}

// KeyCreators maps an account's key hashes to the org member who created
// each (the `user` dimension).
func (s *AnalyticsStore) KeyCreators(accountID string) map[string]string {
	return s.a.KeyCreators(accountID)
}

// QueryUsage aggregates an account's rollup cells as q says.
func (s *AnalyticsStore) QueryUsage(accountID string, q UsageQuery) ([]UsageRow, error) {
	return s.a.QueryUsage(accountID, q)
}

// SealRollup seals every account's hours that are due at t (see
// analytics.Store.SealRollup).
func (s *AnalyticsStore) SealRollup(t time.Time) error { return s.a.SealRollup(t) }

// analyticsKeys are the keys the analytics rows name.
type analyticsKeys struct{ s *AccountStore }

func (k analyticsKeys) EachKeyCreator(accountID string, fn func(hash, creator string)) {
	k.s.eachAccountKey(accountID, func(r keytable.Ref) bool {
		if c, ok := r.Creator(); ok {
			fn(r.Hash(), c)
		}
		return true
	})
}

// analyticsEndUsers are the end users the analytics record on first
// sight.
type analyticsEndUsers struct{ s *EndUserStore }

func (u analyticsEndUsers) HasEndUser(accountID, user string) bool {
	return endusers.Has(u.s, accountID, user)
}

func (u analyticsEndUsers) EnsureEndUser(accountID, user string, t time.Time) {
	endusers.Ensure(u.s, accountID, user, t)
}

// analyticsFeedback counts the stored feedback into the analytics.
type analyticsFeedback struct{ s *FeedbackStore }

func (f analyticsFeedback) LoadFeedback() error { return f.s.loadFeedback() }
