package storage

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// recordDecoders are the fast decoders under test, each with encoding/json's
// decoding of the same type, both from a zero value.
var recordDecoders = map[string]struct {
	fast func(v []byte) (any, bool)
	json func(v []byte) (any, error)
	dec  func(v []byte) (any, error)
}{
	"account":    decoderCase(record.FastAccount),
	"purchase":   decoderCase(record.FastPurchase),
	"management": decoderCase(record.FastMgmtKey),
	"workspace":  decoderCase(record.FastWorkspace),
}

func decoderCase[T any](fast func(*codec.Parser, *T) bool) struct {
	fast func(v []byte) (any, bool)
	json func(v []byte) (any, error)
	dec  func(v []byte) (any, error)
} {
	return struct {
		fast func(v []byte) (any, bool)
		json func(v []byte) (any, error)
		dec  func(v []byte) (any, error)
	}{
		fast: func(v []byte) (any, bool) {
			var x T
			p := codec.NewParser(v)
			ok := fast(&p, &x) && p.Done()
			return x, ok
		},
		json: func(v []byte) (any, error) {
			var x T
			err := json.Unmarshal(v, &x)
			return x, err
		},
		dec: func(v []byte) (any, error) {
			var x T
			err := codec.Decode(v, &x, fast)
			return x, err
		},
	}
}

// checkRecordDecoders: wherever a fast decoder accepts rec, encoding/json
// decodes it to the same value; codec.Decode always decodes as
// encoding/json does, or errs where it errs. It returns which fast
// decoders accepted rec.
func checkRecordDecoders(t *testing.T, rec []byte) map[string]bool {
	t.Helper()
	accepted := map[string]bool{}
	for name, d := range recordDecoders {
		want, werr := d.json(rec)
		if got, ok := d.fast(rec); ok {
			accepted[name] = true
			if werr != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s: the fast decoder accepted\n %+v\nencoding/json %+v, %v", name, rec, got, want, werr)
			}
		}
		got, gerr := d.dec(rec)
		if (werr != nil) != (gerr != nil) || werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s %s: codec.Decode %+v, %v\nencoding/json %+v, %v", name, rec, got, gerr, want, werr)
		}
	}
	return accepted
}

// sampleRecords are records of each type as their encoders write them:
// random, with the shapes the decoders leave to encoding/json among them
// (escapes, non-ASCII text, a workspace's budgets and members, floats
// written with an exponent).
func sampleRecords(n int) map[string][][]byte {
	r := rand.New(rand.NewPCG(3, 4))
	strs := []string{"", "plain", "weird \"x\"\\ <&> \n\t\u2028 日本", "org_0123456789abcdef01234567"}
	pick := func() string { return strs[r.IntN(len(strs))] }
	opt := func() *string {
		if r.IntN(2) == 0 {
			return nil
		}
		s := pick()
		return &s
	}
	zones := []*time.Location{time.UTC, time.FixedZone("x", 3600), time.FixedZone("y", -5*3600-1800)}
	when := func() time.Time { return time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))]) }
	optTime := func() *time.Time {
		if r.IntN(2) == 0 {
			return nil
		}
		t := when()
		return &t
	}
	amount := func() money.Amount { return money.Amount(r.Int64N(2e15) - 1e15) }
	w := func() money.Windowed { return money.Windowed{Period: r.Int64N(3e8) - 1e8, Value: amount()} }
	out := map[string][][]byte{}
	add := func(name string, b []byte, err error) {
		if err != nil {
			panic(err)
		}
		out[name] = append(out[name], b)
	}
	for range n {
		a := Account{ID: pick(), Name: pick(), Kind: AccountKind(pick()), Billing: Billing(pick()), OwnerUserID: pick(),
			DefaultWorkspaceID: pick(), CreditsPurchased: amount(), Purchases: r.IntN(1000), Usage: amount(), BYOKUsage: amount(),
			RateLimitExempt: r.IntN(2) == 0, FilteredModelCatalog: r.IntN(2) == 0, FreeModelRequests: w(), FreeModelMinute: w(),
			CreatedAt: when(), UpdatedAt: when()}
		b, err := record.AccountJSON(a).MarshalJSON()
		add("account", b, err)
		b, err = json.Marshal(Purchase{ID: pick(), AccountID: pick(), Amount: amount(), Note: pick(), CreatedAt: when()})
		add("purchase", b, err)
		b, err = json.Marshal(ManagementKey{Hash: pick(), AccountID: pick(), Name: pick(), Label: pick(),
			CreatorUserID: opt(), CreatedAt: when(), ExpiresAt: optTime()})
		add("management", b, err)
		ws := Workspace{ID: pick(), AccountID: pick(), Name: pick(), Slug: pick(), Description: opt(), CreatedBy: opt(),
			DefaultGuardrailID: pick(), DefaultImageModel: opt(), DefaultProviderSort: opt(), DefaultTextModel: opt(),
			IOLoggingSamplingRate:        []float64{0, 1, 0.25, 1e-7, 0.1}[r.IntN(5)],
			IsDataDiscountLoggingEnabled: r.IntN(2) == 0, IsObservabilityBroadcastEnabled: r.IntN(2) == 0,
			IsObservabilityIOLoggingEnabled: r.IntN(2) == 0, IncludeBYOKInBudgets: r.IntN(2) == 0,
			CreatedAt: when(), UpdatedAt: optTime()}
		switch r.IntN(3) {
		case 1:
			ws.DisabledServerTools, ws.IOLoggingAPIKeyIDs = []string{}, []int64{}
		case 2:
			ws.DisabledServerTools, ws.IOLoggingAPIKeyIDs = []string{pick(), pick()}, []int64{r.Int64(), -5, 0}
		}
		if r.IntN(8) == 0 {
			ws.Members = map[string]*WorkspaceMember{"u": {UserID: "u", Role: "admin", CreatedAt: when()}}
		}
		b, err = json.Marshal(ws)
		add("workspace", b, err)
	}
	return out
}

