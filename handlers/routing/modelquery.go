package routing

import (
	"cmp"
	"math"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
)

// The values the model lists' modality filters take.
var (
	outputModalities = []string{"text", "image", "audio", "embeddings"}
	inputModalities  = []string{"text", "image", "audio", "file"}
)

// The sorts of GET /models the gateway applies, from the catalog's data
// and its own measurements of each endpoint.
const (
	listByPriceLow   = "pricing-low-to-high"
	listByPriceHigh  = "pricing-high-to-low"
	listByContext    = "context-high-to-low"
	listByNewest     = "newest"
	listByThroughput = "throughput-high-to-low"
	listByLatency    = "latency-low-to-high"
)

// refusedSorts are the public API's sorts that need data the gateway does
// not have, with what it lacks.
var refusedSorts = map[string]string{
	"most-popular":                 "the gateway does not rank models by popularity",
	"top-weekly":                   "the gateway does not rank models by popularity",
	"intelligence-high-to-low":     "the gateway has no benchmark indices",
	"coding-high-to-low":           "the gateway has no benchmark indices",
	"agentic-high-to-low":          "the gateway has no benchmark indices",
	"design-arena-elo-high-to-low": "the gateway has no benchmark rankings",
}

// categories are the public API's use-case categories, none of which the
// catalog assigns.
var categories = []string{"programming", "roleplay", "marketing", "marketing/seo", "technology", "science",
	"translation", "legal", "finance", "health", "trivia", "academia"}

// refusedFilters are the public API's filters on data the gateway does
// not have, in the order of its parameters.
var refusedFilters = []struct{ name, why string }{
	{"min_intelligence_index", "the gateway has no benchmark indices"},
	{"max_intelligence_index", "the gateway has no benchmark indices"},
	{"min_coding_index", "the gateway has no benchmark indices"},
	{"max_coding_index", "the gateway has no benchmark indices"},
	{"min_agentic_index", "the gateway has no benchmark indices"},
	{"max_agentic_index", "the gateway has no benchmark indices"},
	{"min_tool_success_rate", "the gateway does not measure tool-calling success"},
	{"max_tool_success_rate", "the gateway does not measure tool-calling success"},
}

// modelQuery is what GET /models's query asks of the list: its filters
// (each one that is set removes the models that fail it) and its sort.
// An empty parameter is an omitted one.
type modelQuery struct {
	output      []string // nil: every model ("all")
	input       []string
	params      []string
	search      string // lowercased
	minContext  int64
	prompt      priceRange
	completion  priceRange
	arch        string
	authors     []string
	providers   []string
	distillable string // "", "true" or "false"
	zdr         bool
	region      string // a provider's DataPolicy.Region
	minAge      int64  // days; -1: none
	maxAge      int64
	sort        string
	now         time.Time
}

// priceRange bounds a price per token; nil: unbounded.
type priceRange struct{ min, max *big.Rat }

