package reqbody

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

func mustParse(t *testing.T, body string) *Fields {
	t.Helper()
	f, apiErr := ParseObject([]byte(body))
	if apiErr != nil {
		t.Fatalf("ParseObject(%s): %v", body, apiErr)
	}
	return f
}

func errMessage(e *apierror.Error) string {
	if e == nil {
		return ""
	}
	return e.Message
}

func TestParseObject(t *testing.T) {
	tests := []struct {
		body string
		want string
	}{
		{``, ""},
		{`{}`, ""},
		{` {"a":1} `, ""},
		{`[]`, "Request body must be a JSON object"},
		{`"s"`, "Request body must be a JSON object"},
		{`1`, "Request body must be a JSON object"},
		{`{`, "Request body is not valid JSON"},
		{`{"a":1,}`, "Request body is not valid JSON"},
		{`{'a':1}`, "Request body is not valid JSON"},
		{" ", "Request body is not valid JSON"},
		{`{"a":NaN}`, "Request body is not valid JSON"},
		{`{"a":1,"a":2}`, "a: duplicate field"},
		{`{"a":{"b":[{"c":1,"c":1}]}}`, "a.b[0].c: duplicate field"},
		{"{\"name\":\"\xff\"}", "name: not valid UTF-8"},
		{"{\"\xff\":1}", "field name: not valid UTF-8"},
		{strings.Repeat(`{"a":`, 128) + "1" + strings.Repeat("}", 128), ""},
		{strings.Repeat(`{"a":`, 129) + "1" + strings.Repeat("}", 129), "Request body nests deeper than 128 levels"},
		{`{"a":` + strings.Repeat("[", 8<<20), "Request body nests deeper than 128 levels"},
		{`{"n":1e308,"z":-0,"big":123456789012345678901234567890}`, ""},
	}
	for _, tt := range tests {
		_, apiErr := ParseObject([]byte(tt.body))
		if got := errMessage(apiErr); got != tt.want {
			t.Errorf("ParseObject(%q) = %q, want %q", tt.body, got, tt.want)
		}
		if apiErr != nil && apiErr.Status != http.StatusBadRequest {
			t.Errorf("ParseObject(%q) status %d", tt.body, apiErr.Status)
		}
	}
}

func TestFieldsNullableAmount(t *testing.T) {
	tests := []struct {
		raw     string // value of "v"; "" for absent
		want    *money.Amount
		present bool
		err     string
	}{
		{"", nil, false, ""},
		{"null", nil, true, ""},
		{"0", new(money.Amount(0)), true, ""},
		{"0.1", new(money.Amount(100_000_000)), true, ""},
		{"0.3", new(money.Amount(300_000_000)), true, ""},
		{"12.5", new(money.Amount(12_500_000_000)), true, ""},
		{"1e-9", new(money.Amount(1)), true, ""},
		{"1E2", new(money.Amount(100_000_000_000)), true, ""},
		{"123456789.123456789", new(money.Amount(123_456_789_123_456_789)), true, ""},
		{"0.0000000005", new(money.Amount(1)), true, ""},     // half rounds away from zero
		{"0.0000000004", new(money.Amount(0)), true, ""},     // below half rounds down
		{"-0.25", new(money.Amount(-250_000_000)), true, ""}, // sign is the caller's concern
		{"1e30", nil, false, "v: expected a number within range"},
		{`"1"`, nil, false, "v: expected a number or null"},
		{"true", nil, false, "v: expected a number or null"},
		{"[1]", nil, false, "v: expected a number or null"},
	}
	for _, tt := range tests {
		body := `{}`
		if tt.raw != "" {
			body = `{"v":` + tt.raw + `}`
		}
		f := mustParse(t, body)
		got, present := f.NullableAmount("v")
		if present != tt.present || errMessage(f.Err) != tt.err {
			t.Errorf("%s: present %v err %q; want %v %q", body, present, errMessage(f.Err), tt.present, tt.err)
		}
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: amount %v, want %v", body, got, tt.want)
		}
	}
}

