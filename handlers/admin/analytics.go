package admin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Analytics: GET /activity, GET /analytics/meta and POST /analytics/query,
// all answered from the store's in-memory rollup of the stored generation
// records (one cell per UTC hour and dimension values), never from the
// records themselves. Money is summed in exact nano-credits.

// activityDays is the window of GET /activity: the last 30 completed UTC
// days, plus the current day so far.
const activityDays = 30

// activityItem is a row of GET /activity.
type activityItem struct {
	Date               string       `json:"date"`
	Model              string       `json:"model"`
	ModelPermaslug     string       `json:"model_permaslug"`
	EndpointID         string       `json:"endpoint_id"`
	ProviderName       string       `json:"provider_name"`
	Usage              money.Amount `json:"usage"`
	BYOKUsageInference money.Amount `json:"byok_usage_inference"`
	Requests           int64        `json:"requests"`
	PromptTokens       int64        `json:"prompt_tokens"`
	CompletionTokens   int64        `json:"completion_tokens"`
	ReasoningTokens    int64        `json:"reasoning_tokens"`
	FlaggedRequests    int64        `json:"flagged_requests"` // the gateway's own: requests a flagging content filter matched
	WorkspaceID        *string      `json:"workspace_id,omitempty"`
}

// endpointID is a stable UUID for a model served by a provider.
func endpointID(model, provider string) string {
	sum := sha256.Sum256([]byte(model + "\x00" + provider))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// workspaceFilter resolves a workspace_id (an id or a slug) among the
// caller's account's workspaces.
func (ar *adminRequest) workspaceFilter(v string) (string, *apierror.Error) {
	w, ok := ar.store.Workspace(ar.id.AccountID, v)
	if !ok {
		return "", apierror.NotFound("Workspace not found")
	}
	return w.ID, nil
}

func (ar *adminRequest) activity() *apierror.Error {
	q := ar.r.URL.Query()
	t := now().UTC()
	today := storage.BucketStart(t, storage.GranularityDay)
	uq := storage.UsageQuery{
		From: today.AddDate(0, 0, -activityDays), To: t.Add(time.Nanosecond),
		Granularity: storage.GranularityDay, GroupBy: []string{storage.DimModel, storage.DimProvider},
	}
	if v := q.Get("date"); v != "" {
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return apierror.BadRequest("date: expected a UTC date as YYYY-MM-DD")
		}
		if d.Before(uq.From) || d.After(today) {
			return apierror.BadRequest("date: must be within the last 30 days")
		}
		uq.From, uq.To = d, d.AddDate(0, 0, 1)
	}
	if v := q.Get("api_key_hash"); v != "" {
		uq.Filters = append(uq.Filters, storage.UsageFilter{Dim: storage.DimAPIKey, Values: []string{v}})
	}
	if v := q.Get("user_id"); v != "" {
		// The org member's requests: those through the keys they created.
		uq.Filters = append(uq.Filters, storage.UsageFilter{Dim: storage.DimUser, Values: []string{v}})
	}
	byWorkspace := false
	switch v := q.Get("group_by"); v {
	case "":
	case "workspace":
		byWorkspace = true
		uq.GroupBy = append(uq.GroupBy, storage.DimWorkspace)
	default:
		return apierror.BadRequest("group_by: expected workspace")
	}
	if v := q.Get("workspace_id"); v != "" {
		ws, apiErr := ar.workspaceFilter(v)
		if apiErr != nil {
			return apiErr
		}
		uq.Filters = append(uq.Filters, storage.UsageFilter{Dim: storage.DimWorkspace, Values: []string{ws}})
	}
	rows, err := ar.store.QueryUsage(ar.id.AccountID, uq)
	if err != nil {
		return storeError(err, "Activity")
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if !a.Bucket.Equal(b.Bucket) {
			return a.Bucket.Before(b.Bucket)
		}
		return strings.Join(a.Dims, "\x00") < strings.Join(b.Dims, "\x00")
	})
	out := make([]activityItem, len(rows))
	for i, r := range rows {
		model, provider := r.Dims[0], r.Dims[1]
		out[i] = activityItem{
			Date: r.Bucket.Format(time.DateOnly), Model: model, ModelPermaslug: model,
			EndpointID: endpointID(model, provider), ProviderName: provider,
			Usage: r.Sums.Usage, BYOKUsageInference: r.Sums.BYOKUsage, Requests: r.Sums.Requests,
			PromptTokens: r.Sums.PromptTokens, CompletionTokens: r.Sums.CompletionTokens, FlaggedRequests: r.Sums.Flagged,
		}
		if byWorkspace {
			ws := r.Dims[2]
			if ws == "" {
				ws = ar.id.Account.DefaultWorkspaceID
			}
			out[i].WorkspaceID = &ws
		}
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": out})
	return nil
}

