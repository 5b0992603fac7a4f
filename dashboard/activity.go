package dashboard

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
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
	MoreGroups           int
}

// dayGroup is one value of the breakdown on one day.
type dayGroup struct {
	day int
	g   string
}

type dayFigures struct{ usage, requests, tokens float64 }

// activityScan is the Activity page's figures, gathered in one pass over
// the account's rollup cells (storage.ScanUsage): per value of the
// breakdown, per day and value, and the models and providers of the range.
type activityScan struct {
	groups            map[string]*storage.Sums
	days              map[dayGroup]*dayFigures
	totals            storage.Sums
	models, providers map[string]struct{}
	other             []dayFigures // per day, the values not charted alone
}

// scanActivity reads the selection from the analytics rollup: never the
// generation records. own, when not nil, keeps only those keys (a
// member's). The figures per day and value are kept for the values in
// charted (nil: every value; the breakdown by key, which may have
// thousands of values, charts only the largest, found by a first pass).
func scanActivity(st *storage.Store, accountID string, q activityQuery, from, to time.Time, own map[string]bool, charted []string, choices bool) activityScan {
	a := activityScan{groups: map[string]*storage.Sums{}, days: map[dayGroup]*dayFigures{},
		models: map[string]struct{}{}, providers: map[string]struct{}{}, other: make([]dayFigures, q.Days)}
	dim := q.dim()
	st.ScanUsage(accountID, from, to, func(c *storage.Cell) {
		if own != nil && !own[c.APIKey] {
			return
		}
		if choices {
			if _, ok := a.models[c.Model]; !ok && c.Model != "" {
				a.models[c.Model] = struct{}{}
			}
			if _, ok := a.providers[c.Provider]; !ok && c.Provider != "" {
				a.providers[c.Provider] = struct{}{}
			}
		}
		if (q.Model != "" && c.Model != q.Model) || (q.Key != "" && c.APIKey != q.Key) || (q.Provider != "" && c.Provider != q.Provider) {
			return
		}
		v := c.Dim(dim)
		addSums(&a.totals, c.Sums)
		if charted == nil {
			g := a.groups[v]
			if g == nil {
				g = new(storage.Sums)
				a.groups[v] = g
			}
			addSums(g, c.Sums)
		} else if !slices.Contains(charted, v) {
			if day := int(c.Hour.Sub(from) / (24 * time.Hour)); day >= 0 && day < len(a.other) {
				a.other[day].usage += c.Sums.Usage.Float64()
				a.other[day].requests += float64(c.Sums.Requests)
				a.other[day].tokens += float64(c.Sums.PromptTokens + c.Sums.CompletionTokens)
			}
			return
		}
		k := dayGroup{int(c.Hour.Sub(from) / (24 * time.Hour)), v}
		f := a.days[k]
		if f == nil {
			f = new(dayFigures)
			a.days[k] = f
		}
		f.usage += c.Sums.Usage.Float64()
		f.requests += float64(c.Sums.Requests)
		f.tokens += float64(c.Sums.PromptTokens + c.Sums.CompletionTokens)
	})
	return a
}

// maxOnePassDays is the longest range whose breakdown by key keeps every
// key's days in one pass (10,000 keys x 31 days of figures: 7 MB).
const maxOnePassDays = 31

// scanKeys is scanActivity for the breakdown by key in one pass: each
// key's sums and days, then the days of the largest four apart and the
// rest summed.
func scanKeys(st *storage.Store, accountID string, q activityQuery, from, to time.Time, own map[string]bool, choices bool) activityScan {
	type keyAgg struct {
		sums storage.Sums
		days []dayFigures
	}
	a := activityScan{groups: map[string]*storage.Sums{}, days: map[dayGroup]*dayFigures{},
		models: map[string]struct{}{}, providers: map[string]struct{}{}, other: make([]dayFigures, q.Days)}
	keys := map[string]*keyAgg{}
	var slab []dayFigures
	st.ScanUsage(accountID, from, to, func(c *storage.Cell) {
		if own != nil && !own[c.APIKey] {
			return
		}
		if choices {
			if _, ok := a.models[c.Model]; !ok && c.Model != "" {
				a.models[c.Model] = struct{}{}
			}
			if _, ok := a.providers[c.Provider]; !ok && c.Provider != "" {
				a.providers[c.Provider] = struct{}{}
			}
		}
		if (q.Model != "" && c.Model != q.Model) || (q.Key != "" && c.APIKey != q.Key) || (q.Provider != "" && c.Provider != q.Provider) {
			return
		}
		day := int(c.Hour.Sub(from) / (24 * time.Hour))
		if day < 0 || day >= q.Days {
			return
		}
		addSums(&a.totals, c.Sums)
		k := keys[c.APIKey]
		if k == nil {
			if len(slab)+q.Days > cap(slab) {
				slab = make([]dayFigures, 0, 1024*q.Days)
			}
			k = &keyAgg{days: slab[len(slab) : len(slab)+q.Days]}
			slab = slab[:len(slab)+q.Days]
			keys[c.APIKey] = k
		}
		addSums(&k.sums, c.Sums)
		f := &k.days[day]
		f.usage += c.Sums.Usage.Float64()
		f.requests += float64(c.Sums.Requests)
		f.tokens += float64(c.Sums.PromptTokens + c.Sums.CompletionTokens)
	})
	for v, k := range keys {
		a.groups[v] = &k.sums
	}
	top := topGroups(a.groups, maxSeries-1)
	for v, k := range keys {
		if slices.Contains(top, v) {
			for day := range k.days {
				f := k.days[day]
				a.days[dayGroup{day, v}] = &f
			}
			continue
		}
		for day, f := range k.days {
			a.other[day].usage += f.usage
			a.other[day].requests += f.requests
			a.other[day].tokens += f.tokens
		}
	}
	return a
}

