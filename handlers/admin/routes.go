package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routetable"
)

// APIPrefix is where every route of the public API lives.
const APIPrefix = "/api/v1"

// RouteKind says which key may call a route.
type RouteKind uint8

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

// Op is what the pipeline (package handlers) does on a route Admin does
// not serve. There, a request whose method the op does not take is
// answered 405 on an inference route's own path (OpInfer), 404 anywhere
// else.
type Op uint8

const (
	OpNone Op = iota // Admin's routes, unknown paths
	// OpInfer is an inference route's own path: a POST reaches a provider
	// in the route's dialect (APIRoute.Dialect).
	OpInfer
	// OpInferBelow is a path below an inference route: a POST reaches a
	// provider as it is (dialect.Other).
	OpInferBelow
	OpCountTokens         // POST /messages/count_tokens, answered by the gateway
	OpInputTokens         // POST /responses/input_tokens, likewise
	OpListModels          // GET /models
	OpListUserModels      // GET /models/user
	OpCountModels         // GET /models/count
	OpListProviders       // GET /providers
	OpModelEndpoints      // GET /models/{author}/{slug}/endpoints
	OpGetModel            // GET /model/{author}/{slug}
	OpZDREndpoints        // GET /endpoints/zdr
	OpListImageModels     // GET /images/models
	OpImageModelEndpoints // GET /images/models/{author}/{slug}/endpoints
	// OpListEmbeddingsModels is GET /embeddings/models: the models whose
	// output is embeddings.
	OpListEmbeddingsModels
)

// Takes reports whether the op serves method: the catalog's lists GET
// (and HEAD), the others POST.
func (o Op) Takes(method string) bool {
	switch o {
	case OpNone:
		return false
	case OpListModels, OpListUserModels, OpCountModels, OpListProviders, OpModelEndpoints, OpGetModel, OpZDREndpoints,
		OpListImageModels, OpImageModelEndpoints, OpListEmbeddingsModels:
		return method == http.MethodGet || method == http.MethodHead
	}
	return method == http.MethodPost
}

// APIRoute is what the route table says about a request's path, classified
// once per request (ClassifyRoute) and carried by the pipeline.
type APIRoute struct {
	Sub  string // the path below APIPrefix, without one trailing slash
	Kind RouteKind
	Op   Op
	// dialectIx is the route's dialect, an index of dialects: the
	// pipeline copies an APIRoute per request, kept at three words.
	dialectIx uint8
}

// dialects are the dialect kinds of the inference and token counting
// routes, and "" for the others.
var dialects = [...]dialect.Kind{"", dialect.Chat, dialect.Responses, dialect.Messages, dialect.Other}

// Dialect is the API the client speaks on an inference or token counting
// route; "" on the others.
func (a APIRoute) Dialect() dialect.Kind { return dialects[a.dialectIx] }

// withDialect is a with its dialect k (one of dialects).
func (a APIRoute) withDialect(k dialect.Kind) APIRoute {
	i := slices.Index(dialects[:], k)
	if i < 0 {
		panic("route dialect " + string(k) + ": not in dialects")
	}
	a.dialectIx = uint8(i)
	return a
}

// adminHandler serves one administrative route.
type adminHandler func(ar *adminRequest) *apierror.Error

// apiRoute is one entry of the public API's route table.
type apiRoute struct {
	// pattern is an http.ServeMux pattern relative to APIPrefix. With a
	// method it is one endpoint: Admin's (serve) or the pipeline's (op).
	// Without one it is a group: the path and every path below it, for
	// any method.
	pattern string
	kind    RouteKind
	// serve is an endpoint's handler: an adminHandler, or a method of
	// adminRequest taking the pattern's wildcards, in order, as strings.
	serve any
	// guard runs first on every request to a group's paths (including
	// unknown ones and wrong methods); its error is the answer.
	guard adminHandler
	// op is what the pipeline does on a route Admin does not serve: an
	// endpoint's, or OpInfer for an inference route's group; dialect is
	// the API its client speaks.
	op      Op
	dialect dialect.Kind

	handler adminHandler // serve, its wildcards bound (compileRoutes)
}