// analyticsMetric is a metric of POST /analytics/query.
type analyticsMetric struct {
	Name          string `json:"name"`
	DisplayLabel  string `json:"display_label"`
	IsRate        bool   `json:"is_rate"`
	DisplayFormat string `json:"display_format"`
	value         func(s *storage.Sums) any
	less          func(a, b *storage.Sums) bool
}

type labelled struct {
	Name         string `json:"name"`
	DisplayLabel string `json:"display_label"`
}

type analyticsOperator struct {
	Name      string `json:"name"`
	ValueType string `json:"value_type"`
}

func intMetric(name, label string, f func(s *storage.Sums) int64) analyticsMetric {
	return analyticsMetric{Name: name, DisplayLabel: label, DisplayFormat: "number",
		value: func(s *storage.Sums) any { return f(s) },
		less:  func(a, b *storage.Sums) bool { return f(a) < f(b) }}
}

func amountMetric(name, label string, f func(s *storage.Sums) money.Amount) analyticsMetric {
	return analyticsMetric{Name: name, DisplayLabel: label, DisplayFormat: "currency",
		value: func(s *storage.Sums) any { return f(s) },
		less:  func(a, b *storage.Sums) bool { return f(a) < f(b) }}
}

func avgLatency(s *storage.Sums) float64 {
	if s.Requests == 0 {
		return 0
	}
	return math.Round(float64(s.LatencyMS)/float64(s.Requests)*1000) / 1000
}

var analyticsMetrics = []analyticsMetric{
	intMetric("request_count", "Request Count", func(s *storage.Sums) int64 { return s.Requests }),
	intMetric("prompt_tokens", "Prompt Tokens", func(s *storage.Sums) int64 { return s.PromptTokens }),
	intMetric("completion_tokens", "Completion Tokens", func(s *storage.Sums) int64 { return s.CompletionTokens }),
	intMetric("total_tokens", "Total Tokens", func(s *storage.Sums) int64 { return s.PromptTokens + s.CompletionTokens }),
	amountMetric("usage", "Spend (credits)", func(s *storage.Sums) money.Amount { return s.Usage }),
	amountMetric("byok_usage", "BYOK Spend", func(s *storage.Sums) money.Amount { return s.BYOKUsage }),
	intMetric("feedback_count", "Feedback Count", func(s *storage.Sums) int64 { return s.Feedback }),
	intMetric("flagged_request_count", "Flagged Requests", func(s *storage.Sums) int64 { return s.Flagged }),
	{Name: "avg_latency_ms", DisplayLabel: "Average Latency", IsRate: true, DisplayFormat: "latency",
		value: func(s *storage.Sums) any { return avgLatency(s) },
		less:  func(a, b *storage.Sums) bool { return avgLatency(a) < avgLatency(b) }},
}

var analyticsDimensions = []labelled{
	{storage.DimModel, "Model"}, {storage.DimProvider, "Provider"}, {storage.DimAPIKey, "API Key"},
	{storage.DimEndUser, "End User"}, {storage.DimWorkspace, "Workspace"}, {storage.DimStatus, "Status"},
	{storage.DimBYOK, "BYOK"}, {storage.DimUser, "User (key creator)"},
}

var analyticsGranularities = []labelled{
	{storage.GranularityHour, "Hour"}, {storage.GranularityDay, "Day"},
	{storage.GranularityWeek, "Week"}, {storage.GranularityMonth, "Month"},
}

var analyticsOperators = []analyticsOperator{
	{"eq", "scalar"}, {"neq", "scalar"}, {"in", "array"}, {"not_in", "array"},
}

