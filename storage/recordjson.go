package storage

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/money"
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
	if !encodableTime(a.CreatedAt) || !encodableTime(a.UpdatedAt) {
		return appendMarshaled(b, Account(a)) // encoding/json's own error
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
	b = appendWindowed(b, a.FreeModelRequests)
	b = append(b, `,"free_model_minute":`...)
	b = appendWindowed(b, a.FreeModelMinute)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, a.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, a.UpdatedAt)
	return append(b, '}'), nil
}

// apiKeyJSON is an APIKey as the group commit encodes it.
type apiKeyJSON APIKey

// MarshalJSON implements json.Marshaler.
func (k apiKeyJSON) MarshalJSON() ([]byte, error) { return k.AppendJSON(make([]byte, 0, 768)) }

// AppendJSON appends what MarshalJSON returns (kernel.Appender).
func (k apiKeyJSON) AppendJSON(b []byte) ([]byte, error) {
	if !encodableTime(k.CreatedAt) || !encodableTime(k.UpdatedAt) || k.ExpiresAt != nil && !encodableTime(*k.ExpiresAt) {
		return appendMarshaled(b, APIKey(k)) // encoding/json's own error
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
	b = appendNullableString(b, k.CreatorUserID)
	b = append(b, `,"external_user":`...)
	b = appendNullableString(b, k.ExternalUser)
	b = append(b, `,"created_at":`...)
	b = appendTime(b, k.CreatedAt)
	b = append(b, `,"updated_at":`...)
	b = appendTime(b, k.UpdatedAt)
	b = append(b, `,"expires_at":`...)
	if k.ExpiresAt == nil {
		b = append(b, "null"...)
	} else {
		b = appendTime(b, *k.ExpiresAt)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, k.Seq, 10)
	b = append(b, `,"usage":`...)
	b = appendCounters(b, k.Usage)
	b = append(b, `,"byok_usage":`...)
	b = appendCounters(b, k.BYOKUsage)
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

// appendMarshaled appends encoding/json's encoding of v.
func appendMarshaled(b []byte, v any) ([]byte, error) {
	enc, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, enc...), nil
}

func appendWindowed(b []byte, w money.Windowed) []byte {
	b = append(b, `{"p":`...)
	b = strconv.AppendInt(b, w.Period, 10)
	b = append(b, `,"v":`...)
	b = w.Value.Append(b)
	return append(b, '}')
}

func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonstr.Append(b, *s)
}

// appendTime is time.Time's MarshalJSON for a time encodableTime accepts.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// encodableTime reports whether time.Time's MarshalJSON encodes t as
// appendTime does (it refuses years outside [0,9999] and zone offsets
// with seconds, or beyond ±24h).
func encodableTime(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off%60 == 0 && off > -24*3600 && off < 24*3600
}
