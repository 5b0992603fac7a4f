package routetable

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

type row struct {
	pattern string
	name    string
}

var table = Compile("/api", []row{
	{"/things", "things"},
	{"GET /things", "list"},
	{"POST /things", "create"},
	{"GET /things/{id}", "get"},
	{"DELETE /things/{id}", "delete"},
	{"/things/a/special", "special"},
	{"PUT /things/a/special/x", "special-x"},
	{"GET /alone", "alone"},
}, func(r *row) string { return r.pattern })

func name(r *row) string {
	if r == nil {
		return ""
	}
	return r.name
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		method, target         string
		ok                     bool
		endpoint, method2, grp string
		allow, id              string
	}{
		{"GET", "/api/things", true, "list", "GET", "things", "GET, POST", ""},
		{"GET", "/api/things/", true, "list", "GET", "things", "GET, POST", ""},
		{"HEAD", "/api/things", true, "list", "GET", "things", "GET, POST", ""},
		{"PUT", "/api/things", true, "", "", "things", "GET, POST", ""},
		{"DELETE", "/api/things/a%2Fb", true, "delete", "DELETE", "things", "DELETE, GET", "a/b"},
		{"POST", "/api/things/7/", true, "", "", "things", "DELETE, GET", "7"},
		{"GET", "/api/things/7/more", true, "", "", "things", "", ""},
		{"PUT", "/api/things/a/special/x", true, "special-x", "PUT", "special", "PUT", ""},
		{"GET", "/api/things/a/special", true, "", "", "special", "", ""},
		{"GET", "/api/things/a/special/y", true, "", "", "special", "", ""},
		{"GET", "/api/alone/", true, "alone", "GET", "", "GET", ""},
		{"POST", "/api/alone", true, "", "", "", "GET", ""},
		{"GET", "/api/alone/x", false, "", "", "", "", ""},
		{"GET", "/api/nothing", false, "", "", "", "", ""},
		{"GET", "/api/things//x", false, "", "", "", "", ""},
		{"GET", "/api/things/../alone", false, "", "", "", "", ""},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		m := table.Lookup(r)
		ok := m != nil
		if m == nil {
			m = new(Match[row])
		}
		if ok != tc.ok || name(m.Endpoint) != tc.endpoint || m.Method != tc.method2 || name(m.Group) != tc.grp || m.Allow != tc.allow {
			t.Errorf("%s %s: ok %v, endpoint %q %q, group %q, allow %q; want %v, %q %q, %q, %q", tc.method, tc.target,
				ok, name(m.Endpoint), m.Method, name(m.Group), m.Allow, tc.ok, tc.endpoint, tc.method2, tc.grp, tc.allow)
		}
		if got := r.PathValue("id"); got != tc.id {
			t.Errorf("%s %s: id %q, want %q", tc.method, tc.target, got, tc.id)
		}
	}
}

func TestGroup(t *testing.T) {
	for path, want := range map[string]string{
		"/things": "things", "/things/x": "things", "/things/a/special": "special",
		"/things/a/special/x/y": "special", "/things/a/specialx": "things", "/thingsx": "", "/alone": "", "": "",
	} {
		if got := name(table.Group(path)); got != want {
			t.Errorf("Group(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestCompileRefusesNoPath(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("compiled")
		}
	}()
	Compile("", []row{{"GET ", "x"}}, func(r *row) string { return r.pattern })
}

func BenchmarkLookup(b *testing.B) {
	r := httptest.NewRequest(http.MethodDelete, "/api/things/7", nil)
	b.ReportAllocs()
	for b.Loop() {
		if m := table.Lookup(r); m == nil || m.Endpoint == nil {
			b.Fatal("no endpoint")
		}
	}
}
