package admin

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
)

// spec45 is the public API's routes that need a management key.
var spec45 = []string{
	"GET /activity", "GET /analytics/meta", "POST /analytics/query",
	"GET /keys", "POST /keys", "GET /keys/{hash}", "PATCH /keys/{hash}", "DELETE /keys/{hash}",
	"GET /byok", "POST /byok", "GET /byok/{id}", "PATCH /byok/{id}", "DELETE /byok/{id}",
	"GET /credits", "DELETE /response-cache",
	"GET /end-users", "POST /end-users", "GET /end-users/{user}", "PATCH /end-users/{user}", "DELETE /end-users/{user}",
	"POST /generation/feedback",
	"GET /guardrails", "POST /guardrails", "GET /guardrails/{id}", "PATCH /guardrails/{id}", "DELETE /guardrails/{id}",
	"GET /guardrails/{id}/assignments/keys", "POST /guardrails/{id}/assignments/keys",
	"POST /guardrails/{id}/assignments/keys/remove",
	"GET /guardrails/{id}/assignments/members", "POST /guardrails/{id}/assignments/members",
	"POST /guardrails/{id}/assignments/members/remove",
	"GET /guardrails/assignments/keys", "GET /guardrails/assignments/members",
	"GET /observability/destinations", "POST /observability/destinations",
	"GET /observability/destinations/{id}", "PATCH /observability/destinations/{id}", "DELETE /observability/destinations/{id}",
	"GET /organization/members", "GET /organization/settings", "PATCH /organization/settings",
	"GET /private-endpoints", "POST /private-endpoints", "GET /private-endpoints/{id}", "PATCH /private-endpoints/{id}",
	"DELETE /private-endpoints/{id}", "POST /private-endpoints/{id}/activate", "POST /private-endpoints/{id}/disable",
	"POST /private-endpoints/{id}/enable", "PUT /private-endpoints/{id}/pricing", "POST /private-endpoints/{id}/validate",
	"GET /scim/group-mappings", "POST /scim/group-mappings", "GET /scim/group-mappings/{id}",
	"PATCH /scim/group-mappings/{id}", "DELETE /scim/group-mappings/{id}", "GET /scim/groups",
	"POST /scim/sync-jobs", "GET /scim/sync-jobs/{id}",
	"GET /workspaces", "POST /workspaces", "GET /workspaces/{id}", "PATCH /workspaces/{id}", "DELETE /workspaces/{id}",
	"GET /workspaces/{id}/members", "POST /workspaces/{id}/members/add", "POST /workspaces/{id}/members/remove",
	"GET /workspaces/{workspace_ref}/budgets", "GET /workspaces/{workspace_ref}/budgets/{interval}",
	"PUT /workspaces/{workspace_ref}/budgets/{interval}", "DELETE /workspaces/{workspace_ref}/budgets/{interval}",
	// The connect flow's code: the reference's 403 names management keys.
	"POST /auth/keys/code",
}

// sample fills a pattern's wildcards with sample values.
func sample(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "x" + s[1:len(s)-1]
		}
	}
	return strings.Join(segs, "/")
}

