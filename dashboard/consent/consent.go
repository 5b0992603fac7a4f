// Package consent is the dashboard's side of the connect flow (OAuth PKCE,
// package handlers/connect): the consent page an app sends a person to,
// where the person, signed in, sees which app (its callback's origin)
// asks for a key and with what limit, and approves or refuses; and the
// person's "Connected apps" page, where they revoke the keys apps hold.
// It is a dashboard extension (dashboard.RegisterExtension): its pages are
// served under the dashboard's prefix, behind its sessions and CSRF
// checks, in its layout.
package consent

import (
	"embed"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dashboard"
	"github.com/tollgate-dev/caddy-tollgate/handlers/connect"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func init() { dashboard.RegisterExtension(mount) }

// Paths below the dashboard's prefix.
const (
	ConnectPath = "/connect" // the consent page
	AppsPath    = "/apps"    // the person's connected apps
)

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"money": func(a money.Amount) string { return "$" + a.String() },
	"date":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
}).ParseFS(templateFS, "templates/*.html"))

// pages serves one dashboard's consent and connected-apps pages.
type pages struct{ d *dashboard.Dashboard }

func mount(d *dashboard.Dashboard) error {
	p := pages{d}
	d.Handle("GET "+ConnectPath, dashboard.RequireSession(http.HandlerFunc(p.consentPage)))
	d.Handle("POST "+ConnectPath, dashboard.RequireSession(http.HandlerFunc(p.decide)))
	d.Handle("GET "+AppsPath, dashboard.RequireSession(http.HandlerFunc(p.appsPage)))
	d.Handle("POST "+AppsPath+"/{hash}/revoke", dashboard.RequireSession(http.HandlerFunc(p.revoke)))
	return nil
}

// requestFields are the authorization request's fields, carried from the
// consent page's query to its form.
var requestFields = []string{"callback_url", "code_challenge", "code_challenge_method", "limit",
	"usage_limit_type", "expires_at", "key_label", "workspace_id"}

// member is the person a session speaks for, whose key an app would get:
// the member, or a personal account's owner. An organization spoken for
// as a whole (a link without a member) or an operator has none.
func (p pages) member(r *http.Request) (st *storage.Store, s dashboard.Session, userID string, ok bool) {
	s, _ = dashboard.SessionFrom(r)
	st, err := p.d.Gateway().Store()
	if err != nil || s.AccountID == "" {
		return st, s, "", false
	}
	if s.MemberID != "" {
		return st, s, s.MemberID, true
	}
	acct, found := st.Account(s.AccountID)
	if !found || acct.Kind != storage.AccountPersonal {
		return st, s, "", false
	}
	return st, s, acct.OwnerUserID, true
}

// noMember is the page of a session without a person to give a key to.
func (p pages) noMember(w http.ResponseWriter, r *http.Request) {
	p.message(w, r, http.StatusForbidden, "Sign in as yourself to connect apps",
		"An app's key belongs to a person: sign in with a link issued for your own member of the account, then try again.")
}

type consentData struct {
	Prefix, Origin, AppName, CallbackURL, KeyName, Workspace string
	// UnicodeHost is the callback's host as the app wrote it, when it is
	// not ASCII: shown beside the origin's ASCII form, which is the one
	// no letter of another alphabet can disguise.
	UnicodeHost      string
	AccountName, Who string
	Limit            *money.Amount
	LimitReset       money.Interval
	ExpiresAt        *time.Time
	Fields           [][2]string
	CSRF             template.HTML
	CodeTTL          time.Duration
}

// consentPage shows what the app asks for, with Approve and Refuse. A
// request that breaks the rules is not sent back to its callback (it may
// not be the app's): the page says what is wrong.
func (p pages) consentPage(w http.ResponseWriter, r *http.Request) {
	req, apiErr := connect.ParseQuery(r.URL.Query())
	if apiErr != nil {
		p.message(w, r, apiErr.Status, "This app's request cannot be approved", apiErr.Message)
		return
	}
	st, s, user, ok := p.member(r)
	if !ok {
		p.noMember(w, r)
		return
	}
	acct, _ := st.Account(s.AccountID)
	_, name, origin := req.App()
	data := consentData{
		Prefix: p.d.Prefix, Origin: origin, AppName: name, CallbackURL: req.CallbackURL, KeyName: req.KeyName(),
		Workspace: req.WorkspaceID, AccountName: acct.Name, Who: user, UnicodeHost: connect.UnicodeHost(req.CallbackURL),
		Limit: req.Limit, LimitReset: req.LimitReset, ExpiresAt: req.ExpiresAt,
		CSRF: dashboard.CSRFField(r), CodeTTL: connect.CodeTTL(p.d.Gateway()),
	}
	q := r.URL.Query()
	for _, f := range requestFields {
		if q.Has(f) {
			data.Fields = append(data.Fields, [2]string{f, q.Get(f)})
		}
	}
	p.render(w, r, http.StatusOK, "Connect "+name, "", "connect", data)
}

