package storage

import (
	"encoding/json"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// Opening a database decodes every account, management key, purchase and
// workspace record: at a million keys (100,000 accounts) encoding/json's
// reflection over these 400,000 records was most of the start once the
// keys came from their snapshot. Each has a decoder of the exact form its
// encoder writes (member order, no white space, strings without escapes
// or non-ASCII bytes, the numbers it writes), in one pass without
// reflection like decodeAPIKeyFast; anything else (an older record, a
// field set that is rare, such as a workspace's budgets) is left to
// encoding/json. What a fast decoder accepts it decodes as encoding/json
// does (TestRecordDecodersMatchEncodingJSON, FuzzRecordDecoders).

// decodeRecord decodes v into x with fast, else with encoding/json.
func decodeRecord[T any](v []byte, x *T, fast func(*codec.Parser, *T) bool) error {
	p := codec.NewParser(v)
	if fast(&p, x) && p.Done() {
		return nil
	}
	*x = *new(T)
	return json.Unmarshal(v, x)
}

// fastAccount reads what accountJSON writes.
func fastAccount(p *codec.Parser, a *Account) bool {
	var kind, billing string
	ok := p.Lit(`{"id":`) && p.Str(&a.ID) &&
		p.Lit(`,"name":`) && p.Str(&a.Name) &&
		p.Lit(`,"kind":`) && p.Str(&kind) &&
		p.Lit(`,"billing":`) && p.Str(&billing)
	a.Kind, a.Billing = AccountKind(kind), Billing(billing)
	if ok && p.Lit(`,"owner_user_id":`) {
		ok = p.Str(&a.OwnerUserID)
	}
	var purchases int64
	ok = ok && p.Lit(`,"default_workspace_id":`) && p.Str(&a.DefaultWorkspaceID) &&
		p.Lit(`,"credits_purchased":`) && p.Amount(&a.CreditsPurchased) &&
		p.Lit(`,"purchases":`) && p.Int(&purchases) && purchases == int64(int(purchases)) &&
		p.Lit(`,"usage":`) && p.Amount(&a.Usage) &&
		p.Lit(`,"byok_usage":`) && p.Amount(&a.BYOKUsage) &&
		p.Lit(`,"rate_limit_exempt":`) && p.Bool(&a.RateLimitExempt) &&
		p.Lit(`,"filtered_model_catalog":`) && p.Bool(&a.FilteredModelCatalog) &&
		p.Lit(`,"free_model_requests":`) && p.Windowed(&a.FreeModelRequests) &&
		p.Lit(`,"free_model_minute":`) && p.Windowed(&a.FreeModelMinute) &&
		p.Lit(`,"created_at":`) && p.Time(&a.CreatedAt) &&
		p.Lit(`,"updated_at":`) && p.Time(&a.UpdatedAt) &&
		p.Lit(`}`)
	a.Purchases = int(purchases)
	return ok
}

// fastPurchase reads what encoding/json writes for a Purchase.
func fastPurchase(p *codec.Parser, r *Purchase) bool {
	ok := p.Lit(`{"id":`) && p.Str(&r.ID) &&
		p.Lit(`,"account_id":`) && p.Str(&r.AccountID) &&
		p.Lit(`,"amount":`) && p.Amount(&r.Amount)
	if ok && p.Lit(`,"note":`) {
		ok = p.Str(&r.Note)
	}
	return ok && p.Lit(`,"created_at":`) && p.Time(&r.CreatedAt) && p.Lit(`}`)
}

// fastMgmtKey reads what encoding/json writes for a ManagementKey.
func fastMgmtKey(p *codec.Parser, m *ManagementKey) bool {
	return p.Lit(`{"hash":`) && p.Str(&m.Hash) &&
		p.Lit(`,"account_id":`) && p.Str(&m.AccountID) &&
		p.Lit(`,"name":`) && p.Str(&m.Name) &&
		p.Lit(`,"label":`) && p.Str(&m.Label) &&
		p.Lit(`,"creator_user_id":`) && p.NullableStr(&m.CreatorUserID) &&
		p.Lit(`,"created_at":`) && p.Time(&m.CreatedAt) &&
		p.Lit(`,"expires_at":`) && p.NullableTime(&m.ExpiresAt) &&
		p.Lit(`}`)
}

// fastWorkspace reads what encoding/json writes for a Workspace without
// budgets or members (most of them; a workspace with either is left to
// encoding/json).
func fastWorkspace(p *codec.Parser, w *Workspace) bool {
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
