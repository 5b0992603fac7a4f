package record

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// filler sets every field of a record, at random, to values that include
// the edges: zero, empty and nil, unicode and escapes, the extreme
// integers, times in other zones and out of JSON's range.
type filler struct {
	r *rand.Rand
	// plain keeps to what the fast JSON readers take (ASCII strings
	// without escapes, times in range), so that they are exercised.
	plain bool
}

var (
	fillStrs = []string{"", "a", "plain", "org_0123456789abcdef01234567", "gen-1764428645000-0a1b2c3d4e5f",
		"weird \"x\"\\ <&> \n\t\b\f\x01 \u2028 日本", "ü", "\xff", "completed"}
	fillPlainStrs = []string{"", "a", "plain", "org_0123456789abcdef01234567", "https://app.example:8443", "daily"}
	fillInts      = []int64{0, 1, -1, 7, 1 << 40, -1 << 40, 1<<53 - 1, math.MaxInt64, math.MinInt64, 999999999999999999}
	fillFloats    = []float64{0, 1, 0.25, 1e-7, 0.1, -0.5, 1e21, math.SmallestNonzeroFloat64}
	fillZones     = []*time.Location{time.UTC, time.FixedZone("x", 3600), time.FixedZone("y", -5*3600-1800),
		time.FixedZone("s", 3600+7), time.FixedZone("z", -12*3600)}
)

func (f *filler) time() time.Time {
	switch f.r.IntN(10) {
	case 0:
		return time.Time{}
	case 1:
		if !f.plain {
			return time.Date(10000+f.r.IntN(5), 1, 2, 3, 4, 5, 6, time.UTC)
		}
	}
	zones := fillZones
	if f.plain {
		zones = zones[:3]
	}
	return time.Unix(f.r.Int64N(4e9), f.r.Int64N(1e9)).In(zones[f.r.IntN(len(zones))])
}

func (f *filler) fill(v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(f.time()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		strs := fillStrs
		if f.plain {
			strs = fillPlainStrs
		}
		v.SetString(strs[f.r.IntN(len(strs))])
	case reflect.Bool:
		v.SetBool(f.r.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		n := fillInts[f.r.IntN(len(fillInts))]
		if f.r.IntN(3) == 0 {
			n = f.r.Int64N(2e15) - 1e15
		}
		v.SetInt(n)
	case reflect.Uint64:
		v.SetUint(uint64(fillInts[f.r.IntN(len(fillInts))]))
	case reflect.Float64:
		v.SetFloat(fillFloats[f.r.IntN(len(fillFloats))])
	case reflect.Pointer:
		if f.r.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		switch n := f.r.IntN(5); n {
		case 0:
			v.SetZero()
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				f.fill(s.Index(i))
			}
			v.Set(s)
		}
	case reflect.Map:
		// At most one entry: a map's entries are written in no order.
		switch f.r.IntN(3) {
		case 0:
			v.SetZero()
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
		case 2:
			m := reflect.MakeMap(v.Type())
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k)
			for f.fill(e); e.Kind() == reflect.Pointer && e.IsNil(); f.fill(e) {
				// the stores keep no nil entry
			}
			m.SetMapIndex(k, e)
			v.Set(m)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	default:
		panic("filler: no values for " + v.Type().String())
	}
}

func randomRecord[T any](f *filler) *T {
	v := new(T)
	f.fill(reflect.ValueOf(v).Elem())
	return v
}

// mutations are rec cut short at every length and with each byte
// changed to a few others.
func mutations(rec []byte, r *rand.Rand) [][]byte {
	out := [][]byte{rec}
	for i := range len(rec) {
		out = append(out, rec[:i])
		mut := bytes.Clone(rec)
		mut[i] = []byte(` "09x\.e-,]}nt` + "\x80")[r.IntN(15)]
		out = append(out, mut)
	}
	return out
}

// binaryCase compares a binary codec with today's on random records: the
// same bytes, and the same record (or failure) read back from today's
// bytes, whole, cut short or with a byte more.
func binaryCase[T any](t *testing.T, n int, enc, oldEnc func([]byte, any) ([]byte, error),
	dec, oldDec func([]byte, *T, *codec.StrArena) error) {
	t.Helper()
	f := &filler{r: rand.New(rand.NewPCG(1, uint64(n)))}
	for range n {
		v := randomRecord[T](f)
		want, werr := oldEnc(nil, v)
		got, gerr := enc(nil, v)
		if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
			t.Fatalf("%T %+v:\n got %x, %v\nwant %x, %v", v, v, got, gerr, want, werr)
		}
		if werr != nil {
			continue
		}
		for _, b := range append(mutations(want, f.r)[:1], append(want, 0), want[:len(want)/2]) {
			var g, w T
			gerr, werr := dec(b, &g, nil), oldDec(b, &w, &codec.StrArena{})
			if (gerr == nil) != (werr == nil) || werr == nil && !reflect.DeepEqual(g, w) {
				t.Fatalf("%T %x:\n got %+v, %v\nwant %+v, %v", v, b, g, gerr, w, werr)
			}
		}
		var back T
		if err := dec(want, &back, nil); err != nil || !sameJSON(&back, v) {
			t.Fatalf("%T round trip: %+v, %v\nwant %+v", v, back, err, v)
		}
	}
}

