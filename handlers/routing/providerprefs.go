package routing

import (
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/policy"
)

// providerPrefs are the request's `provider` routing preferences (the
// public API's ProviderPreferences): which endpoints may serve it
// (filters, applied to every model of the request alike) and in what
// order they are tried (ranker). Every field of the object is read
// here: an unknown one, or one of the wrong type, is a 400 naming it.
type providerPrefs struct {
	order          []string
	only, ignore   map[string]bool
	allowFallbacks bool

	// Filters.
	zdr, denyDataCollection, distillable bool
	quantizations                        map[string]bool
	maxPrice                             *priceCeiling
	requireParameters                    bool

	// Ranking.
	sort          string // "", sortPrice, sortThroughput or sortLatency
	partitionNone bool   // sort every model's endpoints together
	minThroughput cutoffs
	maxLatency    cutoffs

	// filters: any filter beyond only and ignore is set.
	filters bool
}

// Sort orders.
const (
	sortPrice      = "price"
	sortThroughput = "throughput"
	sortLatency    = "latency"
)

// cutoffs are a preferred_max_latency or preferred_min_throughput: a
// bound per percentile (p50, p75, p90, p99); 0 bounds nothing.
type cutoffs [4]float64

func (c cutoffs) set() bool { return c != cutoffs{} }

// percentileNames are the members of a cutoffs object, in cutoffs order.
var percentileNames = [4]string{"p50", "p75", "p90", "p99"}

// priceCeiling is a max_price, each bound in femto-credits per unit (per
// token, request, image or audio unit); nil bounds nothing.
type priceCeiling struct {
	prompt, completion, request, image, audio *big.Rat
}

// Errors of the provider object name the field.
func prefsError(field, want string) *apierror.Error {
	return apierror.BadRequest("provider." + field + ": expected " + want)
}

// unknownField is the 400 of a member the object does not define, its
// path cut short when a client sent a long name.
func unknownField(path string) *apierror.Error {
	if len(path) > 100 {
		path = path[:100] + "..."
	}
	return apierror.BadRequest(path + ": unknown field")
}

// parseProviderPrefs reads the `provider` object; provider names match the
// catalog's case-insensitively.
func parseProviderPrefs(v gjson.Result) (providerPrefs, *apierror.Error) {
	p := providerPrefs{allowFallbacks: true}
	if !v.Exists() || v.Type == gjson.Null {
		return p, nil
	}
	if !v.IsObject() {
		return p, apierror.BadRequest("provider: expected an object")
	}
	var apiErr *apierror.Error
	v.ForEach(func(k, f gjson.Result) bool {
		apiErr = p.setField(k.Str, f)
		return apiErr == nil
	})
	return p, apiErr
}

// setField reads one member of the provider object; null leaves the
// default.
func (p *providerPrefs) setField(name string, f gjson.Result) *apierror.Error {
	switch name {
	case "order", "only", "ignore", "allow_fallbacks", "zdr", "data_collection", "enforce_distillable_text",
		"quantizations", "max_price", "require_parameters", "sort", "preferred_min_throughput", "preferred_max_latency":
	default:
		return unknownField("provider." + name)
	}
	if f.Type == gjson.Null {
		return nil
	}
	boolean := func(dst *bool) *apierror.Error {
		if !f.IsBool() {
			return prefsError(name, "a boolean")
		}
		*dst = f.Bool()
		return nil
	}
	var apiErr *apierror.Error
	switch name {
	case "order":
		p.order, apiErr = providerNames(name, f)
	case "only", "ignore":
		var list []string
		if list, apiErr = providerNames(name, f); apiErr == nil {
			set := make(map[string]bool, len(list))
			for _, n := range list {
				set[n] = true
			}
			if name == "only" {
				p.only = set
			} else {
				p.ignore = set
			}
		}
	case "allow_fallbacks":
		apiErr = boolean(&p.allowFallbacks)
	case "zdr":
		apiErr = boolean(&p.zdr)
	case "enforce_distillable_text":
		apiErr = boolean(&p.distillable)
	case "require_parameters":
		apiErr = boolean(&p.requireParameters)
	case "data_collection":
		switch {
		case f.Type == gjson.String && f.Str == "deny":
			p.denyDataCollection = true
		case f.Type == gjson.String && f.Str == "allow":
		default:
			apiErr = prefsError(name, `"allow" or "deny"`)
		}
	case "quantizations":
		apiErr = p.setQuantizations(f)
	case "max_price":
		p.maxPrice, apiErr = parsePriceCeiling(f)
	case "sort":
		apiErr = p.setSort(f)
	case "preferred_min_throughput":
		p.minThroughput, apiErr = parseCutoffs(name, f)
	case "preferred_max_latency":
		p.maxLatency, apiErr = parseCutoffs(name, f)
	}
	p.filters = p.zdr || p.denyDataCollection || p.distillable || p.quantizations != nil || p.maxPrice != nil || p.requireParameters
	return apiErr
}

