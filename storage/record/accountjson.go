package record

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// AccountJSON is an Account as the group commit encodes it.
type AccountJSON Account

// MarshalJSON implements json.Marshaler.
func (a AccountJSON) MarshalJSON() ([]byte, error) { return a.AppendJSON(make([]byte, 0, 512)) }

// AppendJSON appends what MarshalJSON returns (kernel.Appender).
func (a AccountJSON) AppendJSON(b []byte) ([]byte, error) {
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

// APIKeyJSON is an APIKey as the group commit encodes it.
type APIKeyJSON APIKey

// MarshalJSON implements json.Marshaler.
func (k APIKeyJSON) MarshalJSON() ([]byte, error) { return k.AppendJSON(make([]byte, 0, 768)) }

// AppendJSON appends what MarshalJSON returns (kernel.Appender).
func (k APIKeyJSON) AppendJSON(b []byte) ([]byte, error) {
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

// FastAccount reads what AccountJSON writes.
func FastAccount(p *codec.Parser, a *Account) bool {
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

// FastPurchase reads what encoding/json writes for a Purchase.
func FastPurchase(p *codec.Parser, r *Purchase) bool {
	ok := p.Lit(`{"id":`) && p.Str(&r.ID) &&
		p.Lit(`,"account_id":`) && p.Str(&r.AccountID) &&
		p.Lit(`,"amount":`) && p.Amount(&r.Amount)
	if ok && p.Lit(`,"note":`) {
		ok = p.Str(&r.Note)
	}
	return ok && p.Lit(`,"created_at":`) && p.Time(&r.CreatedAt) && p.Lit(`}`)
}

// FastMgmtKey reads what encoding/json writes for a ManagementKey.
func FastMgmtKey(p *codec.Parser, m *ManagementKey) bool {
	return p.Lit(`{"hash":`) && p.Str(&m.Hash) &&
		p.Lit(`,"account_id":`) && p.Str(&m.AccountID) &&
		p.Lit(`,"name":`) && p.Str(&m.Name) &&
		p.Lit(`,"label":`) && p.Str(&m.Label) &&
		p.Lit(`,"creator_user_id":`) && p.NullableStr(&m.CreatorUserID) &&
		p.Lit(`,"created_at":`) && p.Time(&m.CreatedAt) &&
		p.Lit(`,"expires_at":`) && p.NullableTime(&m.ExpiresAt) &&
		p.Lit(`}`)
}
