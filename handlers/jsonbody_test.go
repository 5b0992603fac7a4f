package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func mustParse(t *testing.T, body string) *fields {
	t.Helper()
	f, apiErr := parseObject([]byte(body))
	if apiErr != nil {
		t.Fatalf("parseObject(%s): %v", body, apiErr)
	}
	return f
}

func errMessage(e *APIError) string {
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
		_, apiErr := parseObject([]byte(tt.body))
		if got := errMessage(apiErr); got != tt.want {
			t.Errorf("parseObject(%q) = %q, want %q", tt.body, got, tt.want)
		}
		if apiErr != nil && apiErr.Status != http.StatusBadRequest {
			t.Errorf("parseObject(%q) status %d", tt.body, apiErr.Status)
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
		if present != tt.present || errMessage(f.err) != tt.err {
			t.Errorf("%s: present %v err %q; want %v %q", body, present, errMessage(f.err), tt.present, tt.err)
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
		if present != tt.present || errMessage(f.err) != tt.err {
			t.Errorf("%s utc=%v: present %v err %q; want %v %q", body, tt.utcOnly, present, errMessage(f.err), tt.present, tt.err)
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
		if v, ok := f.get(name); !ok || v.Raw != want {
			t.Errorf("get(%q) = %q %v, want %q", name, v.Raw, ok, want)
		}
	}
	if v, ok := f.get("\\u0062"); ok {
		t.Errorf("get of the raw key = %q", v.Raw)
	}
	if _, ok := f.get("d"); ok {
		t.Error("a nested key is not a field")
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
	if f.err != nil {
		t.Fatalf("unexpected error %v", f.err)
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
	if got := errMessage(f.err); got != "i: expected a boolean" {
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
		b, apiErr := readBody(httptest.NewRecorder(), r, tt.limit)
		if tt.status == 0 {
			if apiErr != nil || string(b) != tt.body {
				t.Errorf("readBody(%d bytes, %d) = %q, %v", len(tt.body), tt.limit, b, apiErr)
			}
			continue
		}
		if apiErr == nil || apiErr.Status != tt.status || b != nil {
			t.Errorf("readBody(%d bytes, %d) = %q, %v; want %d", len(tt.body), tt.limit, b, apiErr, tt.status)
		}
	}
}

func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("Content-Length", "99")
	WriteError(w, &APIError{
		Status: 429, Message: "Rate limit exceeded",
		Metadata: map[string]any{"error_type": "rate_limit_exceeded"},
		Header:   http.Header{"Retry-After": {"3"}},
	})
	want := `{"error":{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":"rate_limit_exceeded"}}}` + "\n"
	if w.Code != 429 || w.Body.String() != want {
		t.Errorf("got %d %s", w.Code, w.Body.String())
	}
	h := w.Header()
	if h.Get("Content-Type") != "application/json" || h.Get("Retry-After") != "3" || h.Get("Content-Length") != "" {
		t.Errorf("headers = %v", h)
	}
	if got := (&APIError{Status: 404, Message: "x"}).Error(); got != "404 x" {
		t.Errorf("Error() = %q", got)
	}
}

// A body an earlier handler set from memory is taken without a copy, still
// bounded by the limit; once partly read it is read like any other.
func TestReadBodyTakesBufferedBody(t *testing.T) {
	body := []byte(`{"model":"m"}`)
	r := httptest.NewRequest("POST", "/", nil)
	setBody(r, body)
	got, apiErr := readBody(httptest.NewRecorder(), r, 1<<10)
	if apiErr != nil || &got[0] != &body[0] {
		t.Fatalf("readBody = %q %v, want the same bytes, not a copy", got, apiErr)
	}
	if n, _ := r.Body.Read(make([]byte, 1)); n != 0 {
		t.Fatal("a taken body still reads")
	}

	setBody(r, body)
	if _, apiErr := readBody(httptest.NewRecorder(), r, 4); apiErr == nil || apiErr.Status != 413 {
		t.Fatalf("over the limit: %v, want 413", apiErr)
	}

	setBody(r, body)
	r.Body.Read(make([]byte, 2))
	got, apiErr = readBody(httptest.NewRecorder(), r, 1<<10)
	if apiErr != nil || string(got) != `model":"m"}` {
		t.Fatalf("partly read: %q %v", got, apiErr)
	}
}

func TestJSONQuoteMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "gen-0001763900000000-abcdef", "vendor/model:free", "a\"b", "a\\b", "<&>",
		"tab\there", "\x01", "日本", "\xff", "\u2028", "~ DEL\x7f"} {
		want, _ := json.Marshal(s)
		if got := jsonQuote(s); string(got) != string(want) {
			t.Errorf("jsonQuote(%q) = %s, want %s", s, got, want)
		}
	}
}