func TestFieldsNullableTime(t *testing.T) {
	const tsErr = "v: expected an ISO 8601 timestamp such as 2027-12-31T23:59:59Z"
	const utcErr = "v: expected a UTC timestamp ending in Z"
	tests := []struct {
		raw     string
		utcOnly bool
		want    string // RFC 3339 in UTC; "" for nil
		present bool
		err     string
	}{
		{"", true, "", false, ""},
		{"null", true, "", true, ""},
		{`"2030-01-02T03:04:05Z"`, true, "2030-01-02T03:04:05Z", true, ""},
		{`"2030-01-02T03:04:05.123456789Z"`, true, "2030-01-02T03:04:05.123456789Z", true, ""},
		{`"2030-01-02T03:04:05+00:00"`, true, "", false, utcErr},
		{`"2030-01-02T03:04:05-00:00"`, true, "", false, utcErr},
		{`"2030-01-02T03:04:05+02:00"`, true, "", false, utcErr},
		{`"2030-01-02T03:04:05+02:00"`, false, "2030-01-02T01:04:05Z", true, ""},
		{`"2030-01-02T03:04:05+00:00"`, false, "2030-01-02T03:04:05Z", true, ""},
		{`"2030-01-02T03:04:05z"`, true, "", false, tsErr},
		{`"2030-01-02 03:04:05Z"`, true, "", false, tsErr},
		{`"2030-01-02"`, true, "", false, tsErr},
		{`"2030-01-02T03:04:05"`, false, "", false, tsErr},
		{`""`, true, "", false, tsErr},
		{`"tomorrow"`, false, "", false, tsErr},
		{`1893456000`, true, "", false, "v: expected a string or null"},
	}
	for _, tt := range tests {
		body := `{}`
		if tt.raw != "" {
			body = `{"v":` + tt.raw + `}`
		}
		f := mustParse(t, body)
		got, present := f.NullableTime("v", tt.utcOnly)
		if present != tt.present || errMessage(f.Err) != tt.err {
			t.Errorf("%s utc=%v: present %v err %q; want %v %q", body, tt.utcOnly, present, errMessage(f.Err), tt.present, tt.err)
		}
		var s string
		if got != nil {
			s = got.UTC().Format(time.RFC3339Nano)
		}
		if s != tt.want {
			t.Errorf("%s utc=%v: time %q, want %q", body, tt.utcOnly, s, tt.want)
		}
	}
}

// TestFieldsGet: members are found by their decoded key, the value as
// gjson reads it.
func TestFieldsGet(t *testing.T) {
	f := mustParse(t, ` { "a" : "x" , "\u0062":[1, 2], "c\"":{"d":1}, "n":null } `)
	for name, want := range map[string]string{"a": `"x"`, "b": `[1, 2]`, `c"`: `{"d":1}`, "n": "null"} {
		if v, ok := f.Get(name); !ok || v.Raw != want {
			t.Errorf("get(%q) = %q %v, want %q", name, v.Raw, ok, want)
		}
	}
	if v, ok := f.Get("\\u0062"); ok {
		t.Errorf("get of the raw key = %q", v.Raw)
	}
	if _, ok := f.Get("d"); ok {
		t.Error("a nested key is not a field")
	}
}

