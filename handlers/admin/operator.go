package admin

import (
	"net/http"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// ServeForAccount serves the management route sub (a path below
// APIPrefix, such as "/keys/<hash>") for the operator, with the rights
// of one of acct's management keys: the operator API's keys, activity,
// usage and generation commands are the public routes' own code, so that
// no rule has a second implementation. Only routes a management key may
// call are served; r's path is replaced by the public one. It writes a success
// itself and returns an error for the caller to write in its own way.
func (a *Admin) ServeForAccount(w http.ResponseWriter, r *http.Request, acct storage.Account, sub string) *apierror.Error {
	return a.serveFor(w, r, acct, "", sub)
}

// ServeForMember is ServeForAccount for one of the organization's members
// who is not an admin (the dashboard's member session): the same routes
// and rules, except that what an admin set on a key (its limit, its
// disable) is refused to the member, 403.
func (a *Admin) ServeForMember(w http.ResponseWriter, r *http.Request, acct storage.Account, memberID, sub string) *apierror.Error {
	return a.serveFor(w, r, acct, memberID, sub)
}

func (a *Admin) serveFor(w http.ResponseWriter, r *http.Request, acct storage.Account, member, sub string) *apierror.Error {
	api, _ := ClassifyRoute(APIPrefix + sub)
	if api.Kind != RouteManagement && api.Kind != RouteAnyKey {
		return apierror.NotFound("Not found: " + r.Method + " " + APIPrefix + api.Sub)
	}
	store, err := a.gw.Store()
	if err != nil {
		return apierror.New(http.StatusServiceUnavailable, "tollgate database unavailable: "+err.Error())
	}
	r = r.Clone(r.Context())
	r.URL.Path, r.URL.RawPath = APIPrefix+api.Sub, ""
	id := &gateway.Identity{
		Principal: storage.Principal{Management: true, AccountID: acct.ID, Key: &storage.APIKey{}, MgmtKey: &storage.ManagementKey{}},
		Account:   &acct,
	}
	ar := &adminRequest{w: w, r: r, id: id, store: store, limits: a.gw.FreeModelLimits(), gw: a.gw, member: member, logger: a.logger}
	return resolveRoute(r, api).serve(ar)
}
