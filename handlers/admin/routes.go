package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
)

// APIPrefix is where every route of the public API lives.
const APIPrefix = "/api/v1"

// RouteKind says which key may call a route.
type RouteKind int

const (
	RouteUnknown    RouteKind = iota
	RoutePublic               // no key needed; a key, when given, is checked
	RouteInference            // regular keys only
	RouteAnyKey               // regular or management key (GET /key)
	RouteManagement           // management keys only
	// RouteKeyless takes no key: the request carries its own credential
	// (the connect flow's code and verifier). A key sent is not looked at.
	RouteKeyless
)

// adminHandler serves one administrative route.
type adminHandler func(ar *adminRequest) *apierror.Error

// apiRoute is one entry of the public API's route table.
type apiRoute struct {
	// pattern is an http.ServeMux pattern relative to APIPrefix. With a
	// method it is one endpoint, served by Admin. Without one it is a
	// group: the path and every path below it, for any method.
	pattern string
	kind    RouteKind
	// serve is an endpoint's handler: an adminHandler, or a method of
	// adminRequest taking the pattern's wildcards, in order, as strings.
	serve any
	// guard runs first on every request to a group's paths (including
	// unknown ones and wrong methods); its error is the answer.
	guard adminHandler
}

// apiRoutes is the public API, each route once with the key kind it needs
// (SPEC.md 4.5 and 5). The pipeline's authentication (ClassifyRoute),
// Admin (resolveRoute) and the pipeline's router (IsGroupPath) read their
// decisions from it.
//
// The pipeline (package handlers) serves the groups without a handler:
// inference, whose POST reaches a provider (no other request does: other
// methods get 405, other paths 404), and the catalog's lists.
// An administrative group gives its unlisted paths its key kind, so that a
// caller learns a path does not exist only once authorized: 404 then.
var apiRoutes = []apiRoute{
	{pattern: "/chat/completions", kind: RouteInference},
	{pattern: "/completions", kind: RouteInference},
	{pattern: "/responses", kind: RouteInference},
	{pattern: "/embeddings", kind: RouteInference},
	{pattern: "/messages", kind: RouteInference},
	{pattern: "/models/user", kind: RouteInference},
	// GET /models, /models/count and /models/{author}/{slug}/endpoints.
	{pattern: "/models", kind: RoutePublic},
	{pattern: "/providers", kind: RoutePublic},

	{pattern: "GET /generation", kind: RouteAnyKey, serve: (*adminRequest).getGeneration},

	{pattern: "GET /key", kind: RouteAnyKey, serve: (*adminRequest).currentKey},

	// The connect flow (OAuth PKCE, connect.go): a code for a management
	// key's member, and its exchange, whose credential is the verifier.
	{pattern: "POST /auth/keys/code", kind: RouteManagement, serve: (*adminRequest).createAuthCode},
	{pattern: "POST /auth/keys", kind: RouteKeyless, serve: (*adminRequest).exchangeAuthCode},

	{pattern: "/keys", kind: RouteManagement},
	{pattern: "GET /keys", kind: RouteManagement, serve: (*adminRequest).listKeys},
	{pattern: "POST /keys", kind: RouteManagement, serve: (*adminRequest).createKey},
	{pattern: "GET /keys/{hash}", kind: RouteManagement, serve: (*adminRequest).getKey},
	{pattern: "PATCH /keys/{hash}", kind: RouteManagement, serve: (*adminRequest).updateKey},
	{pattern: "DELETE /keys/{hash}", kind: RouteManagement, serve: (*adminRequest).deleteKey},

	{pattern: "/organization", kind: RouteManagement},
	{pattern: "GET /organization/settings", kind: RouteManagement, serve: (*adminRequest).orgSettings},
	{pattern: "PATCH /organization/settings", kind: RouteManagement, serve: (*adminRequest).updateOrgSettings},
	{pattern: "GET /organization/members", kind: RouteManagement, serve: (*adminRequest).listMembers},

	{pattern: "/credits", kind: RouteManagement},
	{pattern: "GET /credits", kind: RouteManagement, serve: (*adminRequest).credits},

	{pattern: "/byok", kind: RouteManagement},
	{pattern: "GET /byok", kind: RouteManagement, serve: with(openBYOK, (*byokRequest).list)},
	{pattern: "POST /byok", kind: RouteManagement, serve: with(openBYOK, (*byokRequest).create)},
	{pattern: "GET /byok/{id}", kind: RouteManagement, serve: withID(openBYOK, (*byokRequest).get)},
	{pattern: "PATCH /byok/{id}", kind: RouteManagement, serve: withID(openBYOK, (*byokRequest).update)},
	{pattern: "DELETE /byok/{id}", kind: RouteManagement, serve: withID(openBYOK, (*byokRequest).delete)},

	{pattern: "/end-users", kind: RouteManagement},
	{pattern: "GET /end-users", kind: RouteManagement, serve: (*adminRequest).listEndUsers},
	{pattern: "POST /end-users", kind: RouteManagement, serve: (*adminRequest).createEndUser},
	{pattern: "GET /end-users/{user}", kind: RouteManagement, serve: (*adminRequest).getEndUser},
	{pattern: "PATCH /end-users/{user}", kind: RouteManagement, serve: (*adminRequest).updateEndUser},
	{pattern: "DELETE /end-users/{user}", kind: RouteManagement, serve: (*adminRequest).deactivateEndUser},

	{pattern: "/generation/feedback", kind: RouteManagement},
	{pattern: "POST /generation/feedback", kind: RouteManagement, serve: (*adminRequest).submitFeedback},

	{pattern: "/activity", kind: RouteManagement},
	{pattern: "GET /activity", kind: RouteManagement, serve: (*adminRequest).activity},
	{pattern: "/analytics", kind: RouteManagement},
	{pattern: "GET /analytics/meta", kind: RouteManagement, serve: (*adminRequest).analyticsMeta},
	{pattern: "POST /analytics/query", kind: RouteManagement, serve: (*adminRequest).queryAnalytics},

	{pattern: "/observability", kind: RouteManagement},
	{pattern: "GET /observability/destinations", kind: RouteManagement, serve: with(openDestinations, (*destinationRequest).list)},
	{pattern: "POST /observability/destinations", kind: RouteManagement, serve: with(openDestinations, (*destinationRequest).create)},
	{pattern: "GET /observability/destinations/{id}", kind: RouteManagement, serve: withID(openDestinations, (*destinationRequest).get)},
	{pattern: "PATCH /observability/destinations/{id}", kind: RouteManagement, serve: withID(openDestinations, (*destinationRequest).update)},
	{pattern: "DELETE /observability/destinations/{id}", kind: RouteManagement, serve: withID(openDestinations, (*destinationRequest).delete)},

	{pattern: "/private-endpoints", kind: RouteManagement},
	{pattern: "GET /private-endpoints", kind: RouteManagement, serve: with(openEndpoints, (*endpointRequest).list)},
	{pattern: "POST /private-endpoints", kind: RouteManagement, serve: with(openEndpoints, (*endpointRequest).create)},
	{pattern: "GET /private-endpoints/{id}", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).get)},
	{pattern: "PATCH /private-endpoints/{id}", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).update)},
	{pattern: "DELETE /private-endpoints/{id}", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).delete)},
	{pattern: "POST /private-endpoints/{id}/validate", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).validate)},
	{pattern: "POST /private-endpoints/{id}/activate", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).activate)},
	{pattern: "POST /private-endpoints/{id}/disable", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).disable)},
	{pattern: "POST /private-endpoints/{id}/enable", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).enable)},
	{pattern: "PUT /private-endpoints/{id}/pricing", kind: RouteManagement, serve: withID(openEndpoints, (*endpointRequest).setPricing)},

	{pattern: "/workspaces", kind: RouteManagement},
	{pattern: "GET /workspaces", kind: RouteManagement, serve: (*adminRequest).listWorkspaces},
	{pattern: "POST /workspaces", kind: RouteManagement, serve: (*adminRequest).createWorkspace},
	{pattern: "GET /workspaces/{ref}", kind: RouteManagement, serve: (*adminRequest).getWorkspace},
	{pattern: "PATCH /workspaces/{ref}", kind: RouteManagement, serve: (*adminRequest).updateWorkspace},
	{pattern: "DELETE /workspaces/{ref}", kind: RouteManagement, serve: (*adminRequest).deleteWorkspace},
	{pattern: "GET /workspaces/{ref}/members", kind: RouteManagement, serve: (*adminRequest).listWorkspaceMembers},
	{pattern: "POST /workspaces/{ref}/members/add", kind: RouteManagement, serve: (*adminRequest).addWorkspaceMembers},
	{pattern: "POST /workspaces/{ref}/members/remove", kind: RouteManagement, serve: (*adminRequest).removeWorkspaceMembers},
	{pattern: "GET /workspaces/{ref}/budgets", kind: RouteManagement, serve: (*adminRequest).listBudgets},
	{pattern: "GET /workspaces/{ref}/budgets/{interval}", kind: RouteManagement, serve: (*adminRequest).getBudget},
	{pattern: "PUT /workspaces/{ref}/budgets/{interval}", kind: RouteManagement, serve: (*adminRequest).setBudget},
	{pattern: "DELETE /workspaces/{ref}/budgets/{interval}", kind: RouteManagement, serve: (*adminRequest).deleteBudget},

	{pattern: "/guardrails", kind: RouteManagement},
	{pattern: "GET /guardrails", kind: RouteManagement, serve: (*adminRequest).listGuardrails},
	{pattern: "POST /guardrails", kind: RouteManagement, serve: (*adminRequest).createGuardrail},
	{pattern: "GET /guardrails/{id}", kind: RouteManagement, serve: (*adminRequest).getGuardrail},
	{pattern: "PATCH /guardrails/{id}", kind: RouteManagement, serve: (*adminRequest).updateGuardrail},
	{pattern: "DELETE /guardrails/{id}", kind: RouteManagement, serve: (*adminRequest).deleteGuardrail},
	{pattern: "GET /guardrails/{id}/assignments/keys", kind: RouteManagement, serve: (*adminRequest).listKeyAssignments},
	{pattern: "POST /guardrails/{id}/assignments/keys", kind: RouteManagement, serve: (*adminRequest).assignKeys},
	{pattern: "POST /guardrails/{id}/assignments/keys/remove", kind: RouteManagement, serve: (*adminRequest).unassignKeys},
	{pattern: "GET /guardrails/{id}/assignments/members", kind: RouteManagement, serve: (*adminRequest).listMemberAssignments},
	{pattern: "POST /guardrails/{id}/assignments/members", kind: RouteManagement, serve: (*adminRequest).assignMembers},
	{pattern: "POST /guardrails/{id}/assignments/members/remove", kind: RouteManagement, serve: (*adminRequest).unassignMembers},
	{pattern: "GET /guardrails/assignments/keys", kind: RouteManagement, serve: (*adminRequest).listAllKeyAssignments},
	{pattern: "GET /guardrails/assignments/members", kind: RouteManagement, serve: (*adminRequest).listAllMemberAssignments},

	// SCIM configuration exists for organizations only: a personal
	// account's management key gets 404 on any of these paths.
	{pattern: "/scim", kind: RouteManagement, guard: requireOrganization},
	{pattern: "GET /scim/group-mappings", kind: RouteManagement, serve: (*adminRequest).listSCIMMappings},
	{pattern: "POST /scim/group-mappings", kind: RouteManagement, serve: (*adminRequest).createSCIMMapping},
	{pattern: "GET /scim/group-mappings/{id}", kind: RouteManagement, serve: (*adminRequest).getSCIMMapping},
	{pattern: "PATCH /scim/group-mappings/{id}", kind: RouteManagement, serve: (*adminRequest).updateSCIMMapping},
	{pattern: "DELETE /scim/group-mappings/{id}", kind: RouteManagement, serve: (*adminRequest).deleteSCIMMapping},
	{pattern: "GET /scim/groups", kind: RouteManagement, serve: (*adminRequest).listSCIMGroups},
	{pattern: "POST /scim/sync-jobs", kind: RouteManagement, serve: (*adminRequest).createSCIMSyncJob},
	{pattern: "GET /scim/sync-jobs/{id}", kind: RouteManagement, serve: (*adminRequest).getSCIMSyncJob},
}