func (ar *adminRequest) analyticsMeta() *apierror.Error {
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": map[string]any{
		"metrics": analyticsMetrics, "dimensions": analyticsDimensions,
		"operators": analyticsOperators, "granularities": analyticsGranularities,
	}})
	return nil
}

// Query bounds.
const (
	analyticsDefaultLimit = 1000
	analyticsMaxLimit     = 10000
	analyticsMaxDims      = 2
	analyticsMaxFilters   = 20
)

func lookupMetric(name string) (*analyticsMetric, bool) {
	for i := range analyticsMetrics {
		if analyticsMetrics[i].Name == name {
			return &analyticsMetrics[i], true
		}
	}
	return nil, false
}

func knownIn(name string, list []labelled) bool {
	for _, l := range list {
		if l.Name == name {
			return true
		}
	}
	return false
}

func namesOf(list []labelled) string {
	names := make([]string, len(list))
	for i, l := range list {
		names[i] = l.Name
	}
	return strings.Join(names, ", ")
}

// filterValue renders a scalar filter value (string or number) as a dimension value.
func filterValue(v gjson.Result) (string, bool) {
	switch v.Type {
	case gjson.String:
		return v.Str, true
	case gjson.Number:
		return v.Raw, true
	case gjson.True, gjson.False:
		return v.Raw, true
	}
	return "", false
}

// analyticsQuery is a parsed POST /analytics/query body.
type analyticsQuery struct {
	usage       storage.UsageQuery
	metrics     []*analyticsMetric
	orderField  string
	orderDesc   bool
	limit       int
	groupLimit  int
	granularity string
}

