package dashboard

import (
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/dashboard/oidc"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Sign-in through an organization's OpenID Connect provider (package
// dashboard/oidc does the flow and the matching; this file mounts it):
//
//	GET <prefix>/signin/oidc?account=<id>   to the organization's provider
//	GET <prefix>/signin/oidc                the sign-in page's entry: asks for the organization
//	GET <prefix>/signin/oidc/find?account=  a link to that organization's provider
//	GET <prefix>/signin/oidc/callback       the provider's redirect: the member's session
//
// The organization is asked on a page of its own, whose answer is a link
// rather than a redirect: the sign-in page's Content-Security-Policy
// (form-action 'self') would stop a form's redirect to the provider.

func init() { RegisterExtension(addOIDCSignIn) }

// oidcSignIn is one dashboard's OIDC sign-in.
type oidcSignIn struct {
	d   *Dashboard
	mu  sync.Mutex
	svc *oidc.Service // made at the first sign-in, once the store is open
}

func addOIDCSignIn(d *Dashboard) error {
	o := &oidcSignIn{d: d}
	d.Handle("GET "+oidc.SignInPath, http.HandlerFunc(o.begin))
	d.Handle("GET "+oidc.SignInPath+"/find", http.HandlerFunc(o.find))
	d.Handle("GET "+oidc.CallbackPath, http.HandlerFunc(o.callback))
	d.AddSignInOption(SignInOption{Label: "Sign in with your identity provider", Path: oidc.SignInPath})
	return nil
}

func (o *oidcSignIn) service() (*oidc.Service, *storage.Store, error) {
	st, err := o.d.gw.Store()
	if err != nil {
		return nil, nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.svc == nil {
		o.svc = oidc.NewService(oidc.Options{Store: st, Sealer: o.d.gw.BYOKSealer(), Logger: o.d.logger.Named("oidc")})
	}
	return o.svc, st, nil
}

// callbackURL is the redirect URI registered at the provider, on the host
// the request came to.
func (o *oidcSignIn) callbackURL(r *http.Request) string {
	scheme := "http"
	if viaHTTPS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + o.d.Prefix + oidc.CallbackPath
}

func (o *oidcSignIn) unavailable(w http.ResponseWriter, r *http.Request) {
	o.d.errorPage(w, r, http.StatusServiceUnavailable, "The gateway's database is unavailable", "Retry in a moment.")
}

// limited counts a sign-in attempt against the client's cap; over it, it
// answers 429.
func (o *oidcSignIn) limited(w http.ResponseWriter, r *http.Request) bool {
	ip := clientIP(r)
	if o.d.limiter.allow(ip, now()) {
		return false
	}
	o.d.logger.Warn("dashboard sign-in refused: too many attempts", zap.String("remote_ip", ip), zap.String("method", "oidc"))
	w.Header().Set("Retry-After", "60")
	o.d.errorPage(w, r, http.StatusTooManyRequests, "Too many sign-in attempts", "Wait a minute, then sign in again.")
	return true
}

type oidcPageData struct {
	Prefix, Path, Account, Name string
}

// begin sends the browser to the organization's provider; without an
// organization it asks for one.
func (o *oidcSignIn) begin(w http.ResponseWriter, r *http.Request) {
	account := r.URL.Query().Get("account")
	if account == "" {
		o.d.page(w, r, http.StatusOK, "Sign in with your identity provider", "", "oidc_find",
			oidcPageData{Prefix: o.d.Prefix, Path: oidc.SignInPath})
		return
	}
	svc, _, err := o.service()
	if err != nil {
		o.unavailable(w, r)
		return
	}
	if e := svc.Begin(w, r, account, o.callbackURL(r)); e != nil {
		o.d.errorPage(w, r, e.Status, e.Title, e.Message)
	}
}

// find answers the organization asked for with a link to its provider.
func (o *oidcSignIn) find(w http.ResponseWriter, r *http.Request) {
	if o.limited(w, r) {
		return
	}
	account := r.URL.Query().Get("account")
	_, st, err := o.service()
	if err != nil {
		o.unavailable(w, r)
		return
	}
	acct, ok := st.Account(account)
	if _, has := oidc.StoreOf(st).Config(account); !ok || !has || acct.Kind != storage.AccountOrganization {
		o.d.errorPage(w, r, http.StatusNotFound, "No identity provider for this organization",
			"No organization with this ID signs in through an identity provider. Check the ID with your admin, or sign in with a link.")
		return
	}
	o.d.page(w, r, http.StatusOK, "Sign in with your identity provider", "", "oidc_continue",
		oidcPageData{Prefix: o.d.Prefix, Path: oidc.SignInPath, Account: acct.ID, Name: acct.Name})
}

// callback completes the sign-in and starts the member's session.
func (o *oidcSignIn) callback(w http.ResponseWriter, r *http.Request) {
	if o.limited(w, r) {
		return
	}
	svc, _, err := o.service()
	if err != nil {
		o.unavailable(w, r)
		return
	}
	id, e := svc.Finish(w, r, o.callbackURL(r))
	if e != nil {
		o.d.errorPage(w, r, e.Status, e.Title, e.Message)
		return
	}
	s, err := StartSession(w, r, Principal{AccountID: id.AccountID, MemberID: id.MemberID, Method: "oidc"})
	if err != nil {
		o.d.logger.Error("dashboard session could not start", zap.String("account_id", id.AccountID),
			zap.String("member_id", id.MemberID), zap.Error(err))
		o.d.errorPage(w, r, http.StatusServiceUnavailable, "Sign-in failed", "The gateway could not sign you in. Retry in a moment.")
		return
	}
	o.d.logger.Info("dashboard sign-in", append(sessionFields(s, r), zap.String("via", "oidc"))...)
	http.Redirect(w, r, o.d.Prefix+"/", http.StatusSeeOther)
}
