package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// fakeGateway is the tollgate app as the dashboard sees it, over a store.
type fakeGateway struct{ st *storage.Store }

func (g fakeGateway) Store() (*storage.Store, error) { return g.st, nil }
func (fakeGateway) Brand() string                    { return "service" }
func (fakeGateway) FreeModelLimits() gateway.FreeModelLimits {
	return gateway.FreeModelLimits{}.WithDefaults()
}
func (fakeGateway) Catalog() *catalog.Catalog              { return &catalog.Catalog{} }
func (fakeGateway) InFlightPolicy() billing.InFlightPolicy { return billing.InFlightPolicy{} }
func (fakeGateway) BYOKSealer() *storage.Sealer            { return nil }
func (fakeGateway) DefaultRateLimits() *storage.RateLimits { return nil }
func (fakeGateway) EgressPolicy() *egress.Policy           { return nil }

// testDashboard is a provisioned dashboard over a fresh store.
func testDashboard(t *testing.T) (*Dashboard, *storage.Store) {
	t.Helper()
	st := openStore(t)
	d := &Dashboard{}
	if err := d.setup(fakeGateway{st}, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	return d, st
}

// client is a browser of the dashboard: it keeps the cookie.
type client struct {
	t      *testing.T
	d      *Dashboard
	cookie *http.Cookie
}

func (c *client) do(method, path string, form url.Values, hdr ...string) *httptest.ResponseRecorder {
	c.t.Helper()
	var r *http.Request
	if form != nil {
		r = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, path, nil)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	if c.cookie != nil {
		r.AddCookie(c.cookie)
	}
	w := httptest.NewRecorder()
	if err := c.d.ServeHTTP(w, r, nil); err != nil {
		c.t.Fatal(err)
	}
	for _, ck := range w.Result().Cookies() {
		if ck.Name == CookieName {
			if ck.MaxAge < 0 {
				c.cookie = nil
			} else {
				c.cookie = ck
			}
		}
	}
	return w
}

// signIn signs c in with a new link for p.
func (c *client) signIn(st *storage.Store, p Principal) {
	c.t.Helper()
	token, _, err := StoreOf(st).IssueLink(p, time.Minute)
	if err != nil {
		c.t.Fatal(err)
	}
	w := c.do("POST", "/dashboard/signin", url.Values{"token": {token}})
	if w.Code != http.StatusSeeOther || c.cookie == nil {
		c.t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
}

func (c *client) csrf() string {
	s, ok := StoreOf(fakeStore(c.d)).session(c.cookie.Value)
	if !ok {
		c.t.Fatal("no session")
	}
	return sessionOf(s, c.cookie.Value).CSRF
}

func fakeStore(d *Dashboard) *storage.Store { st, _ := d.gw.Store(); return st }

func TestSignInSetsASafeCookieAndSignOutNeedsCSRF(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	c := &client{t: t, d: d}
	if w := c.do("GET", "/dashboard/", nil); w.Code != http.StatusSeeOther ||
		w.Header().Get("Location") != "/dashboard/signin?return_to="+url.QueryEscape("/dashboard/") {
		t.Fatalf("signed-out page: %d %q", w.Code, w.Header().Get("Location"))
	}
	c.signIn(st, Principal{AccountID: a.ID})
	if !c.cookie.HttpOnly || c.cookie.SameSite != http.SameSiteLaxMode || c.cookie.Path != "/dashboard/" || c.cookie.Secure {
		t.Fatalf("cookie %+v", c.cookie)
	}
	first := c.cookie.Value
	if w := c.do("GET", "/dashboard/", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Acme") {
		t.Fatalf("overview: %d", w.Code)
	}
	// A new sign-in replaces the session (rotation): the old cookie is dead.
	c.signIn(st, Principal{AccountID: a.ID})
	if c.cookie.Value == first {
		t.Fatal("session not rotated")
	}
	if _, ok := StoreOf(st).session(first); ok {
		t.Fatal("the previous session survived a new sign-in")
	}
	// State-changing requests need the session's CSRF token.
	for _, bad := range []url.Values{{}, {"csrf_token": {"forged"}}} {
		if w := c.do("POST", "/dashboard/signout", bad); w.Code != http.StatusForbidden {
			t.Fatalf("sign-out without CSRF: %d", w.Code)
		}
	}
	if w := c.do("POST", "/dashboard/signout", url.Values{"csrf_token": {c.csrf()}}, "Origin", "https://evil.example"); w.Code != http.StatusForbidden {
		t.Fatalf("cross-origin sign-out: %d", w.Code)
	}
	cookie := c.cookie.Value
	if w := c.do("POST", "/dashboard/signout", url.Values{"csrf_token": {c.csrf()}}); w.Code != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", w.Code, w.Body)
	}
	if _, ok := StoreOf(st).session(cookie); ok || c.cookie != nil {
		t.Fatal("session still alive after sign-out")
	}
}

func TestSignInCookieIsSecureOverTLS(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	token, _, _ := StoreOf(st).IssueLink(Principal{AccountID: a.ID}, time.Minute)
	r := httptest.NewRequest("POST", "https://gw.example/dashboard/signin", strings.NewReader("token="+token))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	_ = d.ServeHTTP(w, r, nil)
	cs := w.Result().Cookies()
	if len(cs) != 1 || !cs[0].Secure {
		t.Fatalf("cookies over TLS: %+v", cs)
	}
}

func TestSignInRefusals(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	c := &client{t: t, d: d}
	token, _, _ := StoreOf(st).IssueLink(Principal{AccountID: a.ID}, time.Minute)
	// From another site: refused, and the link is still usable.
	if w := c.do("POST", "/dashboard/signin", url.Values{"token": {token}}, "Sec-Fetch-Site", "cross-site"); w.Code != http.StatusForbidden {
		t.Fatalf("cross-site sign-in: %d", w.Code)
	}
	// A GET shows the link's page but does not use it.
	if w := c.do("GET", "/dashboard/signin?token="+token, nil); w.Code != http.StatusOK || c.cookie != nil {
		t.Fatalf("GET of the link: %d", w.Code)
	}
	// return_to stays on the dashboard.
	w := c.do("POST", "/dashboard/signin", url.Values{"token": {token}, "return_to": {"//evil.example/x"}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard/" {
		t.Fatalf("sign-in with a foreign return_to: %d %q", w.Code, w.Header().Get("Location"))
	}
	c.cookie = nil
	w = c.do("POST", "/dashboard/signin", url.Values{"token": {token}})
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not valid") || c.cookie != nil {
		t.Fatalf("used link: %d", w.Code)
	}
}

func TestSignInAttemptsAreRateLimited(t *testing.T) {
	d, _ := testDashboard(t)
	c := &client{t: t, d: d}
	for i := range DefaultSignInAttempts {
		if w := c.do("POST", "/dashboard/signin", url.Values{"token": {"tgl_forged"}}); w.Code != http.StatusBadRequest {
			t.Fatalf("attempt %d: %d", i, w.Code)
		}
	}
	w := c.do("POST", "/dashboard/signin", url.Values{"token": {"tgl_forged"}})
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("attempt past the cap: %d", w.Code)
	}
}

