package storage

import (
	"strconv"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// Every charge rewrites its account's and key's records in the group
// commit, where encoding/json's reflection (and the compaction it runs on
// each Amount's and time's own encoding) was the largest cost. The
// snapshots hand the kernel these types instead, encoded by hand into
// exactly what encoding/json writes for the struct tags
// (TestRecordJSONMatchesEncodingJSON); records are still read back with
// encoding/json.

// The records the group commit writes on every charge encode into its one
// buffer.
var (
	_ kernel.Appender = Generation{}
	_ kernel.Appender = accountJSON{}
	_ kernel.Appender = apiKeyJSON{}
	_ kernel.Appender = scopeUsage{}
)

// accountJSON is an Account as the group commit encodes it.
type accountJSON Account

// MarshalJSON implements json.Marshaler.
func (a accountJSON) MarshalJSON() ([]byte, error) { return a.AppendJSON(make([]byte, 0, 512)) }

// AppendJSON appends what MarshalJSON returns (kernel.Appender).
func (a accountJSON) AppendJSON(b []byte) ([]byte, error) {
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

// apiKeyJSON is an APIKey as the group commit encodes it.
type apiKeyJSON APIKey

// MarshalJSON implements json.Marshaler.
func (k apiKeyJSON) MarshalJSON() ([]byte, error) { return k.AppendJSON(make([]byte, 0, 768)) }

// AppendJSON appends what MarshalJSON returns (kernel.Appender).
func (k apiKeyJSON) AppendJSON(b []byte) ([]byte, error) {
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
