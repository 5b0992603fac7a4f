package routing

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/images"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/routestats"
)

// serveGateway answers a request the router does not send to a provider:
// the catalog's lists (GET), else 405 on an inference route's own path and
// 404 on any other. Only inference POSTs reach providers.
func (rt *Router) serveGateway(w http.ResponseWriter, r *http.Request, st *pipeline.State) error {
	op := st.API.Op
	if op == admin.OpNone && admin.OpListModels.Takes(r.Method) {
		op = admin.ResolveOp(r) // a catalog route with path values
	}
	if !op.Takes(r.Method) {
		if op == admin.OpInfer {
			e := apierror.New(http.StatusMethodNotAllowed, "Method "+r.Method+" is not allowed on "+r.URL.Path)
			e.Header = http.Header{"Allow": {http.MethodPost}}
			return apierror.Fail(r, e)
		}
		return apierror.Fail(r, apierror.NotFound("Not found: "+r.Method+" "+r.URL.Path))
	}
	switch op {
	case admin.OpListModels:
		return rt.serveModels(w, r, st, publicModels)
	case admin.OpListUserModels:
		return rt.serveModels(w, r, st, userModels)
	case admin.OpListEmbeddingsModels:
		return rt.serveModels(w, r, st, embeddingModels)
	case admin.OpCountModels:
		return rt.countModels(w, r)
	case admin.OpListProviders:
		apierror.WriteJSON(w, http.StatusOK, map[string]any{"data": providerList(rt.catalog())})
	case admin.OpModelEndpoints:
		id := r.PathValue("author") + "/" + r.PathValue("slug")
		m, ok := rt.catalog().Lookup(id)
		if !ok {
			return apierror.Fail(r, apierror.NotFound("Model not found: "+id))
		}
		apierror.WriteJSON(w, http.StatusOK, map[string]any{"data": endpointList(m)})
	case admin.OpGetModel:
		m, apiErr := rt.namedModel(st, r.PathValue("author")+"/"+r.PathValue("slug"))
		if apiErr != nil {
			return apierror.Fail(r, apiErr)
		}
		writeRaw(w, `{"data":`, m.Public, "}\n")
	case admin.OpListImageModels:
		apierror.WriteJSON(w, http.StatusOK, map[string]any{"data": imageModelList(rt.catalog())})
	case admin.OpImageModelEndpoints:
		id := r.PathValue("author") + "/" + r.PathValue("slug")
		m, ok := rt.catalog().Lookup(id)
		if !ok || !images.OutputsImages(m) {
			return apierror.Fail(r, apierror.NotFound("Model not found: "+id))
		}
		apierror.WriteJSON(w, http.StatusOK, imageEndpoints(m))
	case admin.OpZDREndpoints:
		apierror.WriteJSON(w, http.StatusOK, map[string]any{"data": zdrEndpoints(rt.catalog())})
	default:
		return apierror.Fail(r, apierror.NotFound("Not found: "+r.Method+" "+r.URL.Path))
	}
	return nil
}

// routingVariants are the model id suffixes that choose how a model is
// served (web search, its endpoints' order), not another model.
var routingVariants = []string{":online", ":nitro", ":floor"}

// namedModel is the model GET /model/{author}/{slug} names: by its id, a
// family alias, or either with routing variants (":online", ":nitro",
// ":floor"); 404 for any other, and for a model the caller's filtered
// catalog leaves out.
func (rt *Router) namedModel(st *pipeline.State, id string) (*catalog.Model, *apierror.Error) {
	m, ok := rt.catalog().Lookup(id)
	for base := id; !ok; {
		i := slices.IndexFunc(routingVariants, func(v string) bool { return strings.HasSuffix(base, v) })
		if i < 0 {
			break
		}
		base = base[:len(base)-len(routingVariants[i])]
		m, ok = rt.catalog().Lookup(base)
	}
	if ok && filtersCatalog(st.ID) {
		models, apiErr := rt.ModelsFor(st)
		if apiErr != nil {
			return nil, apiErr
		}
		ok = slices.Contains(models, m)
	}
	if !ok {
		return nil, apierror.NotFound("Model not found: " + id)
	}
	return m, nil
}

// writeRaw answers 200 with a JSON body written by hand: the public
// objects are already JSON, and encoding/json would re-escape them.
func writeRaw(w http.ResponseWriter, prefix string, raw []byte, suffix string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(prefix)+len(raw)+len(suffix)))
	w.WriteHeader(http.StatusOK)
	// The status is sent: a failed write is a client gone.
	_, _ = io.WriteString(w, prefix)
	_, _ = w.Write(raw)
	_, _ = io.WriteString(w, suffix)
}

// providerInfo is one entry of GET /providers. The catalog knows providers
// by name only: the policy and status pages are unknown (null).
type providerInfo struct {
	Name              string   `json:"name"`
	Slug              string   `json:"slug"`
	PrivacyPolicyURL  *string  `json:"privacy_policy_url"`
	TermsOfServiceURL *string  `json:"terms_of_service_url"`
	StatusPageURL     *string  `json:"status_page_url"`
	Headquarters      *string  `json:"headquarters"`
	Datacenters       []string `json:"datacenters"`
}

