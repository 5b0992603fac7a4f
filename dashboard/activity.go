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
}

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
	rows, _ := st.QueryUsage(acct.ID, storage.UsageQuery{From: from, To: today.AddDate(0, 0, 1),
		Granularity: storage.GranularityDay, GroupBy: []string{q.dim()}, Filters: q.filters(s)})
	data := activityData{Prefix: d.Prefix, Q: q, Dims: activityDims, DayOptions: []int{1, 7, 30, 90, 365}}
	// Totals per value, largest spend first: the chart's series order.
	totals := map[string]*groupRow{}
	for _, row := range rows {
		g := totals[row.Dims[0]]
		if g == nil {
			g = &groupRow{Value: row.Dims[0]}
			totals[row.Dims[0]] = g
		}
		addSums(&g.Sums, row.Sums)
		addSums(&data.Totals, row.Sums)
	}
	keyNames := map[string]string{}
	keys := d.visibleKeys(st, s, acct, "")
	for _, k := range keys {
		keyNames[k.Hash] = k.Name
	}
	for _, g := range totals {
		g.Label = g.Value
		if q.By == "key" {
			if n, ok := keyNames[g.Value]; ok {
				g.Label = n
			} else if len(g.Value) > 12 {
				g.Label = g.Value[:12] + "…"
			}
		}
		if g.Label == "" {
			g.Label = "(none)"
		}
		g.Usage, g.Tokens = g.Sums.Usage, g.Sums.PromptTokens+g.Sums.CompletionTokens
		if g.Sums.Requests > 0 {
			g.AvgLatencyMS = g.Sums.LatencyMS / g.Sums.Requests
		}
		data.Groups = append(data.Groups, *g)
	}
	sort.Slice(data.Groups, func(i, j int) bool {
		if data.Groups[i].Usage != data.Groups[j].Usage {
			return data.Groups[i].Usage > data.Groups[j].Usage
		}
		return data.Groups[i].Sums.Requests > data.Groups[j].Sums.Requests
	})
	index := map[string]int{}
	for i := range data.Groups {
		index[data.Groups[i].Value] = i
		data.Groups[i].ChartClass = "c" + strconv.Itoa(min(i, maxSeries-1))
	}
	days := make([]time.Time, q.Days)
	for i := range days {
		days[i] = from.AddDate(0, 0, i)
	}
	mk := func() []series {
		ss := make([]series, len(data.Groups))
		for i, g := range data.Groups {
			ss[i] = series{Name: g.Label, Values: make([]float64, q.Days)}
		}
		return ss
	}
	spend, reqs, toks := mk(), mk(), mk()
	for _, row := range rows {
		i := int(row.Bucket.Sub(from) / (24 * time.Hour))
		j := index[row.Dims[0]]
		if i < 0 || i >= q.Days {
			continue
		}
		spend[j].Values[i] += row.Sums.Usage.Float64()
		reqs[j].Values[i] += float64(row.Sums.Requests)
		toks[j].Values[i] += float64(row.Sums.PromptTokens + row.Sums.CompletionTokens)
	}
	data.Spend = stackedChart(days, spend, formatMoneyAxis)
	data.Requests = stackedChart(days, reqs, formatCountAxis)
	data.Tok = stackedChart(days, toks, formatCountAxis)
	// The filters' choices: the models and providers of the range.
	choices, _ := st.QueryUsage(acct.ID, storage.UsageQuery{From: from, To: today.AddDate(0, 0, 1),
		GroupBy: []string{storage.DimModel, storage.DimProvider}, Filters: activityQuery{}.filters(s)})
	for _, c := range choices {
		if c.Dims[0] != "" && !slices.Contains(data.Models, c.Dims[0]) {
			data.Models = append(data.Models, c.Dims[0])
		}
		if c.Dims[1] != "" && !slices.Contains(data.Providers, c.Dims[1]) {
			data.Providers = append(data.Providers, c.Dims[1])
		}
	}
	slices.Sort(data.Models)
	slices.Sort(data.Providers)
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
	v := r.URL.Query()
	data.CSV = d.Prefix + "/activity.csv?" + v.Encode()
	d.page(w, r, http.StatusOK, "Activity", "activity", "activity", data)
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
	x := &recentIndex{acc: map[string][]recentGen{}}
	recents[st] = x
	st.SubscribeGenerations(func(g storage.Generation) { x.add(g) })
	go func() {
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
