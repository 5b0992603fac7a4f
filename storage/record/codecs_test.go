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

// binaryCase round-trips random records through a binary codec: each
// reads back as written and writes again the same bytes; cut short or
// with a byte more, it does not read.
func binaryCase[T any](t *testing.T, n int, enc func([]byte, any) ([]byte, error), dec func([]byte, *T, *codec.StrArena) error) {
	t.Helper()
	f := &filler{r: rand.New(rand.NewPCG(1, uint64(n)))}
	for range n {
		v := randomRecord[T](f)
		b, err := enc(nil, v)
		if err != nil {
			continue
		}
		var back T
		if err := dec(b, &back, &codec.StrArena{}); err != nil || !sameJSON(&back, v) {
			t.Fatalf("%T round trip: %+v, %v\nwant %+v", v, back, err, v)
		}
		if again, err := enc(nil, &back); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%T written again: %x, %v\nwant %x", v, again, err, b)
		}
		for _, bad := range [][]byte{append(bytes.Clone(b), 0), b[:len(b)/2], b[:len(b)-1]} {
			var x T
			if dec(bad, &x, nil) == nil {
				t.Fatalf("%T: %x read, from %x", v, bad, b)
			}
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

// jsonCase compares a JSON writer with encoding/json (of want) on random
// records; a checked writer also refuses what encoding/json refuses.
func jsonCase[T any](t *testing.T, n int, checked bool, enc func(*T, []byte) ([]byte, error), want func(*T) ([]byte, error)) {
	t.Helper()
	f := &filler{r: rand.New(rand.NewPCG(2, uint64(n)))}
	for i := range n {
		f.plain = i%2 == 0
		v := randomRecord[T](f)
		w, werr := want(v)
		got, gerr := enc(v, []byte("prefix"))
		if werr != nil {
			if checked && gerr == nil {
				t.Fatalf("%T %+v: written, where encoding/json errs: %v", v, v, werr)
			}
			continue
		}
		if gerr != nil || !bytes.Equal(got, append([]byte("prefix"), w...)) {
			t.Fatalf("%T %+v:\n got %s, %v\nwant prefix%s", v, v, got, gerr, w)
		}
	}
}

// readerCase reads the JSON of random records, whole and changed, with a
// fast reader: what it takes, it reads as want does.
func readerCase[T any](t *testing.T, n int, write func(*T) ([]byte, error), read func([]byte, *T) bool, want func([]byte, *T) error) {
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
			if !read(b, &g) {
				continue
			}
			if j == 0 {
				taken++
			}
			if err := want(b, &w); err != nil || !reflect.DeepEqual(g, w) {
				t.Fatalf("%T %s:\n got %+v\nwant %+v, %v", v, b, g, w, err)
			}
		}
	}
	if taken < n/4 {
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

func unmarshal[T any](b []byte, v *T) error { return json.Unmarshal(b, v) }

// TestCodecsRandom runs every generated codec over random records, every
// field set.
func TestCodecsRandom(t *testing.T) {
	const n = 1000
	binaryCase(t, n, EncodeAccount, DecodeAccount)
	binaryCase(t, n, EncodePurchase, DecodePurchase)
	binaryCase(t, n, EncodeMgmtKey, DecodeMgmtKey)
	binaryCase(t, n, EncodeWorkspace, DecodeWorkspace)

	jsonCase(t, n, true, func(a *Account, b []byte) ([]byte, error) { return AccountJSON(*a).AppendJSON(b) }, marshal[Account])
	jsonCase(t, n, true, func(k *APIKey, b []byte) ([]byte, error) { return APIKeyJSON(*k).AppendJSON(b) }, marshal[APIKey])
	jsonCase(t, n, false, func(g *Generation, b []byte) ([]byte, error) { return g.AppendJSON(b) },
		func(g *Generation) ([]byte, error) { return json.Marshal((*generationFields)(g)) })

	accountJSON := func(a *Account) ([]byte, error) { return AccountJSON(*a).MarshalJSON() }
	readerCase(t, n, func(a *Account) ([]byte, error) {
		a.RateLimits = nil // left to the slower path
		return accountJSON(a)
	}, parserRead(FastAccount), unmarshal[Account])
	readerCase(t, n, marshal[Purchase], parserRead(FastPurchase), unmarshal[Purchase])
	readerCase(t, n, marshal[ManagementKey], parserRead(FastMgmtKey), unmarshal[ManagementKey])
	readerCase(t, n, func(w *Workspace) ([]byte, error) {
		w.Budgets, w.Members, w.RateLimits = nil, nil, nil // left to encoding/json
		return json.Marshal(w)
	}, parserRead(FastWorkspace), unmarshal[Workspace])
	readerCase(t, n, marshal[Preset], parserRead(FastPreset), unmarshal[Preset])
	readerCase(t, n, marshal[PresetVersion], parserRead(FastPresetVersion), unmarshal[PresetVersion])
	readerCase(t, n, func(k *APIKey) ([]byte, error) {
		k.Connect, k.RateLimits = nil, nil // left to the slower path
		return APIKeyJSON(*k).MarshalJSON()
	}, DecodeAPIKeyFast, unmarshal[APIKey])
	readerCase(t, n, func(g *Generation) ([]byte, error) { return g.MarshalJSON() }, fastGenerationSums, decodeGenerationSumsGJSON)
}

// FuzzBinaryCodecs: whatever bytes a binary decoder reads, it writes
// again as bytes that read back to the same record (go test -fuzz
// FuzzBinaryCodecs ./storage/record).
func FuzzBinaryCodecs(f *testing.F) {
	fl := &filler{r: rand.New(rand.NewPCG(4, 4))}
	for range 8 {
		for _, enc := range []func() ([]byte, error){
			func() ([]byte, error) { return EncodeAccount(nil, randomRecord[Account](fl)) },
			func() ([]byte, error) { return EncodePurchase(nil, randomRecord[Purchase](fl)) },
			func() ([]byte, error) { return EncodeMgmtKey(nil, randomRecord[ManagementKey](fl)) },
			func() ([]byte, error) { return EncodeWorkspace(nil, randomRecord[Workspace](fl)) },
		} {
			if b, err := enc(); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzBinary(t, b, EncodeAccount, DecodeAccount)
		fuzzBinary(t, b, EncodePurchase, DecodePurchase)
		fuzzBinary(t, b, EncodeMgmtKey, DecodeMgmtKey)
		fuzzBinary(t, b, EncodeWorkspace, DecodeWorkspace)
	})
}

func fuzzBinary[T any](t *testing.T, b []byte, enc func([]byte, any) ([]byte, error), dec func([]byte, *T, *codec.StrArena) error) {
	var v T
	if dec(b, &v, nil) != nil {
		return
	}
	again, err := enc(nil, &v)
	if err != nil {
		t.Fatalf("%T read from %x does not write: %v", v, b, err)
	}
	var back T
	if err := dec(again, &back, nil); err != nil || !reflect.DeepEqual(back, v) && !sameJSON(&back, &v) { // NaN != NaN
		t.Fatalf("%T read from %x: %+v, written again and read %+v, %v", v, b, v, back, err)
	}
}
