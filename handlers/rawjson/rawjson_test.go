package rawjson

import (
	"bytes"
	"encoding/json"
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
