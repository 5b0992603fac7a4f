package integration

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testissuer"
)

const oidcSecret = "oidc-client-secret-never-logged-7f3a"

// TestOIDCOperatorAPI sets, shows and removes an organization's identity
// provider through the operator API: bad settings are 400s naming the
// field, the provider's discovery is checked before anything is stored,
// and the secret is never shown.
func TestOIDCOperatorAPI(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("")
	is := testissuer.New(t, "tollgate", oidcSecret)
	path := "/accounts/" + org.AccountID + "/oidc"

	c.operator("GET", path, nil).expectError(t, 404, "no identity provider")
	for _, tc := range []struct{ body, msg string }{
		{`{"client_id":"tollgate","client_secret":"x"}`, "issuer: must be a non-empty URL"},
		{`{"issuer":"http://idp.example.com","client_id":"tollgate","client_secret":"x"}`, "issuer: must use https"},
		{`{"issuer":"` + is.URL + `","client_secret":"x"}`, "client_id: must be a non-empty string"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate"}`, "client_secret: must be a non-empty string"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate","client_secret":"x","allowed_email_domains":"acme.com"}`, "allowed_email_domains: must be an array"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate","client_secret":"x","allowed_email_domains":["not a domain"]}`, "allowed_email_domains:"},
		{`{"issuer":"` + is.URL + `","client_id":"tollgate","client_secret":"x","scopes":["openid"]}`, "scopes: unknown field"},
		// Discovery fails: nothing answers there, or not as a provider.
		{`{"issuer":"http://127.0.0.1:1","client_id":"tollgate","client_secret":"x"}`, "issuer: its discovery document"},
		{`{"issuer":"` + is.URL + `/","client_id":"tollgate","client_secret":"x"}`, "issuer: the discovery document names issuer"},
	} {
		c.operator("PUT", path, tc.body).expectError(t, 400, tc.msg)
	}
	c.operator("GET", path, nil).expect(t, 404)

	set := c.operator("PUT", path, `{"issuer":"`+is.URL+`","client_id":"tollgate","client_secret":"`+oidcSecret+`","allowed_email_domains":["Example.com"]}`).expect(t, 201)
	d := set.JSON.Get("data")
	if d.Get("issuer").Str != is.URL || d.Get("client_id").Str != "tollgate" || d.Get("client_secret_label").Str != "****7f3a" ||
		d.Get("allowed_email_domains.0").Str != "example.com" || d.Get("redirect_path").Str != "/dashboard/signin/oidc/callback" ||
		d.Get("signin_path").Str != "/dashboard/signin/oidc?account="+org.AccountID {
		t.Fatalf("set: %s", set.Body)
	}
	// Changed without the secret: it is kept.
	c.operator("PUT", path, `{"issuer":"`+is.URL+`","client_id":"tollgate"}`).expect(t, 200)
	shown := c.operator("GET", path, nil).expect(t, 200)
	if strings.Contains(string(shown.Body), oidcSecret[:20]) || shown.JSON.Get("data.client_secret_label").Str != "****7f3a" ||
		shown.JSON.Get("data.allowed_email_domains.#").Int() != 0 {
		t.Fatalf("show: %s", shown.Body)
	}
	c.operator("POST", path, `{}`).expectError(t, 405, "")

	personal := c.newTenant("personal", "")
	c.operator("PUT", "/accounts/"+personal.AccountID+"/oidc", `{"issuer":"`+is.URL+`","client_id":"tollgate","client_secret":"x"}`).
		expectError(t, 400, "only organizations")
	c.operator("PUT", "/accounts/org_missing/oidc", `{}`).expectError(t, 404, "account org_missing not found")

	c.operator("DELETE", path, nil).expect(t, 200)
	c.operator("GET", path, nil).expect(t, 404)
	c.operator("DELETE", path, nil).expectError(t, 404, "no identity provider")
}