// providerNames reads an array of provider names, lower-cased.
func providerNames(field string, f gjson.Result) ([]string, *apierror.Error) {
	if !f.IsArray() {
		return nil, prefsError(field, "an array of provider names")
	}
	var out []string
	for _, n := range f.Array() {
		if n.Type != gjson.String {
			return nil, prefsError(field, "an array of provider names")
		}
		out = append(out, strings.ToLower(n.Str))
	}
	return out, nil
}

func (p *providerPrefs) setQuantizations(f gjson.Result) *apierror.Error {
	want := "an array of " + strings.Join(catalog.Quantizations, ", ")
	if !f.IsArray() {
		return prefsError("quantizations", want)
	}
	p.quantizations = map[string]bool{}
	for _, q := range f.Array() {
		if q.Type != gjson.String || !slices.Contains(catalog.Quantizations, q.Str) {
			return prefsError("quantizations", want)
		}
		p.quantizations[q.Str] = true
	}
	return nil
}

func (p *providerPrefs) setSort(f gjson.Result) *apierror.Error {
	by := f
	if f.IsObject() {
		by = gjson.Result{Type: gjson.Null}
		var apiErr *apierror.Error
		f.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "by":
				by = v
			case "partition":
				switch {
				case v.Type == gjson.Null || v.Type == gjson.String && v.Str == "model":
				case v.Type == gjson.String && v.Str == "none":
					p.partitionNone = true
				default:
					apiErr = prefsError("sort.partition", `"model" or "none"`)
				}
			default:
				apiErr = unknownField("provider.sort." + k.Str)
			}
			return apiErr == nil
		})
		if apiErr != nil {
			return apiErr
		}
		if by.Type == gjson.Null {
			return nil
		}
	}
	field := "sort"
	if f.IsObject() {
		field = "sort.by"
	}
	if by.Type == gjson.String && by.Str == "exacto" {
		return apierror.BadRequest("provider." + field + `: "exacto" is not supported by this gateway (it has no tool-calling quality measurements); use "price", "throughput" or "latency"`)
	}
	if by.Type != gjson.String || (by.Str != sortPrice && by.Str != sortThroughput && by.Str != sortLatency) {
		return prefsError(field, `"price", "throughput" or "latency"`)
	}
	p.sort = by.Str
	return nil
}

// parseCutoffs reads a number (the p50 bound) or an object of percentile
// bounds.
func parseCutoffs(field string, f gjson.Result) (cutoffs, *apierror.Error) {
	var c cutoffs
	want := "a positive number or an object of p50, p75, p90, p99"
	if f.Type == gjson.Number {
		if f.Num <= 0 {
			return c, prefsError(field, want)
		}
		c[0] = f.Num
		return c, nil
	}
	if !f.IsObject() {
		return c, prefsError(field, want)
	}
	var apiErr *apierror.Error
	f.ForEach(func(k, v gjson.Result) bool {
		i := slices.Index(percentileNames[:], k.Str)
		switch {
		case i < 0:
			apiErr = unknownField("provider." + field + "." + k.Str)
		case v.Type == gjson.Null:
		case v.Type != gjson.Number || v.Num <= 0:
			apiErr = prefsError(field+"."+k.Str, "a positive number")
		default:
			c[i] = v.Num
		}
		return apiErr == nil
	})
	return c, apiErr
}