// parseModelQuery reads GET /models's query; every parameter the public
// API defines is applied or refused, with a 400 naming it. Only
// output_modalities is read when countOnly (GET /models/count).
func parseModelQuery(q url.Values, countOnly bool) (*modelQuery, *apierror.Error) {
	mq := &modelQuery{output: []string{"text"}, minAge: -1, maxAge: -1}
	if v := q.Get("output_modalities"); v != "" && v != "all" {
		list, apiErr := modalityList("output_modalities", v, outputModalities)
		if apiErr != nil {
			return nil, apiErr
		}
		mq.output = list
	} else if v == "all" {
		mq.output = nil
	}
	if countOnly {
		return mq, nil
	}
	if v := q.Get("category"); v != "" {
		if !slices.Contains(categories, v) {
			return nil, apierror.BadRequest("category: unknown category " + strconv.Quote(v))
		}
		return nil, apierror.BadRequest("category: the gateway assigns its models no use-case category")
	}
	mq.params = commaList(q.Get("supported_parameters"))
	if v := q.Get("sort"); v != "" {
		switch v {
		case listByPriceLow, listByPriceHigh, listByContext, listByNewest, listByThroughput, listByLatency:
			mq.sort = v
		default:
			if why, ok := refusedSorts[v]; ok {
				return nil, apierror.BadRequest("sort: " + strconv.Quote(v) + ": " + why)
			}
			return nil, apierror.BadRequest("sort: unknown sort " + strconv.Quote(v))
		}
	}
	for _, name := range []string{"use_rss", "use_rss_chat_links"} {
		switch q.Get(name) {
		case "", "false":
		case "true":
			return nil, apierror.BadRequest(name + ": the gateway does not serve the model list as an RSS feed")
		default:
			return nil, apierror.BadRequest(name + ": expected true or false")
		}
	}
	mq.search = strings.ToLower(strings.TrimSpace(q.Get("q")))
	if v := q.Get("input_modalities"); v != "" {
		list, apiErr := modalityList("input_modalities", v, inputModalities)
		if apiErr != nil {
			return nil, apiErr
		}
		mq.input = list
	}
	if v := q.Get("context"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, apierror.BadRequest("context: expected a positive integer")
		}
		mq.minContext = n
	}
	for _, b := range []struct {
		name string
		dst  **big.Rat
	}{
		{"min_price", &mq.prompt.min}, {"max_price", &mq.prompt.max},
		{"min_output_price", &mq.completion.min}, {"max_output_price", &mq.completion.max},
	} {
		if v := q.Get(b.name); v != "" {
			r, ok := perMillion(v)
			if !ok {
				return nil, apierror.BadRequest(b.name + ": expected a non-negative number (credits per million tokens)")
			}
			*b.dst = r
		}
	}
	mq.arch = strings.TrimSpace(q.Get("arch"))
	mq.authors = commaList(q.Get("model_authors"))
	mq.providers = commaList(q.Get("providers"))
	switch v := q.Get("distillable"); v {
	case "", "true", "false":
		mq.distillable = v
	default:
		return nil, apierror.BadRequest("distillable: expected true or false")
	}
	switch q.Get("zdr") {
	case "":
	case "true":
		mq.zdr = true
	default:
		return nil, apierror.BadRequest("zdr: expected true")
	}
	switch v := q.Get("region"); v {
	case "":
	case "eu":
		mq.region = "europe"
	case "us":
		mq.region = "us"
	default:
		return nil, apierror.BadRequest("region: expected eu or us")
	}
	for _, b := range []struct {
		name string
		dst  *int64
	}{{"min_age_days", &mq.minAge}, {"max_age_days", &mq.maxAge}} {
		if v := q.Get(b.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, apierror.BadRequest(b.name + ": expected a non-negative integer")
			}
			*b.dst = n
		}
	}
	for _, f := range refusedFilters {
		if q.Get(f.name) != "" {
			return nil, apierror.BadRequest(f.name + ": " + f.why)
		}
	}
	if mq.minAge >= 0 || mq.maxAge >= 0 || mq.sort == listByThroughput || mq.sort == listByLatency {
		mq.now = time.Now()
	}
	return mq, nil
}

// commaList is a comma-separated parameter's values, blanks trimmed and
// empty ones dropped; nil for none.
func commaList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// modalityList is a comma-separated list of modalities, each one of known.
func modalityList(name, v string, known []string) ([]string, *apierror.Error) {
	list := commaList(v)
	for _, m := range list {
		if !slices.Contains(known, m) {
			return nil, apierror.BadRequest(name + ": unknown modality " + strconv.Quote(m) + " (expected " + strings.Join(known, ", ") + ")")
		}
	}
	if len(list) == 0 {
		return nil, apierror.BadRequest(name + ": expected " + strings.Join(known, ", "))
	}
	return list, nil
}

// perMillion is a price given in credits per million tokens, as a price
// per token in billing.Price units.
func perMillion(v string) (*big.Rat, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(v)
	if !ok {
		return nil, false
	}
	// A Price is femto-credits: per token, a price per million is 1e9 of them.
	return r.Mul(r, big.NewRat(1_000_000_000, 1)), true
}

// in reports whether p is within the range.
func (pr priceRange) in(p billing.Price) bool {
	if pr.min == nil && pr.max == nil {
		return true
	}
	r := new(big.Rat).SetInt64(int64(p))
	return (pr.min == nil || r.Cmp(pr.min) >= 0) && (pr.max == nil || r.Cmp(pr.max) <= 0)
}