// sameJSON: the record read back is the one written, as its JSON shows
// it (a time's location aside).
func sameJSON(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb) || erra != nil && errb != nil
}

// jsonCase compares a JSON writer with today's on random records.
func jsonCase[T any](t *testing.T, n int, enc, oldEnc func(*T, []byte) ([]byte, error)) {
	t.Helper()
	f := &filler{r: rand.New(rand.NewPCG(2, uint64(n)))}
	for i := range n {
		f.plain = i%2 == 0
		v := randomRecord[T](f)
		want, werr := oldEnc(v, []byte("prefix"))
		got, gerr := enc(v, []byte("prefix"))
		if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
			t.Fatalf("%T %+v:\n got %s, %v\nwant %s, %v", v, v, got, gerr, want, werr)
		}
	}
}

// readerCase compares a fast JSON reader with today's on the JSON of
// random records, whole and changed: the same answer, and where both
// take a record, the same record.
func readerCase[T any](t *testing.T, n int, write func(*T) ([]byte, error), read, oldRead func([]byte, *T) bool) {
	t.Helper()
	f := &filler{r: rand.New(rand.NewPCG(3, uint64(n)))}
	taken := 0
	for i := range n {
		f.plain = i%4 != 0
		v := randomRecord[T](f)
		rec, err := write(v)
		if err != nil {
			continue
		}
		recs := [][]byte{rec}
		if i%100 == 0 {
			recs = mutations(rec, f.r)
		}
		for j, b := range recs {
			var g, w T
			gok, wok := read(b, &g), oldRead(b, &w)
			if gok != wok || wok && !reflect.DeepEqual(g, w) {
				t.Fatalf("%T %s:\n got %+v, %v\nwant %+v, %v", v, b, g, gok, w, wok)
			}
			if j == 0 && wok {
				taken++
			}
		}
	}
	if taken < n/10 {
		t.Fatalf("%T: the reader took %d of %d records", *new(T), taken, n)
	}
}

// parserRead runs a reader of codec.Parser over a whole record.
func parserRead[T any](fast func(*codec.Parser, *T) bool) func([]byte, *T) bool {
	return func(b []byte, v *T) bool {
		p := codec.NewParser(b)
		return fast(&p, v) && p.Done()
	}
}

func marshal[T any](v *T) ([]byte, error) { return json.Marshal(v) }

// TestCodecsMatchHandWritten pins the records' binary and JSON forms
// to what the hand-written codecs wrote and read.
func TestCodecsMatchHandWritten(t *testing.T) {
	const n = 2000
	binaryCase(t, n, EncodeAccount, oldEncodeAccount, DecodeAccount, oldDecodeAccount)
	binaryCase(t, n, EncodePurchase, oldEncodePurchase, DecodePurchase, oldDecodePurchase)
	binaryCase(t, n, EncodeMgmtKey, oldEncodeMgmtKey, DecodeMgmtKey, oldDecodeMgmtKey)
	binaryCase(t, n, EncodeWorkspace, oldEncodeWorkspace, DecodeWorkspace, oldDecodeWorkspace)

	jsonCase(t, n, func(a *Account, b []byte) ([]byte, error) { return AccountJSON(*a).AppendJSON(b) },
		func(a *Account, b []byte) ([]byte, error) { return oldAccountJSON(AccountJSON(*a), b) })
	jsonCase(t, n, func(k *APIKey, b []byte) ([]byte, error) { return APIKeyJSON(*k).AppendJSON(b) },
		func(k *APIKey, b []byte) ([]byte, error) { return oldAPIKeyJSON(APIKeyJSON(*k), b) })
	jsonCase(t, n, func(g *Generation, b []byte) ([]byte, error) { return g.AppendJSON(b) },
		func(g *Generation, b []byte) ([]byte, error) { return oldGenerationJSON(*g, b) })

	accountJSON := func(a *Account) ([]byte, error) { return AccountJSON(*a).MarshalJSON() }
	readerCase(t, n, accountJSON, parserRead(FastAccount), parserRead(oldFastAccount))
	readerCase(t, n, marshal[Purchase], parserRead(FastPurchase), parserRead(oldFastPurchase))
	readerCase(t, n, marshal[ManagementKey], parserRead(FastMgmtKey), parserRead(oldFastMgmtKey))
	readerCase(t, n, marshal[Workspace], parserRead(FastWorkspace), parserRead(oldFastWorkspace))
	readerCase(t, n, func(k *APIKey) ([]byte, error) { return APIKeyJSON(*k).MarshalJSON() }, DecodeAPIKeyFast, oldDecodeAPIKeyFast)
	readerCase(t, n, func(g *Generation) ([]byte, error) { return g.MarshalJSON() }, fastGenerationSums, oldFastGenerationSums)
}
