package handlers

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestNullableArray(t *testing.T) {
	str := func(e gjson.Result) (string, bool) { return e.Str, e.Type == gjson.String }
	for _, tc := range []struct {
		body    string
		want    []string
		present bool
		err     string
	}{
		{`{}`, nil, false, ""},
		{`{"a":null}`, nil, true, ""},
		{`{"a":[]}`, []string{}, true, ""},
		{`{"a":["x","y"]}`, []string{"x", "y"}, true, ""},
		{`{"a":"x"}`, nil, false, "a: expected strings or null"},
		{`{"a":["x",1]}`, nil, false, "a: expected strings or null"},
	} {
		f := mustParse(t, tc.body)
		got, present := nullableArray(f, "a", "strings or null", str)
		if !reflect.DeepEqual(got, tc.want) || (got == nil) != (tc.want == nil) || present != tc.present || errMessage(f.err) != tc.err {
			t.Errorf("%s: %#v %v %q, want %#v %v %q", tc.body, got, present, errMessage(f.err), tc.want, tc.present, tc.err)
		}
	}
	f := mustParse(t, `{"n":[1,2.5]}`)
	if _, ok := f.NullableInts("n"); ok || errMessage(f.err) != "n: expected an array of integers or null" {
		t.Fatalf("NullableInts with a fraction: %q", errMessage(f.err))
	}
	f = mustParse(t, `{"n":[1,-2]}`)
	if got, ok := f.NullableInts("n"); !ok || !reflect.DeepEqual(got, []int64{1, -2}) {
		t.Fatalf("NullableInts: %v %v", got, ok)
	}
}

func TestWritePage(t *testing.T) {
	for _, tc := range []struct {
		offset, limit int
		want          string
	}{
		{0, 2, `{"data":["1","2"],"total_count":3}`},
		{2, 2, `{"data":["3"],"total_count":3}`},
		{5, 2, `{"data":[],"total_count":3}`},
	} {
		w := httptest.NewRecorder()
		writePage(w, []int{1, 2, 3}, tc.offset, tc.limit, func(n int) string { return string(rune('0' + n)) })
		if got := strings.TrimSpace(w.Body.String()); got != tc.want || w.Code != http.StatusOK {
			t.Errorf("offset %d limit %d: %d %s, want %s", tc.offset, tc.limit, w.Code, got, tc.want)
		}
	}
}

func TestNullableField(t *testing.T) {
	f := mustParse(t, `{"t":true,"n":null,"s":"x","a":[1, 2]}`)
	if b, ok := f.NullableBool("t"); !ok || b == nil || !*b {
		t.Fatalf("t: %v %v", b, ok)
	}
	if b, ok := f.NullableBool("n"); !ok || b != nil {
		t.Fatalf("n: %v %v", b, ok)
	}
	if b, ok := f.NullableBool("missing"); ok || b != nil || f.err != nil {
		t.Fatalf("missing: %v %v %v", b, ok, f.err)
	}
	if raw, ok := f.NullableRaw("a"); !ok || string(raw) != "[1, 2]" {
		t.Fatalf("a: %s %v", raw, ok)
	}
	if _, ok := f.NullableBool("s"); ok || errMessage(f.err) != "s: expected a boolean or null" {
		t.Fatalf("s: %v %q", ok, errMessage(f.err))
	}
	f = mustParse(t, `{"s":"x"}`)
	if _, ok := f.NullableRaw("s"); ok || errMessage(f.err) != "s: expected an array or null" {
		t.Fatalf("raw s: %v %q", ok, errMessage(f.err))
	}
}