// TestOIDCCLIAndRestart sets the provider with `caddy tollgate oidc`, the
// secret read from a file; the settings survive kill -9, and the secret
// is in no log line.
func TestOIDCCLIAndRestart(t *testing.T) {
	p := startProcess(t, t.TempDir())
	is := testissuer.New(t, "tollgate", oidcSecret)
	acct := cli(t, p, "account", "create", "--name", "Acme", "--type", "organization").Get("data.id").Str
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(oidcSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := cli(t, p, "oidc", "set", "--account", acct, "--issuer", is.URL, "--client-id", "tollgate",
		"--client-secret-file", secretFile, "--allowed-email-domain", "acme.com", "--allowed-email-domain", "corp.acme.com")
	if set.Get("data.client_secret_label").Str != "****7f3a" || set.Get("data.allowed_email_domains.#").Int() != 2 {
		t.Fatalf("oidc set: %s", set.Raw)
	}
	p.kill()
	p.start(t)
	shown := cli(t, p, "oidc", "show", "--account", acct)
	if shown.Get("data.issuer").Str != is.URL || shown.Get("data.client_id").Str != "tollgate" || strings.Contains(shown.Raw, oidcSecret) {
		t.Fatalf("oidc show after restart: %s", shown.Raw)
	}
	if del := cli(t, p, "oidc", "delete", "--account", acct); !del.Get("deleted").Bool() {
		t.Fatalf("oidc delete: %s", del.Raw)
	}
	p.stop(t) // the log is read once the process has written all of it
	if strings.Contains(p.log.String(), oidcSecret) {
		t.Fatal("the client secret is in the gateway's log")
	}
}

// oidcBrowser is a browser of the in-process gateway: cookies kept,
// redirects followed (to the test provider and back).
type oidcBrowser struct {
	t *testing.T
	c *http.Client
}

func newOIDCBrowser(t *testing.T) *oidcBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &oidcBrowser{t: t, c: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
}

func (b *oidcBrowser) do(method, path string, form url.Values) (int, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, "http://"+gatewayAddr+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// csrf reads the session's CSRF token from a page's form (csrfField is
// the dashboard tests').
func (b *oidcBrowser) csrf(page string) string {
	b.t.Helper()
	code, body := b.do("GET", page, nil)
	m := csrfField.FindStringSubmatch(body)
	if code != 200 || m == nil {
		b.t.Fatalf("%s: %d, no CSRF token", page, code)
	}
	return m[1]
}

// TestOIDCDashboardSignIn signs an organization's people in to the
// dashboard through Caddy with the test provider: the admin's session
// creates a management key, the member's is refused it; a stranger and a
// deactivated member get a page, no session.
func TestOIDCDashboardSignIn(t *testing.T) {
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\tbind 127.0.0.1\n\ttollgate {", "\tbind 127.0.0.1\n\ttollgate_dashboard\n\ttollgate {")
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	is := testissuer.New(t, "tollgate", oidcSecret)
	c.operator("PUT", "/accounts/"+org.AccountID+"/oidc", `{"issuer":"`+is.URL+`","client_id":"tollgate","client_secret":"`+oidcSecret+`"}`).expect(t, 201)
	signIn := "/dashboard/signin/oidc?account=" + org.AccountID

	// The sign-in page offers it.
	if code, body := newOIDCBrowser(t).do("GET", "/dashboard/signin", nil); code != 200 || !strings.Contains(body, "Sign in with your identity provider") {
		t.Fatalf("sign-in page %d", code)
	}

	ada := newOIDCBrowser(t)
	is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@example.com", EmailVerified: true})
	if code, body := ada.do("GET", signIn, nil); code != 200 || !strings.Contains(body, "test organization") {
		t.Fatalf("admin's overview after sign-in: %d %s", code, body)
	}
	// (The POST's redirect leads to the page that shows the key once.)
	code, body := ada.do("POST", "/dashboard/management-keys", url.Values{"name": {"from oidc"}, "csrf_token": {ada.csrf("/dashboard/keys")}})
	if code != 200 || !strings.Contains(body, "sk-tg-mgmt-") {
		t.Fatalf("admin creates a management key: %d %s", code, body)
	}

	mia := newOIDCBrowser(t)
	is.SignIn(testissuer.User{Subject: "idp-mia", Email: "mia@example.com", EmailVerified: true})
	if code, _ := mia.do("GET", signIn, nil); code != 200 {
		t.Fatalf("member's overview after sign-in: %d", code)
	}
	if code, _ := mia.do("GET", "/dashboard/keys", nil); code != 200 {
		t.Fatalf("member's keys page: %d", code)
	}
	if code, _ := mia.do("POST", "/dashboard/management-keys", url.Values{"name": {"not mine"}, "csrf_token": {mia.csrf("/dashboard/keys")}}); code != 403 {
		t.Fatalf("member creates a management key: %d", code)
	}
	mkeys := c.operator("GET", "/accounts/"+org.AccountID+"/management-keys", nil).expect(t, 200)
	if n := strings.Count(string(mkeys.Body), `"name":"not mine"`); n != 0 || !strings.Contains(string(mkeys.Body), `"name":"from oidc"`) {
		t.Fatalf("management keys: %s", mkeys.Body)
	}

	// A stranger, then the member once deactivated: a page, no session.
	zed := newOIDCBrowser(t)
	is.SignIn(testissuer.User{Subject: "idp-zed", Email: "zed@example.com", EmailVerified: true})
	if code, body := zed.do("GET", signIn, nil); code != 403 || !strings.Contains(body, "not a member") {
		t.Fatalf("stranger: %d %s", code, body)
	}
	if code, body := zed.do("GET", "/dashboard/keys", nil); code != 200 || !strings.Contains(body, "Sign in") || strings.Contains(body, "csrf_token") {
		t.Fatalf("stranger's keys page: %d", code)
	}
	c.operator("DELETE", "/accounts/"+org.AccountID+"/members/"+org.Member, nil).expect(t, 200)
	again := newOIDCBrowser(t)
	is.SignIn(testissuer.User{Subject: "idp-mia", Email: "mia@example.com", EmailVerified: true})
	if code, body := again.do("GET", signIn, nil); code != 403 || !strings.Contains(body, "deactivated") {
		t.Fatalf("deactivated member: %d %s", code, body)
	}
	// The deactivated member's earlier session ended with the deactivation.
	if code, body := mia.do("GET", "/dashboard/keys", nil); code != 200 || !strings.Contains(body, "Sign in") || strings.Contains(body, "csrf_token") {
		t.Fatalf("deactivated member's old session: %d", code)
	}
	// The admin demoted: the session of the provider's sign-in is a
	// member's at the next request.
	c.operator("PATCH", "/accounts/"+org.AccountID+"/members/"+org.Admin, `{"role":"member"}`).expect(t, 200)
	if code, _ := ada.do("POST", "/dashboard/settings/workspaces", url.Values{"name": {"after demotion"}, "csrf_token": {ada.csrf("/dashboard/keys")}}); code != 403 {
		t.Fatalf("demoted admin creates a workspace: %d", code)
	}

	// The provider down when the browser comes back: a page that says
	// so, no session.
	is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@example.com", EmailVerified: true})
	late := newOIDCBrowser(t)
	late.c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := late.c.Get("http://" + gatewayAddr + signIn)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	atIdP, err := late.c.Get(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	atIdP.Body.Close()
	back := atIdP.Header.Get("Location")
	if res.StatusCode != 302 || atIdP.StatusCode != 302 || !strings.HasPrefix(back, "http://"+gatewayAddr+"/dashboard/signin/oidc/callback?") {
		t.Fatalf("to the provider: %d, back: %d %s", res.StatusCode, atIdP.StatusCode, back)
	}
	is.Close()
	if code, body := late.do("GET", strings.TrimPrefix(back, "http://"+gatewayAddr), nil); code != 502 || !strings.Contains(body, "could not be reached") {
		t.Fatalf("provider down: %d %s", code, body)
	}
	// No session: the page sends the browser to sign in.
	if code, _ := late.do("GET", "/dashboard/keys", nil); code != http.StatusSeeOther {
		t.Fatalf("a session after a failed sign-in: %d", code)
	}
}

// exampleRedaction is Caddyfile.example's log redaction snippet, read
// from the example so that the test checks what operators copy.
func exampleRedaction(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "(tollgate_log_redaction) {\n")
	snippet, _, ok2 := strings.Cut(rest, "\n}\n")
	if !ok || !ok2 || !strings.Contains(snippet, "replace code REDACTED") {
		t.Fatal("Caddyfile.example has no tollgate_log_redaction snippet with the OIDC code")
	}
	return "(tollgate_log_redaction) {\n" + snippet + "\n}\n"
}

// TestOIDCSignInLogsNoSecret signs in through the built gateway with its
// access log and Caddy's DEBUG log (both with Caddyfile.example's
// redaction): the client secret, the authorization code, the ID token and
// the cookies are in no log line.
func TestOIDCSignInLogsNoSecret(t *testing.T) {
	redaction := exampleRedaction(t)
	p := startProcessWith(t, t.TempDir(), func(cfg string) string {
		cfg = replaceOnce(t, cfg, "\tskip_install_trust\n", "\tskip_install_trust\n\tlog default {\n\t\tlevel DEBUG\n\t\timport tollgate_log_redaction\n\t}\n")
		cfg = replaceOnce(t, cfg, "\tbind 127.0.0.1\n\ttollgate {", "\tbind 127.0.0.1\n\tlog {\n\t\timport tollgate_log_redaction\n\t}\n\ttollgate_dashboard\n\ttollgate {")
		return redaction + cfg
	})
	c := newClient(t, p.gateway, p.admin)
	org := c.newOrg("")
	is := testissuer.New(t, "tollgate", oidcSecret)
	c.operator("PUT", "/accounts/"+org.AccountID+"/oidc", `{"issuer":"`+is.URL+`","client_id":"tollgate","client_secret":"`+oidcSecret+`"}`).expect(t, 201)
	is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@example.com", EmailVerified: true})

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) *http.Response {
		t.Helper()
		res, err := browser.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	base := "http://" + p.gateway
	begin := get(base + "/dashboard/signin/oidc?account=" + org.AccountID)
	back := get(begin.Header.Get("Location")).Header.Get("Location")
	cb, _ := url.Parse(back)
	code := cb.Query().Get("code")
	done := get(back)
	if done.StatusCode != http.StatusSeeOther || code == "" {
		t.Fatalf("callback: %d", done.StatusCode)
	}
	if res := get(base + "/dashboard/"); res.StatusCode != 200 {
		t.Fatalf("overview: %d", res.StatusCode)
	}
	secrets := map[string]string{"client secret": oidcSecret, "authorization code": code, "ID token": "eyJ"}
	for _, ck := range append(begin.Cookies(), done.Cookies()...) {
		if ck.Value != "" {
			secrets["cookie "+ck.Name] = ck.Value
		}
	}
	if len(secrets) != 5 {
		t.Fatalf("the test needs the flow and session cookies: %v", secrets)
	}
	p.stop(t)
	logs := p.log.String()
	for _, want := range []string{"http.log.access", "/dashboard/signin/oidc/callback", "dashboard sign-in through the identity provider"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("%q is not in the log: the test needs its access log and sign-in lines", want)
		}
	}
	for name, s := range secrets {
		if i := strings.Index(logs, s); i >= 0 {
			t.Errorf("the %s is in the logs: %s", name, logs[max(i-300, 0):min(i+100, len(logs))])
		}
	}
}
