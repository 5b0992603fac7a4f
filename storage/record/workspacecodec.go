package record

import "github.com/tollgate-dev/caddy-tollgate/storage/codec"

// FastWorkspace reads what encoding/json writes for a Workspace without
// budgets or members (most of them; a workspace with either is left to
// encoding/json).
func FastWorkspace(p *codec.Parser, w *Workspace) bool {
	return p.Lit(`{"id":`) && p.Str(&w.ID) &&
		p.Lit(`,"account_id":`) && p.Str(&w.AccountID) &&
		p.Lit(`,"name":`) && p.Str(&w.Name) &&
		p.Lit(`,"slug":`) && p.Str(&w.Slug) &&
		p.Lit(`,"description":`) && p.NullableStr(&w.Description) &&
		p.Lit(`,"created_by":`) && p.NullableStr(&w.CreatedBy) &&
		p.Lit(`,"default_guardrail_id":`) && p.Str(&w.DefaultGuardrailID) &&
		p.Lit(`,"default_image_model":`) && p.NullableStr(&w.DefaultImageModel) &&
		p.Lit(`,"default_provider_sort":`) && p.NullableStr(&w.DefaultProviderSort) &&
		p.Lit(`,"default_text_model":`) && p.NullableStr(&w.DefaultTextModel) &&
		p.Lit(`,"disabled_server_tools":`) && p.Strs(&w.DisabledServerTools) &&
		p.Lit(`,"io_logging_api_key_ids":`) && p.Ints(&w.IOLoggingAPIKeyIDs) &&
		p.Lit(`,"io_logging_sampling_rate":`) && p.Float(&w.IOLoggingSamplingRate) &&
		p.Lit(`,"is_data_discount_logging_enabled":`) && p.Bool(&w.IsDataDiscountLoggingEnabled) &&
		p.Lit(`,"is_observability_broadcast_enabled":`) && p.Bool(&w.IsObservabilityBroadcastEnabled) &&
		p.Lit(`,"is_observability_io_logging_enabled":`) && p.Bool(&w.IsObservabilityIOLoggingEnabled) &&
		p.Lit(`,"include_byok_in_budgets":`) && p.Bool(&w.IncludeBYOKInBudgets) &&
		p.Lit(`,"created_at":`) && p.Time(&w.CreatedAt) &&
		p.Lit(`,"updated_at":`) && p.NullableTime(&w.UpdatedAt) &&
		p.Lit(`}`)
}
