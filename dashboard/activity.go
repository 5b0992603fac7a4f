package dashboard

import (
	"cmp"
	"encoding/csv"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"

	"go.uber.org/zap"
)

func (d *Dashboard) activityRoutes(page pageFunc) {
	page("GET /activity", d.activity)
	page("GET /activity.csv", d.activityCSV)
}

// activityDims are the breakdowns the Activity page offers.
var activityDims = []struct{ Key, Label, Dim string }{
	{"model", "Model", storage.DimModel},
	{"key", "API key", storage.DimAPIKey},
	{"provider", "Provider", storage.DimProvider},
}

// activityQuery is the Activity page's selection, from its URL.
type activityQuery struct {
	Days                 int
	By                   string // model, key or provider
	Model, Key, Provider string
}

func parseActivity(q url.Values) activityQuery {
	a := activityQuery{Days: 30, By: "model", Model: q.Get("model"), Key: q.Get("key"), Provider: q.Get("provider")}
	if n, err := strconv.Atoi(q.Get("days")); err == nil && slices.Contains([]int{1, 7, 30, 90, 365}, n) {
		a.Days = n
	}
	if slices.ContainsFunc(activityDims, func(d struct{ Key, Label, Dim string }) bool { return d.Key == q.Get("by") }) {
		a.By = q.Get("by")
	}
	return a
}

func (a activityQuery) dim() string {
	for _, d := range activityDims {
		if d.Key == a.By {
			return d.Dim
		}
	}
	return storage.DimModel
}

// filters are the rollup filters of the selection; a member sees only
// their own keys' usage.
func (a activityQuery) filters(s Session) []storage.UsageFilter {
	var fs []storage.UsageFilter
	for _, f := range []struct{ dim, v string }{{storage.DimModel, a.Model}, {storage.DimAPIKey, a.Key}, {storage.DimProvider, a.Provider}} {
		if f.v != "" {
			fs = append(fs, storage.UsageFilter{Dim: f.dim, Values: []string{f.v}})
		}
	}
	if !s.CanManageAccount() {
		fs = append(fs, storage.UsageFilter{Dim: storage.DimUser, Values: []string{s.MemberID}})
	}
	return fs
}

// groupRow is one value of the breakdown over the range.
type groupRow struct {
	Value, Label string
	Sums         storage.Sums
	Usage        money.Amount
	Tokens       int64
	AvgLatencyMS int64
	ChartClass   string
}

type activityData struct {
	Prefix               string
	Q                    activityQuery
	Dims                 []struct{ Key, Label, Dim string }
	DayOptions           []int
	Spend, Requests, Tok chartSVG
	Groups               []groupRow
	Totals               storage.Sums
	Recent               []recentGen
	Models, Providers    []string
	Keys                 []storage.APIKey
	CSV                  string
	// The table's page of values: rows From to To of Count; PrevURL and
	// NextURL page it ("" on the first or last page).
	From, To, Count  int
	PrevURL, NextURL string
}

type dayFigures struct{ usage, requests, tokens float64 }

func (f *dayFigures) add(s *storage.Sums) {
	f.usage += s.Usage.Float64()
	f.requests += float64(s.Requests)
	f.tokens += float64(s.PromptTokens + s.CompletionTokens)
}

// valueAgg is one value of the breakdown over the range.
type valueAgg struct {
	value string
	sums  storage.Sums
	seen  bool
	slot  int32 // its row of per-day figures in the first pass; -1: none
}

// activityScan is the Activity page's figures from the account's rollup
// cells (storage.ScanUsage), never the generation records: each value of
// the breakdown's sums, the days of the charted values (the largest
// maxSeries-1 when there are more than maxSeries, else all) and of the
// rest as one series, and the models and providers of the range.
type activityScan struct {
	values            []valueAgg // by the rollup's id of the value (Cell.DimID)
	order             []int32    // ids of the values seen, largest spend first
	series            [][]dayFigures
	other             []dayFigures // per day, the values not charted alone
	totals            storage.Sums
	models, providers []string
}