// route is what the table says about one request.
type route struct {
	kind RouteKind
	sub  string // the path below APIPrefix, without one trailing slash
	*routeEntry
}

// routeFor looks the request up in the table; ok is false for paths
// outside APIPrefix. An administrative request is matched on the ServeMux,
// which sets its path values on r (r.PathValue); the others need no more
// than ClassifyRoute.
func routeFor(r *http.Request) (route, bool) {
	kind, sub, ok := ClassifyRoute(r.URL.Path)
	if !ok {
		return route{}, false
	}
	return resolveRoute(r, kind, sub), true
}

// resolveRoute is routeFor for a path already classified (once per
// request, by the pipeline): administrative routes are looked up in the mux,
// which sets r's path values.
func resolveRoute(r *http.Request, kind RouteKind, sub string) route {
	rt := route{kind: kind, sub: sub, routeEntry: noEndpoint}
	if rt.administrative() {
		var c routeCapture
		routes.mux.ServeHTTP(&c, r)
		// No entry: ServeMux redirects a path that is not clean ("//",
		// "/../"), and no route is written that way.
		if c.entry != nil {
			rt.routeEntry = c.entry
		}
	}
	return rt
}

// administrative reports whether Admin serves the route.
func (rt route) administrative() bool {
	return rt.kind == RouteManagement || rt.kind == RouteAnyKey || rt.kind == RouteKeyless
}