// keyGroups is the first pass of the breakdown by key: each key's sums.
func keyGroups(st *storage.Store, accountID string, q activityQuery, from, to time.Time, own map[string]bool) map[string]*storage.Sums {
	groups := map[string]*storage.Sums{}
	st.ScanUsage(accountID, from, to, func(c *storage.Cell) {
		if (own != nil && !own[c.APIKey]) || (q.Model != "" && c.Model != q.Model) || (q.Key != "" && c.APIKey != q.Key) || (q.Provider != "" && c.Provider != q.Provider) {
			return
		}
		g := groups[c.APIKey]
		if g == nil {
			g = new(storage.Sums)
			groups[c.APIKey] = g
		}
		addSums(g, c.Sums)
	})
	return groups
}

// maxGroupRows is how many values of the breakdown the table lists.
const maxGroupRows = 100

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
	keyNames := map[string]string{}
	keys := d.visibleKeys(st, s, acct, "")
	var own map[string]bool
	if !s.CanManageAccount() {
		own = map[string]bool{}
	}
	for _, k := range keys {
		keyNames[k.Hash] = k.Name
		if own != nil {
			own[k.Hash] = true
		}
	}
	to := today.AddDate(0, 0, 1)
	choices := d.cachedChoices(acct.ID, q.Days, own != nil)
	var scan activityScan
	switch {
	case q.By == "key" && q.Days <= maxOnePassDays:
		scan = scanKeys(st, acct.ID, q, from, to, own, choices == nil)
	case q.By == "key":
		// Thousands of keys over a long range: their sums first, then
		// the days of the largest, the rest as one series.
		groups := keyGroups(st, acct.ID, q, from, to, own)
		scan = scanActivity(st, acct.ID, q, from, to, own, topGroups(groups, maxSeries-1), choices == nil)
		scan.groups = groups
	default:
		scan = scanActivity(st, acct.ID, q, from, to, own, nil, choices == nil)
	}
	if choices == nil {
		choices = d.keepChoices(acct.ID, q.Days, own != nil, scan)
	}
	data := activityData{Prefix: d.Prefix, Q: q, Dims: activityDims, DayOptions: []int{1, 7, 30, 90, 365}, Totals: scan.totals}
	for v, sums := range scan.groups {
		g := groupRow{Value: v, Label: v, Sums: *sums, Usage: sums.Usage, Tokens: sums.PromptTokens + sums.CompletionTokens}
		if q.By == "key" {
			if n, ok := keyNames[v]; ok {
				g.Label = n
			} else if len(v) > 12 {
				g.Label = v[:12] + "…"
			}
		}
		if g.Label == "" {
			g.Label = "(none)"
		}
		if sums.Requests > 0 {
			g.AvgLatencyMS = sums.LatencyMS / sums.Requests
		}
		data.Groups = append(data.Groups, g)
	}
	// Largest spend first: the chart's series order.
	sort.Slice(data.Groups, func(i, j int) bool {
		if data.Groups[i].Usage != data.Groups[j].Usage {
			return data.Groups[i].Usage > data.Groups[j].Usage
		}
		return data.Groups[i].Value < data.Groups[j].Value
	})
	// The charts stack the first maxSeries-1 values and the rest as one.
	index := map[string]int{}
	n := min(len(data.Groups), maxSeries)
	for i := range data.Groups {
		data.Groups[i].ChartClass = "c" + strconv.Itoa(min(i, maxSeries-1))
		index[data.Groups[i].Value] = min(i, maxSeries-1)
	}
	days := make([]time.Time, q.Days)
	for i := range days {
		days[i] = from.AddDate(0, 0, i)
	}
	mk := func() []series {
		ss := make([]series, n)
		for i := range ss {
			ss[i] = series{Name: data.Groups[i].Label, Values: make([]float64, q.Days)}
		}
		if len(data.Groups) > maxSeries {
			ss[maxSeries-1].Name = "other"
		}
		return ss
	}
	spend, reqs, toks := mk(), mk(), mk()
	for k, f := range scan.days {
		if k.day < 0 || k.day >= q.Days {
			continue
		}
		j := index[k.g]
		spend[j].Values[k.day] += f.usage
		reqs[j].Values[k.day] += f.requests
		toks[j].Values[k.day] += f.tokens
	}
	if len(data.Groups) >= maxSeries {
		for day, f := range scan.other {
			spend[maxSeries-1].Values[day] += f.usage
			reqs[maxSeries-1].Values[day] += f.requests
			toks[maxSeries-1].Values[day] += f.tokens
		}
	}
	if q.Days > 90 {
		// A year's bars by week: 53 bars, not 365.
		_, spend = byWeek(days, spend)
		_, reqs = byWeek(days, reqs)
		days, toks = byWeek(days, toks)
	}
	data.Spend = stackedChart(days, spend, formatMoneyAxis)
	data.Requests = stackedChart(days, reqs, formatCountAxis)
	data.Tok = stackedChart(days, toks, formatCountAxis)
	if len(data.Groups) > maxGroupRows {
		data.MoreGroups = len(data.Groups) - maxGroupRows
		data.Groups = data.Groups[:maxGroupRows]
	}
	data.Models, data.Providers = choices.models, choices.providers
	if len(keys) <= 500 {
		data.Keys = keys
	}
	data.Recent = recentOf(st).list(acct.ID, 25, func(g *recentGen) bool {
		return (q.Model == "" || g.Model == q.Model) && (q.Key == "" || g.KeyHash == q.Key) &&
			(q.Provider == "" || g.Provider == q.Provider) &&
			(s.CanManageAccount() || keyNames[g.KeyHash] != "")
	})
	for i := range data.Recent {
		data.Recent[i].KeyName = keyNames[data.Recent[i].KeyHash]
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
	c := &filterChoices{until: now().Add(choicesTTL)}
	for m := range scan.models {
		c.models = append(c.models, m)
	}
	for p := range scan.providers {
		c.providers = append(c.providers, p)
	}
	slices.Sort(c.models)
	slices.Sort(c.providers)
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

// topGroups are the n values of largest spend (a few: a slice is
// searched faster than a map of long keys is hashed).
func topGroups(groups map[string]*storage.Sums, n int) []string {
	type kv struct {
		k string
		u money.Amount
	}
	all := make([]kv, 0, len(groups))
	for k, v := range groups {
		all = append(all, kv{k, v.Usage})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].u != all[j].u {
			return all[i].u > all[j].u
		}
		return all[i].k < all[j].k
	})
	var top []string
	for _, e := range all[:min(n, len(all))] {
		top = append(top, e.k)
	}
	return top
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
	rows, _ := st.QueryUsage(acct.ID, storage.UsageQuery{From: from, To: today.AddDate(0, 0, 1),
		Granularity: storage.GranularityDay, GroupBy: []string{q.dim()}, Filters: q.filters(s)})
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].Bucket.Equal(rows[j].Bucket) {
			return rows[i].Bucket.Before(rows[j].Bucket)
		}
		return rows[i].Dims[0] < rows[j].Dims[0]
	})
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="activity-`+acct.ID+`-`+today.Format("2006-01-02")+`.csv"`)
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

var (
	recentMu sync.Mutex
	recents  = map[*storage.Store]*recentIndex{}
)

// recentOf returns the store's index, made at first use: it subscribes to
// settled generations and loads the stored ones in the background.
func recentOf(st *storage.Store) *recentIndex {
	recentMu.Lock()
	defer recentMu.Unlock()
	if x, ok := recents[st]; ok {
		return x
	}
	x := &recentIndex{acc: map[string][]recentGen{}, seeded: make(chan struct{})}
	recents[st] = x
	st.SubscribeGenerations(func(g storage.Generation) { x.add(g) })
	go func() {
		defer close(x.seeded)
		_ = st.Generations(func(g storage.Generation) bool { x.add(g); return true })
	}()
	return x
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