// onePassValues is how many values of the breakdown get their days in
// the first pass over the cells: models and providers are a few, so one
// pass gives everything; thousands of keys would need a slab of
// megabytes visited at random, so a breakdown with more values reads the
// cells again for the days of the few it charts.
var onePassValues int32 = 64 // a variable for tests

// cellFilter admits a cell of the selection and places it in a day.
type cellFilter struct {
	q        activityQuery
	fromUnix int64
	own      map[string]bool // a member's keys; nil: every key
	ownOf    []uint8         // by key id: 0 unknown, 1 own, 2 not
}

// mine reports whether the cell is of the session's keys.
func (f *cellFilter) mine(c *storage.Cell) bool {
	if f.own == nil {
		return true
	}
	id := c.DimID(storage.DimAPIKey)
	f.ownOf = growTo(f.ownOf, int(id)+1)
	if f.ownOf[id] == 0 {
		f.ownOf[id] = 2
		if f.own[c.APIKey] {
			f.ownOf[id] = 1
		}
	}
	return f.ownOf[id] == 1
}

// day admits a cell of the session's keys that the filters select and
// returns its day in the range.
func (f *cellFilter) day(c *storage.Cell) (int, bool) {
	q := &f.q
	if (q.Model != "" && c.Model != q.Model) || (q.Key != "" && c.APIKey != q.Key) || (q.Provider != "" && c.Provider != q.Provider) {
		return 0, false
	}
	day := int((c.Hour.Unix() - f.fromUnix) / 86400)
	return day, day >= 0 && day < q.Days
}

// growTo returns s with at least n elements, the new ones zero.
func growTo[T any](s []T, n int) []T {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		return s[:n]
	}
	t := make([]T, n, max(n, 2*cap(s), 64))
	copy(t, s)
	return t
}

// scanActivity reads the selection from the analytics rollup: one pass
// for each value's sums (in a slice by the value's id: no hashing of
// strings per cell), and, when the breakdown has more than onePassValues
// values, a second for the days of the charted ones. own, when not nil,
// keeps only those keys (a member's); choices also gathers the models and
// providers of the range (for the filters).
func scanActivity(st *storage.Store, accountID string, q activityQuery, from, to time.Time, own map[string]bool, choices bool) activityScan {
	dim := q.dim()
	f := &cellFilter{q: q, fromUnix: from.Unix(), own: own}
	a := activityScan{other: make([]dayFigures, q.Days)}
	var slab []dayFigures // per slot, per day
	slots, overflow := int32(0), false
	var models, providers []string // by id
	st.ScanUsage(accountID, from, to, func(c *storage.Cell) {
		if !f.mine(c) {
			return
		}
		if choices {
			if mid := c.DimID(storage.DimModel); mid != 0 {
				if models = growTo(models, int(mid)+1); models[mid] == "" {
					models[mid] = c.Model
				}
			}
			if pid := c.DimID(storage.DimProvider); pid != 0 {
				if providers = growTo(providers, int(pid)+1); providers[pid] == "" {
					providers[pid] = c.Provider
				}
			}
		}
		day, ok := f.day(c)
		if !ok {
			return
		}
		addSums(&a.totals, c.Sums)
		id := c.DimID(dim)
		a.values = growTo(a.values, int(id)+1)
		v := &a.values[id]
		if !v.seen {
			v.seen, v.value, v.slot = true, c.Dim(dim), -1
			a.order = append(a.order, int32(id))
			if slots < onePassValues {
				v.slot = slots
				slots++
				slab = append(slab, make([]dayFigures, q.Days)...)
			} else {
				overflow = true
			}
		}
		addSums(&v.sums, c.Sums)
		if v.slot >= 0 {
			slab[int(v.slot)*q.Days+day].add(&c.Sums)
		}
	})
	if choices {
		a.models, a.providers = nonEmpty(models), nonEmpty(providers)
	}
	// Largest spend first: the chart's series order and the table's.
	slices.SortFunc(a.order, func(x, y int32) int {
		vx, vy := &a.values[x], &a.values[y]
		if vx.sums.Usage != vy.sums.Usage {
			return cmp.Compare(vy.sums.Usage, vx.sums.Usage)
		}
		return strings.Compare(vx.value, vy.value)
	})
	charted := a.order
	if len(charted) > maxSeries {
		charted = charted[:maxSeries-1]
	}
	a.series = make([][]dayFigures, len(charted))
	if !overflow {
		// Every value has its days in the slab.
		seriesOf := make([]int, slots)
		for i := range seriesOf {
			seriesOf[i] = -1
		}
		for i, id := range charted {
			seriesOf[a.values[id].slot] = i
		}
		for _, id := range a.order {
			slot := int(a.values[id].slot)
			days := slab[slot*q.Days : (slot+1)*q.Days]
			if i := seriesOf[slot]; i >= 0 {
				a.series[i] = days
				continue
			}
			for d := range days {
				a.other[d].usage += days[d].usage
				a.other[d].requests += days[d].requests
				a.other[d].tokens += days[d].tokens
			}
		}
		return a
	}
	// Many values: the days of the charted ones, the rest summed.
	seriesOf := make([]int8, len(a.values))
	for i := range seriesOf {
		seriesOf[i] = -1
	}
	for i, id := range charted {
		seriesOf[id] = int8(i)
		a.series[i] = make([]dayFigures, q.Days)
	}
	st.ScanUsage(accountID, from, to, func(c *storage.Cell) {
		if !f.mine(c) {
			return
		}
		day, ok := f.day(c)
		if !ok {
			return
		}
		if id := c.DimID(dim); int(id) < len(seriesOf) && seriesOf[id] >= 0 {
			a.series[seriesOf[id]][day].add(&c.Sums)
			return
		}
		a.other[day].add(&c.Sums)
	})
	return a
}

