package caddymodule

import (
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
)

// operatorFunc answers a request with a status and a body to encode.
type operatorFunc func(c *operatorCall) (int, any, *apierror.Error)

// operatorRoute is one route of the operator API: an http.ServeMux
// pattern and its handler. A path value named id is an account, and one
// named member a member of it: operatorCall.load reads them first.
type operatorRoute struct {
	pattern string
	serve   operatorFunc
}

// operatorRoutes is the operator API, each route once.
var operatorRoutes = []operatorRoute{
	{"GET /tollgate/accounts", (*operatorCall).listAccounts},
	{"POST /tollgate/accounts", (*operatorCall).createAccount},
	{"GET /tollgate/accounts/{id}", func(c *operatorCall) (int, any, *apierror.Error) {
		return http.StatusOK, dataOf(newOperatorAccount(c.acct)), nil
	}},
	{"PATCH /tollgate/accounts/{id}", func(c *operatorCall) (int, any, *apierror.Error) { return c.updateAccount(c.acct.ID) }},
	{"GET /tollgate/accounts/{id}/credits", func(c *operatorCall) (int, any, *apierror.Error) { return c.listPurchases(c.acct) }},
	{"POST /tollgate/accounts/{id}/credits", func(c *operatorCall) (int, any, *apierror.Error) { return c.addCredits(c.acct.ID) }},
	{"GET /tollgate/accounts/{id}/management-keys", func(c *operatorCall) (int, any, *apierror.Error) { return c.listMgmtKeys(c.acct.ID) }},
	{"POST /tollgate/accounts/{id}/management-keys", func(c *operatorCall) (int, any, *apierror.Error) { return c.createMgmtKey(c.acct.ID) }},
	{"GET /tollgate/accounts/{id}/scim-token", (*operatorCall).showSCIMToken},
	{"POST /tollgate/accounts/{id}/scim-token", (*operatorCall).rotateSCIMToken},
	{"DELETE /tollgate/accounts/{id}/scim-token", (*operatorCall).revokeSCIMToken},
	{"GET /tollgate/accounts/{id}/members", (*operatorCall).listMembers},
	{"POST /tollgate/accounts/{id}/members", func(c *operatorCall) (int, any, *apierror.Error) { return c.createMember(c.acct.ID) }},
	{"GET /tollgate/accounts/{id}/members/{member}", func(c *operatorCall) (int, any, *apierror.Error) {
		return http.StatusOK, dataOf(newOperatorMember(c.member)), nil
	}},
	{"PATCH /tollgate/accounts/{id}/members/{member}", func(c *operatorCall) (int, any, *apierror.Error) { return c.updateMember(c.member) }},
	{"DELETE /tollgate/accounts/{id}/members/{member}", (*operatorCall).deactivateMember},
	// An account's API keys, activity, usage and generations: the public
	// management routes, served as the account (forAccount).
	{"GET /tollgate/accounts/{id}/keys", forAccount},
	{"POST /tollgate/accounts/{id}/keys", forAccount},
	{"GET /tollgate/accounts/{id}/keys/{hash}", forAccount},
	{"PATCH /tollgate/accounts/{id}/keys/{hash}", forAccount},
	{"DELETE /tollgate/accounts/{id}/keys/{hash}", forAccount},
	{"GET /tollgate/accounts/{id}/activity", forAccount},
	{"POST /tollgate/accounts/{id}/analytics/query", forAccount},
	{"GET /tollgate/accounts/{id}/generation", forAccount},
	{"GET /tollgate/generations/{gen}", (*operatorCall).generation},
	{"POST /tollgate/signin-links", (*operatorCall).createSignInLink},
	{"GET /tollgate/management-keys", func(c *operatorCall) (int, any, *apierror.Error) { return c.listMgmtKeys("") }},
	{"DELETE /tollgate/management-keys/{hash}", func(c *operatorCall) (int, any, *apierror.Error) {
		return c.revokeMgmtKey(c.r.PathValue("hash"))
	}},
}

// operatorEntry is what operatorMux holds for one registered pattern.
type operatorEntry struct {
	method string       // "" for the path's other methods
	serve  operatorFunc // nil for the path's other methods
	allow  *string      // the methods the path takes
}

// ServeHTTP reports the entry the mux matched to the operatorMatch.
func (e *operatorEntry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if m, ok := w.(*operatorMatch); ok {
		m.entry = e
	}
}

// operatorMatch is the writer of a match: it learns the entry and swallows
// what the mux itself would answer (404, redirects).
type operatorMatch struct{ entry *operatorEntry }

func (*operatorMatch) Header() http.Header         { return http.Header{} }
func (*operatorMatch) Write(b []byte) (int, error) { return len(b), nil }
func (*operatorMatch) WriteHeader(int)             {}

var operatorMux = compileOperatorRoutes(operatorRoutes)

// compileOperatorRoutes registers each route, also with a trailing slash,
// and each path without a method, to answer 405 with the methods it takes.
func compileOperatorRoutes(table []operatorRoute) *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(method, path string, e *operatorEntry) {
		mux.Handle(strings.TrimSpace(method+" "+path), e)
		mux.Handle(strings.TrimSpace(method+" "+path+"/{$}"), e)
	}
	paths := map[string]*operatorEntry{}
	methods := map[string][]string{}
	for _, rt := range table {
		method, path, _ := strings.Cut(rt.pattern, " ")
		other := paths[path]
		if other == nil {
			other = &operatorEntry{allow: new(string)}
			paths[path] = other
			handle("", path, other)
		}
		methods[path] = append(methods[path], method)
		handle(method, path, &operatorEntry{method: method, serve: rt.serve, allow: other.allow})
	}
	for path, e := range paths {
		slices.Sort(methods[path])
		*e.allow = strings.Join(methods[path], ", ")
	}
	return mux
}