// providerList is every provider name of the catalog, in catalog order.
func providerList(c *catalog.Catalog) []providerInfo {
	out := []providerInfo{}
	seen := map[string]bool{}
	for _, m := range c.Models() {
		for _, p := range m.Providers {
			if !seen[p.Name] {
				seen[p.Name] = true
				out = append(out, providerInfo{Name: p.Name, Slug: p.Name, Datacenters: []string{}})
			}
		}
	}
	return out
}

// endpointList is GET /models/{author}/{slug}/endpoints: the model's
// public fields and one entry per provider (endpointView).
func endpointList(m *catalog.Model) map[string]any {
	pub := gjson.ParseBytes(m.Public)
	arch := map[string]any{"instruct_type": nil, "tokenizer": nil, "modality": nil,
		"input_modalities": []string{"text"}, "output_modalities": []string{"text"}}
	pub.Get("architecture").ForEach(func(k, v gjson.Result) bool {
		arch[k.Str] = json.RawMessage(v.Raw)
		return true
	})
	pricing := modelPricing(pub)
	endpoints := make([]map[string]any, 0, len(m.Providers))
	now := time.Now()
	for _, p := range m.Providers {
		endpoints = append(endpoints, endpointView(m, p, pricing, now))
	}
	return map[string]any{
		"id": m.ID, "name": m.Name, "created": pub.Get("created").Int(), "description": pub.Get("description").Str,
		"architecture": arch, "endpoints": endpoints,
	}
}

// modelPricing is a model's public pricing, which its endpoints without
// their own pricing charge.
func modelPricing(pub gjson.Result) json.RawMessage {
	if p := pub.Get("pricing"); p.IsObject() {
		return json.RawMessage(p.Raw)
	}
	return json.RawMessage(`{"prompt":"0","completion":"0"}`)
}

// endpointView is provider p of model m in the public endpoint shape:
// the provider's own prices (else the model's, pricing), quantization and
// parameters, and the gateway's measurements of it (routestats: latency
// in seconds, throughput in tokens per second, uptime in percent of the
// calls that answered; null without any).
func endpointView(m *catalog.Model, p *catalog.Provider, pricing json.RawMessage, now time.Time) map[string]any {
	var maxCompletion *int64
	if m.MaxCompletionTokens > 0 {
		maxCompletion = &m.MaxCompletionTokens
	}
	var quantization any
	if p.Quantization != "" {
		quantization = p.Quantization
	}
	endpointPricing := any(pricing)
	if p.Pricing != nil {
		endpointPricing = endpointPriceView(p.Pricing)
	}
	return map[string]any{
		"name": p.Name + ": " + m.Name, "model_id": m.ID, "model_name": m.Name,
		"context_length": m.ContextLength, "max_completion_tokens": maxCompletion, "max_prompt_tokens": nil,
		"pricing": endpointPricing, "provider_name": p.Name, "tag": p.Name, "quantization": quantization, "status": 0,
		"supported_parameters":      p.Parameters(),
		"supports_implicit_caching": false,
		"supports_tool_choice":      map[string]bool{"auto": true, "function": true, "none": true, "required": true},
		"latency_last_30m":          percentileView(p.Stats.Latency(now)),
		"throughput_last_30m":       percentileView(p.Stats.Throughput(now)),
		"uptime_last_1d":            uptimeView(p.Stats, routestats.UptimeDay, now),
		"uptime_last_30m":           uptimeView(p.Stats, routestats.Window, now),
		"uptime_last_5m":            uptimeView(p.Stats, routestats.UptimeShort, now),
	}
}

// uptimeView is the share of the endpoint's calls within window that
// answered, in percent; nil without any (calls refused for the request's
// sake, a rate limit among them, do not count).
func uptimeView(s *routestats.Stats, window time.Duration, now time.Time) any {
	if p, _, ok := s.Uptime(window, now); ok {
		return p
	}
	return nil
}

// zdrEndpoints is GET /endpoints/zdr: every endpoint of the catalog that
// retains nothing (its provider's zdr), in catalog order.
func zdrEndpoints(c *catalog.Catalog) []map[string]any {
	out := []map[string]any{}
	now := time.Now()
	for _, m := range c.Models() {
		var pricing json.RawMessage
		for _, p := range m.Providers {
			if !p.DataPolicy.ZDR {
				continue
			}
			if pricing == nil {
				pricing = modelPricing(gjson.ParseBytes(m.Public))
			}
			out = append(out, endpointView(m, p, pricing, now))
		}
	}
	return out
}

// endpointPriceView is a provider's own pricing in the public shape.
func endpointPriceView(p *billing.Pricing) map[string]any {
	v := map[string]any{"prompt": p.Prompt, "completion": p.Completion, "request": p.Request, "web_search": p.WebSearch}
	if p.CacheReadSet {
		v["input_cache_read"] = p.InputCacheRead
	}
	if p.CacheWriteSet {
		v["input_cache_write"] = p.InputCacheWrite
	}
	if p.CacheWrite1hSet {
		v["input_cache_write_1h"] = p.InputCacheWrite1h
	}
	if p.Overrides != nil {
		v["overrides"] = p.Overrides.Entries
	}
	return v
}

// percentileView is measurements in the public PercentileStats shape;
// nil without any.
func percentileView(p routestats.Percentiles) any {
	if !p.OK {
		return nil
	}
	return map[string]float64{"p50": p.P50, "p75": p.P75, "p90": p.P90, "p99": p.P99}
}