// nonEmpty is the set values of a slice by id, sorted.
func nonEmpty(byID []string) []string {
	var out []string
	for _, v := range byID {
		if v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// keyChoices is how many keys the key filter lists at most.
const keyChoices = 500

// tableRows is how many values of the breakdown a page of the table lists.
const tableRows = 100

// activity shows spend, requests and tokens per day by model, key or
// provider, from the analytics rollup (never a scan of generations), and
// the most recent generations.
func (d *Dashboard) activity(w http.ResponseWriter, r *http.Request, s Session) {
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	q := parseActivity(r.URL.Query())
	t := now().UTC()
	today := storage.BucketStart(t, storage.GranularityDay)
	from := today.AddDate(0, 0, -(q.Days - 1))
	// The key filter lists up to keyChoices keys; an account with more
	// (thousands) is not listed whole: the names of the keys a page shows
	// are looked up one by one.
	var keys []storage.APIKey
	var own map[string]bool
	if s.CanManageAccount() {
		keys = st.ListAPIKeys(storage.KeyFilter{AccountID: acct.ID, IncludeDisabled: true, Limit: keyChoices + 1})
	} else {
		keys = d.visibleKeys(st, s, acct, "")
		own = map[string]bool{}
	}
	keyNames := make(map[string]string, min(len(keys), keyChoices))
	for _, k := range keys {
		keyNames[k.Hash] = k.Name
		if own != nil {
			own[k.Hash] = true
		}
	}
	keyName := func(hash string) (string, bool) {
		if n, ok := keyNames[hash]; ok || own != nil || len(keys) <= keyChoices {
			return n, ok
		}
		k, ok := st.APIKey(hash)
		if !ok || k.AccountID != acct.ID {
			return "", false
		}
		return k.Name, true
	}
	to := today.AddDate(0, 0, 1)
	choices := d.cachedChoices(acct.ID, q.Days, own != nil)
	scan := scanActivity(st, acct.ID, q, from, to, own, choices == nil)
	if choices == nil {
		choices = d.keepChoices(acct.ID, q.Days, own != nil, scan)
	}
	data := activityData{Prefix: d.Prefix, Q: q, Dims: activityDims, DayOptions: []int{1, 7, 30, 90, 365}, Totals: scan.totals}
	label := func(v string) string {
		if q.By == "key" {
			if n, ok := keyName(v); ok {
				return n
			} else if len(v) > 12 {
				return v[:12] + "…"
			}
		}
		if v == "" {
			return "(none)"
		}
		return v
	}
	// The table's page: rows built for it alone, not for every value.
	data.Count = len(scan.order)
	offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
	offset = max(0, min(offset, (max(0, data.Count-1)/tableRows)*tableRows))
	end := min(data.Count, offset+tableRows)
	for i, id := range scan.order[offset:end] {
		v := &scan.values[id]
		g := groupRow{Value: v.value, Label: label(v.value), Sums: v.sums, Usage: v.sums.Usage,
			Tokens: v.sums.PromptTokens + v.sums.CompletionTokens, ChartClass: "c" + strconv.Itoa(min(offset+i, maxSeries-1))}
		if v.sums.Requests > 0 {
			g.AvgLatencyMS = v.sums.LatencyMS / v.sums.Requests
		}
		data.Groups = append(data.Groups, g)
	}
	data.From, data.To = offset+1, end
	pageURL := func(o int) string {
		v := r.URL.Query()
		v.Del("offset")
		if o > 0 {
			v.Set("offset", strconv.Itoa(o))
		}
		return d.Prefix + "/activity?" + v.Encode()
	}
	if offset > 0 {
		data.PrevURL = pageURL(offset - tableRows)
	}
	if end < data.Count {
		data.NextURL = pageURL(end)
	}
	// The charts: the charted values, then the rest as "other".
	days := make([]time.Time, q.Days)
	for i := range days {
		days[i] = from.AddDate(0, 0, i)
	}
	n := len(scan.series)
	if len(scan.order) > n {
		n++
	}
	spend, reqs, toks := make([]series, n), make([]series, n), make([]series, n)
	for i := range n {
		name := "other"
		figs := scan.other
		if i < len(scan.series) {
			name, figs = label(scan.values[scan.order[i]].value), scan.series[i]
		}
		spend[i] = series{Name: name, Values: make([]float64, q.Days)}
		reqs[i] = series{Name: name, Values: make([]float64, q.Days)}
		toks[i] = series{Name: name, Values: make([]float64, q.Days)}
		for day, f := range figs {
			spend[i].Values[day], reqs[i].Values[day], toks[i].Values[day] = f.usage, f.requests, f.tokens
		}
	}
	if q.Days > 90 {
		// A year's bars by week: 53 bars, not 365.
		_, spend = byWeek(days, spend)
		_, reqs = byWeek(days, reqs)
		days, toks = byWeek(days, toks)
	}
	data.Spend = stackedChart(days, spend, moneyAxis)
	data.Requests = stackedChart(days, reqs, countAxis)
	data.Tok = stackedChart(days, toks, countAxis)
	data.Models, data.Providers = choices.models, choices.providers
	if len(keys) <= keyChoices {
		data.Keys = keys
	}
	data.Recent = recentOf(st, d.logger).list(acct.ID, 25, func(g *recentGen) bool {
		return (q.Model == "" || g.Model == q.Model) && (q.Key == "" || g.KeyHash == q.Key) &&
			(q.Provider == "" || g.Provider == q.Provider) &&
			(s.CanManageAccount() || own[g.KeyHash])
	})
	for i := range data.Recent {
		data.Recent[i].KeyName, _ = keyName(data.Recent[i].KeyHash)
	}
	data.CSV = d.Prefix + "/activity.csv?" + r.URL.Query().Encode()
	d.page(w, r, http.StatusOK, "Activity", "activity", "activity", data)
}

// byWeek sums daily series into 7-day bars (the last may be shorter),
// each named by its first day.
func byWeek(days []time.Time, ss []series) ([]time.Time, []series) {
	n := (len(days) + 6) / 7
	out := make([]series, len(ss))
	for j, s := range ss {
		out[j] = series{Name: s.Name, Values: make([]float64, n)}
		for i, v := range s.Values {
			out[j].Values[i/7] += v
		}
	}
	weeks := make([]time.Time, n)
	for i := range weeks {
		weeks[i] = days[i*7]
	}
	return weeks, out
}

// filterChoices are the models and providers the Activity page's filters
// offer: those of the range, kept a minute per account and range, so that
// a page does not pay two map lookups per rollup cell for them.
type filterChoices struct {
	models, providers []string
	until             time.Time
}

type choiceKey struct {
	account string
	days    int
	member  bool
}

const choicesTTL = time.Minute

func (d *Dashboard) cachedChoices(accountID string, days int, member bool) *filterChoices {
	d.choicesMu.Lock()
	defer d.choicesMu.Unlock()
	c, ok := d.choices[choiceKey{accountID, days, member}]
	if !ok || now().After(c.until) {
		return nil
	}
	return c
}

func (d *Dashboard) keepChoices(accountID string, days int, member bool, scan activityScan) *filterChoices {
	c := &filterChoices{until: now().Add(choicesTTL), models: scan.models, providers: scan.providers}
	if member {
		// Members' views differ by member: not kept.
		return c
	}
	d.choicesMu.Lock()
	defer d.choicesMu.Unlock()
	if d.choices == nil || len(d.choices) > 10_000 {
		d.choices = map[choiceKey]*filterChoices{}
	}
	d.choices[choiceKey{accountID, days, member}] = c
	return c
}

func addSums(a *storage.Sums, b storage.Sums) {
	a.Requests += b.Requests
	a.PromptTokens += b.PromptTokens
	a.CompletionTokens += b.CompletionTokens
	a.Usage += b.Usage
	a.BYOKUsage += b.BYOKUsage
	a.LatencyMS += b.LatencyMS
}

// activityCSV exports the selection per day and value of the breakdown.
func (d *Dashboard) activityCSV(w http.ResponseWriter, r *http.Request, s Session) {
	st, acct, ok := d.account(w, r, s)
	if !ok {
		return
	}
	q := parseActivity(r.URL.Query())
	t := now().UTC()
	today := storage.BucketStart(t, storage.GranularityDay)
	from := today.AddDate(0, 0, -(q.Days - 1))
	rows, err := st.QueryUsage(acct.ID, storage.UsageQuery{From: from, To: today.AddDate(0, 0, 1),
		Granularity: storage.GranularityDay, GroupBy: []string{q.dim()}, Filters: q.filters(s)})
	if err != nil {
		// An empty file would read as a period without activity.
		d.logger.Error("activity export: usage query failed", zap.String("account", acct.ID), zap.Error(err))
		d.errorPage(w, r, http.StatusServiceUnavailable, "The activity could not be read",
			"The gateway's database did not answer. Retry in a moment.")
		return
	}
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].Bucket.Equal(rows[j].Bucket) {
			return rows[i].Bucket.Before(rows[j].Bucket)
		}
		return rows[i].Dims[0] < rows[j].Dims[0]
	})
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="activity-`+acct.ID+`-`+today.Format("2006-01-02")+`.csv"`)
	// csv.Writer keeps its first error and writes nothing after it: the
	// only one possible here is the browser gone, which ends the export.
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"date", q.dim(), "requests", "prompt_tokens", "completion_tokens", "usage", "byok_usage"})
	for _, row := range rows {
		_ = cw.Write([]string{row.Bucket.Format("2006-01-02"), csvSafe(row.Dims[0]), strconv.FormatInt(row.Sums.Requests, 10),
			strconv.FormatInt(row.Sums.PromptTokens, 10), strconv.FormatInt(row.Sums.CompletionTokens, 10),
			row.Sums.Usage.String(), row.Sums.BYOKUsage.String()})
	}
	cw.Flush()
}

// csvSafe keeps a spreadsheet from reading a value as a formula.
func csvSafe(v string) string {
	if v != "" && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@') {
		return "'" + v
	}
	return v
}

// The most recent generations of each account, for the Activity page's
// table: generation records live on disk and are never scanned for a
// page, so the dashboard keeps the last recentPerAccount of each account
// in memory, from the store's stream of settled generations (and, once at
// start, from the stored records, in the background).

// recentPerAccount is how many generations per account the table can show.
const recentPerAccount = 500

// recentGen is one generation as the table shows it.
type recentGen struct {
	ID, KeyHash, KeyName, Model, Provider, FinishReason, Status string
	PromptTokens, CompletionTokens, LatencyMS                   int64
	Cost                                                        money.Amount
	CreatedAt                                                   time.Time
}

type recentIndex struct {
	mu  sync.RWMutex
	acc map[string][]recentGen // by account, oldest first
	// seeded is closed once the stored records are read.
	seeded chan struct{}
}

// recentOf returns the store's index, made at first use (with the
// dashboard's domain store, so it lives and goes with the store): it
// subscribes to settled generations and loads the stored ones in the
// background (seedRecent).
func recentOf(st *storage.Store, logger *zap.Logger) *recentIndex {
	ds := StoreOf(st)
	ds.recentOnce.Do(func() {
		x := &recentIndex{acc: map[string][]recentGen{}, seeded: make(chan struct{})}
		ds.recent = x
		st.SubscribeGenerations(func(g storage.Generation) { x.add(g) })
		go func() {
			defer close(x.seeded)
			x.seed(st, logger)
		}()
	})
	return ds.recent
}

// Reading the stored generations is tried seedTries times, waiting
// seedWait, then twice as long each time: a read that failed once (the
// database busy or unreachable) would otherwise leave the list without
// them until the process restarts. Adding a generation twice is harmless.
var (
	seedTries = 6
	seedWait  = time.Second
	sleep     = time.Sleep
	// storedGenerations reads the stored generations (a test's may fail).
	storedGenerations = func(st *storage.Store, fn func(storage.Generation) bool) error { return st.Generations(fn) }
)

// seed adds the stored generations to x.
func (x *recentIndex) seed(st *storage.Store, logger *zap.Logger) {
	wait := seedWait
	for try := 1; ; try++ {
		err := storedGenerations(st, func(g storage.Generation) bool { x.add(g); return true })
		if err == nil || errors.Is(err, storage.ErrClosed) {
			return // done, or the store closed (a reload or a stop) under the read
		}
		if try == seedTries {
			logger.Error("the activity page's recent generations lack the stored ones: reading them failed",
				zap.Int("tries", try), zap.Error(err))
			return
		}
		logger.Warn("reading the stored generations for the activity page failed; trying again",
			zap.Duration("in", wait), zap.Error(err))
		sleep(wait)
		wait *= 2
	}
}

// add files g in its account's list, in time order, keeping the newest.
func (x *recentIndex) add(g storage.Generation) {
	r := recentGen{ID: g.ID, KeyHash: g.KeyHash, Model: g.Model, Provider: g.Provider, FinishReason: g.FinishReason,
		Status: g.Status, PromptTokens: g.PromptTokens, CompletionTokens: g.CompletionTokens, LatencyMS: g.LatencyMS,
		Cost: g.Cost, CreatedAt: g.CreatedAt}
	x.mu.Lock()
	defer x.mu.Unlock()
	l := x.acc[g.AccountID]
	if len(l) >= recentPerAccount && !r.CreatedAt.After(l[0].CreatedAt) {
		return
	}
	i := sort.Search(len(l), func(i int) bool { return l[i].CreatedAt.After(r.CreatedAt) })
	if i > 0 && l[i-1].ID == r.ID {
		return // seen through both the stream and the stored records
	}
	l = slices.Insert(l, i, r)
	if len(l) > recentPerAccount {
		l = l[len(l)-recentPerAccount:]
	}
	x.acc[g.AccountID] = l
}

// list returns up to n of the account's newest generations that keep
// admits, newest first.
func (x *recentIndex) list(accountID string, n int, keep func(*recentGen) bool) []recentGen {
	x.mu.RLock()
	defer x.mu.RUnlock()
	l := x.acc[accountID]
	var out []recentGen
	for i := len(l) - 1; i >= 0 && len(out) < n; i-- {
		if keep(&l[i]) {
			out = append(out, l[i])
		}
	}
	return out
}
