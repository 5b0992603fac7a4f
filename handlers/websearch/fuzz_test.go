package websearch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzNormalize checks that no body panics Normalize and that whatever it
// accepts comes out in the one internal form, as a fixed point. The seed
// corpus lives in testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"model":"x-ai/grok-4:online","plugins":[{"id":"web","max_results":3}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		out, spec, dep, err := Normalize(body, brand)
		if !bytes.Equal(body, orig) {
			t.Fatal("input modified")
		}
		if err != nil || spec == nil {
			if !bytes.Equal(out, body) || dep != nil || (err != nil && spec != nil) {
				t.Fatalf("no rewrite, yet out %q spec %+v dep %v err %v", out, spec, dep, err)
			}
			return
		}
		if json.Valid(body) && !json.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		if spec.MaxResults < 1 || spec.MaxResults > MaxMaxResults {
			t.Fatalf("max_results %d", spec.MaxResults)
		}
		root := gjson.ParseBytes(out)
		web := 0
		for _, tool := range root.Get("tools").Array() {
			if tool.Get("type").String() == brand+":web_search" {
				web++
			}
		}
		if web != 1 || root.Get("x_search_filter").Exists() || strings.Contains(root.Get(`plugins.#(id=="web").id`).String(), "web") {
			t.Fatalf("not normalized: %s", out)
		}
		out2, spec2, dep2, err2 := Normalize(out, brand)
		if err2 != nil || dep2 != nil || !reflect.DeepEqual(spec2, spec) || !bytes.Equal(compact(out2), compact(out)) {
			t.Fatalf("not a fixed point:\n%s\n%s\n%+v\n%+v %v %v", out, out2, spec, spec2, dep2, err2)
		}
	})
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}
