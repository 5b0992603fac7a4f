package oidc

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tollgate-dev/caddy-tollgate/scim"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testissuer"
)

const (
	callback     = "http://gw.test/dashboard/signin/oidc/callback"
	clientID     = "tollgate-dashboard"
	clientSecret = "s3cret-client-secret-0123456789"
)

type fixture struct {
	t      *testing.T
	st     *storage.Store
	svc    *Service
	is     *testissuer.Issuer
	acct   storage.Account
	admin  storage.Member
	member storage.Member
	logs   *observer.ObservedLogs
	// secrets are what must never reach a log line.
	secrets []string
}

func testSealer(t *testing.T) *storage.Sealer {
	t.Helper()
	s, err := storage.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newFixture opens a store with an organization (an admin, a member) whose
// identity provider is a test issuer.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := storage.Open(storage.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acct, err := st.CreateAccount(storage.NewAccount{Name: "Acme", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := st.CreateMember(storage.NewMember{AccountID: acct.ID, Email: "ada@acme.test", Role: storage.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	member, err := st.CreateMember(storage.NewMember{AccountID: acct.ID, Email: "mia@acme.test"})
	if err != nil {
		t.Fatal(err)
	}
	is := testissuer.New(t, clientID, clientSecret)
	sealer := testSealer(t)
	if _, _, err := StoreOf(st).Put(acct.ID, Settings{Issuer: is.URL, ClientID: clientID, ClientSecret: clientSecret}, sealer); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	f := &fixture{t: t, st: st, is: is, acct: acct, admin: admin, member: member, logs: logs, secrets: []string{clientSecret}}
	f.svc = NewService(Options{Store: st, Sealer: sealer, Logger: zap.New(core)})
	t.Cleanup(f.checkLogs)
	return f
}

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// begin runs Begin and returns the flow cookie and the provider's URL.
func (f *fixture) begin() (*http.Cookie, string) {
	f.t.Helper()
	rec := httptest.NewRecorder()
	if e := f.svc.Begin(rec, httptest.NewRequest("GET", "http://gw.test/dashboard/signin/oidc?account="+f.acct.ID, nil), f.acct.ID, callback); e != nil {
		f.t.Fatalf("Begin: %v", e)
	}
	res := rec.Result()
	if res.StatusCode != http.StatusFound {
		f.t.Fatalf("Begin answered %d", res.StatusCode)
	}
	var ck *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == FlowCookie {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.Path != "/dashboard/signin/oidc/callback" || ck.SameSite != http.SameSiteLaxMode || ck.MaxAge <= 0 {
		f.t.Fatalf("flow cookie: %+v", ck)
	}
	loc := res.Header.Get("Location")
	u, _ := url.Parse(loc)
	q := u.Query()
	if !strings.HasPrefix(loc, f.is.URL+"/authorize?") || q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" ||
		q.Get("state") == "" || q.Get("redirect_uri") != callback || q.Get("client_id") != clientID {
		f.t.Fatalf("Begin's redirect: %s", loc)
	}
	f.secrets = append(f.secrets, q.Get("state"), q.Get("nonce"), q.Get("code_challenge"), ck.Value)
	return ck, loc
}

// authorize has the provider sign the person in and returns the callback
// URL it sends the browser to.
func (f *fixture) authorize(loc string) string {
	f.t.Helper()
	res, err := noRedirects.Get(loc)
	if err != nil {
		f.t.Fatal(err)
	}
	res.Body.Close()
	back := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(back, callback+"?") {
		f.t.Fatalf("provider answered %d, to %q", res.StatusCode, back)
	}
	u, _ := url.Parse(back)
	f.secrets = append(f.secrets, u.Query().Get("code"))
	return back
}

// finish runs Finish at the callback URL with the cookie (nil: none).
func (f *fixture) finish(back string, ck *http.Cookie) (Identity, *Error, *http.Response) {
	f.t.Helper()
	req := httptest.NewRequest("GET", back, nil)
	if ck != nil {
		req.AddCookie(ck)
	}
	rec := httptest.NewRecorder()
	id, e := f.svc.Finish(rec, req, callback)
	res := rec.Result()
	cleared := false
	for _, c := range res.Cookies() {
		cleared = cleared || c.Name == FlowCookie && c.MaxAge < 0
	}
	if !cleared {
		f.t.Error("Finish did not clear the flow cookie")
	}
	return id, e, res
}

// signIn runs the whole flow as the provider's person u.
func (f *fixture) signIn(u testissuer.User) (Identity, *Error) {
	f.t.Helper()
	f.is.SignIn(u)
	ck, loc := f.begin()
	id, e, _ := f.finish(f.authorize(loc), ck)
	return id, e
}

func wantRefused(t *testing.T, e *Error, status int, reason string) {
	t.Helper()
	if e == nil {
		t.Fatalf("signed in; want %d %s", status, reason)
	}
	if e.Status != status || e.Reason != reason {
		t.Fatalf("refused with %d %s (%s); want %d %s", e.Status, e.Reason, e.Message, status, reason)
	}
	if e.Title == "" || e.Message == "" {
		t.Fatalf("refusal without a page: %+v", e)
	}
}

// checkLogs fails the test when a log line holds a secret: the client
// secret, a state, nonce, challenge, code, cookie or a JWT.
func (f *fixture) checkLogs() {
	for _, e := range f.logs.All() {
		b, _ := json.Marshal(e.ContextMap())
		line := e.Message + " " + string(b)
		for _, s := range f.secrets {
			if s != "" && strings.Contains(line, s) {
				f.t.Errorf("log line holds a secret: %s", line)
			}
		}
		if strings.Contains(line, "eyJ") {
			f.t.Errorf("log line holds a JWT: %s", line)
		}
	}
}

func TestSignInMatchesAdminAddedMemberByEmail(t *testing.T) {
	f := newFixture(t)
	id, e := f.signIn(testissuer.User{Subject: "idp-ada", Email: "Ada@Acme.test", EmailVerified: true})
	if e != nil {
		t.Fatal(e)
	}
	want := Identity{AccountID: f.acct.ID, MemberID: f.admin.ID, Role: storage.RoleAdmin, Email: "ada@acme.test", Subject: "idp-ada", Match: "email"}
	if id != want {
		t.Fatalf("identity %+v, want %+v", id, want)
	}
	id, e = f.signIn(testissuer.User{Subject: "idp-mia", Email: "mia@acme.test", EmailVerified: true})
	if e != nil || id.MemberID != f.member.ID || id.Role != storage.RoleMember {
		t.Fatalf("member: %+v %v", id, e)
	}
	if n := f.is.Exchanges(); n != 2 {
		t.Fatalf("%d exchanges", n)
	}
}

func TestSignInMatchesSCIMUser(t *testing.T) {
	f := newFixture(t)
	ext := "00u1okta"
	u, err := scim.StoreOf(f.st).ProvisionUser(f.acct.ID, scim.UserInput{UserName: "lin@acme.test", ExternalID: &ext, Email: "lin@acme.test", Active: true})
	if err != nil {
		t.Fatal(err)
	}
	// By externalId = subject: the email is not needed (nor verified).
	id, e := f.signIn(testissuer.User{Subject: ext, Email: "someone-else@acme.test"})
	if e != nil || id.MemberID != u.ID || id.Match != "external_id" {
		t.Fatalf("by externalId: %+v %v", id, e)
	}
	// By userName = verified email.
	other, err := scim.StoreOf(f.st).ProvisionUser(f.acct.ID, scim.UserInput{UserName: "kai@acme.test", Email: "kai.work@acme.test", Active: true})
	if err != nil {
		t.Fatal(err)
	}
	id, e = f.signIn(testissuer.User{Subject: "idp-kai", Email: "KAI@acme.test", EmailVerified: true})
	if e != nil || id.MemberID != other.ID || id.Match != "user_name" {
		t.Fatalf("by userName: %+v %v", id, e)
	}
}

func TestSignInRefusesDeactivatedMembers(t *testing.T) {
	f := newFixture(t)
	ext := "00u2okta"
	ss := scim.StoreOf(f.st)
	u, err := ss.ProvisionUser(f.acct.ID, scim.UserInput{UserName: "sam@acme.test", ExternalID: &ext, Email: "sam@acme.test", Active: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ss.ReplaceUser(f.acct.ID, u.ID, scim.UserInput{UserName: "sam@acme.test", ExternalID: &ext, Email: "sam@acme.test", Active: false}); err != nil {
		t.Fatal(err)
	}
	_, e := f.signIn(testissuer.User{Subject: ext, Email: "sam@acme.test", EmailVerified: true})
	wantRefused(t, e, http.StatusForbidden, "member_deactivated")
	// The same by email (userName) without the externalId.
	_, e = f.signIn(testissuer.User{Subject: "other-sub", Email: "sam@acme.test", EmailVerified: true})
	wantRefused(t, e, http.StatusForbidden, "member_deactivated")
	// An admin-added member the operator deactivated.
	if _, err := f.st.DeactivateMember(f.acct.ID, f.member.ID); err != nil {
		t.Fatal(err)
	}
	_, e = f.signIn(testissuer.User{Subject: "idp-mia", Email: "mia@acme.test", EmailVerified: true})
	wantRefused(t, e, http.StatusForbidden, "member_deactivated")
}

func TestSignInRefusesUnknownAndUnverified(t *testing.T) {
	f := newFixture(t)
	_, e := f.signIn(testissuer.User{Subject: "idp-zed", Email: "zed@acme.test", EmailVerified: true})
	wantRefused(t, e, http.StatusForbidden, "unknown_member")
	if !strings.Contains(e.Message, "zed@acme.test") || !strings.Contains(e.Title, "Acme") {
		t.Fatalf("page: %+v", e)
	}
	_, e = f.signIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test", EmailVerified: false})
	wantRefused(t, e, http.StatusForbidden, "email_unverified")
	f.is.EditClaims(func(c map[string]any) { delete(c, "email_verified") })
	ck, loc := f.begin()
	_, e, _ = f.finish(f.authorize(loc), ck)
	wantRefused(t, e, http.StatusForbidden, "email_unverified")
	// "true" as a string, as some providers send it, is verified.
	f.is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test"})
	f.is.EditClaims(func(c map[string]any) { c["email_verified"] = "true" })
	ck, loc = f.begin()
	if id, e, _ := f.finish(f.authorize(loc), ck); e != nil || id.MemberID != f.admin.ID {
		t.Fatalf("string email_verified: %+v %v", id, e)
	}
}

func TestSignInAllowedDomains(t *testing.T) {
	f := newFixture(t)
	if _, _, err := StoreOf(f.st).Put(f.acct.ID, Settings{Issuer: f.is.URL, ClientID: clientID, AllowedDomains: []string{"Corp.Example"}}, f.svc.sealer); err != nil {
		t.Fatal(err)
	}
	_, e := f.signIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test", EmailVerified: true})
	wantRefused(t, e, http.StatusForbidden, "domain_not_allowed")
	if _, err := f.st.CreateMember(storage.NewMember{AccountID: f.acct.ID, Email: "bo@corp.example"}); err != nil {
		t.Fatal(err)
	}
	if _, e := f.signIn(testissuer.User{Subject: "idp-bo", Email: "bo@corp.example", EmailVerified: true}); e != nil {
		t.Fatal(e)
	}
}

func TestSignInRefusesForeignCallbacks(t *testing.T) {
	f := newFixture(t)
	f.is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test", EmailVerified: true})

	t.Run("wrong state", func(t *testing.T) {
		ck, loc := f.begin()
		back := f.authorize(loc)
		u, _ := url.Parse(back)
		q := u.Query()
		q.Set("state", "forged-"+q.Get("state"))
		u.RawQuery = q.Encode()
		_, e, _ := f.finish(u.String(), ck)
		wantRefused(t, e, http.StatusBadRequest, "state_mismatch")
	})
	t.Run("no cookie", func(t *testing.T) {
		// Another browser's callback (login CSRF): nothing ties it to
		// this one.
		_, loc := f.begin()
		_, e, _ := f.finish(f.authorize(loc), nil)
		wantRefused(t, e, http.StatusBadRequest, "no_flow_cookie")
	})
	t.Run("forged cookie", func(t *testing.T) {
		ck, loc := f.begin()
		forged := *ck
		forged.Value = strings.Repeat("A", len(ck.Value))
		_, e, _ := f.finish(f.authorize(loc), &forged)
		wantRefused(t, e, http.StatusBadRequest, "bad_flow_cookie")
	})
	t.Run("replayed state", func(t *testing.T) {
		ck, loc := f.begin()
		back := f.authorize(loc)
		if _, e, _ := f.finish(back, ck); e != nil {
			t.Fatal(e)
		}
		_, e, _ := f.finish(back, ck)
		wantRefused(t, e, http.StatusBadRequest, "state_replayed")
	})
	t.Run("expired flow", func(t *testing.T) {
		ck, loc := f.begin()
		back := f.authorize(loc)
		defer func(old func() time.Time) { now = old }(now)
		now = func() time.Time { return time.Now().Add(FlowTTL + time.Minute) }
		_, e, _ := f.finish(back, ck)
		wantRefused(t, e, http.StatusBadRequest, "flow_expired")
	})
	t.Run("provider error", func(t *testing.T) {
		ck, loc := f.begin()
		u, _ := url.Parse(loc)
		back := callback + "?error=access_denied&error_description=%3Cb%3Enope%3C%2Fb%3E&state=" + url.QueryEscape(u.Query().Get("state"))
		_, e, _ := f.finish(back, ck)
		wantRefused(t, e, http.StatusForbidden, "provider_refused")
		if !strings.Contains(e.Message, "access_denied") || strings.Contains(e.Message, "nope") {
			t.Fatalf("page: %s", e.Message)
		}
	})
	t.Run("code already redeemed", func(t *testing.T) {
		ck, loc := f.begin()
		back := f.authorize(loc)
		// The code redeemed by someone else first: the provider refuses it
		// the second time.
		u, _ := url.Parse(back)
		if res, err := http.PostForm(f.is.URL+"/token", url.Values{"grant_type": {"authorization_code"}, "code": {u.Query().Get("code")},
			"client_id": {clientID}, "client_secret": {clientSecret}, "redirect_uri": {callback}, "code_verifier": {"x"}}); err == nil {
			res.Body.Close()
		}
		_, e, _ := f.finish(back, ck)
		wantRefused(t, e, http.StatusForbidden, "code_refused")
	})
}

func TestSignInRefusesBadIDTokens(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(map[string]any)
		reason string
	}{
		{"wrong nonce", func(c map[string]any) { c["nonce"] = "another-sign-in" }, "nonce_mismatch"},
		{"wrong audience", func(c map[string]any) { c["aud"] = "another-client" }, "id_token_invalid"},
		{"wrong issuer", func(c map[string]any) { c["iss"] = "https://evil.example" }, "id_token_invalid"},
		{"expired", func(c map[string]any) {
			c["iat"] = time.Now().Add(-time.Hour).Unix()
			c["exp"] = time.Now().Add(-30 * time.Minute).Unix()
		}, "id_token_expired"},
		{"no subject", func(c map[string]any) { delete(c, "sub") }, "id_token_invalid"},
		{"several audiences, issued to another", func(c map[string]any) {
			c["aud"] = []string{clientID, "another-client"}
			c["azp"] = "another-client"
		}, "id_token_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test", EmailVerified: true})
			f.is.EditClaims(tc.edit)
			ck, loc := f.begin()
			_, e, _ := f.finish(f.authorize(loc), ck)
			wantRefused(t, e, http.StatusForbidden, tc.reason)
		})
	}
}