// serve answers an administrative request: the group's guard, then the
// endpoint, 405 for a method the path does not take, 404 for an unknown
// path.
func (rt route) serve(ar *adminRequest) *apierror.Error {
	if rt.guard != nil {
		if apiErr := rt.guard(ar); apiErr != nil {
			return apiErr
		}
	}
	switch {
	case rt.handler != nil && rt.method == ar.r.Method:
		return rt.handler(ar)
	case rt.allow != nil:
		e := apierror.New(http.StatusMethodNotAllowed, "Method "+ar.r.Method+" is not allowed on "+ar.r.URL.Path)
		e.Header = http.Header{"Allow": {*rt.allow}}
		return e
	}
	return apierror.NotFound("Not found: " + ar.r.Method + " " + ar.r.URL.Path)
}

// ClassifyRoute returns the route's kind and its path below APIPrefix;
// paths outside APIPrefix are RouteUnknown with ok false. It reads the
// table's groups and its endpoints outside them, by string comparison
// alone, so that the request path can ask it at no cost.
func ClassifyRoute(path string) (kind RouteKind, sub string, ok bool) {
	sub, ok = strings.CutPrefix(path, APIPrefix)
	if !ok || (sub != "" && sub[0] != '/') {
		return RouteUnknown, "", false
	}
	sub = strings.TrimSuffix(sub, "/")
	if kind, ok := routes.exact[sub]; ok {
		return kind, sub, true
	}
	for _, g := range routes.groups {
		if strings.HasPrefix(sub, g.path) && (len(sub) == len(g.path) || sub[len(g.path)] == '/') {
			return g.kind, sub, true
		}
	}
	return RouteUnknown, sub, true
}

