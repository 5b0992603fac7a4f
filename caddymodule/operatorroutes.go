package caddymodule

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routetable"
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
	{"GET /tollgate/accounts/{id}/oidc", (*operatorCall).showOIDC},
	{"PUT /tollgate/accounts/{id}/oidc", (*operatorCall).setOIDC},
	{"DELETE /tollgate/accounts/{id}/oidc", (*operatorCall).deleteOIDC},
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
	{"GET /tollgate/accounts/{id}/presets", forAccount},
	{"GET /tollgate/accounts/{id}/presets/{slug}", forAccount},
	{"PATCH /tollgate/accounts/{id}/presets/{slug}", forAccount},
	{"GET /tollgate/accounts/{id}/presets/{slug}/versions", forAccount},
	{"GET /tollgate/accounts/{id}/presets/{slug}/versions/{version}", forAccount},
	{"POST /tollgate/accounts/{id}/presets/{slug}/chat/completions", forAccount},
	{"GET /tollgate/generations/{gen}", (*operatorCall).generation},
	{"POST /tollgate/signin-links", (*operatorCall).createSignInLink},
	{"GET /tollgate/management-keys", func(c *operatorCall) (int, any, *apierror.Error) { return c.listMgmtKeys("") }},
	{"DELETE /tollgate/management-keys/{hash}", func(c *operatorCall) (int, any, *apierror.Error) {
		return c.revokeMgmtKey(c.r.PathValue("hash"))
	}},
}

// operatorTable is operatorRoutes compiled.
var operatorTable = routetable.Compile("", operatorRoutes, func(rt *operatorRoute) string { return rt.pattern })