// shape is a pattern with its wildcards' names erased.
func shape(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

func lookup(t *testing.T, method, target string) (route, *http.Request) {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	rt, ok := routeFor(r)
	if !ok {
		t.Fatalf("%s %s: not under %s", method, target, APIPrefix)
	}
	return rt, r
}

// TestRoutesMatchSpec checks the table against the list above: exactly
// those management routes need a management key, each with a handler;
// GET /key takes any key.
func TestRoutesMatchSpec(t *testing.T) {
	var table []string
	for _, rt := range apiRoutes {
		if strings.Contains(rt.pattern, " ") && rt.kind == RouteManagement {
			table = append(table, shape(rt.pattern))
		}
	}
	var spec []string
	for _, p := range spec45 {
		spec = append(spec, shape(p))
	}
	slices.Sort(table)
	slices.Sort(spec)
	if !slices.Equal(table, spec) {
		t.Errorf("management routes of the table:\n%v\nof the public API:\n%v", table, spec)
	}
	for _, p := range append(spec45, "GET /key", "POST /auth/keys") {
		method, path, _ := strings.Cut(p, " ")
		rt, _ := lookup(t, method, APIPrefix+sample(path))
		want := RouteManagement
		switch p {
		case "GET /key":
			want = RouteAnyKey
		case "POST /auth/keys": // the code exchange: its credential is the verifier
			want = RouteKeyless
		}
		if rt.Kind != want || rt.Endpoint == nil || rt.Endpoint.handler == nil || rt.Method != method {
			t.Errorf("%s: kind %d, method %q, endpoint %v; want kind %d", p, rt.Kind, rt.Method, rt.Endpoint, want)
		}
	}
}

// TestRoutesAgree checks that ClassifyRoute, which the pipeline asks once
// per request, and the ServeMux, which Admin dispatches with, give every
// pattern of the table the kind it declares, with and without a trailing
// slash; that every administrative endpoint has its handler, and that
// every other route's op is found: by ClassifyRoute, or by ResolveOp for a
// path with wildcards.
func TestRoutesAgree(t *testing.T) {
	for _, rt := range apiRoutes {
		method, path, endpoint := strings.Cut(rt.pattern, " ")
		if !endpoint {
			method, path = http.MethodPost, method
		}
		for _, target := range []string{APIPrefix + sample(path), APIPrefix + sample(path) + "/"} {
			api, _ := ClassifyRoute(target)
			got, r := lookup(t, method, target)
			m := routes.Lookup(r)
			ok := m != nil
			if !ok {
				m = noMatch
			}
			declared := m.Group
			if m.Endpoint != nil {
				declared = m.Endpoint
			}
			if api.Kind != rt.kind || got.Kind != rt.kind || !ok || declared == nil || declared.kind != rt.kind {
				t.Errorf("%s %s: ClassifyRoute %d, routeFor %d, table %+v; declared %d", method, target, api.Kind, got.Kind, m, rt.kind)
			}
			switch {
			case got.Kind.administrative() && endpoint && (got.Endpoint == nil || got.Endpoint.handler == nil || got.Method != method):
				t.Errorf("%s %s: no handler", method, target)
			case !endpoint && got.Kind.administrative() != (rt.kind == RouteManagement || rt.kind == RouteAnyKey):
				t.Errorf("%s %s: administrative %v", method, target, got.Kind.administrative())
			case rt.op == OpNone:
			case strings.Contains(path, "{"):
				if op := ResolveOp(httptest.NewRequest(method, target, nil)); api.Op != OpNone || op != rt.op {
					t.Errorf("%s %s: ClassifyRoute op %d, ResolveOp %d; want %d", method, target, api.Op, op, rt.op)
				}
			case api.Op != rt.op || api.Dialect() != rt.dialect:
				t.Errorf("%s %s: op %d, dialect %q; want %d, %q", method, target, api.Op, api.Dialect(), rt.op, rt.dialect)
			}
		}
	}
	// Paths below a group take its kind; others are unknown.
	for _, tc := range []struct {
		path string
		kind RouteKind
	}{
		{"/keys/a/b", RouteManagement},
		{"/scim/nope", RouteManagement},
		{"/generation/feedback/x", RouteManagement},
		{"/generation/x", RouteUnknown},
		{"/chat/completions/x/y", RouteInference},
		{"/models/user/x", RouteInference},
		{"/models/a/b/endpoints", RoutePublic},
		{"/model/a/b", RoutePublic},
		{"/endpoints/x", RoutePublic},
		{"/key/x", RouteUnknown},
		{"/keyz", RouteUnknown},
		{"", RouteUnknown},
	} {
		api, _ := ClassifyRoute(APIPrefix + tc.path)
		got, _ := lookup(t, http.MethodGet, APIPrefix+tc.path)
		if api.Kind != tc.kind || got.Kind != tc.kind || got.Endpoint != nil || got.Allow != "" {
			t.Errorf("%s: ClassifyRoute %d, routeFor %+v; want kind %d, no endpoint", tc.path, api.Kind, got, tc.kind)
		}
	}
	if _, ok := routeFor(httptest.NewRequest(http.MethodGet, "/api/v10/keys", nil)); ok {
		t.Error("/api/v10/keys is under the prefix")
	}
}

// TestClassifyRouteOps checks the pipeline's ops and dialects: an
// inference route's own path in its dialect, the paths below it as they
// are (dialect.Other), the token counts in their API's dialect.
func TestClassifyRouteOps(t *testing.T) {
	for _, tc := range []struct {
		path    string
		op      Op
		dialect dialect.Kind
	}{
		{"/chat/completions", OpInfer, dialect.Chat},
		{"/chat/completions/", OpInfer, dialect.Chat},
		{"/chat/completions/x", OpInferBelow, dialect.Other},
		{"/responses", OpInfer, dialect.Responses},
		{"/responses/resp_1", OpInferBelow, dialect.Other},
		{"/responses/input_tokens", OpInputTokens, dialect.Responses},
		{"/messages", OpInfer, dialect.Messages},
		{"/messages/count_tokens/", OpCountTokens, dialect.Messages},
		{"/messages/batches", OpInferBelow, dialect.Other},
		{"/completions", OpInfer, dialect.Other},
		{"/embeddings", OpInfer, dialect.Other},
		{"/embeddings/models", OpListEmbeddingsModels, ""},
		{"/embeddings/x", OpInferBelow, dialect.Other},
		{"/models", OpListModels, ""},
		{"/models/user", OpListUserModels, ""},
		{"/models/user/x", OpNone, ""},
		{"/models/count", OpCountModels, ""},
		{"/models/a/b/endpoints", OpNone, ""}, // ResolveOp
		{"/providers", OpListProviders, ""},
		{"/endpoints/zdr", OpZDREndpoints, ""},
		{"/endpoints/x", OpNone, ""},
		{"/model/a/b", OpNone, ""}, // ResolveOp
		{"/keys", OpNone, ""},
		{"/nope", OpNone, ""},
	} {
		api, _ := ClassifyRoute(APIPrefix + tc.path)
		if api.Op != tc.op || api.Dialect() != tc.dialect {
			t.Errorf("%s: op %d, dialect %q; want %d, %q", tc.path, api.Op, api.Dialect(), tc.op, tc.dialect)
		}
	}
	for _, tc := range []struct {
		method, path string
		op           Op
		author, slug string
	}{
		{"GET", "/models/a/b/endpoints", OpModelEndpoints, "a", "b"},
		{"HEAD", "/models/a/b/endpoints/", OpModelEndpoints, "a", "b"},
		{"GET", "/models/user/b/endpoints", OpModelEndpoints, "user", "b"},
		{"GET", "/models/a/b/c/endpoints", OpNone, "", ""},
		{"POST", "/models/a/b/endpoints", OpNone, "a", "b"}, // the path, not the method
		{"GET", "/models/a", OpNone, "", ""},
		{"GET", "/model/a/b", OpGetModel, "a", "b"},
		{"GET", "/model/~a/b-latest", OpGetModel, "~a", "b-latest"},
		{"GET", "/model/a/b:free", OpGetModel, "a", "b:free"},
		{"GET", "/model/a", OpNone, "", ""},
	} {
		r := httptest.NewRequest(tc.method, APIPrefix+tc.path, nil)
		if op := ResolveOp(r); op != tc.op || r.PathValue("author") != tc.author || r.PathValue("slug") != tc.slug {
			t.Errorf("%s %s: ResolveOp %d, %q/%q; want %d, %q/%q", tc.method, tc.path, op, r.PathValue("author"), r.PathValue("slug"), tc.op, tc.author, tc.slug)
		}
	}
}

func TestRouteForPathValues(t *testing.T) {
	_, r := lookup(t, "GET", "/api/v1/end-users/team%2Fa%20b")
	if got := r.PathValue("user"); got != "team/a b" {
		t.Errorf("user = %q", got)
	}
	_, r = lookup(t, "PUT", "/api/v1/workspaces/w1/budgets/daily/")
	if ref, iv := r.PathValue("ref"), r.PathValue("interval"); ref != "w1" || iv != "daily" {
		t.Errorf("ref, interval = %q, %q", ref, iv)
	}
}

// serveRoute answers a request with the table alone (no store: the
// answers tested here come before any handler).
func serveRoute(t *testing.T, method, target string) *apierror.Error {
	t.Helper()
	rt, r := lookup(t, method, target)
	return rt.serve(&adminRequest{r: r})
}

func TestRouteErrors(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		status         int
		allow, message string
	}{
		{"PUT", "/api/v1/keys", 405, "GET, POST", "Method PUT is not allowed on /api/v1/keys"},
		{"PUT", "/api/v1/keys/", 405, "GET, POST", "Method PUT is not allowed on /api/v1/keys/"},
		{"POST", "/api/v1/keys/h", 405, "DELETE, GET, PATCH", "Method POST is not allowed on /api/v1/keys/h"},
		{"GET", "/api/v1/private-endpoints/p/pricing", 405, "PUT", "Method GET is not allowed on /api/v1/private-endpoints/p/pricing"},
		// HEAD is not GET on the administrative routes, as before.
		{"HEAD", "/api/v1/credits", 405, "GET", "Method HEAD is not allowed on /api/v1/credits"},
		{"GET", "/api/v1/keys/a/b", 404, "", "Not found: GET /api/v1/keys/a/b"},
		{"GET", "/api/v1/analytics", 404, "", "Not found: GET /api/v1/analytics"},
		// ServeMux would redirect an unclean path; it is no route.
		{"GET", "/api/v1/keys//x", 404, "", "Not found: GET /api/v1/keys//x"},
		{"GET", "/api/v1/keys/../credits", 404, "", "Not found: GET /api/v1/keys/../credits"},
	} {
		apiErr := serveRoute(t, tc.method, tc.target)
		if apiErr == nil || apiErr.Status != tc.status || apiErr.Message != tc.message || apiErr.Header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %+v; want %d %q, Allow %q", tc.method, tc.target, apiErr, tc.status, tc.message, tc.allow)
		}
	}
}