// Lookups of names a body lacks are answered by the names' bits: a name
// that shares a present name's bit, or lacks one, is still told apart.
func TestFieldsGetPresentAndAbsent(t *testing.T) {
	names := []string{"", "a", "b", "ab", "ba", "model", "tools", "messages", "provider", "max_tokens",
		"temperature", "stream", "user", "input", "prompt", "models", "x_y", "é"}
	for n := range names {
		// The body has the first n names, each once.
		var b strings.Builder
		b.WriteString("{")
		for i, name := range names[:n] {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"` + name + `":` + strconv.Itoa(i))
		}
		b.WriteString("}")
		f := mustParse(t, b.String())
		for i, name := range names {
			v, ok := f.Get(name)
			if want := i < n; ok != want || ok && v.Raw != strconv.Itoa(i) {
				t.Errorf("%s: get(%q) = %q %v, want present %v", b.String(), name, v.Raw, ok, want)
			}
		}
	}
}

// EachRaw yields what Each does, the values unparsed.
func TestFieldsEachRaw(t *testing.T) {
	f := mustParse(t, ` { "a" : "x\n" , "\u0062":[1, 2], "n":null, "i": -1.5e3 } `)
	var each, raw []string
	for name, v := range f.Each {
		each = append(each, name+"="+v.Raw)
	}
	for name, v := range f.EachRaw {
		raw = append(raw, name+"="+v)
	}
	if want := []string{`a="x\n"`, `b=[1, 2]`, `n=null`, `i=-1.5e3`}; !reflect.DeepEqual(each, want) || !reflect.DeepEqual(raw, want) {
		t.Errorf("Each %q, EachRaw %q, want %q", each, raw, want)
	}
}

func TestFieldsTypes(t *testing.T) {
	f := mustParse(t, `{"s":"x","e":"","n":null,"b":true,"f":false,"i":1,"a.b":"dotted","o":{"s":"nested"}}`)
	if v, ok := f.String("s"); v != "x" || !ok {
		t.Errorf("String(s) = %q %v", v, ok)
	}
	if v, ok := f.String("e"); v != "" || !ok {
		t.Errorf("String(e) = %q %v", v, ok)
	}
	if v, ok := f.String("missing"); v != "" || ok {
		t.Errorf("String(missing) = %q %v", v, ok)
	}
	if v, ok := f.String("a.b"); v != "dotted" || !ok {
		t.Errorf("String(a.b) = %q %v: field names are not paths", v, ok)
	}
	if _, ok := f.String("o.s"); ok {
		t.Error("String(o.s) found a nested field")
	}
	if v, ok := f.NullableString("n"); v != nil || !ok {
		t.Errorf("NullableString(n) = %v %v", v, ok)
	}
	if v, ok := f.NullableString("s"); v == nil || *v != "x" || !ok {
		t.Errorf("NullableString(s) = %v %v", v, ok)
	}
	if v, ok := f.Bool("b"); !v || !ok {
		t.Errorf("Bool(b) = %v %v", v, ok)
	}
	if v, ok := f.Bool("f"); v || !ok {
		t.Errorf("Bool(f) = %v %v", v, ok)
	}
	if v, ok := f.Bool("missing"); v || ok {
		t.Errorf("Bool(missing) = %v %v", v, ok)
	}
	if f.Err != nil {
		t.Fatalf("unexpected error %v", f.Err)
	}
	// the first type error is kept
	if _, ok := f.Bool("i"); ok {
		t.Error("Bool(i) ok")
	}
	if _, ok := f.String("i"); ok {
		t.Error("String(i) ok")
	}
	if _, ok := f.NullableString("b"); ok {
		t.Error("NullableString(b) ok")
	}
	if got := errMessage(f.Err); got != "i: expected a boolean" {
		t.Errorf("err = %q", got)
	}
}

func TestReadBody(t *testing.T) {
	tests := []struct {
		body   string
		limit  int64
		status int
	}{
		{"", 4, 0},
		{"abcd", 4, 0},
		{"abcde", 4, 413},
		{strings.Repeat("x", 5000), 4096, 413},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tt.body))
		b, apiErr := Read(httptest.NewRecorder(), r, tt.limit)
		if tt.status == 0 {
			if apiErr != nil || string(b) != tt.body {
				t.Errorf("Read(%d bytes, %d) = %q, %v", len(tt.body), tt.limit, b, apiErr)
			}
			continue
		}
		if apiErr == nil || apiErr.Status != tt.status || b != nil {
			t.Errorf("Read(%d bytes, %d) = %q, %v; want %d", len(tt.body), tt.limit, b, apiErr, tt.status)
		}
	}
}

// A body an earlier handler set from memory is taken without a copy, still
// bounded by the limit; once partly read it is read like any other.
func TestReadBodyTakesBufferedBody(t *testing.T) {
	body := []byte(`{"model":"m"}`)
	r := httptest.NewRequest("POST", "/", nil)
	r.Body = NewBuffered(body)
	got, apiErr := Read(httptest.NewRecorder(), r, 1<<10)
	if apiErr != nil || &got[0] != &body[0] {
		t.Fatalf("readBody = %q %v, want the same bytes, not a copy", got, apiErr)
	}
	if n, _ := r.Body.Read(make([]byte, 1)); n != 0 {
		t.Fatal("a taken body still reads")
	}

	r.Body = NewBuffered(body)
	if _, apiErr := Read(httptest.NewRecorder(), r, 4); apiErr == nil || apiErr.Status != 413 {
		t.Fatalf("over the limit: %v, want 413", apiErr)
	}

	r.Body = NewBuffered(body)
	r.Body.Read(make([]byte, 2))
	got, apiErr = Read(httptest.NewRecorder(), r, 1<<10)
	if apiErr != nil || string(got) != `model":"m"}` {
		t.Fatalf("partly read: %q %v", got, apiErr)
	}
}

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
		if !reflect.DeepEqual(got, tc.want) || (got == nil) != (tc.want == nil) || present != tc.present || errMessage(f.Err) != tc.err {
			t.Errorf("%s: %#v %v %q, want %#v %v %q", tc.body, got, present, errMessage(f.Err), tc.want, tc.present, tc.err)
		}
	}
	f := mustParse(t, `{"n":[1,2.5]}`)
	if _, ok := f.NullableInts("n"); ok || errMessage(f.Err) != "n: expected an array of integers or null" {
		t.Fatalf("NullableInts with a fraction: %q", errMessage(f.Err))
	}
	f = mustParse(t, `{"n":[1,-2]}`)
	if got, ok := f.NullableInts("n"); !ok || !reflect.DeepEqual(got, []int64{1, -2}) {
		t.Fatalf("NullableInts: %v %v", got, ok)
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
	if b, ok := f.NullableBool("missing"); ok || b != nil || f.Err != nil {
		t.Fatalf("missing: %v %v %v", b, ok, f.Err)
	}
	if raw, ok := f.NullableRaw("a"); !ok || string(raw) != "[1, 2]" {
		t.Fatalf("a: %s %v", raw, ok)
	}
	if _, ok := f.NullableBool("s"); ok || errMessage(f.Err) != "s: expected a boolean or null" {
		t.Fatalf("s: %v %q", ok, errMessage(f.Err))
	}
	f = mustParse(t, `{"s":"x"}`)
	if _, ok := f.NullableRaw("s"); ok || errMessage(f.Err) != "s: expected an array or null" {
		t.Fatalf("raw s: %v %q", ok, errMessage(f.Err))
	}
}

