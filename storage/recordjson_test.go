package storage

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

func TestRecordJSONMatchesEncodingJSON(t *testing.T) {
	weird := "weird \"x\"\\ <&> \n\t\b\f\x01 \u2028 日本 \xff"
	limit := money.Amount(-12_345)
	at := time.Date(2026, 11, 21, 1, 2, 3, 4, time.UTC)
	zoned := time.Date(2027, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	counters := money.UsageCounters{Total: 1234567891, Daily: money.Windowed{Period: 20261121, Value: 5},
		Weekly: money.Windowed{Period: -3, Value: -1}, Monthly: money.Windowed{Period: 202611, Value: money.AmountScale}}
	accounts := []Account{
		{},
		{ID: "org_1", Name: weird, Kind: AccountOrganization, Billing: BillingPrepaid, OwnerUserID: "u1",
			DefaultWorkspaceID: "ws", CreditsPurchased: 100 * money.AmountScale, Purchases: 3, Usage: 12_500_000_000,
			BYOKUsage: -1, RateLimitExempt: true, FilteredModelCatalog: true,
			FreeModelRequests: money.Windowed{Period: 20261121, Value: 7}, FreeModelMinute: money.Windowed{Period: 1, Value: 2},
			CreatedAt: at, UpdatedAt: zoned, RateLimits: &record.RateLimits{RequestsPerMinute: 1, RequestsPerDay: 1 << 40, PromptTokensPerMinute: 3, CompletionTokensPerMinute: 4, ConcurrentRequests: 5}},
	}
	everyFieldSet(t, accounts[1])
	for _, a := range accounts {
		compareJSON(t, record.AccountJSON(a), a)
	}
	keys := []APIKey{
		{},
		{Hash: "abc", AccountID: "org_1", WorkspaceID: "ws", Name: weird, Label: "sk-...", Disabled: true, Limit: &limit,
			LimitReset: money.IntervalMonthly, IncludeBYOKInLimit: true, CreatorUserID: &weird, ExternalUser: new(string),
			CreatedAt: at, UpdatedAt: zoned, ExpiresAt: &zoned, Seq: 1 << 63, Usage: counters, BYOKUsage: counters,
			Connect:      &ConnectApp{ID: 1<<53 - 1, Name: weird, Origin: "https://app.example:8443"},
			LimitByAdmin: true, DisabledByAdmin: true, RateLimits: &record.RateLimits{RequestsPerMinute: 7}},
		{Hash: "def", LimitByAdmin: true},
		{Hash: "ghi", DisabledByAdmin: true},
	}
	everyFieldSet(t, keys[1])
	for _, k := range keys {
		compareJSON(t, record.APIKeyJSON(k), k)
	}
	// A time encoding/json refuses is refused the same way.
	bad := Account{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := json.Marshal(record.AccountJSON(bad)); err == nil {
		t.Error("year 10000 encoded")
	}
	if _, err := json.Marshal(record.APIKeyJSON(APIKey{ExpiresAt: &bad.CreatedAt})); err == nil {
		t.Error("year 10000 encoded")
	}
}

func compareJSON(t *testing.T, hand json.Marshaler, plain any) {
	t.Helper()
	got, err := hand.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("hand-written:\n%s\nencoding/json:\n%s", got, want)
	}
}

// everyFieldSet fails when a field of the record is left zero: a field added
// to Account or APIKey must be set above, so that compareJSON proves the
// hand-written encoder writes it (a dropped field would be lost on disk).
func everyFieldSet(t *testing.T, record any) {
	t.Helper()
	v := reflect.ValueOf(record)
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.IsExported() && v.Field(i).IsZero() {
			t.Errorf("%s.%s is zero in the test record: set it, so that the encoder is checked for it", v.Type().Name(), f.Name)
		}
	}
}
