package record

// Today's codecs, as they were written by hand before they were generated:
// the generated ones must write the same bytes and read the same values
// (TestCodecsMatchHandWritten).

import (
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

func oldEncodeAccount(b []byte, v any) ([]byte, error) {
	a := v.(*Account)
	b = codec.AppendBytes(b, a.ID)
	b = codec.AppendBytes(b, a.Name)
	b = codec.AppendBytes(b, string(a.Kind))
	b = codec.AppendBytes(b, string(a.Billing))
	b = codec.AppendBytes(b, a.OwnerUserID)
	b = codec.AppendBytes(b, a.DefaultWorkspaceID)
	b = binary.AppendVarint(b, int64(a.CreditsPurchased))
	b = binary.AppendVarint(b, int64(a.Purchases))
	b = binary.AppendVarint(b, int64(a.Usage))
	b = binary.AppendVarint(b, int64(a.BYOKUsage))
	b = codec.AppendBool(b, a.RateLimitExempt)
	b = codec.AppendBool(b, a.FilteredModelCatalog)
	b = codec.AppendBinWindowed(b, a.FreeModelRequests)
	b = codec.AppendBinWindowed(b, a.FreeModelMinute)
	var err error
	b = codec.AppendBinTime(b, a.CreatedAt, &err)
	return codec.AppendBinTime(b, a.UpdatedAt, &err), err
}

func oldDecodeAccount(v []byte, a *Account, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	a.ID = p.Str()
	a.Name = p.Str()
	a.Kind = AccountKind(p.Str())
	a.Billing = Billing(p.Str())
	a.OwnerUserID = p.Str()
	a.DefaultWorkspaceID = p.Str()
	a.CreditsPurchased = money.Amount(p.Varint())
	purchases := p.Varint()
	a.Purchases = int(purchases)
	a.Usage = money.Amount(p.Varint())
	a.BYOKUsage = money.Amount(p.Varint())
	a.RateLimitExempt = p.Bool()
	a.FilteredModelCatalog = p.Bool()
	a.FreeModelRequests = p.Windowed()
	a.FreeModelMinute = p.Windowed()
	a.CreatedAt = p.Time()
	a.UpdatedAt = p.Time()
	return p.Done(int64(a.Purchases) == purchases)
}

func oldEncodePurchase(b []byte, v any) ([]byte, error) {
	r := v.(*Purchase)
	b = codec.AppendBytes(b, r.ID)
	b = codec.AppendBytes(b, r.AccountID)
	b = binary.AppendVarint(b, int64(r.Amount))
	b = codec.AppendBytes(b, r.Note)
	var err error
	return codec.AppendBinTime(b, r.CreatedAt, &err), err
}

func oldDecodePurchase(v []byte, r *Purchase, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	r.ID = p.Str()
	r.AccountID = p.Str()
	r.Amount = money.Amount(p.Varint())
	r.Note = p.Str()
	r.CreatedAt = p.Time()
	return p.Done(true)
}

func oldEncodeMgmtKey(b []byte, v any) ([]byte, error) {
	m := v.(*ManagementKey)
	b = codec.AppendBytes(b, m.Hash)
	b = codec.AppendBytes(b, m.AccountID)
	b = codec.AppendBytes(b, m.Name)
	b = codec.AppendBytes(b, m.Label)
	b = codec.AppendBool(b, m.CreatorUserID != nil)
	if m.CreatorUserID != nil {
		b = codec.AppendBytes(b, *m.CreatorUserID)
	}
	var err error
	b = codec.AppendBinTime(b, m.CreatedAt, &err)
	b = codec.AppendBool(b, m.ExpiresAt != nil)
	if m.ExpiresAt != nil {
		b = codec.AppendBinTime(b, *m.ExpiresAt, &err)
	}
	return b, err
}

func oldDecodeMgmtKey(v []byte, m *ManagementKey, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	m.Hash = p.Str()
	m.AccountID = p.Str()
	m.Name = p.Str()
	m.Label = p.Str()
	if p.Bool() {
		c := p.Str()
		m.CreatorUserID = &c
	}
	m.CreatedAt = p.Time()
	if p.Bool() {
		t := p.Time()
		m.ExpiresAt = &t
	}
	return p.Done(true)
}

func oldAccountJSON(a AccountJSON, b []byte) ([]byte, error) {
	if !codec.EncodableTime(a.CreatedAt) || !codec.EncodableTime(a.UpdatedAt) {
		return codec.AppendMarshaled(b, Account(a)) // encoding/json's own error
	}
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, a.ID)
	b = append(b, `,"name":`...)
	b = jsonstr.Append(b, a.Name)
	b = append(b, `,"kind":`...)
	b = jsonstr.Append(b, string(a.Kind))
	b = append(b, `,"billing":`...)
	b = jsonstr.Append(b, string(a.Billing))
	if a.OwnerUserID != "" {
		b = append(b, `,"owner_user_id":`...)
		b = jsonstr.Append(b, a.OwnerUserID)
	}
	b = append(b, `,"default_workspace_id":`...)
	b = jsonstr.Append(b, a.DefaultWorkspaceID)
	b = append(b, `,"credits_purchased":`...)
	b = a.CreditsPurchased.Append(b)
	b = append(b, `,"purchases":`...)
	b = strconv.AppendInt(b, int64(a.Purchases), 10)
	b = append(b, `,"usage":`...)
	b = a.Usage.Append(b)
	b = append(b, `,"byok_usage":`...)
	b = a.BYOKUsage.Append(b)
	b = append(b, `,"rate_limit_exempt":`...)
	b = strconv.AppendBool(b, a.RateLimitExempt)
	b = append(b, `,"filtered_model_catalog":`...)
	b = strconv.AppendBool(b, a.FilteredModelCatalog)
	b = append(b, `,"free_model_requests":`...)
	b = codec.AppendWindowed(b, a.FreeModelRequests)
	b = append(b, `,"free_model_minute":`...)
	b = codec.AppendWindowed(b, a.FreeModelMinute)
	b = append(b, `,"created_at":`...)
	b = codec.AppendTime(b, a.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = codec.AppendTime(b, a.UpdatedAt)
	return append(b, '}'), nil
}

func oldAPIKeyJSON(k APIKeyJSON, b []byte) ([]byte, error) {
	if !codec.EncodableTime(k.CreatedAt) || !codec.EncodableTime(k.UpdatedAt) || k.ExpiresAt != nil && !codec.EncodableTime(*k.ExpiresAt) {
		return codec.AppendMarshaled(b, APIKey(k)) // encoding/json's own error
	}
	b = append(b, `{"hash":`...)
	b = jsonstr.Append(b, k.Hash)
	b = append(b, `,"account_id":`...)
	b = jsonstr.Append(b, k.AccountID)
	b = append(b, `,"workspace_id":`...)
	b = jsonstr.Append(b, k.WorkspaceID)
	b = append(b, `,"name":`...)
	b = jsonstr.Append(b, k.Name)
	b = append(b, `,"label":`...)
	b = jsonstr.Append(b, k.Label)
	b = append(b, `,"disabled":`...)
	b = strconv.AppendBool(b, k.Disabled)
	b = append(b, `,"limit":`...)
	if k.Limit == nil {
		b = append(b, "null"...)
	} else {
		b = k.Limit.Append(b)
	}
	b = append(b, `,"limit_reset":`...)
	b = jsonstr.Append(b, string(k.LimitReset))
	b = append(b, `,"include_byok_in_limit":`...)
	b = strconv.AppendBool(b, k.IncludeBYOKInLimit)
	b = append(b, `,"creator_user_id":`...)
	b = codec.AppendNullableString(b, k.CreatorUserID)
	b = append(b, `,"external_user":`...)
	b = codec.AppendNullableString(b, k.ExternalUser)
	b = append(b, `,"created_at":`...)
	b = codec.AppendTime(b, k.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = codec.AppendTime(b, k.UpdatedAt)
	b = append(b, `,"expires_at":`...)
	if k.ExpiresAt == nil {
		b = append(b, "null"...)
	} else {
		b = codec.AppendTime(b, *k.ExpiresAt)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, k.Seq, 10)
	b = append(b, `,"usage":`...)
	b = codec.AppendCounters(b, k.Usage)
	b = append(b, `,"byok_usage":`...)
	b = codec.AppendCounters(b, k.BYOKUsage)
	if k.LimitByAdmin {
		b = append(b, `,"limit_by_admin":true`...)
	}
	if k.DisabledByAdmin {
		b = append(b, `,"disabled_by_admin":true`...)
	}
	if k.Connect != nil {
		b = append(b, `,"connect":{"id":`...)
		b = strconv.AppendInt(b, k.Connect.ID, 10)
		b = append(b, `,"name":`...)
		b = jsonstr.Append(b, k.Connect.Name)
		b = append(b, `,"origin":`...)
		b = jsonstr.Append(b, k.Connect.Origin)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

func oldFastAccount(p *codec.Parser, a *Account) bool {
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

func oldFastPurchase(p *codec.Parser, r *Purchase) bool {
	ok := p.Lit(`{"id":`) && p.Str(&r.ID) &&
		p.Lit(`,"account_id":`) && p.Str(&r.AccountID) &&
		p.Lit(`,"amount":`) && p.Amount(&r.Amount)
	if ok && p.Lit(`,"note":`) {
		ok = p.Str(&r.Note)
	}
	return ok && p.Lit(`,"created_at":`) && p.Time(&r.CreatedAt) && p.Lit(`}`)
}

func oldFastMgmtKey(p *codec.Parser, m *ManagementKey) bool {
	return p.Lit(`{"hash":`) && p.Str(&m.Hash) &&
		p.Lit(`,"account_id":`) && p.Str(&m.AccountID) &&
		p.Lit(`,"name":`) && p.Str(&m.Name) &&
		p.Lit(`,"label":`) && p.Str(&m.Label) &&
		p.Lit(`,"creator_user_id":`) && p.NullableStr(&m.CreatorUserID) &&
		p.Lit(`,"created_at":`) && p.Time(&m.CreatedAt) &&
		p.Lit(`,"expires_at":`) && p.NullableTime(&m.ExpiresAt) &&
		p.Lit(`}`)
}

func oldFastWorkspace(p *codec.Parser, w *Workspace) bool {
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

func oldEncodeWorkspace(b []byte, v any) ([]byte, error) {
	w := v.(*Workspace)
	b = codec.AppendBytes(b, w.ID)
	b = codec.AppendBytes(b, w.AccountID)
	b = codec.AppendBytes(b, w.Name)
	b = codec.AppendBytes(b, w.Slug)
	b = codec.AppendOptStr(b, w.Description)
	b = codec.AppendOptStr(b, w.CreatedBy)
	b = codec.AppendBytes(b, w.DefaultGuardrailID)
	b = codec.AppendOptStr(b, w.DefaultImageModel)
	b = codec.AppendOptStr(b, w.DefaultProviderSort)
	b = codec.AppendOptStr(b, w.DefaultTextModel)
	b = codec.AppendBool(b, w.DisabledServerTools != nil)
	b = binary.AppendUvarint(b, uint64(len(w.DisabledServerTools)))
	for _, t := range w.DisabledServerTools {
		b = codec.AppendBytes(b, t)
	}
	b = codec.AppendBool(b, w.IOLoggingAPIKeyIDs != nil)
	b = binary.AppendUvarint(b, uint64(len(w.IOLoggingAPIKeyIDs)))
	for _, id := range w.IOLoggingAPIKeyIDs {
		b = binary.AppendVarint(b, id)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w.IOLoggingSamplingRate))
	b = codec.AppendBool(b, w.IsDataDiscountLoggingEnabled)
	b = codec.AppendBool(b, w.IsObservabilityBroadcastEnabled)
	b = codec.AppendBool(b, w.IsObservabilityIOLoggingEnabled)
	b = codec.AppendBool(b, w.IncludeBYOKInBudgets)
	var err error
	b = codec.AppendBinTime(b, w.CreatedAt, &err)
	b = codec.AppendBool(b, w.UpdatedAt != nil)
	if w.UpdatedAt != nil {
		b = codec.AppendBinTime(b, *w.UpdatedAt, &err)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Budgets)))
	for iv, bu := range w.Budgets {
		b = codec.AppendBytes(b, string(iv))
		b = codec.AppendBytes(b, bu.ID)
		b = codec.AppendBytes(b, string(bu.Interval))
		b = binary.AppendVarint(b, int64(bu.Limit))
		b = codec.AppendBinTime(b, bu.CreatedAt, &err)
		b = codec.AppendBinTime(b, bu.UpdatedAt, &err)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Members)))
	for id, m := range w.Members {
		b = codec.AppendBytes(b, id)
		b = codec.AppendBytes(b, m.UserID)
		b = codec.AppendBytes(b, string(m.Role))
		b = codec.AppendBinTime(b, m.CreatedAt, &err)
	}
	return b, err
}

func oldDecodeWorkspace(v []byte, w *Workspace, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	w.ID = p.Str()
	w.AccountID = p.Str()
	w.Name = p.Str()
	w.Slug = p.Str()
	w.Description = p.OptStr()
	w.CreatedBy = p.OptStr()
	w.DefaultGuardrailID = p.Str()
	w.DefaultImageModel = p.OptStr()
	w.DefaultProviderSort = p.OptStr()
	w.DefaultTextModel = p.OptStr()
	if some := p.Bool(); some {
		w.DisabledServerTools = make([]string, p.Count())
		for i := range w.DisabledServerTools {
			w.DisabledServerTools[i] = p.Str()
		}
	} else if p.Count() != 0 {
		p.Fail()
	}
	if some := p.Bool(); some {
		w.IOLoggingAPIKeyIDs = make([]int64, p.Count())
		for i := range w.IOLoggingAPIKeyIDs {
			w.IOLoggingAPIKeyIDs[i] = p.Varint()
		}
	} else if p.Count() != 0 {
		p.Fail()
	}
	w.IOLoggingSamplingRate = math.Float64frombits(p.Uint64())
	w.IsDataDiscountLoggingEnabled = p.Bool()
	w.IsObservabilityBroadcastEnabled = p.Bool()
	w.IsObservabilityIOLoggingEnabled = p.Bool()
	w.IncludeBYOKInBudgets = p.Bool()
	w.CreatedAt = p.Time()
	if p.Bool() {
		t := p.Time()
		w.UpdatedAt = &t
	}
	if n := p.Count(); n > 0 {
		w.Budgets = make(map[BudgetInterval]*WorkspaceBudget, n)
		for range n {
			iv := BudgetInterval(p.Str())
			w.Budgets[iv] = &WorkspaceBudget{ID: p.Str(), Interval: BudgetInterval(p.Str()), Limit: money.Amount(p.Varint()),
				CreatedAt: p.Time(), UpdatedAt: p.Time()}
		}
	}
	if n := p.Count(); n > 0 {
		w.Members = make(map[string]*WorkspaceMember, n)
		for range n {
			id := p.Str()
			w.Members[id] = &WorkspaceMember{UserID: p.Str(), Role: MemberRole(p.Str()), CreatedAt: p.Time()}
		}
	}
	return p.Done(true)
}

func oldDecodeAPIKeyFast(v []byte, k *APIKey) bool {
	p := codec.NewParser(v)
	ok := p.Lit(`{"hash":`) && p.Str(&k.Hash) &&
		p.Lit(`,"account_id":`) && p.Str(&k.AccountID) &&
		p.Lit(`,"workspace_id":`) && p.Str(&k.WorkspaceID) &&
		p.Lit(`,"name":`) && p.Str(&k.Name) &&
		p.Lit(`,"label":`) && p.Str(&k.Label) &&
		p.Lit(`,"disabled":`) && p.Bool(&k.Disabled) &&
		p.Lit(`,"limit":`) && p.NullableAmount(&k.Limit)
	var reset string
	ok = ok && p.Lit(`,"limit_reset":`) && p.Str(&reset)
	k.LimitReset = money.Interval(reset)
	ok = ok && p.Lit(`,"include_byok_in_limit":`) && p.Bool(&k.IncludeBYOKInLimit) &&
		p.Lit(`,"creator_user_id":`) && p.NullableStr(&k.CreatorUserID) &&
		p.Lit(`,"external_user":`) && p.NullableStr(&k.ExternalUser) &&
		p.Lit(`,"created_at":`) && p.Time(&k.CreatedAt) &&
		p.Lit(`,"updated_at":`) && p.Time(&k.UpdatedAt) &&
		p.Lit(`,"expires_at":`) && p.NullableTime(&k.ExpiresAt) &&
		p.Lit(`,"seq":`) && p.Uint(&k.Seq) &&
		p.Lit(`,"usage":`) && p.Counters(&k.Usage) &&
		p.Lit(`,"byok_usage":`) && p.Counters(&k.BYOKUsage)
	k.LimitByAdmin = ok && p.Lit(`,"limit_by_admin":true`)
	k.DisabledByAdmin = ok && p.Lit(`,"disabled_by_admin":true`)
	ok = ok && p.Lit(`}`)
	return ok && p.Done()
}

func oldGenerationJSON(g Generation, b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, g.ID)
	b = append(b, `,"account_id":`...)
	b = jsonstr.Append(b, g.AccountID)
	b = append(b, `,"key_hash":`...)
	b = jsonstr.Append(b, g.KeyHash)
	if g.WorkspaceID != "" {
		b = append(b, `,"workspace_id":`...)
		b = jsonstr.Append(b, g.WorkspaceID)
	}
	b = append(b, `,"model":`...)
	b = jsonstr.Append(b, g.Model)
	b = append(b, `,"provider":`...)
	b = jsonstr.Append(b, g.Provider)
	if g.UpstreamModel != "" {
		b = append(b, `,"upstream_model":`...)
		b = jsonstr.Append(b, g.UpstreamModel)
	}
	if g.UpstreamID != "" {
		b = append(b, `,"upstream_id":`...)
		b = jsonstr.Append(b, g.UpstreamID)
	}
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, g.PromptTokens, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, g.CompletionTokens, 10)
	if g.CacheReadTokens != 0 {
		b = append(b, `,"cache_read_tokens":`...)
		b = strconv.AppendInt(b, g.CacheReadTokens, 10)
	}
	if g.CacheWriteTokens != 0 {
		b = append(b, `,"cache_write_tokens":`...)
		b = strconv.AppendInt(b, g.CacheWriteTokens, 10)
	}
	if g.SearchResults != 0 {
		b = append(b, `,"search_results":`...)
		b = strconv.AppendInt(b, g.SearchResults, 10)
	}
	b = append(b, `,"cost":`...)
	b = g.Cost.Append(b)
	if g.BYOK {
		b = append(b, `,"byok":true`...)
	}
	if g.Credits != 0 {
		b = append(b, `,"credits":`...)
		b = g.Credits.Append(b)
	}
	b = append(b, `,"status":`...)
	b = jsonstr.Append(b, g.Status)
	b = append(b, `,"streamed":`...)
	b = strconv.AppendBool(b, g.Streamed)
	if g.FinishReason != "" {
		b = append(b, `,"finish_reason":`...)
		b = jsonstr.Append(b, g.FinishReason)
	}
	if g.UsageEstimated {
		b = append(b, `,"usage_estimated":true`...)
	}
	b = append(b, `,"latency_ms":`...)
	b = strconv.AppendInt(b, g.LatencyMS, 10)
	if g.User != "" {
		b = append(b, `,"user":`...)
		b = jsonstr.Append(b, g.User)
	}
	b = append(b, `,"created_at":"`...)
	b = g.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if len(g.ContentFlags) > 0 {
		b = append(b, `,"content_flags":[`...)
		for i, f := range g.ContentFlags {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"guardrail_id":`...)
			b = jsonstr.Append(b, f.GuardrailID)
			b = append(b, `,"label":`...)
			b = jsonstr.Append(b, f.Label)
			if f.Builtin != "" {
				b = append(b, `,"builtin":`...)
				b = jsonstr.Append(b, f.Builtin)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(g.Attempts) > 0 {
		b = append(b, `,"attempts":[`...)
		for i, a := range g.Attempts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"provider":`...)
			b = jsonstr.Append(b, a.Provider)
			b = append(b, `,"model":`...)
			b = jsonstr.Append(b, a.Model)
			b = append(b, `,"status":`...)
			b = strconv.AppendInt(b, int64(a.Status), 10)
			b = append(b, `,"latency_ms":`...)
			b = strconv.AppendInt(b, a.LatencyMS, 10)
			if a.BYOK {
				b = append(b, `,"byok":true`...)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if g.Routing != "" {
		b = append(b, `,"routing":`...)
		b = jsonstr.Append(b, g.Routing)
	}
	return append(b, '}'), nil
}

func oldFastGenerationSums(v []byte, g *Generation) bool {
	p := codec.NewParser(v)
	var n int64
	var b bool
	ok := p.Lit(`{"id":`) && p.SkipStr() &&
		p.Lit(`,"account_id":`) && p.Str(&g.AccountID) &&
		p.Lit(`,"key_hash":`) && p.Str(&g.KeyHash)
	ok = ok && (!p.Lit(`,"workspace_id":`) || p.Str(&g.WorkspaceID))
	ok = ok && p.Lit(`,"model":`) && p.Str(&g.Model) &&
		p.Lit(`,"provider":`) && p.Str(&g.Provider)
	ok = ok && (!p.Lit(`,"upstream_model":`) || p.SkipStr())
	ok = ok && (!p.Lit(`,"upstream_id":`) || p.SkipStr())
	ok = ok && p.Lit(`,"prompt_tokens":`) && p.Int(&g.PromptTokens) &&
		p.Lit(`,"completion_tokens":`) && p.Int(&g.CompletionTokens)
	for _, opt := range []string{`,"cache_read_tokens":`, `,"cache_write_tokens":`, `,"search_results":`} {
		ok = ok && (!p.Lit(opt) || p.Int(&n))
	}
	ok = ok && p.Lit(`,"cost":`) && p.Amount(&g.Cost)
	g.BYOK = ok && p.Lit(`,"byok":true`)
	ok = ok && (!p.Lit(`,"credits":`) || p.Amount(&g.Credits))
	ok = ok && p.Lit(`,"status":`) && p.Str(&g.Status) &&
		p.Lit(`,"streamed":`) && p.Bool(&b)
	ok = ok && (!p.Lit(`,"finish_reason":`) || p.SkipStr())
	if ok {
		p.Lit(`,"usage_estimated":true`) // optional, not summed
	}
	ok = ok && p.Lit(`,"latency_ms":`) && p.Int(&g.LatencyMS)
	ok = ok && (!p.Lit(`,"user":`) || p.Str(&g.User))
	ok = ok && p.Lit(`,"created_at":`) && p.Time(&g.CreatedAt)
	if ok && p.Lit(`,"content_flags":[`) {
		for first := true; ok && !p.Lit(`]`); first = false {
			var f ContentFlag
			ok = (first || p.Lit(`,`)) && p.Lit(`{"guardrail_id":`) && p.Str(&f.GuardrailID) &&
				p.Lit(`,"label":`) && p.Str(&f.Label)
			ok = ok && (!p.Lit(`,"builtin":`) || p.Str(&f.Builtin)) && p.Lit(`}`)
			g.ContentFlags = append(g.ContentFlags, f)
		}
	}
	if ok && p.Lit(`,"attempts":[`) {
		for first := true; ok && !p.Lit(`]`); first = false {
			ok = (first || p.Lit(`,`)) && p.Lit(`{"provider":`) && p.SkipStr() &&
				p.Lit(`,"model":`) && p.SkipStr() &&
				p.Lit(`,"status":`) && p.Int(&n) &&
				p.Lit(`,"latency_ms":`) && p.Int(&n)
			ok = ok && (p.Lit(`,"byok":true}`) || p.Lit(`}`))
		}
	}
	ok = ok && (!p.Lit(`,"routing":`) || p.SkipStr())
	return ok && p.Lit(`}`) && p.Done()
}
