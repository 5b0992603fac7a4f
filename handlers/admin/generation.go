package admin

import (
	"errors"
	"net/http"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// getGeneration serves GET /generation?id=: one of the account's
// generations, by any id its client saw (the generation id, or the
// provider's id of an answer passed through), in the public shape. What
// the gateway does not record is null; another account's generation is
// 404.
func (ar *adminRequest) getGeneration() *apierror.Error {
	id := ar.r.URL.Query().Get("id")
	if id == "" {
		return apierror.BadRequest("id: required query parameter")
	}
	if len(id) > maxGenerationID {
		return apierror.NotFound("Generation not found")
	}
	g, err := ar.store.AccountGeneration(ar.id.AccountID, id)
	if errors.Is(err, storage.ErrNotFound) {
		return generationNotFound(err)
	}
	if err != nil {
		return storeError(err, "Generation")
	}
	apierror.WriteJSON(ar.w, http.StatusOK, map[string]any{"data": ar.generationView(g)})
	return nil
}

// generationNotFound is the 404 of a generation lookup: one older than
// the retention says it was removed.
func generationNotFound(err error) *apierror.Error {
	var exp *storage.ExpiredError
	if errors.As(err, &exp) {
		return apierror.NotFound("Generation not found: " + exp.ID + " has expired (generations are removed " +
			storage.FormatRetention(exp.Retention) + " after they are created, generation_retention)")
	}
	return apierror.NotFound("Generation not found")
}

// generationView is a generation record in the public GenerationResponse
// shape.
func (ar *adminRequest) generationView(g storage.Generation) map[string]any {
	cost := g.Cost.Float64()
	var upstreamCost any
	if g.BYOK {
		upstreamCost = cost
	}
	var cacheDiscount any // null: the provider read and wrote no cache
	if g.CacheReadTokens > 0 || g.CacheWriteTokens > 0 {
		cacheDiscount = g.CacheDiscount.Float64()
	}
	region := "global"
	if m, ok := ar.gw.Catalog().Lookup(g.Model); ok {
		for _, p := range m.Providers {
			if p.Name == g.Provider && p.DataPolicy.Region != "" {
				region = p.DataPolicy.Region
			}
		}
	}
	orNil := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	return map[string]any{
		"id": g.ID, "upstream_id": orNil(g.UpstreamID), "model": g.Model, "provider_name": g.Provider,
		"created_at": g.CreatedAt.UTC().Format(time.RFC3339Nano), "api_type": "completions",
		"total_cost": cost, "usage": cost, "upstream_inference_cost": upstreamCost, "cache_discount": cacheDiscount,
		"is_byok": g.BYOK, "streamed": g.Streamed, "cancelled": g.Status == "aborted",
		"latency": g.LatencyMS, "generation_time": nil, "moderation_latency": nil,
		"finish_reason": orNil(g.FinishReason), "native_finish_reason": orNil(g.FinishReason),
		"tokens_prompt": g.PromptTokens, "tokens_completion": g.CompletionTokens,
		"native_tokens_prompt": g.PromptTokens, "native_tokens_completion": g.CompletionTokens,
		"native_tokens_completion_images": nil, "native_tokens_reasoning": nil, "native_tokens_cached": g.CacheReadTokens,
		"num_media_prompt": nil, "num_input_audio_prompt": nil, "num_media_completion": nil,
		"num_search_results": g.SearchResults, "num_fetches": nil, "web_search_engine": nil,
		"origin": "", "app_id": nil, "external_user": orNil(g.User), "preset_id": orNil(g.PresetID), "router": orNil(g.Router),
		"provider_responses": providerResponses(g), "routing": orNil(g.Routing), "user_agent": nil, "http_referer": nil, "service_tier": nil,
		"data_region": region, "workspace_id": orNil(g.WorkspaceID), "session_id": orNil(g.SessionID), "request_id": nil,
		"response_cache_source_id": orNil(g.ResponseCacheSourceID),
		"content_flags":            contentFlagsView(g.ContentFlags),
	}
}

// contentFlagsView lists the flagging content filters that matched the
// request: [] when none did.
func contentFlagsView(flags []storage.ContentFlag) []storage.ContentFlag {
	if flags == nil {
		return []storage.ContentFlag{}
	}
	return flags
}

// providerResponses are the generation's provider calls in the public
// ProviderResponse shape, the last the one that answered. A request with
// one endpoint keeps no list: its one call is the record's provider.
func providerResponses(g storage.Generation) []map[string]any {
	attempts := g.Attempts
	if len(attempts) == 0 {
		attempts = []storage.ProviderAttempt{{Provider: g.Provider, Model: g.Model, Status: http.StatusOK, LatencyMS: g.LatencyMS, BYOK: g.BYOK}}
	}
	out := make([]map[string]any, 0, len(attempts))
	for i, a := range attempts {
		r := map[string]any{"provider_name": a.Provider, "model_permaslug": a.Model, "status": a.Status,
			"latency": a.LatencyMS, "is_byok": a.BYOK}
		if i == len(attempts)-1 && g.UpstreamID != "" {
			r["id"] = g.UpstreamID
		}
		out = append(out, r)
	}
	return out
}