// The extension seam: a route mounted by an extension signs people in
// with StartSession and renders in the layout.
func TestExtensionStartsSessions(t *testing.T) {
	RegisterExtension(func(d *Dashboard) error {
		d.AddSignInOption(SignInOption{Label: "Sign in with Example SSO", Path: "/test-sso"})
		d.Handle("GET /test-sso", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !d.AllowSignIn(r) {
				d.ErrorPage(w, r, http.StatusTooManyRequests, "Too many", "wait")
				return
			}
			if _, err := StartSession(w, r, Principal{AccountID: r.URL.Query().Get("account"), Method: "sso"}); err != nil {
				d.ErrorPage(w, r, http.StatusForbidden, "No", err.Error())
				return
			}
			http.Redirect(w, r, d.ReturnTo(r.URL.Query().Get("return_to")), http.StatusSeeOther)
		}))
		return nil
	})
	defer func() { extMu.Lock(); extensions = extensions[:len(extensions)-1]; extMu.Unlock() }()
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	c := &client{t: t, d: d}
	if !strings.Contains(c.do("GET", "/dashboard/signin", nil).Body.String(), "Sign in with Example SSO") {
		t.Fatal("the sign-in page does not offer the extension's method")
	}
	if w := c.do("GET", "/dashboard/test-sso?account=org_nope", nil); w.Code != http.StatusForbidden || c.cookie != nil {
		t.Fatalf("unknown account: %d", w.Code)
	}
	w := c.do("GET", "/dashboard/test-sso?account="+a.ID+"&return_to=/dashboard/keys", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard/keys" || c.cookie == nil {
		t.Fatalf("extension sign-in: %d %q", w.Code, w.Header().Get("Location"))
	}
	s, ok := StoreOf(st).session(c.cookie.Value)
	if !ok || s.Principal.Method != "sso" || s.Principal.Role != RoleOwner {
		t.Fatalf("session %+v", s)
	}
}

// The static folder serves its files, never a listing of itself.
func TestStaticServesFilesOnly(t *testing.T) {
	d, _ := testDashboard(t)
	c := &client{t: t, d: d}
	if w := c.do("GET", "/dashboard/static/dashboard.css", nil); w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Type"), "text/css") {
		t.Fatalf("stylesheet: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	for _, path := range []string{"/dashboard/static/", "/dashboard/static/nope.css"} {
		w := c.do("GET", path, nil)
		if w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), `href="dashboard.js"`) {
			t.Fatalf("%s: %d, lists files: %v", path, w.Code, strings.Contains(w.Body.String(), `href="dashboard.js"`))
		}
	}
}

// A form the dashboard cannot read whole is refused with the reason,
// before any handler acts on the part it could read.
func TestUnreadableFormIsRefused(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID})
	keys := len(d.visibleKeys(st, Session{Principal: Principal{AccountID: a.ID}}, a, ""))

	big := c.form("name", strings.Repeat("k", maxFormBytes))
	if w := c.do("POST", "/dashboard/keys", big); w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "too large") {
		t.Fatalf("an oversized form: %d %s", w.Code, w.Body)
	}
	bad := httptest.NewRequest("POST", "/dashboard/keys", strings.NewReader("csrf_token="+c.csrf()+"&name=%zz"))
	bad.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	bad.AddCookie(c.cookie)
	w := httptest.NewRecorder()
	if err := d.ServeHTTP(w, bad, nil); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusBadRequest {
		t.Fatalf("a malformed form: %d %s", w.Code, w.Body)
	}
	if n := len(d.visibleKeys(st, Session{Principal: Principal{AccountID: a.ID}}, a, "")); n != keys {
		t.Fatalf("keys: %d before, %d after", keys, n)
	}
	// The same form, readable, creates the key.
	c.created(c.do("POST", "/dashboard/keys", c.form("name", "ok")))
}