func parseAnalyticsQuery(b []byte, t time.Time) (*analyticsQuery, *apierror.Error) {
	f, apiErr := reqbody.ParseText(b)
	if apiErr != nil {
		return nil, apiErr
	}
	for _, name := range []string{"classifier_dimensions", "classifier_filters"} {
		if v, ok := f.Get(name); ok && v.Type != gjson.Null {
			return nil, apierror.BadRequest(name + ": classifiers are not supported by this gateway")
		}
	}
	q := &analyticsQuery{limit: analyticsDefaultLimit}
	ms, ok := f.Get("metrics")
	if !ok || !ms.IsArray() || len(ms.Array()) == 0 {
		return nil, apierror.BadRequest("metrics: required non-empty array of metric names")
	}
	for i, m := range ms.Array() {
		metric, ok := lookupMetric(m.Str)
		if m.Type != gjson.String || !ok {
			return nil, apierror.BadRequest(fmt.Sprintf("metrics[%d]: unknown metric %s; see GET /analytics/meta", i, m.Raw))
		}
		q.metrics = append(q.metrics, metric)
	}
	if ds, ok := f.Get("dimensions"); ok && ds.Type != gjson.Null {
		if !ds.IsArray() {
			return nil, apierror.BadRequest("dimensions: expected an array of dimension names")
		}
		if len(ds.Array()) > analyticsMaxDims {
			return nil, apierror.BadRequest("dimensions: at most 2 dimensions")
		}
		for i, d := range ds.Array() {
			if d.Type != gjson.String || !knownIn(d.Str, analyticsDimensions) {
				return nil, apierror.BadRequest(fmt.Sprintf("dimensions[%d]: unknown dimension %s; expected one of %s", i, d.Raw, namesOf(analyticsDimensions)))
			}
			for _, prev := range q.usage.GroupBy {
				if prev == d.Str {
					return nil, apierror.BadRequest(fmt.Sprintf("dimensions[%d]: %q is repeated", i, d.Str))
				}
			}
			q.usage.GroupBy = append(q.usage.GroupBy, d.Str)
		}
	}
	if fs, ok := f.Get("filters"); ok && fs.Type != gjson.Null {
		if !fs.IsArray() {
			return nil, apierror.BadRequest("filters: expected an array")
		}
		if len(fs.Array()) > analyticsMaxFilters {
			return nil, apierror.BadRequest("filters: at most 20 filters")
		}
		for i, x := range fs.Array() {
			uf, apiErr := parseAnalyticsFilter(fmt.Sprintf("filters[%d]", i), x)
			if apiErr != nil {
				return nil, apiErr
			}
			q.usage.Filters = append(q.usage.Filters, uf)
		}
	}
	if g, ok := f.Get("granularity"); ok && g.Type != gjson.Null {
		if g.Type != gjson.String || !knownIn(g.Str, analyticsGranularities) {
			return nil, apierror.BadRequest("granularity: expected one of " + namesOf(analyticsGranularities) + " (the data's resolution is one hour)")
		}
		q.granularity = g.Str
		q.usage.Granularity = g.Str
	}
	q.usage.From, q.usage.To = t.AddDate(0, 0, -30), t.Add(time.Nanosecond)
	if tr, ok := f.Get("time_range"); ok && tr.Type != gjson.Null {
		if !tr.IsObject() {
			return nil, apierror.BadRequest("time_range: expected an object with start and end")
		}
		var bounds [2]time.Time
		for i, name := range []string{"start", "end"} {
			v := tr.Get(name)
			ts, err := time.Parse(time.RFC3339Nano, v.Str)
			if v.Type != gjson.String || err != nil {
				return nil, apierror.BadRequest("time_range." + name + ": required RFC 3339 date-time")
			}
			bounds[i] = ts
		}
		if !bounds[0].Before(bounds[1]) {
			return nil, apierror.BadRequest("time_range: start must be before end")
		}
		q.usage.From, q.usage.To = bounds[0], bounds[1]
	}
	intField := func(name string, lo, hi int) (int, bool, *apierror.Error) {
		v, ok := f.Get(name)
		if !ok || v.Type == gjson.Null {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v.Raw)
		if v.Type != gjson.Number || err != nil || n < lo || n > hi {
			return 0, false, apierror.BadRequest(fmt.Sprintf("%s: expected an integer from %d to %d", name, lo, hi))
		}
		return n, true, nil
	}
	var set bool
	if q.limit, set, apiErr = intField("limit", 1, analyticsMaxLimit); apiErr != nil {
		return nil, apiErr
	} else if !set {
		q.limit = analyticsDefaultLimit
	}
	if q.groupLimit, _, apiErr = intField("group_limit", 1, analyticsMaxLimit); apiErr != nil {
		return nil, apiErr
	}
	if q.granularity != "" {
		q.orderField = "date"
	} else {
		q.orderField, q.orderDesc = "request_count", true
	}
	if ob, ok := f.Get("order_by"); ok && ob.Type != gjson.Null {
		field, dir := ob.Get("field"), ob.Get("direction")
		if !ob.IsObject() || field.Type != gjson.String {
			return nil, apierror.BadRequest("order_by.field: required string")
		}
		if dir.Str != "asc" && dir.Str != "desc" {
			return nil, apierror.BadRequest("order_by.direction: expected asc or desc")
		}
		if !q.orderable(field.Str) {
			return nil, apierror.BadRequest(fmt.Sprintf("order_by.field: %q is not a requested metric, request_count, a requested dimension or date", field.Str))
		}
		q.orderField, q.orderDesc = field.Str, dir.Str == "desc"
	}
	return q, nil
}

func (q *analyticsQuery) orderable(field string) bool {
	if field == "request_count" || (field == "date" && q.granularity != "") {
		return true
	}
	for _, m := range q.metrics {
		if m.Name == field {
			return true
		}
	}
	for _, d := range q.usage.GroupBy {
		if d == field {
			return true
		}
	}
	return false
}

