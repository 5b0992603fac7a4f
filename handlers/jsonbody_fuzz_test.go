package handlers

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// FuzzRequestValidators runs hostile bodies through the inference and
// administrative validators: none may panic or recurse without bound
// (the seeds hold 8 MiB of '[' and every kind of malformed text), and a
// body they accept is one JSON object within jsoncheck's bounds whose
// fields read back as gjson reads them.
func FuzzRequestValidators(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","input":"hi","max_output_tokens":16,"user":"u1"}`,
		`{"model":"m","messages":[],"model":"n"}`,
		`{"model":"m","messages":[{"role":"user","role":"system"}]}`,
		`{"model":"m","messages":[],"user":"\ud800"}`,
		`{"model":"m","messages":[],"user":"a\u0000"}`,
		`{"model":"m","messages":[],"max_tokens":1e308}`,
		`{"model":"m","messages":[],"max_tokens":-0}`,
		`{"model":"m","messages":[],"max_tokens":9223372036854775808}`,
		`{"model":"m","messages":[],"max_tokens":NaN}`,
		"{\"model\":\"m\xff\",\"messages\":[]}",
		`{"name":"` + strings.Repeat("n", 300) + `","description":"a\nb"}`,
		`{"model":"m","messages":` + strings.Repeat("[", 8<<20),
		strings.Repeat(`{"a":`, 200),
		``, `[]`, `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range []dialect.Kind{dialect.Chat, dialect.Responses} {
			if fl, apiErr := routing.ValidateInference(kind, b); apiErr == nil {
				checkAccepted(t, b, fl)
			}
		}
		if fl, apiErr := reqbody.ParseText(b); apiErr == nil {
			checkAccepted(t, b, fl)
			if len(b) > 0 && jsoncheck.CheckText(b, nil) != nil {
				t.Fatalf("ParseText accepted %q", b)
			}
			for _, name := range []string{"name", "description", "user", "key"} {
				if s, ok := fl.String(name); ok && reqbody.CheckTextField(name, gjson.Result{Type: gjson.String, Str: s, Raw: `""`}) != nil {
					t.Fatalf("%s %q passed String but not its bound", name, s)
				}
			}
		}
	})
}

func checkAccepted(t *testing.T, b []byte, fl *reqbody.Fields) {
	t.Helper()
	if len(b) == 0 {
		return
	}
	if !jsoncheck.Valid(b) || !gjson.ParseBytes(b).IsObject() {
		t.Fatalf("accepted %q", b)
	}
	// Every top-level field reads as gjson reads it (no repeats, so the
	// first match is the only one).
	gjson.ParseBytes(b).ForEach(func(k, v gjson.Result) bool {
		got, ok := fl.Get(k.Str)
		if !ok || got.Raw != v.Raw {
			t.Fatalf("field %q = %q %v, gjson reads %q", k.Str, got.Raw, ok, v.Raw)
		}
		return true
	})
}