// Units of max_price: prompt and completion per million tokens, the rest
// per unit; prices are in femto-credits (1 credit = 1e15).
var (
	femtoPerMillion = big.NewRat(1_000_000_000, 1) // 1e15 per credit / 1e6 tokens
	femtoPerCredit  = big.NewRat(1_000_000_000_000_000, 1)
)

// parsePriceCeiling reads max_price: decimal strings (the public schema)
// or numbers, in credits.
func parsePriceCeiling(f gjson.Result) (*priceCeiling, *apierror.Error) {
	if !f.IsObject() {
		return nil, prefsError("max_price", "an object of prompt, completion, request, image, audio")
	}
	c := &priceCeiling{}
	var apiErr *apierror.Error
	f.ForEach(func(k, v gjson.Result) bool {
		var dst **big.Rat
		scale := femtoPerCredit
		switch k.Str {
		case "prompt":
			dst, scale = &c.prompt, femtoPerMillion
		case "completion":
			dst, scale = &c.completion, femtoPerMillion
		case "request":
			dst = &c.request
		case "image":
			dst = &c.image
		case "audio":
			dst = &c.audio
		default:
			apiErr = unknownField("provider.max_price." + k.Str)
			return false
		}
		if v.Type == gjson.Null {
			return true
		}
		text := v.Str
		if v.Type == gjson.Number {
			text = v.Raw
		}
		var r *big.Rat
		ok := (v.Type == gjson.String || v.Type == gjson.Number) && plainDecimal(text)
		if ok {
			r, ok = new(big.Rat).SetString(text)
		}
		if !ok || r.Sign() < 0 {
			apiErr = prefsError("max_price."+k.Str, "a non-negative decimal (credits)")
			return false
		}
		*dst = r.Mul(r, scale)
		return true
	})
	return c, apiErr
}

// plainDecimal reports whether s is a short decimal whose exponent, if
// any, is small: big.Rat would otherwise compute 10^exponent, however
// large, from a client's text.
func plainDecimal(s string) bool {
	if s == "" || len(s) > 64 || strings.ContainsAny(s, "/xXpP_") {
		return false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		return err == nil && exp >= -30 && exp <= 30
	}
	return true
}

// exceeds reports the first of the endpoint's prices above the ceiling,
// by its field name; "" when none is.
func (c *priceCeiling) exceeds(m *catalog.Model) string {
	above := func(bound *big.Rat, price int64) bool {
		return bound != nil && new(big.Rat).SetInt64(price).Cmp(bound) > 0
	}
	p := m.Pricing
	switch {
	case above(c.prompt, int64(p.Prompt)):
		return "prompt"
	case above(c.completion, int64(p.Completion)):
		return "completion"
	case above(c.request, int64(p.Request)):
		return "request"
	}
	// The catalog prices no image or audio unit: the gateway charges
	// none, so image and audio ceilings are always met.
	return ""
}

// requestParameters are the parameters of the public API a request uses,
// by their names in the chat dialect (what providers' supported_parameters
// list), for `require_parameters`.
func requestParameters(kind dialect.Kind, get func(string) gjson.Result) []string {
	var used []string
	has := func(name string) bool { v := get(name); return v.Exists() && v.Type != gjson.Null }
	add := func(param string, present bool) {
		if present && !slices.Contains(used, param) {
			used = append(used, param)
		}
	}
	for _, name := range []string{"temperature", "top_p", "top_k", "frequency_penalty", "presence_penalty",
		"seed", "logit_bias", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls", "reasoning",
		"include_reasoning", "response_format", "structured_outputs", "max_tokens", "stop", "min_p",
		"top_a", "repetition_penalty", "verbosity", "web_search_options", "prediction"} {
		add(name, has(name))
	}
	add("logprobs", get("logprobs").Type == gjson.True)
	add("max_tokens", has("max_completion_tokens") || has("max_output_tokens"))
	switch kind {
	case dialect.Responses:
		add("response_format", has("text.format"))
		add("structured_outputs", get("text.format.type").Str == "json_schema")
	case dialect.Messages:
		add("reasoning", has("thinking"))
		add("stop", has("stop_sequences"))
	default:
		add("structured_outputs", get("response_format.type").Str == "json_schema")
	}
	return used
}