// decide takes the person's answer (the form carries the request again,
// checked again) and sends them back to the app: with a code on approval,
// error=access_denied on refusal.
func (p pages) decide(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		p.message(w, r, http.StatusBadRequest, "This form could not be read", "Go back, reload the page and try again.")
		return
	}
	v := url.Values{}
	for _, f := range requestFields {
		if r.PostForm.Has(f) {
			v.Set(f, r.PostForm.Get(f))
		}
	}
	req, apiErr := connect.ParseQuery(v)
	if apiErr != nil {
		p.message(w, r, apiErr.Status, "This app's request cannot be approved", apiErr.Message)
		return
	}
	st, s, user, ok := p.member(r)
	if !ok {
		p.noMember(w, r)
		return
	}
	id, _, origin := req.App()
	log := p.d.Logger().With(zap.String("account_id", s.AccountID), zap.String("member_id", user),
		zap.String("app_origin", origin), zap.Int64("app_id", id))
	back, err := url.Parse(req.CallbackURL)
	if err != nil { // checked by ParseQuery
		p.message(w, r, http.StatusBadRequest, "This app's request cannot be approved", "callback_url: expected an absolute URL")
		return
	}
	q := back.Query()
	if r.PostForm.Get("decision") != "approve" {
		log.Info("connect refused by the person")
		q.Set("error", "access_denied")
	} else {
		iss, apiErr := connect.Issue(st, s.AccountID, user, req, connect.CodeTTL(p.d.Gateway()))
		if apiErr != nil {
			p.fail(w, r, log, apiErr)
			return
		}
		log.Info("connect approved: code issued")
		q.Set("code", iss.Code)
	}
	back.RawQuery = q.Encode()
	p.returnTo(w, r, origin, back.String())
}

// returnTo sends the browser back to the app. Not a redirect: the
// dashboard's Content-Security-Policy (form-action 'self') stops a form's
// redirect to another site, and a Location header would put the code in
// the access log's response headers. The page refreshes to the app at
// once (no script needed) and links to it.
func (p pages) returnTo(w http.ResponseWriter, r *http.Request, origin, to string) {
	p.render(w, r, http.StatusOK, "Returning to "+origin, "", "return", map[string]string{"Origin": origin, "URL": to})
}

func (p pages) fail(w http.ResponseWriter, r *http.Request, log *zap.Logger, apiErr *apierror.Error) {
	if apiErr.Status >= 500 {
		log.Error("connect failed", zap.String("error", apiErr.Message))
	}
	p.message(w, r, apiErr.Status, "The app could not be connected", apiErr.Message)
}

type appsData struct {
	Prefix  string
	Apps    []appRow
	Revoked bool // just revoked one (the notice says so, naming nothing from the URL)
	CSRF    template.HTML
	Member  bool
}

type appRow struct {
	storage.APIKey
	Used      money.Amount
	Remaining *money.Amount
	Expired   bool
}

// appsPage lists the keys apps hold for the person, with a revoke button.
func (p pages) appsPage(w http.ResponseWriter, r *http.Request) {
	st, s, user, ok := p.member(r)
	data := appsData{Prefix: p.d.Prefix, Revoked: r.URL.Query().Has("revoked"), CSRF: dashboard.CSRFField(r), Member: ok}
	if ok {
		t := time.Now()
		for _, k := range connect.Apps(st, s.AccountID, user) {
			data.Apps = append(data.Apps, appRow{APIKey: k, Used: k.CapUsage(t), Remaining: k.LimitRemaining(t), Expired: k.Expired(t)})
		}
	}
	p.render(w, r, http.StatusOK, "Connected apps", "apps", "apps", data)
}

// revoke deletes a key an app holds for the person: at once, on every
// replica (the key's deletion is a record change like any other).
func (p pages) revoke(w http.ResponseWriter, r *http.Request) {
	st, s, user, ok := p.member(r)
	if !ok {
		p.noMember(w, r)
		return
	}
	hash := r.PathValue("hash")
	k, _ := st.APIKey(hash)
	if apiErr := connect.Revoke(st, s.AccountID, user, hash); apiErr != nil {
		p.fail(w, r, p.d.Logger(), apiErr)
		return
	}
	origin := ""
	if k.Connect != nil {
		origin = k.Connect.Origin
	}
	p.d.Logger().Info("connect key revoked by its member", zap.String("account_id", s.AccountID),
		zap.String("member_id", user), zap.String("key_hash", hash), zap.String("app_origin", origin))
	http.Redirect(w, r, p.d.Prefix+AppsPath+"?revoked", http.StatusSeeOther)
}

// message is a page with a title and one paragraph.
func (p pages) message(w http.ResponseWriter, r *http.Request, status int, title, detail string) {
	p.render(w, r, status, title, "", "message", map[string]string{"Detail": detail, "Prefix": p.d.Prefix})
}

func (p pages) render(w http.ResponseWriter, r *http.Request, status int, title, nav, tmpl string, data any) {
	body, err := dashboard.ExecuteBody(templates, tmpl, data)
	if err != nil {
		p.d.Logger().Error("connect page failed to render", zap.String("template", tmpl), zap.Error(err))
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	dashboard.Render(w, r, dashboard.Page{Title: title, Body: body, Status: status, Nav: nav})
}