// TestParseObjectInReused parses bodies one after another into one Fields:
// each reads as ParseObject reads it alone, nothing left of the one
// before (an error, a member, a name bit).
func TestParseObjectInReused(t *testing.T) {
	bodies := []string{
		`{"model":"a","stream":true,"messages":[]}`,
		`{"stream":1}`,
		``,
		`{"a\u0062":2,"x":{"y":1}}`,
		`[1]`,
		`{"model":"b"}`,
		`{`,
		`{"n":3}`,
	}
	var f Fields
	for _, b := range bodies {
		want, wantErr := ParseObject([]byte(b))
		got, gotErr := ParseObjectIn(&f, []byte(b))
		if !reflect.DeepEqual(gotErr, wantErr) {
			t.Fatalf("%q: error %v, want %v", b, gotErr, wantErr)
		}
		if wantErr != nil {
			if got != nil {
				t.Fatalf("%q: fields with the error", b)
			}
			continue
		}
		if got != &f {
			t.Fatalf("%q: not parsed into f", b)
		}
		for _, name := range []string{"model", "stream", "messages", "ab", "x", "n", "y"} {
			gv, gok := got.Get(name)
			wv, wok := want.Get(name)
			if gok != wok || gv.Raw != wv.Raw {
				t.Errorf("%q: Get(%q) = %q, %v; want %q, %v", b, name, gv.Raw, gok, wv.Raw, wok)
			}
		}
		got.Bool("stream")
		want.Bool("stream")
		if !reflect.DeepEqual(got.Err, want.Err) {
			t.Errorf("%q: Bool(stream) error %v, want %v", b, got.Err, want.Err)
		}
		if got.Root().Raw != want.Root().Raw {
			t.Errorf("%q: root %q, want %q", b, got.Root().Raw, want.Root().Raw)
		}
	}
}

// The fields share the body's memory, not a copy of it (ParseObject's
// contract: the body does not change afterwards).
func TestParseObjectSharesBody(t *testing.T) {
	b := []byte(`{"model":"abc"}`)
	f, apiErr := ParseObject(b)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	s, _ := f.String("model")
	if s != "abc" || unsafe.StringData(s) != &b[10] {
		t.Fatalf("model %q is not a view of the body", s)
	}
}