// endpointFilter is the request's filters, resolved for one request.
type endpointFilter struct {
	prefs  *providerPrefs
	params []string // the request's parameters, for require_parameters
}

// The preferences' checks, in the order filter applies them.
const (
	checkIgnore = iota
	checkOnly
	checkZDR
	checkDataCollection
	checkDistillable
	checkQuantizations
	checkMaxPrice
	checkParameters
	checks
)

// excludedBy names the preference that check applies when it excludes a,
// or "" when a meets it. The data-policy facts are the ones guardrails
// decide from (policy.EndpointOf): a BYOK credential's declared_zdr
// counts, and the account's own private endpoints meet every data policy.
func (ef endpointFilter) excludedBy(a upstream.Attempt, check int) string {
	p := ef.prefs
	dataPolicy := func() policy.Endpoint { return policy.EndpointOf(a.Model, a.Provider, a.DeclaredZDR) }
	switch check {
	case checkIgnore:
		if p.ignore[strings.ToLower(a.Provider.Name)] {
			return "ignore"
		}
	case checkOnly:
		if p.only != nil && !p.only[strings.ToLower(a.Provider.Name)] {
			return "only"
		}
	case checkZDR:
		if e := dataPolicy(); p.zdr && !e.ZDR && !e.Own {
			return "zdr"
		}
	case checkDataCollection:
		if e := dataPolicy(); p.denyDataCollection && !e.ZDR && e.Trains && !e.Own {
			return "data_collection"
		}
	case checkDistillable:
		if p.distillable && !a.Model.Distillable {
			return "enforce_distillable_text"
		}
	case checkQuantizations:
		if p.quantizations != nil && !p.quantizations[quantizationOf(a.Provider)] {
			return "quantizations"
		}
	case checkMaxPrice:
		if p.maxPrice != nil {
			if field := p.maxPrice.exceeds(a.Model); field != "" {
				return "max_price." + field
			}
		}
	case checkParameters:
		if p.requireParameters {
			supported := a.Provider.Parameters()
			for _, param := range ef.params {
				if !slices.Contains(supported, param) {
					return "require_parameters (" + param + ")"
				}
			}
		}
	}
	return ""
}

// quantizationOf is p's quantization, "unknown" when the catalog does not
// say.
func quantizationOf(p *catalog.Provider) string {
	if p.Quantization == "" {
		return "unknown"
	}
	return p.Quantization
}

// filter keeps the endpoints that meet the preferences, applying one
// preference after the other (ignore, only, zdr, data_collection,
// enforce_distillable_text, quantizations, max_price,
// require_parameters). When one leaves no endpoint, excluded names it
// and the last endpoint it removed.
func (ef endpointFilter) filter(c []upstream.Attempt) (kept []upstream.Attempt, excluded string) {
	p := ef.prefs
	if p.only == nil && p.ignore == nil && !p.filters || len(c) == 0 {
		return c, ""
	}
	out := slices.Clone(c)
	for check := range checks {
		n := 0
		var why string
		var last upstream.Attempt
		for _, a := range out {
			if w := ef.excludedBy(a, check); w != "" {
				why, last = w, a
				continue
			}
			out[n] = a
			n++
		}
		if out = out[:n]; n == 0 {
			return nil, "provider." + why + " excluded " + strconv.Quote(last.Provider.Name) + " for model " + strconv.Quote(last.Model.ID)
		}
	}
	return out, ""
}