// routeEntry is the handler the mux holds for one registered pattern; the
// mux only finds it (and sets the path values), Admin serves it.
type routeEntry struct {
	method   string       // an endpoint's method; "" for a group or a path's other methods
	handler  adminHandler // an endpoint's handler, wildcards bound
	allow    *string      // for an endpoint's path: the methods it takes
	guard    adminHandler // the enclosing group's guard
	declared RouteKind    // the key kind the table gives the pattern
}

// ServeHTTP reports the entry the mux matched to the routeCapture.
func (e *routeEntry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if c, ok := w.(*routeCapture); ok {
		c.entry = e
	}
}

// noEndpoint is the entry of a path without an administrative endpoint.
var noEndpoint = new(routeEntry)

// routeCapture is the writer of a match: it learns the entry and
// swallows what the mux itself would answer (a redirect).
type routeCapture struct{ entry *routeEntry }

func (*routeCapture) Header() http.Header         { return http.Header{} }
func (*routeCapture) Write(b []byte) (int, error) { return len(b), nil }
func (*routeCapture) WriteHeader(int)             {}

// routeGroup is a group of the table, for ClassifyRoute.
type routeGroup struct {
	path string
	kind RouteKind
}

// routeTable is apiRoutes compiled.
type routeTable struct {
	mux    *http.ServeMux
	groups []routeGroup         // longest path first
	exact  map[string]RouteKind // endpoint paths outside every group
}

var routes = compileRoutes(apiRoutes)

