package dashboard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Role is what a signed-in person may do in the dashboard.
type Role string

const (
	// RoleOwner is the person of a personal account, or an organization
	// spoken for as a whole (a link issued without a member): everything
	// of the account.
	RoleOwner Role = "owner"
	// RoleAdmin is an organization admin: everything of the account.
	RoleAdmin Role = "admin"
	// RoleMember is an organization member: their own API keys, the
	// account's usage, and the workspaces they administer.
	RoleMember Role = "member"
	// RoleOperator is the gateway's staff without an account: the
	// operator pages only.
	RoleOperator Role = "operator"
)

// Principal is who a session is for. The store fills Role from the
// account and the member when a session starts and again at every
// request (so a caller sets AccountID, MemberID and Operator).
type Principal struct {
	// AccountID is the account signed in to; "" for an operator alone.
	AccountID string `json:"account_id,omitempty"`
	// MemberID is the organization member ("user_..."); "" for the
	// account's owner.
	MemberID string `json:"member_id,omitempty"`
	// Role is the member's organization role, RoleOwner without a member,
	// RoleOperator for an operator without an account.
	Role Role `json:"role"`
	// Operator grants the operator pages (accounts, credit top-ups, every
	// account's spend).
	Operator bool `json:"operator,omitempty"`
	// Method is how the person signed in: "link", "oidc", ...
	Method string `json:"method,omitempty"`
}

// CanManageAccount reports whether p may change the account's settings
// (organization settings, workspaces, guardrails, BYOK, destinations,
// every key).
func (p Principal) CanManageAccount() bool {
	return p.AccountID != "" && (p.Role == RoleOwner || p.Role == RoleAdmin)
}

// Session is a signed-in person's session.
type Session struct {
	Principal
	CreatedAt time.Time
	ExpiresAt time.Time
	// CSRF is the token forms of this session carry (CSRFField).
	CSRF string
}

// CookieName is the session cookie's name.
const CookieName = "tollgate_dashboard"

// ctxKey keys the request context values of this package.
type ctxKey int

const (
	ctxDashboard ctxKey = iota
	ctxSession
)

// from returns the dashboard serving r; nil outside it.
func from(r *http.Request) *Dashboard {
	d, _ := r.Context().Value(ctxDashboard).(*Dashboard)
	return d
}

// errNoDashboard: a session function was called on a request the
// dashboard does not serve.
var errNoDashboard = errors.New("dashboard: the request is not served by the dashboard handler")

// errNoStore: the gateway's database could not be opened.
var errNoStore = errors.New("dashboard: the gateway's database is unavailable")

// StartSession signs p in: it ends the request's current session if any
// (a new session id at every sign-in, so a planted cookie is worthless),
// stores a new session for p and sets its cookie (HttpOnly, SameSite=Lax,
// Secure over HTTPS, scoped to the dashboard's path). p.Method says how p
// signed in ("link", "oidc"). The store checks p (the account exists, the
// member is active) and fills its Role. Call it only on a request the
// dashboard serves (its handler, or a route added with Handle).
func StartSession(w http.ResponseWriter, r *http.Request, p Principal) (Session, error) {
	d := from(r)
	if d == nil {
		return Session{}, errNoDashboard
	}
	st := d.store()
	if st == nil {
		return Session{}, errNoStore
	}
	if c, err := r.Cookie(CookieName); err == nil {
		if err := st.deleteSession(c.Value); err != nil {
			return Session{}, err
		}
	}
	token, rec, err := st.createSession(p, d.sessionTTL())
	if err != nil {
		return Session{}, err
	}
	http.SetCookie(w, d.cookie(r, token, rec.ExpiresAt))
	return sessionOf(rec, token), nil
}

// SignOut ends the request's session and clears its cookie.
func SignOut(w http.ResponseWriter, r *http.Request) error {
	d := from(r)
	if d == nil {
		return errNoDashboard
	}
	st := d.store()
	if st == nil {
		return errNoStore
	}
	if c, err := r.Cookie(CookieName); err == nil {
		if err := st.deleteSession(c.Value); err != nil {
			return err
		}
	}
	c := d.cookie(r, "", time.Unix(0, 0))
	c.MaxAge = -1
	http.SetCookie(w, c)
	return nil
}

// SessionFrom returns the request's live session: the one RequireSession
// found, or the one its cookie names, with the role the member has now.
func SessionFrom(r *http.Request) (Session, bool) {
	if s, ok := r.Context().Value(ctxSession).(Session); ok {
		return s, true
	}
	d := from(r)
	if d == nil {
		return Session{}, false
	}
	st := d.store()
	c, err := r.Cookie(CookieName)
	if err != nil || st == nil {
		return Session{}, false
	}
	rec, ok := st.liveSession(c.Value, func(err error) {
		d.logger.Warn("dashboard session: the member's record could not be read from the database", zap.Error(err))
	})
	if !ok {
		return Session{}, false
	}
	return sessionOf(rec, c.Value), true
}

func sessionOf(rec sessionRecord, token string) Session {
	return Session{Principal: rec.Principal, CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt, CSRF: csrfToken(token)}
}

// csrfToken is the session's synchronizer token: derived from the cookie
// (which the page's script cannot read and another site cannot send with
// a form of its own), so it is bound to the session and stored nowhere.
func csrfToken(cookie string) string {
	h := sha256.Sum256([]byte("tollgate-dashboard-csrf\x00" + cookie))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// RequireSession serves next only for a signed-in request; others are
// redirected to the sign-in page with the page they asked for as
// return_to (a GET or HEAD; after any other method, the dashboard's home).
// On a state-changing method it also requires the session's CSRF token
// (the form field "csrf_token" or the X-CSRF-Token header): without it,
// 403 and a page that says so, nothing changed. next finds the session
// with SessionFrom.
func RequireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := from(r)
		if d == nil {
			http.Error(w, errNoDashboard.Error(), http.StatusInternalServerError)
			return
		}
		s, ok := SessionFrom(r)
		if !ok {
			back := d.Prefix + "/"
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				back = r.URL.RequestURI()
			}
			http.Redirect(w, r, d.Prefix+"/signin?return_to="+url.QueryEscape(back), http.StatusSeeOther)
			return
		}
		if !safeMethod(r.Method) && !CheckCSRF(r, s) {
			d.logger.Warn("dashboard request refused: missing or wrong CSRF token",
				sessionFields(s, r)...)
			d.errorPage(w, r, http.StatusForbidden, "This form has expired or did not come from this dashboard",
				"Nothing was changed. Go back, reload the page and try again.")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxSession, s)))
	})
}

// safeMethod reports whether m changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// CheckCSRF reports whether r carries s's CSRF token and, when the
// browser says where the request came from, comes from this site.
func CheckCSRF(r *http.Request, s Session) bool {
	if !sameOrigin(r) {
		return false
	}
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf_token")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) == 1
}

// sameOrigin is false when the browser reports a request from another
// site (Sec-Fetch-Site, or an Origin of another host).
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return false
		}
	}
	return true
}

// CSRFField is the hidden form field that carries the request's CSRF
// token; forms of pages served behind RequireSession include it.
func CSRFField(r *http.Request) template.HTML {
	s, ok := SessionFrom(r)
	if !ok {
		return ""
	}
	return template.HTML(`<input type="hidden" name="csrf_token" value="` + template.HTMLEscapeString(s.CSRF) + `">`)
}

// CSRFToken is the request's session CSRF token ("" without a session),
// for the X-CSRF-Token header of a script's request.
func CSRFToken(r *http.Request) string {
	s, _ := SessionFrom(r)
	return s.CSRF
}