// keeps reports whether model m passes every filter of the query.
func (mq *modelQuery) keeps(m *catalog.Model) bool {
	pub := gjson.ParseBytes(m.Public)
	arch := pub.Get("architecture")
	if mq.output != nil && !anyOf(arch.Get("output_modalities"), mq.output) {
		return false
	}
	if mq.input != nil && !allOf(arch.Get("input_modalities"), mq.input) {
		return false
	}
	if mq.params != nil && !allOf(pub.Get("supported_parameters"), mq.params) {
		return false
	}
	if mq.search != "" && !strings.Contains(strings.ToLower(m.ID), mq.search) &&
		!strings.Contains(strings.ToLower(pub.Get("name").Str), mq.search) {
		return false
	}
	if mq.minContext > 0 && pub.Get("context_length").Int() < mq.minContext {
		return false
	}
	if !mq.prompt.in(m.Pricing.Prompt) || !mq.completion.in(m.Pricing.Completion) {
		return false
	}
	if mq.arch != "" && !strings.EqualFold(arch.Get("tokenizer").Str, mq.arch) {
		return false
	}
	if mq.authors != nil {
		author, _, _ := strings.Cut(m.ID, "/")
		if !slices.ContainsFunc(mq.authors, func(a string) bool { return strings.EqualFold(a, author) }) {
			return false
		}
	}
	if mq.providers != nil && !slices.ContainsFunc(m.Providers, func(p *catalog.Provider) bool {
		return slices.ContainsFunc(mq.providers, func(name string) bool { return strings.EqualFold(name, p.Name) })
	}) {
		return false
	}
	if mq.distillable != "" && m.Distillable != (mq.distillable == "true") {
		return false
	}
	if mq.zdr && !slices.ContainsFunc(m.Providers, func(p *catalog.Provider) bool { return p.DataPolicy.ZDR }) {
		return false
	}
	if mq.region != "" && !slices.ContainsFunc(m.Providers, func(p *catalog.Provider) bool { return p.DataPolicy.Region == mq.region }) {
		return false
	}
	if mq.minAge >= 0 || mq.maxAge >= 0 {
		age := int64(mq.now.Sub(time.Unix(pub.Get("created").Int(), 0)) / (24 * time.Hour))
		if mq.minAge >= 0 && age < mq.minAge || mq.maxAge >= 0 && age > mq.maxAge {
			return false
		}
	}
	return true
}

// anyOf reports whether the JSON array of strings list holds one of want.
func anyOf(list gjson.Result, want []string) bool {
	for _, v := range list.Array() {
		if slices.Contains(want, v.Str) {
			return true
		}
	}
	return false
}

// allOf reports whether the JSON array of strings list holds all of want.
func allOf(list gjson.Result, want []string) bool {
	have := list.Array()
	for _, w := range want {
		if !slices.ContainsFunc(have, func(v gjson.Result) bool { return v.Str == w }) {
			return false
		}
	}
	return true
}

// filter is the models that pass the query's filters, in order, sorted
// by its sort (stable: equals keep the catalog's order). It returns
// models itself, unchanged, when nothing is filtered out nor sorted.
func (mq *modelQuery) filter(models []*catalog.Model) []*catalog.Model {
	var out []*catalog.Model
	for i, m := range models {
		if mq.keeps(m) {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil {
			out = append(make([]*catalog.Model, 0, len(models)), models[:i]...)
		}
	}
	if out == nil {
		if mq.sort == "" {
			return models
		}
		out = slices.Clone(models)
	}
	mq.sortModels(out)
	return out
}

// sortModels orders models by the query's sort. Prices are the average
// of the prompt and completion prices; latency and throughput are the
// median (p50) of the model's best endpoint over the gateway's recent
// measurements, and a model without any comes last.
func (mq *modelQuery) sortModels(models []*catalog.Model) {
	switch mq.sort {
	case listByPriceLow, listByPriceHigh:
		sign := 1
		if mq.sort == listByPriceHigh {
			sign = -1
		}
		slices.SortStableFunc(models, func(a, b *catalog.Model) int {
			return sign * cmp.Compare(a.Pricing.Prompt+a.Pricing.Completion, b.Pricing.Prompt+b.Pricing.Completion)
		})
	case listByContext:
		slices.SortStableFunc(models, func(a, b *catalog.Model) int {
			return cmp.Compare(gjson.GetBytes(b.Public, "context_length").Int(), gjson.GetBytes(a.Public, "context_length").Int())
		})
	case listByNewest:
		slices.SortStableFunc(models, func(a, b *catalog.Model) int {
			return cmp.Compare(gjson.GetBytes(b.Public, "created").Int(), gjson.GetBytes(a.Public, "created").Int())
		})
	case listByLatency, listByThroughput:
		score := make(map[*catalog.Model]float64, len(models))
		for _, m := range models {
			score[m] = mq.measured(m)
		}
		slices.SortStableFunc(models, func(a, b *catalog.Model) int { return cmp.Compare(score[a], score[b]) })
	}
}

// measured is a model's score for a latency or throughput sort, lowest
// first: its best endpoint's median latency, or its best endpoint's
// median throughput negated; +Inf without any measurement.
func (mq *modelQuery) measured(m *catalog.Model) float64 {
	best := math.Inf(1)
	for _, p := range m.Providers {
		if mq.sort == listByLatency {
			if l := p.Stats.Latency(mq.now); l.OK {
				best = min(best, l.P50)
			}
		} else if tp := p.Stats.Throughput(mq.now); tp.OK {
			best = min(best, -tp.P50)
		}
	}
	return best
}
