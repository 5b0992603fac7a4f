package dashboard

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/dashboard/oidc"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testissuer"
)

// sealingGateway is fakeGateway with a byok_encryption_key.
type sealingGateway struct {
	fakeGateway
	sealer *storage.Sealer
}

func (g sealingGateway) BYOKSealer() *storage.Sealer { return g.sealer }

// oidcBrowser is a browser (cookies, redirects followed) of a dashboard
// served over HTTP.
type oidcBrowser struct {
	t   *testing.T
	srv *httptest.Server
	c   *http.Client
}

func (b *oidcBrowser) get(path string) (int, string) {
	b.t.Helper()
	res, err := b.c.Get(b.srv.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// The whole sign-in in a browser: the sign-in page's entry, the
// organization's page, the provider, the callback, the member's session.
func TestOIDCSignInStartsTheMembersSession(t *testing.T) {
	st := openStore(t)
	a, admin, member := org(t, st)
	sealer, err := storage.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Dashboard{SignInAttempts: 8}
	if err := d.setup(sealingGateway{fakeGateway{st}, sealer}, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	is := testissuer.New(t, "tollgate", "client-secret")
	if _, _, err := oidc.StoreOf(st).Put(a.ID, oidc.Settings{Issuer: is.URL, ClientID: "tollgate", ClientSecret: "client-secret"}, sealer); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := d.ServeHTTP(w, r, nil); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	newBrowser := func() *oidcBrowser {
		jar, _ := cookiejar.New(nil)
		return &oidcBrowser{t: t, srv: srv, c: &http.Client{Jar: jar}}
	}

	b := newBrowser()
	if code, body := b.get("/dashboard/signin"); code != 200 || !strings.Contains(body, `href="/dashboard/signin/oidc"`) ||
		!strings.Contains(body, "Sign in with your identity provider") {
		t.Fatalf("sign-in page %d %s", code, body)
	}
	if code, body := b.get("/dashboard/signin/oidc"); code != 200 || !strings.Contains(body, `action="/dashboard/signin/oidc/find"`) {
		t.Fatalf("organization page %d %s", code, body)
	}
	code, body := b.get("/dashboard/signin/oidc/find?account=" + url.QueryEscape(a.ID))
	link := `href="/dashboard/signin/oidc?account=` + a.ID + `"`
	if code != 200 || !strings.Contains(body, link) || !strings.Contains(body, "Acme") {
		t.Fatalf("find %d %s", code, body)
	}
	if code, _ := b.get("/dashboard/signin/oidc/find?account=org_nope"); code != 404 {
		t.Fatalf("find unknown: %d", code)
	}

	is.SignIn(testissuer.User{Subject: "idp-bob", Email: "bob@example.com", EmailVerified: true})
	if code, body := b.get("/dashboard/signin/oidc?account=" + a.ID); code != 200 || !strings.Contains(body, "Acme") {
		t.Fatalf("after sign-in %d %s", code, body)
	}
	u, _ := url.Parse(srv.URL + "/dashboard/")
	var sess *http.Cookie
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == CookieName {
			sess = c
		}
	}
	if sess == nil {
		t.Fatal("no session cookie")
	}
	rec, ok := StoreOf(st).session(sess.Value)
	if !ok || rec.Principal.AccountID != a.ID || rec.Principal.MemberID != member.ID || rec.Principal.Role != RoleMember || rec.Principal.Method != "oidc" {
		t.Fatalf("session %+v %v", rec, ok)
	}

	// An admin gets the admin role; the session is a new one.
	is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@example.com", EmailVerified: true})
	b.get("/dashboard/signin/oidc?account=" + a.ID)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == CookieName {
			if c.Value == sess.Value {
				t.Fatal("the session id was kept across sign-ins")
			}
			if rec, ok := StoreOf(st).session(c.Value); !ok || rec.Principal.MemberID != admin.ID || rec.Principal.Role != RoleAdmin {
				t.Fatalf("admin session %+v", rec)
			}
		}
	}
	if _, ok := StoreOf(st).session(sess.Value); ok {
		t.Fatal("the previous session lives on")
	}

	// A stranger gets a clear page and no session.
	stranger := newBrowser()
	is.SignIn(testissuer.User{Subject: "idp-zed", Email: "zed@example.com", EmailVerified: true})
	if code, body := stranger.get("/dashboard/signin/oidc?account=" + a.ID); code != 403 || !strings.Contains(body, "You are not a member of Acme") {
		t.Fatalf("stranger %d %s", code, body)
	}
	for _, c := range stranger.c.Jar.Cookies(u) {
		if c.Name == CookieName {
			t.Fatal("a stranger got a session")
		}
	}
	// Callbacks count as sign-in attempts: past the cap, 429.
	var last int
	for range 10 {
		last, _ = stranger.get("/dashboard/signin/oidc/callback?code=x&state=y")
	}
	if last != http.StatusTooManyRequests {
		t.Fatalf("after 10 attempts: %d", last)
	}
}
