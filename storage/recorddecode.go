package storage

import (
	"encoding/json"
	"strconv"
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
func decodeRecord[T any](v []byte, x *T, fast func(*keyParser, *T) bool) error {
	p := keyParser{b: v}
	if fast(&p, x) && len(p.b) == 0 {
		return nil
	}
	*x = *new(T)
	return json.Unmarshal(v, x)
}

// fastAccount reads what accountJSON writes.
func fastAccount(p *keyParser, a *Account) bool {
	var kind, billing string
	ok := p.lit(`{"id":`) && p.str(&a.ID) &&
		p.lit(`,"name":`) && p.str(&a.Name) &&
		p.lit(`,"kind":`) && p.str(&kind) &&
		p.lit(`,"billing":`) && p.str(&billing)
	a.Kind, a.Billing = AccountKind(kind), Billing(billing)
	if ok && p.lit(`,"owner_user_id":`) {
		ok = p.str(&a.OwnerUserID)
	}
	var purchases int64
	ok = ok && p.lit(`,"default_workspace_id":`) && p.str(&a.DefaultWorkspaceID) &&
		p.lit(`,"credits_purchased":`) && p.amount(&a.CreditsPurchased) &&
		p.lit(`,"purchases":`) && p.int(&purchases) && purchases == int64(int(purchases)) &&
		p.lit(`,"usage":`) && p.amount(&a.Usage) &&
		p.lit(`,"byok_usage":`) && p.amount(&a.BYOKUsage) &&
		p.lit(`,"rate_limit_exempt":`) && p.boolean(&a.RateLimitExempt) &&
		p.lit(`,"filtered_model_catalog":`) && p.boolean(&a.FilteredModelCatalog) &&
		p.lit(`,"free_model_requests":`) && p.windowed(&a.FreeModelRequests) &&
		p.lit(`,"free_model_minute":`) && p.windowed(&a.FreeModelMinute) &&
		p.lit(`,"created_at":`) && p.time(&a.CreatedAt) &&
		p.lit(`,"updated_at":`) && p.time(&a.UpdatedAt) &&
		p.lit(`}`)
	a.Purchases = int(purchases)
	return ok
}

// fastPurchase reads what encoding/json writes for a Purchase.
func fastPurchase(p *keyParser, r *Purchase) bool {
	ok := p.lit(`{"id":`) && p.str(&r.ID) &&
		p.lit(`,"account_id":`) && p.str(&r.AccountID) &&
		p.lit(`,"amount":`) && p.amount(&r.Amount)
	if ok && p.lit(`,"note":`) {
		ok = p.str(&r.Note)
	}
	return ok && p.lit(`,"created_at":`) && p.time(&r.CreatedAt) && p.lit(`}`)
}

// fastMgmtKey reads what encoding/json writes for a ManagementKey.
func fastMgmtKey(p *keyParser, m *ManagementKey) bool {
	return p.lit(`{"hash":`) && p.str(&m.Hash) &&
		p.lit(`,"account_id":`) && p.str(&m.AccountID) &&
		p.lit(`,"name":`) && p.str(&m.Name) &&
		p.lit(`,"label":`) && p.str(&m.Label) &&
		p.lit(`,"creator_user_id":`) && p.nullableStr(&m.CreatorUserID) &&
		p.lit(`,"created_at":`) && p.time(&m.CreatedAt) &&
		p.lit(`,"expires_at":`) && p.nullableTime(&m.ExpiresAt) &&
		p.lit(`}`)
}

// fastWorkspace reads what encoding/json writes for a Workspace without
// budgets or members (most of them; a workspace with either is left to
// encoding/json).
func fastWorkspace(p *keyParser, w *Workspace) bool {
	return p.lit(`{"id":`) && p.str(&w.ID) &&
		p.lit(`,"account_id":`) && p.str(&w.AccountID) &&
		p.lit(`,"name":`) && p.str(&w.Name) &&
		p.lit(`,"slug":`) && p.str(&w.Slug) &&
		p.lit(`,"description":`) && p.nullableStr(&w.Description) &&
		p.lit(`,"created_by":`) && p.nullableStr(&w.CreatedBy) &&
		p.lit(`,"default_guardrail_id":`) && p.str(&w.DefaultGuardrailID) &&
		p.lit(`,"default_image_model":`) && p.nullableStr(&w.DefaultImageModel) &&
		p.lit(`,"default_provider_sort":`) && p.nullableStr(&w.DefaultProviderSort) &&
		p.lit(`,"default_text_model":`) && p.nullableStr(&w.DefaultTextModel) &&
		p.lit(`,"disabled_server_tools":`) && p.strs(&w.DisabledServerTools) &&
		p.lit(`,"io_logging_api_key_ids":`) && p.ints(&w.IOLoggingAPIKeyIDs) &&
		p.lit(`,"io_logging_sampling_rate":`) && p.float(&w.IOLoggingSamplingRate) &&
		p.lit(`,"is_data_discount_logging_enabled":`) && p.boolean(&w.IsDataDiscountLoggingEnabled) &&
		p.lit(`,"is_observability_broadcast_enabled":`) && p.boolean(&w.IsObservabilityBroadcastEnabled) &&
		p.lit(`,"is_observability_io_logging_enabled":`) && p.boolean(&w.IsObservabilityIOLoggingEnabled) &&
		p.lit(`,"include_byok_in_budgets":`) && p.boolean(&w.IncludeBYOKInBudgets) &&
		p.lit(`,"created_at":`) && p.time(&w.CreatedAt) &&
		p.lit(`,"updated_at":`) && p.nullableTime(&w.UpdatedAt) &&
		p.lit(`}`)
}

// strs reads null (nil) or an array of strings (empty: not nil).
func (p *keyParser) strs(s *[]string) bool { return array(p, s, p.str) }

// ints reads null (nil) or an array of integers (empty: not nil).
func (p *keyParser) ints(s *[]int64) bool { return array(p, s, p.int) }

// array reads null (nil) or an array (empty: not nil) whose elements one
// reads.
func array[T any](p *keyParser, s *[]T, one func(*T) bool) bool {
	if p.lit("null") {
		*s = nil
		return true
	}
	if !p.lit("[") {
		return false
	}
	out := []T{}
	for i := 0; !p.lit("]"); i++ {
		if i > 0 && !p.lit(",") {
			return false
		}
		var v T
		if !one(&v) {
			return false
		}
		out = append(out, v)
	}
	*s = out
	return true
}

// float reads a number of the forms number accepts, as encoding/json
// parses a float64.
func (p *keyParser) float(f *float64) bool {
	n, ok := p.number(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(bytesString(n), 64)
	*f = v
	return err == nil
}
