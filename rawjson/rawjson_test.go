package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

var raws = []string{
	`{}`, `[]`, `1`, `"s"`, `null`,
	`{"type":"object","properties":{"city":{"type":"string"}}}`,
	`{ "a" : [1, 2 ,{"b":"c d"}] }`,
	"{\"a\":\"<b> & \u2028\u2029 x\",\"t\":\"tab\\t\"}",
	"{\"a\":\"\xe2\x80\xa7\xe2\x80\"}",
	`{"q":"say \"hi\" \\","n":-1.5e3}`,
	"\n\t{\"a\":1}\r\n",
}

// TestAppendRawIsEncodingJSONs checks AppendRaw against encoding/json's
// json.RawMessage.
func TestAppendRawIsEncodingJSONs(t *testing.T) {
	for _, raw := range raws {
		checkAppendRaw(t, []byte(raw))
	}
}

func FuzzAppendRawIsEncodingJSONs(f *testing.F) {
	for _, raw := range raws {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if json.Valid(raw) {
			checkAppendRaw(t, raw)
		}
	})
}

func checkAppendRaw(t *testing.T, raw []byte) {
	t.Helper()
	want, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	got, err := AppendRaw([]byte("x"), string(raw))
	if err != nil || !bytes.Equal(got, append([]byte("x"), want...)) {
		t.Fatalf("%q: got %q (%v), want %q", raw, got, err, want)
	}
}

// TestLookupIsGjsonGet checks Lookup against gjson's Get.
func TestLookupIsGjsonGet(t *testing.T) {
	doc := `{"a":1,"b":"x\"y","a":2,"c":{"d":[1,2]},"\u0065":"esc","f":null}`
	keys := []string{"a", "b", "c", "e", "f", "missing"}
	out := make([]gjson.Result, len(keys))
	Lookup(doc, keys, out)
	for i, k := range keys {
		want := gjson.Get(doc, k)
		if out[i].Raw != want.Raw || out[i].Str != want.Str || out[i].Type != want.Type || out[i].Exists() != want.Exists() {
			t.Errorf("%s: got %+v, want %+v", k, out[i], want)
		}
	}
}

func TestAppendFloatIsEncodingJSONs(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.5, 1e-7, 1.5e-7, 1e20, 1e21, 1.23456789e25, -3e-10, 123456.789, 5e-324} {
		want, _ := json.Marshal(f)
		if got, ok := AppendFloat(nil, f); !ok || string(got) != string(want) {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
}

// TestArrayIsGjsons checks Array against gjson's Array.
func TestArrayIsGjsons(t *testing.T) {
	for _, doc := range []string{`[]`, `[1,"a\"b",{"c":[2]},null,true]`, `{"a":1}`, `"s"`, `null`, ``, `5`} {
		want, got := gjson.Parse(doc).Array(), Array(gjson.Parse(doc))
		if len(got) != len(want) {
			t.Fatalf("%s: %d elements, want %d", doc, len(got), len(want))
		}
		for i := range want {
			if got[i].Raw != want[i].Raw || got[i].Str != want[i].Str || got[i].Type != want[i].Type || got[i].Num != want[i].Num {
				t.Errorf("%s[%d]: got %+v, want %+v", doc, i, got[i], want[i])
			}
		}
	}
}

// TestForEachIsGjsons checks ForEach against gjson's ForEach.
func TestForEachIsGjsons(t *testing.T) {
	for _, doc := range []string{`{}`, `{"a":1,"b\"c":"x\\ny","\u0064":[1,{"e":2}],"a":null,"f":"plain"}`, `[1,2]`, `"s"`} {
		var want, got []string
		gjson.Parse(doc).ForEach(func(k, v gjson.Result) bool {
			want = append(want, k.Str+"="+v.Raw+"|"+v.Str+"|"+v.Type.String())
			return true
		})
		ForEach(gjson.Parse(doc), func(k string, v gjson.Result) bool {
			got = append(got, k+"="+v.Raw+"|"+v.Str+"|"+v.Type.String())
			return true
		})
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s:\n got %q\nwant %q", doc, got, want)
		}
	}
}
