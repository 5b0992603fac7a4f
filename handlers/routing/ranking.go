package routing

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/routestats"
)

// ranker orders one request's endpoints, most preferred first:
//
//  1. providers named in `provider.order`, in that order;
//  2. the account's own endpoints: private endpoints, then BYOK
//     credentials, then the operator's keys;
//  3. endpoints that meet preferred_max_latency and
//     preferred_min_throughput before those that do not (an endpoint
//     without measurements meets them), then, among those alike so far,
//     endpoints whose uptime of the last 30 minutes is below the
//     gateway's min_uptime behind the others (routestats.LowUptime);
//  4. by `provider.sort` (or the model id's :floor or :nitro suffix):
//     price (prompt + completion, then request, lowest first), throughput
//     (p50, highest first) or latency (p50, lowest first), unmeasured
//     endpoints last; without a sort, load balancing: equally ranked
//     endpoints are drawn one after the other, each with a chance
//     proportional to the inverse square of its price (free ones first);
//  5. sticky routing (package sticky): without provider.order and sort,
//     the endpoint that served the conversation, when it is in the first
//     model's leading run of equally ranked endpoints, leads it.
//
// Measurements are the gateway's own (routestats: the last 64 answers of
// each endpoint within 30 minutes). With `models` fallbacks, each model's
// endpoints are ranked apart and follow the previous model's, except that
// endpoints meeting the preferred cutoffs come before those of any model
// that miss them, and `sort` with partition "none" sorts them together.
type ranker struct {
	prefs *providerPrefs
	sort  string // the request's sort, else the model suffix's
	// balance: load balancing by price applies; false keeps the
	// catalog's order among equally ranked endpoints.
	balance bool
	rand    func() float64 // in [0, 1)
	now     time.Time
	// lead is set by order: the leading run sticky routing chooses in.
	lead int
	// minUptime: endpoints below this uptime (percent) rank behind the
	// others of their rank; 0: off.
	minUptime float64
}

// rankKey is what an endpoint is ranked by.
type rankKey struct {
	order  int // index in provider.order; len(order) when not named
	tier   int
	missed bool    // below a preferred cutoff
	down   bool    // uptime below min_uptime
	metric float64 // by sort, lower first; +Inf unmeasured
	tie    float64
}

func (rk *ranker) key(a upstream.Attempt) rankKey {
	k := rankKey{order: len(rk.prefs.order)}
	if len(rk.prefs.order) > 0 {
		if i := slices.Index(rk.prefs.order, strings.ToLower(a.Provider.Name)); i >= 0 {
			k.order = i
		}
	}
	switch {
	case strings.HasPrefix(a.Provider.Name, privateProviderPrefix):
	case a.BYOK:
		k.tier = 1
	default:
		k.tier = 2
	}
	stats := a.Provider.Stats
	if rk.prefs.maxLatency.set() || rk.prefs.minThroughput.set() {
		k.missed = misses(rk.prefs.maxLatency, stats.Latency(rk.now), func(v, bound float64) bool { return v > bound }) ||
			misses(rk.prefs.minThroughput, stats.Throughput(rk.now), func(v, bound float64) bool { return v < bound })
	}
	if rk.minUptime > 0 {
		if rk.now.IsZero() {
			rk.now = time.Now()
		}
		k.down = stats.LowUptime(rk.minUptime, rk.now)
	}
	switch rk.sort {
	case sortPrice:
		k.metric, k.tie = priceOf(a.Model), float64(a.Model.Pricing.Request)
	case sortThroughput:
		k.metric = math.Inf(1)
		if p := stats.Throughput(rk.now); p.OK {
			k.metric = -p.P50
		}
	case sortLatency:
		k.metric = math.Inf(1)
		if p := stats.Latency(rk.now); p.OK {
			k.metric = p.P50
		}
	}
	return k
}

// misses reports whether measurements p fail one of the cutoffs set.
func misses(c cutoffs, p routestats.Percentiles, fails func(v, bound float64) bool) bool {
	if !p.OK {
		return false
	}
	for i, v := range [4]float64{p.P50, p.P75, p.P90, p.P99} {
		if c[i] > 0 && fails(v, c[i]) {
			return true
		}
	}
	return false
}

// priceOf is an endpoint's price for ranking: its prompt and completion
// prices per token.
func priceOf(m *catalog.Model) float64 {
	return float64(m.Pricing.Prompt) + float64(m.Pricing.Completion)
}

