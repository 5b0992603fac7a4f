package record

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestDecodeAPIKeyKnowsEveryField: the key decoder's slower path (gjson,
// for the records the fast one declines) decodes random keys, every field
// set, as encoding/json does: a field it does not know fails here.
func TestDecodeAPIKeyKnowsEveryField(t *testing.T) {
	f := &filler{r: rand.New(rand.NewPCG(5, 6))}
	for i := range 1000 {
		f.plain = i%2 == 0
		k := randomRecord[APIKey](f)
		rec, err := APIKeyJSON(*k).MarshalJSON()
		if err != nil {
			continue
		}
		for _, rec := range [][]byte{rec, append([]byte(" "), rec...)} { // white space: the slower path
			var got, want APIKey
			gerr, werr := DecodeAPIKey(rec, &got), json.Unmarshal(rec, &want)
			if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s:\n got %+v, %v\nwant %+v, %v", rec, got, gerr, want, werr)
			}
		}
	}
}

// TestGenerationSumsPathsAgree: both readers of a generation's sums keep
// the same fields of random generations, every field set, and the fast
// one takes every record without escapes or non-ASCII text.
func TestGenerationSumsPathsAgree(t *testing.T) {
	f := &filler{r: rand.New(rand.NewPCG(7, 8)), plain: true}
	for range 1000 {
		g := randomRecord[Generation](f)
		rec, err := g.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var fast, slow Generation
		if !fastGenerationSums(rec, &fast) {
			t.Fatalf("the fast reader declined %s", rec)
		}
		if err := decodeGenerationSumsGJSON(rec, &slow); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s:\nfast %+v\nslow %+v", rec, fast, slow)
		}
	}
}

// FuzzDecodeAPIKey: any bytes decode as encoding/json decodes them, or
// fail where it fails (go test -fuzz FuzzDecodeAPIKey ./storage/record).
func FuzzDecodeAPIKey(f *testing.F) {
	fl := &filler{r: rand.New(rand.NewPCG(9, 10))}
	for i := range 16 {
		fl.plain = i%2 == 0
		if rec, err := APIKeyJSON(*randomRecord[APIKey](fl)).MarshalJSON(); err == nil {
			f.Add(rec)
		}
	}
	f.Add([]byte(`{"Hash":"upper","limit":null,"seq":null,"usage":{"Total":5}}`))
	f.Fuzz(func(t *testing.T, rec []byte) {
		var got, want APIKey
		gerr, werr := DecodeAPIKey(rec, &got), json.Unmarshal(rec, &want)
		if (gerr == nil) != (werr == nil) || werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %+v, %v\nwant %+v, %v", rec, got, gerr, want, werr)
		}
	})
}