func parseAnalyticsFilter(at string, x gjson.Result) (storage.UsageFilter, *apierror.Error) {
	var uf storage.UsageFilter
	if !x.IsObject() {
		return uf, apierror.BadRequest(at + ": expected an object with field, operator and value")
	}
	field, op, val := x.Get("field"), x.Get("operator"), x.Get("value")
	if field.Type != gjson.String || !knownIn(field.Str, analyticsDimensions) {
		return uf, apierror.BadRequest(fmt.Sprintf("%s.field: unknown dimension %s; expected one of %s", at, field.Raw, namesOf(analyticsDimensions)))
	}
	uf.Dim = field.Str
	switch op.Str {
	case "eq", "neq":
		v, ok := filterValue(val)
		if !ok {
			return uf, apierror.BadRequest(at + ".value: expected a string or number for " + op.Str)
		}
		uf.Values, uf.Negate = []string{v}, op.Str == "neq"
	case "in", "not_in":
		if !val.IsArray() {
			return uf, apierror.BadRequest(at + ".value: expected an array for " + op.Str)
		}
		for i, e := range val.Array() {
			v, ok := filterValue(e)
			if !ok {
				return uf, apierror.BadRequest(fmt.Sprintf("%s.value[%d]: expected a string or number", at, i))
			}
			uf.Values = append(uf.Values, v)
		}
		uf.Negate = op.Str == "not_in"
		if iu := x.Get("include_unset"); iu.Exists() {
			if iu.Type != gjson.True && iu.Type != gjson.False {
				return uf, apierror.BadRequest(at + ".include_unset: expected a boolean")
			}
			uf.IncludeUnset = iu.Bool()
		}
	default:
		return uf, apierror.BadRequest(at + ".operator: expected one of eq, neq, in, not_in")
	}
	if uf.Dim == storage.DimBYOK {
		for _, v := range uf.Values {
			if v != "true" && v != "false" {
				return uf, apierror.BadRequest(at + ".value: byok is true or false")
			}
		}
	}
	return uf, nil
}

func (ar *adminRequest) queryAnalytics() *apierror.Error {
	start := time.Now()
	b, apiErr := reqbody.Read(ar.w, ar.r, maxAdminBody)
	if apiErr != nil {
		return apiErr
	}
	q, apiErr := parseAnalyticsQuery(b, now().UTC())
	if apiErr != nil {
		return apiErr
	}
	rows, err := ar.store.QueryUsage(ar.id.AccountID, q.usage)
	if err != nil {
		return storeError(err, "Analytics")
	}
	q.sort(rows)
	if q.groupLimit > 0 && len(q.usage.GroupBy) > 0 {
		per := map[string]int{}
		kept := rows[:0]
		for _, r := range rows {
			k := strings.Join(r.Dims, "\x00")
			if per[k] < q.groupLimit {
				per[k]++
				kept = append(kept, r)
			}
		}
		rows = kept
	}
	truncated := len(rows) > q.limit
	if truncated {
		rows = rows[:q.limit]
	}
	out := make([]map[string]any, len(rows))
	for i := range rows {
		r := &rows[i]
		row := make(map[string]any, len(q.metrics)+len(r.Dims)+1)
		if q.granularity != "" {
			row["date__"+q.granularity] = r.Bucket.Format("2006-01-02T15:04:05.000Z")
		}
		for j, d := range q.usage.GroupBy {
			row[d] = r.Dims[j]
		}
		for _, m := range q.metrics {
			row[m.Name] = m.value(&r.Sums)
		}
		out[i] = row
	}
	elapsed := float64(time.Since(start).Microseconds()) / 1000
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": map[string]any{
		"data":     out,
		"metadata": map[string]any{"query_time_ms": elapsed, "row_count": len(out), "truncated": truncated},
	}})
	return nil
}

// sort orders rows by the query's order, then by date and dimensions, so
// that answers are deterministic.
func (q *analyticsQuery) sort(rows []storage.UsageRow) {
	var metric *analyticsMetric
	if m, ok := lookupMetric(q.orderField); ok {
		metric = m
	}
	dimIndex := -1
	for i, d := range q.usage.GroupBy {
		if d == q.orderField {
			dimIndex = i
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		var lt, gt bool
		switch {
		case metric != nil:
			lt, gt = metric.less(&a.Sums, &b.Sums), metric.less(&b.Sums, &a.Sums)
		case dimIndex >= 0:
			lt, gt = a.Dims[dimIndex] < b.Dims[dimIndex], a.Dims[dimIndex] > b.Dims[dimIndex]
		default: // date
			lt, gt = a.Bucket.Before(b.Bucket), a.Bucket.After(b.Bucket)
		}
		if lt || gt {
			return lt != q.orderDesc
		}
		if !a.Bucket.Equal(b.Bucket) {
			return a.Bucket.Before(b.Bucket)
		}
		return strings.Join(a.Dims, "\x00") < strings.Join(b.Dims, "\x00")
	})
}