func compareKeys(a, b rankKey) int {
	return cmp.Or(cmp.Compare(a.order, b.order), cmp.Compare(a.tier, b.tier), compareBool(a.missed, b.missed),
		compareBool(a.down, b.down), cmp.Compare(a.metric, b.metric), cmp.Compare(a.tie, b.tie))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// order orders one model's endpoints (in place); fallbacks then applies
// allow_fallbacks. One endpoint is not ranked. rk.lead is then the
// length of the leading run of equally ranked endpoints that sticky
// routing may choose among: load balanced by price, with no
// provider.order and no sort (else 0).
func (rk *ranker) order(c []upstream.Attempt) []upstream.Attempt {
	p := rk.prefs
	rk.lead = 0
	if len(c) > 1 && (len(p.order) > 0 || rk.sort != "" || p.maxLatency.set() || p.minThroughput.set() || rk.balance || rk.anyDown(c)) {
		keys := make([]rankKey, len(c))
		idx := make([]int, len(c))
		for i, a := range c {
			keys[i], idx[i] = rk.key(a), i
		}
		slices.SortStableFunc(idx, func(i, j int) int { return compareKeys(keys[i], keys[j]) })
		if rk.sort == "" && rk.balance {
			rk.balanceRuns(c, keys, idx)
			if len(p.order) == 0 {
				for rk.lead = 1; rk.lead < len(idx) && compareKeys(keys[idx[0]], keys[idx[rk.lead]]) == 0; rk.lead++ {
				}
			}
		}
		ranked := make([]upstream.Attempt, len(c))
		for i, j := range idx {
			ranked[i] = c[j]
		}
		c = ranked
	}
	return c
}

// fallbacks applies allow_fallbacks to one model's ordered endpoints:
// without fallbacks, only the providers named in order remain, or the
// first endpoint.
func (rk *ranker) fallbacks(c []upstream.Attempt) []upstream.Attempt {
	p := rk.prefs
	if !p.allowFallbacks {
		if len(p.order) > 0 {
			c = slices.DeleteFunc(c, func(a upstream.Attempt) bool { return !slices.Contains(p.order, strings.ToLower(a.Provider.Name)) })
		} else if len(c) > 1 {
			c = c[:1]
		}
	}
	return c
}

// anyDown reports whether an endpoint of c has a low uptime.
func (rk *ranker) anyDown(c []upstream.Attempt) bool {
	if rk.minUptime <= 0 {
		return false
	}
	if rk.now.IsZero() {
		rk.now = time.Now()
	}
	for _, a := range c {
		if a.Provider.Stats.LowUptime(rk.minUptime, rk.now) {
			return true
		}
	}
	return false
}

// balanceRuns reorders each run of equally ranked endpoints (not named in
// order) by drawing them one by one, weighted by the inverse square of
// their price.
func (rk *ranker) balanceRuns(c []upstream.Attempt, keys []rankKey, idx []int) {
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && compareKeys(keys[idx[start]], keys[idx[end]]) == 0 {
			end++
		}
		if end-start > 1 && keys[idx[start]].order == len(rk.prefs.order) {
			run := idx[start:end]
			for i := range run {
				j := i + rk.draw(c, run[i:])
				run[i], run[j] = run[j], run[i]
			}
		}
		start = end
	}
}

// draw picks one of the endpoints c[run[...]]: free ones (price 0) first,
// each alike; else each with weight 1/price².
func (rk *ranker) draw(c []upstream.Attempt, run []int) int {
	if len(run) == 1 {
		return 0
	}
	weight := func(i int) float64 {
		price := priceOf(c[run[i]].Model)
		return 1 / (price * price)
	}
	var free []int
	for i := range run {
		if priceOf(c[run[i]].Model) == 0 {
			free = append(free, i)
		}
	}
	if len(free) > 0 {
		return free[min(len(free)-1, int(rk.rand()*float64(len(free))))]
	}
	total := 0.0
	for i := range run {
		total += weight(i)
	}
	r := rk.rand() * total
	for i := range run {
		if r -= weight(i); r < 0 {
			return i
		}
	}
	return len(run) - 1
}

// sortAcross orders the endpoints of every model together (sort with
// partition "none"), stably.
func (rk *ranker) sortAcross(c []upstream.Attempt) {
	if len(c) < 2 {
		return
	}
	keys := make(map[*catalog.Provider]rankKey, len(c))
	for _, a := range c {
		keys[a.Provider] = rk.key(a)
	}
	slices.SortStableFunc(c, func(a, b upstream.Attempt) int { return compareKeys(keys[a.Provider], keys[b.Provider]) })
}

// preferAcross moves, stably, the endpoints of every model that meet the
// preferred cutoffs before those that miss them: a fallback model's
// endpoint that meets them is tried before a primary one that does not.
func (rk *ranker) preferAcross(c []upstream.Attempt) {
	p := rk.prefs
	if len(c) < 2 || !p.maxLatency.set() && !p.minThroughput.set() {
		return
	}
	missed := make(map[*catalog.Provider]bool, len(c))
	for _, a := range c {
		missed[a.Provider] = rk.key(a).missed
	}
	slices.SortStableFunc(c, func(a, b upstream.Attempt) int { return compareBool(missed[a.Provider], missed[b.Provider]) })
}

// modelSuffixSort is the sort a model id's suffix asks for (:nitro:
// throughput, :floor: price) and the id without it; an id the catalog has
// as written keeps its suffix.
func modelSuffixSort(id string) (base, sort string) {
	if b, ok := strings.CutSuffix(id, ":nitro"); ok {
		return b, sortThroughput
	}
	if b, ok := strings.CutSuffix(id, ":floor"); ok {
		return b, sortPrice
	}
	return id, ""
}

// routingOf describes, for the generation record, how a request's n
// endpoints were chosen and ranked: the filters, then the order.
func (rk *ranker) routingOf(n int, suffixSort string) string {
	p := rk.prefs
	if n == 1 && !p.filters && p.only == nil && p.ignore == nil {
		return "" // nothing to say: the record names the provider
	}
	var parts []string
	if p.filters || p.only != nil || p.ignore != nil {
		parts = append(parts, "filtered by provider preferences")
	}
	switch {
	case n == 1:
		parts = append(parts, "one endpoint")
	case len(p.order) > 0:
		parts = append(parts, "provider.order")
	}
	if n > 1 {
		switch {
		case p.sort != "":
			parts = append(parts, "sorted by "+p.sort)
		case suffixSort != "":
			parts = append(parts, "sorted by "+suffixSort+" (model suffix)")
		case rk.balance:
			parts = append(parts, "load balanced by price")
		default:
			parts = append(parts, "catalog order")
		}
		if p.maxLatency.set() || p.minThroughput.set() {
			parts = append(parts, "preferred latency/throughput first")
		}
		if !p.allowFallbacks {
			parts = append(parts, "no fallbacks")
		}
	}
	return strings.Join(parts, "; ")
}