// TestRecordDecodersMatchEncodingJSON decodes records as their encoders
// write them, each cut short and with each byte changed, and hand-written
// ones, and requires what encoding/json decodes; most plain records must
// take the fast path.
func TestRecordDecodersMatchEncodingJSON(t *testing.T) {
	samples := sampleRecords(1500)
	for name, recs := range samples {
		hits := 0
		for _, rec := range recs {
			if checkRecordDecoders(t, rec)[name] {
				hits++
			}
		}
		if hits < len(recs)/20 {
			t.Errorf("%s: the fast decoder took %d of %d records", name, hits, len(recs))
		}
	}
	for _, plain := range [][]byte{
		mustJSON(record.AccountJSON(Account{ID: "org_1", Name: "n", Kind: "organization", Billing: "prepaid", DefaultWorkspaceID: "w", CreditsPurchased: 5})),
		mustJSON(Purchase{ID: "p", AccountID: "a", Amount: 1_500_000_000, CreatedAt: time.Unix(5, 0).UTC()}),
		mustJSON(ManagementKey{Hash: "h", AccountID: "a", Name: "n", Label: "l"}),
		mustJSON(Workspace{ID: "w", AccountID: "a", Name: "Default", Slug: "default", IOLoggingSamplingRate: 1}),
	} {
		if len(checkRecordDecoders(t, plain)) != 1 {
			t.Fatalf("%s: no fast decoder took this plain record", plain)
		}
		for i := range len(plain) {
			checkRecordDecoders(t, plain[:i])
			for _, b := range []byte{' ', '"', '0', '9', 'x', '\\', '.', 'e', '-', ',', ']', '}', 'n', 0x80} {
				mut := append([]byte(nil), plain...)
				mut[i] = b
				checkRecordDecoders(t, mut)
			}
		}
	}
	for _, rec := range []string{
		`{}`, `[]`, `null`, ``, `{"id":"a","ID":"b"}`, `{"id":"a","id":"b"}`,
		`{"id":"a","purchases":1e3}`, `{"id":"a","purchases":99999999999999999999}`,
		`{"id":"w","account_id":"a","name":"n","slug":"s","description":null,"created_by":null,"default_guardrail_id":"","default_image_model":null,"default_provider_sort":null,"default_text_model":null,"disabled_server_tools":[,],"io_logging_api_key_ids":null,"io_logging_sampling_rate":0,"is_data_discount_logging_enabled":false,"is_observability_broadcast_enabled":false,"is_observability_io_logging_enabled":false,"include_byok_in_budgets":false,"created_at":"0001-01-01T00:00:00Z","updated_at":null}`,
		`{"id":"w","account_id":"a","name":"n","slug":"s","description":null,"created_by":null,"default_guardrail_id":"","default_image_model":null,"default_provider_sort":null,"default_text_model":null,"disabled_server_tools":["a","b"],"io_logging_api_key_ids":[1,-2,0],"io_logging_sampling_rate":-0.5,"is_data_discount_logging_enabled":false,"is_observability_broadcast_enabled":false,"is_observability_io_logging_enabled":false,"include_byok_in_budgets":false,"created_at":"0001-01-01T00:00:00Z","updated_at":null}`,
		`{"id":"p","account_id":"a","amount":-0,"note":"","created_at":"2026-01-02T03:04:05Z"}`,
	} {
		checkRecordDecoders(t, []byte(rec))
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzRecordDecoders: whatever a fast decoder accepts, encoding/json
// decodes to the same value (go test -fuzz FuzzRecordDecoders ./storage).
func FuzzRecordDecoders(f *testing.F) {
	for _, recs := range sampleRecords(20) {
		for _, rec := range recs {
			f.Add(rec)
		}
	}
	f.Fuzz(func(t *testing.T, rec []byte) { checkRecordDecoders(t, rec) })
}

// BenchmarkDecodeRecords decodes plain records of each type with
// codec.Decode and with encoding/json.
func BenchmarkDecodeRecords(b *testing.B) {
	t := time.Date(2026, 11, 28, 12, 0, 0, 123456789, time.UTC)
	for name, rec := range map[string][]byte{
		"account": mustJSON(record.AccountJSON(Account{ID: "org_0123456789abcdef01234567", Name: "bench", Kind: "organization", Billing: "prepaid",
			DefaultWorkspaceID: "0b9f6c3e-2a41-4e1b-9a51-3f2a7d1c9e20", CreditsPurchased: 1e15, Purchases: 1, CreatedAt: t, UpdatedAt: t})),
		"management": mustJSON(ManagementKey{Hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", AccountID: "org_0123456789abcdef01234567",
			Name: "bench", Label: "sk-tg-mgmt-v1-abc...def", CreatedAt: t}),
		"purchase":  mustJSON(Purchase{ID: "pur_0123456789abcdef01234567", AccountID: "org_0123456789abcdef01234567", Amount: 1e15, Note: "bench", CreatedAt: t}),
		"workspace": mustJSON(Workspace{ID: "0b9f6c3e-2a41-4e1b-9a51-3f2a7d1c9e20", AccountID: "org_0123456789abcdef01234567", Name: "Default", Slug: "default", CreatedAt: t}),
	} {
		d := recordDecoders[name]
		b.Run(name+"/fast", func(b *testing.B) {
			for b.Loop() {
				if _, err := d.dec(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/json", func(b *testing.B) {
			for b.Loop() {
				if _, err := d.json(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