// apiRoutes is the public API, each route once with the key kind it needs
// (the administrative routes a management key, the inference routes a
// regular one). The pipeline classifies each request by it once
// (ClassifyRoute: key kind, op, dialect) and Admin dispatches by it
// (resolveRoute).
//
// The pipeline (package handlers) serves the routes with an op: the
// inference routes, each in its dialect, whose POST reaches a provider
// (no other request does: other methods get 405, other paths 404), the
// token counts and the catalog's lists.
// A group gives its unlisted paths its key kind, so that a caller learns
// a path does not exist only once authorized: 404 then.
var apiRoutes = []apiRoute{
	{pattern: "/chat/completions", kind: RouteInference, op: OpInfer, dialect: dialect.Chat},
	{pattern: "/completions", kind: RouteInference, op: OpInfer, dialect: dialect.Other},
	{pattern: "/responses", kind: RouteInference, op: OpInfer, dialect: dialect.Responses},
	{pattern: "POST /responses/input_tokens", kind: RouteInference, op: OpInputTokens, dialect: dialect.Responses},
	{pattern: "/embeddings", kind: RouteInference, op: OpInfer, dialect: dialect.Other},
	{pattern: "GET /embeddings/models", kind: RouteInference, op: OpListEmbeddingsModels},
	{pattern: "/rerank", kind: RouteInference, op: OpInfer, dialect: dialect.Other},
	{pattern: "POST /images", kind: RouteInference, op: OpInfer, dialect: dialect.Other},
	// OpenAI's path of the same call, which its SDK's images.generate posts to.
	{pattern: "POST /images/generations", kind: RouteInference, op: OpInfer, dialect: dialect.Other},
	{pattern: "POST /audio/speech", kind: RouteInference, op: OpInfer, dialect: dialect.Other},
	{pattern: "POST /audio/transcriptions", kind: RouteInference, op: OpInfer, dialect: dialect.Other},
	{pattern: "/messages", kind: RouteInference, op: OpInfer, dialect: dialect.Messages},
	{pattern: "POST /messages/count_tokens", kind: RouteInference, op: OpCountTokens, dialect: dialect.Messages},

	{pattern: "/models/user", kind: RouteInference},
	{pattern: "GET /models/user", kind: RouteInference, op: OpListUserModels},
	{pattern: "/models", kind: RoutePublic},
	{pattern: "GET /models", kind: RoutePublic, op: OpListModels},
	{pattern: "GET /models/count", kind: RoutePublic, op: OpCountModels},
	{pattern: "GET /models/{author}/{slug}/endpoints", kind: RoutePublic, op: OpModelEndpoints},
	{pattern: "/model", kind: RoutePublic},
	{pattern: "GET /model/{author}/{slug}", kind: RoutePublic, op: OpGetModel},
	{pattern: "/endpoints", kind: RoutePublic},
	{pattern: "GET /endpoints/zdr", kind: RoutePublic, op: OpZDREndpoints},
	{pattern: "/images/models", kind: RoutePublic},
	{pattern: "GET /images/models", kind: RoutePublic, op: OpListImageModels},
	{pattern: "GET /images/models/{author}/{slug}/endpoints", kind: RoutePublic, op: OpImageModelEndpoints},
	{pattern: "/providers", kind: RoutePublic},
	{pattern: "GET /providers", kind: RoutePublic, op: OpListProviders},

	{pattern: "GET /generation", kind: RouteAnyKey, serve: (*adminRequest).getGeneration},

	{pattern: "GET /key", kind: RouteAnyKey, serve: (*adminRequest).currentKey},

	// The connect flow (OAuth PKCE: createAuthCode, exchangeAuthCode): a code for a management
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

	{pattern: "/response-cache", kind: RouteManagement},
	{pattern: "DELETE /response-cache", kind: RouteManagement, serve: (*adminRequest).purgeResponseCache},

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

	// Presets are read with any key of their account and made with a
	// management key only (putPreset: the reference's 403).
	{pattern: "/presets", kind: RouteAnyKey},
	{pattern: "GET /presets", kind: RouteAnyKey, serve: (*adminRequest).listPresets},
	{pattern: "GET /presets/{slug}", kind: RouteAnyKey, serve: (*adminRequest).getPreset},
	{pattern: "PATCH /presets/{slug}", kind: RouteAnyKey, serve: (*adminRequest).updatePreset},
	{pattern: "GET /presets/{slug}/versions", kind: RouteAnyKey, serve: (*adminRequest).listPresetVersions},
	{pattern: "GET /presets/{slug}/versions/{version}", kind: RouteAnyKey, serve: (*adminRequest).getPresetVersion},
	{pattern: "POST /presets/{slug}/chat/completions", kind: RouteAnyKey, serve: (*adminRequest).putPresetChat},
	{pattern: "POST /presets/{slug}/messages", kind: RouteAnyKey, serve: (*adminRequest).putPresetMessages},
	{pattern: "POST /presets/{slug}/responses", kind: RouteAnyKey, serve: (*adminRequest).putPresetResponses},

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

// route is what the table says about one administrative request.
type route struct {
	APIRoute
	*routetable.Match[apiRoute]
}

// routeFor looks the request up in the table; ok is false for paths
// outside APIPrefix. An administrative request is matched on the ServeMux,
// which sets its path values on r (r.PathValue); the others need no more
// than ClassifyRoute.
func routeFor(r *http.Request) (route, bool) {
	api, ok := ClassifyRoute(r.URL.Path)
	if !ok {
		return route{}, false
	}
	return route{api, matchFor(r, api.Kind)}, true
}

// resolveRoute is routeFor for a path already classified (once per
// request, by the pipeline).
func resolveRoute(r *http.Request, api APIRoute) route {
	return route{api, matchFor(r, api.Kind)}
}

// matchFor looks a route of kind up in the mux, which sets r's path
// values, when it is administrative; noMatch for the others and for a
// path that is not clean ("//", "/../"), which no route is written as.
func matchFor(r *http.Request, kind RouteKind) *routetable.Match[apiRoute] {
	if kind.administrative() {
		if m := routes.Lookup(r); m != nil {
			return m
		}
	}
	return noMatch
}

// noMatch is the match of a path without an administrative route.
var noMatch = new(routetable.Match[apiRoute])

// administrative reports whether Admin serves the routes of kind k.
func (k RouteKind) administrative() bool {
	return k == RouteManagement || k == RouteAnyKey || k == RouteKeyless
}

// serve answers an administrative request: the group's guard, then the
// endpoint, 405 for a method the path does not take, 404 for an unknown
// path.
func (rt route) serve(ar *adminRequest) *apierror.Error {
	if rt.Group != nil && rt.Group.guard != nil {
		if apiErr := rt.Group.guard(ar); apiErr != nil {
			return apiErr
		}
	}
	switch {
	case rt.Endpoint != nil && rt.Endpoint.handler != nil && rt.Method == ar.r.Method:
		return rt.Endpoint.handler(ar)
	case rt.Allow != "":
		e := apierror.New(http.StatusMethodNotAllowed, "Method "+ar.r.Method+" is not allowed on "+ar.r.URL.Path)
		e.Header = http.Header{"Allow": {rt.Allow}}
		return e
	}
	return apierror.NotFound("Not found: " + ar.r.Method + " " + ar.r.URL.Path)
}

// ClassifyRoute returns what the table says about a path: its key kind,
// its path below APIPrefix, and the pipeline's op and dialect; paths
// outside APIPrefix are RouteUnknown with ok false. It reads the table's
// paths written without wildcards and its groups, by string comparison
// alone, so that the request path can ask it at no cost.
func ClassifyRoute(path string) (APIRoute, bool) {
	sub, ok := strings.CutPrefix(path, APIPrefix)
	if !ok || (sub != "" && sub[0] != '/') {
		return APIRoute{}, false
	}
	sub = strings.TrimSuffix(sub, "/")
	// The groups first: an inference route's own path, the hot one, is
	// a group's, and needs no map lookup.
	for i := range routes.groups {
		g := &routes.groups[i]
		if !strings.HasPrefix(sub, g.path) {
			continue
		}
		if len(sub) == len(g.path) {
			return APIRoute{Sub: sub, Kind: g.self.Kind, Op: g.self.Op, dialectIx: g.self.dialectIx}, true
		}
		if sub[len(g.path)] == '/' {
			c, ok := routes.exact[sub]
			if !g.named || !ok {
				c = g.below
			}
			c.Sub = sub
			return c, true
		}
	}
	c := routes.exact[sub]
	c.Sub = sub
	return c, true
}

// ResolveOp is the op of the endpoint whose method and path r matches
// (OpNone when none does), for a path ClassifyRoute cannot tell alone: one
// with wildcards (GET /models/{author}/{slug}/endpoints). It sets r's path
// values.
func ResolveOp(r *http.Request) Op {
	m := routes.Lookup(r)
	if m == nil || m.Endpoint == nil {
		return OpNone
	}
	return m.Endpoint.op
}

// routeTable is apiRoutes compiled.
type routeTable struct {
	*routetable.Table[apiRoute]
	// groups is each group's classification, longest path first: its own
	// path's, and the one of the paths below it the table does not name.
	groups []groupClass
	// exact is every path of the table written without wildcards that
	// is not a group's, with what ClassifyRoute answers for it.
	exact map[string]APIRoute
}

// groupClass is what ClassifyRoute answers for a group's paths.
type groupClass struct {
	path        string
	self, below APIRoute
	named       bool // exact holds paths below it
}

var routes = compileRoutes(apiRoutes)

// compileRoutes checks the table, binds each endpoint's handler to its
// wildcards and compiles it (routetable.Compile). Every route of a group
// has the group's kind; a path with wildcards lies in a group (ClassifyRoute
// finds it by the group); an endpoint is Admin's (a handler) or the
// pipeline's (an op the method takes), by its kind.
func compileRoutes(table []apiRoute) routeTable {
	table = append([]apiRoute(nil), table...) // the compiled table points into it
	t := routeTable{exact: map[string]APIRoute{}}
	t.Table = routetable.Compile(APIPrefix, table, func(rt *apiRoute) string { return rt.pattern })
	classify := func(path string, c APIRoute) {
		if prev, ok := t.exact[path]; ok && prev.Op != OpNone && c.Op != OpNone && prev != c {
			panic(fmt.Sprintf("route %s: op %d, and %d on the same path", path, c.Op, prev.Op))
		} else if ok && c.Op == OpNone {
			return
		}
		t.exact[path] = c
	}
	for i := range table {
		rt := &table[i]
		method, path, endpoint := strings.Cut(rt.pattern, " ")
		if !endpoint {
			if rt.op != OpNone && rt.op != OpInfer {
				panic("route " + rt.pattern + ": a group's op is OpInfer or none")
			}
			classify(method, APIRoute{Kind: rt.kind, Op: rt.op}.withDialect(rt.dialect))
			continue
		}
		g := t.Group(path)
		switch {
		case g != nil && g.kind != rt.kind:
			panic(fmt.Sprintf("route %s: kind %d inside group %s of kind %d", rt.pattern, rt.kind, g.pattern, g.kind))
		case g == nil && strings.Contains(path, "{"):
			panic("route " + rt.pattern + ": a path with wildcards must lie in a group")
		case !strings.Contains(path, "{"):
			classify(path, APIRoute{Kind: rt.kind, Op: rt.op}.withDialect(rt.dialect))
		}
		admin := rt.kind.administrative()
		switch {
		case admin && rt.op == OpNone:
			rt.handler = bind(rt.pattern, rt.serve, wildcards(path))
		case !admin && rt.serve == nil && rt.op.Takes(method):
		default:
			panic("route " + rt.pattern + ": an administrative route has a handler, any other an op that takes its method")
		}
	}
	for _, g := range table {
		if !strings.Contains(g.pattern, " ") {
			c := groupClass{path: g.pattern, self: t.exact[g.pattern], below: APIRoute{Kind: g.kind}}
			if g.op == OpInfer {
				c.below = APIRoute{Kind: g.kind, Op: OpInferBelow}.withDialect(dialect.Other)
			}
			t.groups = append(t.groups, c)
			delete(t.exact, g.pattern)
		}
	}
	slices.SortStableFunc(t.groups, func(a, b groupClass) int { return len(b.path) - len(a.path) })
	for i := range t.groups {
		for path := range t.exact {
			t.groups[i].named = t.groups[i].named || strings.HasPrefix(path, t.groups[i].path+"/")
		}
	}
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

// requireOrganization refuses a personal account's management key with
// 404: a personal account has no organization resources.
func requireOrganization(ar *adminRequest) *apierror.Error {
	_, apiErr := ar.orgAccount()
	return apiErr
}