func TestRouteWithOpen(t *testing.T) {
	refused := apierror.BadRequest("off")
	called := ""
	open := func(ok bool) func(*adminRequest) (string, *apierror.Error) {
		return func(*adminRequest) (string, *apierror.Error) {
			if !ok {
				return "", refused
			}
			return "req", nil
		}
	}
	list := func(req string) *apierror.Error { called = req + " list"; return nil }
	get := func(req, id string) *apierror.Error { called = req + " get " + id; return nil }
	if apiErr := with(open(false), list)(nil); apiErr != refused || called != "" {
		t.Errorf("refused list: %v, called %q", apiErr, called)
	}
	if apiErr := withID(open(false), get)(nil, "x"); apiErr != refused || called != "" {
		t.Errorf("refused get: %v, called %q", apiErr, called)
	}
	if apiErr := with(open(true), list)(nil); apiErr != nil || called != "req list" {
		t.Errorf("list: %v, called %q", apiErr, called)
	}
	if apiErr := withID(open(true), get)(nil, "x"); apiErr != nil || called != "req get x" {
		t.Errorf("get: %v, called %q", apiErr, called)
	}
}

// TestCompileRoutesRefuses checks that a table that would let a handler
// miss its path values, or a route escape its group's kind, does not load.
func TestCompileRoutesRefuses(t *testing.T) {
	for name, table := range map[string][]apiRoute{
		"arity":     {{pattern: "/a", kind: RouteManagement}, {pattern: "GET /a/{id}", kind: RouteManagement, serve: (*adminRequest).listKeys}},
		"kind":      {{pattern: "/a", kind: RouteManagement}, {pattern: "GET /a/b", kind: RouteAnyKey, serve: (*adminRequest).listKeys}},
		"no group":  {{pattern: "GET /a/{id}", kind: RouteManagement, serve: (*adminRequest).getKey}},
		"no op":     {{pattern: "GET /a", kind: RoutePublic}},
		"op method": {{pattern: "POST /a", kind: RoutePublic, op: OpListModels}},
		"admin op":  {{pattern: "GET /a", kind: RouteManagement, op: OpListModels}},
		"group op":  {{pattern: "/a", kind: RouteInference, op: OpCountTokens}},
		"two ops": {{pattern: "/a", kind: RouteInference, op: OpInfer, dialect: dialect.Chat},
			{pattern: "POST /a", kind: RouteInference, op: OpCountTokens}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: compiled", name)
				}
			}()
			compileRoutes(table)
		}()
	}
}

func BenchmarkRouteFor(b *testing.B) {
	for _, target := range []string{"/api/v1/chat/completions", "/api/v1/workspaces/w1/budgets/daily"} {
		b.Run(strings.TrimPrefix(target, APIPrefix+"/"), func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, target, nil)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := routeFor(r); !ok {
					b.Fatal("no route")
				}
			}
		})
	}
}

func BenchmarkClassifyRoute(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if api, _ := ClassifyRoute("/api/v1/chat/completions"); api.Kind != RouteInference {
			b.Fatal(api.Kind)
		}
	}
}