func TestSignInSeveralAudiencesIssuedToUs(t *testing.T) {
	f := newFixture(t)
	f.is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test", EmailVerified: true})
	f.is.EditClaims(func(c map[string]any) {
		c["aud"] = []string{clientID, "another-client"}
		c["azp"] = clientID
	})
	ck, loc := f.begin()
	if id, e, _ := f.finish(f.authorize(loc), ck); e != nil || id.MemberID != f.admin.ID {
		t.Fatalf("%+v %v", id, e)
	}
}

func TestSignInProviderDown(t *testing.T) {
	f := newFixture(t)
	f.is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test", EmailVerified: true})
	// Down at the callback: the provider was discovered at Begin.
	ck, loc := f.begin()
	back := f.authorize(loc)
	f.is.Close()
	_, e, _ := f.finish(back, ck)
	wantRefused(t, e, http.StatusBadGateway, "provider_unreachable")

	// Down before any discovery (a new service: nothing cached).
	svc := NewService(Options{Store: f.st, Sealer: f.svc.sealer, Logger: f.svc.log})
	rec := httptest.NewRecorder()
	e = svc.Begin(rec, httptest.NewRequest("GET", "http://gw.test/dashboard/signin/oidc", nil), f.acct.ID, callback)
	wantRefused(t, e, http.StatusBadGateway, "provider_unreachable")
	if rec.Code != http.StatusOK || len(rec.Result().Cookies()) != 0 {
		t.Fatalf("a failed Begin wrote %d with cookies %v", rec.Code, rec.Result().Cookies())
	}
	rec = httptest.NewRecorder()
	WriteErrorPage(rec, e, "/dashboard/signin")
	res := rec.Result()
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "could not be reached") ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("page %d %q", res.StatusCode, rec.Body.String())
	}
}

