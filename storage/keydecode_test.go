package storage

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// TestDecodeAPIKeyMatchesEncodingJSON decodes stored key records, random
// ones as the group commit writes them and hand-written ones (old
// records, nulls, escapes, names encoding/json matches case-insensitively,
// bad values), and requires what encoding/json decodes, or an error where
// it errs.
func TestDecodeAPIKeyMatchesEncodingJSON(t *testing.T) {
	same := func(rec []byte) {
		t.Helper()
		var want, got APIKey
		werr := json.Unmarshal(rec, &want)
		gerr := record.DecodeAPIKey(rec, &got)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("%s: encoding/json %v, record.DecodeAPIKey %v", rec, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%s:\n encoding/json %+v\n record.DecodeAPIKey  %+v", rec, want, got)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "plain", "weird \"x\"\\ <&> \n\t\u2028 日本", "sk-tg-v1-abc...def", "org_0123456789abcdef01234567"}
	pick := func() string { return strs[r.IntN(len(strs))] }
	zones := []*time.Location{time.UTC, time.FixedZone("x", 3600), time.FixedZone("y", -5*3600-1800)}
	when := func() time.Time {
		return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])
	}
	counters := func() money.UsageCounters {
		w := func() money.Windowed {
			return money.Windowed{Period: r.Int64N(3e8) - 1e8, Value: money.Amount(r.Int64N(1e15) - 1e14)}
		}
		return money.UsageCounters{Total: money.Amount(r.Int64()), Daily: w(), Weekly: w(), Monthly: w()}
	}
	fastHits := 0
	for range 2000 {
		k := APIKey{Hash: pick(), AccountID: pick(), WorkspaceID: pick(), Name: pick(), Label: pick(),
			Disabled: r.IntN(2) == 0, LimitReset: money.Interval([]string{"", "daily", "weekly", "monthly"}[r.IntN(4)]),
			IncludeBYOKInLimit: r.IntN(2) == 0, CreatedAt: when(), UpdatedAt: when(), Seq: r.Uint64(),
			Usage: counters(), BYOKUsage: counters()}
		if r.IntN(2) == 0 {
			l := money.Amount(r.Int64N(1e15))
			k.Limit = &l
		}
		if r.IntN(2) == 0 {
			s := pick()
			k.CreatorUserID = &s
		}
		if r.IntN(2) == 0 {
			s := pick()
			k.ExternalUser = &s
		}
		if r.IntN(2) == 0 {
			e := when()
			k.ExpiresAt = &e
		}
		if r.IntN(4) == 0 {
			k.Connect = &ConnectApp{ID: r.Int64(), Name: pick(), Origin: pick()}
		}
		k.LimitByAdmin, k.DisabledByAdmin = r.IntN(4) == 0, r.IntN(4) == 0
		rec, err := record.APIKeyJSON(k).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		same(rec)
		var fast, want APIKey
		if record.DecodeAPIKeyFast(rec, &fast) {
			fastHits++
			_ = json.Unmarshal(rec, &want)
			if !reflect.DeepEqual(want, fast) {
				t.Fatalf("%s: the fast path decoded %+v", rec, fast)
			}
		}
		var got APIKey
		if err := record.DecodeAPIKey(rec, &got); err != nil || !reflect.DeepEqual(got.Usage, k.Usage) || got.Seq != k.Seq {
			t.Fatalf("round trip of %s: %v", rec, err)
		}
	}
	if fastHits < 100 {
		t.Fatalf("the fast path decoded %d of 2000 records", fastHits)
	}
	// Records the fast path refuses part way are decoded whole again.
	plain, _ := record.APIKeyJSON(APIKey{Hash: "h", Name: "n", Seq: 7}).MarshalJSON()
	for i := range len(plain) {
		same(plain[:i])
		for _, b := range []byte{' ', '"', '0', 'x', '\\', '.', 'e', '-'} {
			mut := append([]byte(nil), plain...)
			mut[i] = b
			same(mut)
		}
	}
	for _, rec := range []string{
		`{}`,
		`{"hash":"h","account_id":"a","seq":3}`, // an old record: fields missing
		`{"hash":"h","limit":null,"creator_user_id":null,"expires_at":null,"usage":null,"seq":null,"name":null,"created_at":null}`,
		`{"hash":"h\u0041\n","name":"\ud83d\ude00","label":"caf\u00e9"}`,
		`{"Hash":"upper","ACCOUNT_ID":"a"}`,
		`{"hash":"h","usage":{"Total":5,"daily":{"P":3,"v":"1.5"}}}`,
		`{"hash":"h","unknown":{"nested":[1,2,{"x":null}]},"extra":true}`,
		`{"hash":"a","hash":"b"}`,
		`{"limit":"1.25","usage":{"total":"0.000000001","weekly":{"p":202611,"v":7}}}`,
		`{"hash":5}`, `{"disabled":"yes"}`, `{"seq":-1}`, `{"seq":1.5}`, `{"seq":"4"}`, `{"limit":true}`,
		`{"created_at":"yesterday"}`, `{"usage":[]}`, `{"usage":{"daily":5}}`, `[]`, `"x"`, `{"hash":"h"`, ``,
		`{"expires_at":"2026-01-02T03:04:05.123+01:00","limit_reset":"weekly"}`,
	} {
		same([]byte(rec))
	}
	// No key keeps its whole record alive: its strings are copies.
	rec := []byte(`{"hash":"` + strings.Repeat("a", 64) + `","name":"n"}`)
	var k APIKey
	if err := record.DecodeAPIKey(rec, &k); err != nil {
		t.Fatal(err)
	}
	rec[9] = 'b'
	if k.Hash[0] != 'a' {
		t.Fatal("the hash aliases the record")
	}
}

func BenchmarkDecodeAPIKey(b *testing.B) {
	lim := money.Amount(5e9)
	creator := "user_0123456789abcdef01234567"
	at := time.Now().UTC()
	rec, _ := record.APIKeyJSON(APIKey{Hash: strings.Repeat("ab", 32), AccountID: "org_0123456789abcdef01234567",
		WorkspaceID: "5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f", Name: "bench key", Label: "sk-tg-v1-abc...def",
		Limit: &lim, LimitReset: money.IntervalMonthly, CreatorUserID: &creator, CreatedAt: at, UpdatedAt: at, Seq: 123456,
		Usage: money.UsageCounters{Total: 12345, Daily: money.Windowed{Period: 20261125, Value: 5}}}).MarshalJSON()
	b.Run("encoding/json", func(b *testing.B) {
		for range b.N {
			var k APIKey
			_ = json.Unmarshal(rec, &k)
		}
	})
	b.Run("record.DecodeAPIKey", func(b *testing.B) {
		for range b.N {
			var k APIKey
			_ = record.DecodeAPIKey(rec, &k)
		}
	})
}