// compileRoutes registers the table on a ServeMux. Every pattern is also
// registered with a trailing slash ({$}), which is trimmed as it was
// always; every endpoint path also without its method, to answer 405 with
// the methods it takes; every group as its path and the subtree below.
func compileRoutes(table []apiRoute) routeTable {
	t := routeTable{mux: http.NewServeMux(), exact: map[string]RouteKind{}}
	handle := func(path string, e *routeEntry) {
		t.mux.Handle(e.method+" "+APIPrefix+path, e)
		if !strings.HasSuffix(path, "/") {
			t.mux.Handle(e.method+" "+APIPrefix+path+"/{$}", e)
		}
	}
	groups := map[string]apiRoute{}
	for _, rt := range table {
		if method, path, ok := strings.Cut(rt.pattern, " "); !ok {
			groups[method] = rt
			t.groups = append(t.groups, routeGroup{path: method, kind: rt.kind})
		} else if path == "" {
			panic("route " + rt.pattern + ": no path")
		}
	}
	slices.SortFunc(t.groups, func(a, b routeGroup) int { return len(b.path) - len(a.path) })
	enclosing := func(path string) (apiRoute, bool) {
		for _, g := range t.groups {
			if strings.HasPrefix(path, g.path) && (len(path) == len(g.path) || path[len(g.path)] == '/') {
				return groups[g.path], true
			}
		}
		return apiRoute{}, false
	}

	paths := map[string]*routeEntry{} // each endpoint path's entry for other methods
	methods := map[string][]string{}
	for _, rt := range table {
		method, path, ok := strings.Cut(rt.pattern, " ")
		if !ok {
			continue
		}
		g, inGroup := enclosing(path)
		switch {
		case inGroup && g.kind != rt.kind:
			panic(fmt.Sprintf("route %s: kind %d inside group %s of kind %d", rt.pattern, rt.kind, g.pattern, g.kind))
		case !inGroup && strings.Contains(path, "{"):
			panic("route " + rt.pattern + ": a path with wildcards must lie in a group")
		case !inGroup:
			t.exact[path] = rt.kind
		}
		names := wildcards(path)
		other := paths[path]
		if other == nil {
			other = &routeEntry{allow: new(string), guard: g.guard, declared: rt.kind}
			paths[path] = other
			handle(path, other)
		}
		methods[path] = append(methods[path], method)
		handle(path, &routeEntry{method: method, handler: bind(rt.pattern, rt.serve, names),
			allow: other.allow, guard: g.guard, declared: rt.kind})
	}
	for path, e := range paths {
		slices.Sort(methods[path])
		*e.allow = strings.Join(methods[path], ", ")
	}
	for path, g := range groups {
		e := &routeEntry{guard: g.guard, declared: g.kind}
		if paths[path] == nil {
			handle(path, e)
		}
		t.mux.Handle(APIPrefix+path+"/", e)
	}
	t.mux.Handle(APIPrefix, noEndpoint)
	t.mux.Handle(APIPrefix+"/", noEndpoint)
	return t
}

// wildcards returns the names of a path's wildcards, in order.
func wildcards(path string) []string {
	var names []string
	for seg := range strings.SplitSeq(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			names = append(names, strings.TrimSuffix(name, "}"))
		}
	}
	return names
}

// bind adapts an endpoint's handler to adminHandler, passing it the path
// values of names.
func bind(pattern string, serve any, names []string) adminHandler {
	switch h := serve.(type) {
	case adminHandler:
		if len(names) == 0 {
			return h
		}
	case func(*adminRequest) *apierror.Error:
		if len(names) == 0 {
			return h
		}
	case func(*adminRequest, string) *apierror.Error:
		if len(names) == 1 {
			return func(ar *adminRequest) *apierror.Error { return h(ar, ar.r.PathValue(names[0])) }
		}
	case func(*adminRequest, string, string) *apierror.Error:
		if len(names) == 2 {
			return func(ar *adminRequest) *apierror.Error {
				return h(ar, ar.r.PathValue(names[0]), ar.r.PathValue(names[1]))
			}
		}
	}
	panic(fmt.Sprintf("route %s: handler %T does not take its %d path values", pattern, serve, len(names)))
}

// with adapts a handler of a resource that open prepares (or refuses).
func with[R any](open func(*adminRequest) (R, *apierror.Error), h func(R) *apierror.Error) adminHandler {
	return func(ar *adminRequest) *apierror.Error {
		req, apiErr := open(ar)
		if apiErr != nil {
			return apiErr
		}
		return h(req)
	}
}

// withID is with for a handler of one item.
func withID[R any](open func(*adminRequest) (R, *apierror.Error), h func(R, string) *apierror.Error) func(*adminRequest, string) *apierror.Error {
	return func(ar *adminRequest, id string) *apierror.Error {
		req, apiErr := open(ar)
		if apiErr != nil {
			return apiErr
		}
		return h(req, id)
	}
}

// requireOrganization refuses a personal account's management key
// (SPEC.md 4.3 rule 2).
func requireOrganization(ar *adminRequest) *apierror.Error {
	_, apiErr := ar.orgAccount()
	return apiErr
}

// IsGroupPath reports whether sub is the path of a group of the route
// table of kind (an inference endpoint such as /chat/completions).
func IsGroupPath(sub string, kind RouteKind) bool {
	for _, g := range routes.groups {
		if g.path == sub {
			return g.kind == kind
		}
	}
	return false
}