func TestSignInWithoutSettings(t *testing.T) {
	f := newFixture(t)
	other, err := f.st.CreateAccount(storage.NewAccount{Name: "Other", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	e := f.svc.Begin(httptest.NewRecorder(), httptest.NewRequest("GET", "http://gw.test/x", nil), other.ID, callback)
	wantRefused(t, e, http.StatusNotFound, "not_configured")
	off := NewService(Options{Store: f.st})
	e = off.Begin(httptest.NewRecorder(), httptest.NewRequest("GET", "http://gw.test/x", nil), f.acct.ID, callback)
	wantRefused(t, e, http.StatusServiceUnavailable, "no_key")
}

// The discovery cache: a second sign-in makes no discovery request.
func TestSignInCachesDiscovery(t *testing.T) {
	f := newFixture(t)
	var hits int
	client := NewHTTPClient()
	base := client.Transport
	client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration") || r.URL.Path == "/keys" {
			hits++
		}
		return base.RoundTrip(r)
	})
	f.svc = NewService(Options{Store: f.st, Sealer: f.svc.sealer, Logger: f.svc.log, HTTPClient: client})
	for range 3 {
		if _, e := f.signIn(testissuer.User{Subject: "idp-ada", Email: "ada@acme.test", EmailVerified: true}); e != nil {
			t.Fatal(e)
		}
	}
	if hits != 2 { // one discovery, one key set
		t.Fatalf("%d discovery and key requests for 3 sign-ins, want 2", hits)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The flow cookie is Secure when the browser comes back over HTTPS: TLS
// here, or a callback address the dashboard made https (a trusted proxy
// that ends TLS); not over plain HTTP.
func TestFlowCookieSecureWithAnHTTPSCallback(t *testing.T) {
	f := newFixture(t)
	for cb, secure := range map[string]bool{callback: false, "https://gw.test/dashboard/signin/oidc/callback": true} {
		rec := httptest.NewRecorder()
		if e := f.svc.Begin(rec, httptest.NewRequest("GET", "http://gw.test/dashboard/signin/oidc", nil), f.acct.ID, cb); e != nil {
			t.Fatalf("Begin: %v", e)
		}
		for _, c := range rec.Result().Cookies() {
			if c.Name == FlowCookie && c.Secure != secure {
				t.Fatalf("%s: flow cookie Secure %v", cb, c.Secure)
			}
		}
	}
}
