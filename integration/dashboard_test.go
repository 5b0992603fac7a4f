package integration

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// startDashboard runs the test gateway with the dashboard at /dashboard.
func startDashboard(t *testing.T) *client {
	t.Helper()
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\ttollgate {\n\t\t# the gateway's options", "\ttollgate_dashboard {\n\t\tsignin_attempts 50\n\t}\n\ttollgate {\n\t\t# the gateway's options")
	})
	return newClient(t, gatewayAddr, adminAddr)
}

// browser is a cookie-keeping HTTP client of the dashboard that does not
// follow redirects.
type browser struct {
	t    *testing.T
	base string
	http *http.Client
	csrf string
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: "http://" + gatewayAddr, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// page GETs or POSTs (form not nil) a dashboard path; it remembers the
// page's CSRF token.
func (b *browser) page(method, path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	var res *http.Response
	var err error
	if form == nil {
		res, err = b.http.Get(b.base + path)
	} else {
		res, err = b.http.PostForm(b.base+path, form)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if m := csrfField.FindStringSubmatch(sb.String()); m != nil {
		b.csrf = m[1]
	}
	return res.StatusCode, sb.String(), res.Header
}

func (b *browser) form(kv ...string) url.Values {
	v := url.Values{"csrf_token": {b.csrf}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

// signInLink issues a sign-in link through the operator API.
func (c *client) signInLink(body string) (token, link string) {
	c.t.Helper()
	r := c.operator("POST", "/signin-links", body).expect(c.t, 201)
	return r.JSON.Get("token").String(), r.JSON.Get("url").String()
}

func TestDashboardSignInLinkIsOneTimeAndConcurrentUseSignsInOnce(t *testing.T) {
	c := startDashboard(t)
	org := c.newTenant("organization", "10")
	// Refusals of the operator route name the field.
	c.operator("POST", "/signin-links", `{}`).expectError(t, 400, "account")
	c.operator("POST", "/signin-links", `{"account_id":"org_nope"}`).expectError(t, 404, "org_nope")
	c.operator("POST", "/signin-links", `{"account_id":"`+org.AccountID+`","expires_in":"48h"}`).expectError(t, 400, "expires_in")
	c.operator("POST", "/signin-links", `{"account_id":"`+org.AccountID+`","member_id":"user_nope"}`).expectError(t, 404, "user_nope")

	token, link := c.signInLink(`{"account_id":"` + org.AccountID + `","base_url":"http://` + gatewayAddr + `"}`)
	if !strings.HasPrefix(link, "http://"+gatewayAddr+"/dashboard/signin?token=tgl_") {
		t.Fatalf("link %q", link)
	}
	// Opening the link changes nothing; 16 browsers posting it at once:
	// one signs in.
	b := newBrowser(t)
	if status, body, _ := b.page("GET", strings.TrimPrefix(link, b.base), nil); status != 200 || !strings.Contains(body, "Continue to the dashboard") {
		t.Fatalf("link page: %d", status)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	signedIn := 0
	for range 16 {
		wg.Go(func() {
			nb := newBrowser(t)
			res, err := nb.http.PostForm(nb.base+"/dashboard/signin", url.Values{"token": {token}})
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			switch res.StatusCode {
			case http.StatusSeeOther:
				signedIn++
			case http.StatusBadRequest:
			default:
				t.Errorf("concurrent sign-in: %d", res.StatusCode)
			}
		})
	}
	wg.Wait()
	if signedIn != 1 {
		t.Fatalf("%d sign-ins with one link", signedIn)
	}
	// Forged: a clear page, no cookie.
	status, body, hdr := b.page("POST", "/dashboard/signin", url.Values{"token": {"tgl_forged"}})
	if status != 400 || !strings.Contains(body, "not valid") || hdr.Get("Set-Cookie") != "" {
		t.Fatalf("forged link: %d %v", status, hdr)
	}
	if hdr.Get("Content-Security-Policy") == "" || strings.Contains(hdr.Get("Content-Security-Policy"), "unsafe-inline") {
		t.Fatalf("CSP %q", hdr.Get("Content-Security-Policy"))
	}
}

func TestDashboardRolesThroughCaddy(t *testing.T) {
	c := startDashboard(t)
	org := c.newTenant("organization", "10")
	admin := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@example.com","role":"admin"}`).expect(t, 201).JSON.Get("data.id").String()
	member := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"bob@example.com"}`).expect(t, 201).JSON.Get("data.id").String()
	signIn := func(body string) *browser {
		token, _ := c.signInLink(body)
		b := newBrowser(t)
		if status, _, _ := b.page("POST", "/dashboard/signin", url.Values{"token": {token}}); status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", status)
		}
		b.page("GET", "/dashboard/keys", nil)
		return b
	}
	// A member cannot create a management key: the store's rule, the
	// operator API's message; nothing created.
	m := signIn(`{"account_id":"` + org.AccountID + `","member_id":"` + member + `"}`)
	status, body, _ := m.page("POST", "/dashboard/management-keys", m.form("name", "sneaky", "expires_in", "720h"))
	if status != 403 || !strings.Contains(body, "only organization admins can create management keys") {
		t.Fatalf("member management key: %d", status)
	}
	if n := len(c.operator("GET", "/accounts/"+org.AccountID+"/management-keys", nil).JSON.Get("data").Array()); n != 1 {
		t.Fatalf("%d management keys", n)
	}
	// Nor top up credits.
	if status, _, _ := m.page("POST", "/dashboard/operator/accounts/"+org.AccountID+"/credits", m.form("amount", "100")); status != 403 {
		t.Fatalf("member top-up: %d", status)
	}
	// An admin creates one, shown once.
	a := signIn(`{"account_id":"` + org.AccountID + `","member_id":"` + admin + `"}`)
	status, _, hdr := a.page("POST", "/dashboard/management-keys", a.form("name", "ops-2", "expires_in", "720h"))
	if status != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/dashboard/keys?created=") {
		t.Fatalf("admin management key: %d %q", status, hdr.Get("Location"))
	}
	_, body, _ = a.page("GET", hdr.Get("Location"), nil)
	mgmt := regexp.MustCompile(`sk-tg-mgmt-v1-[0-9a-f]{64}`).FindString(body)
	if mgmt == "" {
		t.Fatal("the new management key is not shown")
	}
	c.api("GET", "/keys", mgmt, nil).expect(t, 200)
	// The operator tops up through the operator API's route.
	op := signIn(`{"operator":true}`)
	op.page("GET", "/dashboard/operator", nil)
	if status, body, _ := op.page("POST", "/dashboard/operator/accounts/"+org.AccountID+"/credits", op.form("amount", "abc")); status != 400 || !strings.Contains(body, "amount") {
		t.Fatalf("bad top-up: %d", status)
	}
	if status, _, _ := op.page("POST", "/dashboard/operator/accounts/"+org.AccountID+"/credits", op.form("amount", "5")); status != http.StatusSeeOther {
		t.Fatalf("top-up: %d", status)
	}
	credits := c.operator("GET", "/accounts/"+org.AccountID, nil).JSON.Get("data")
	if got := gjson.Get(credits.Raw, "total_credits").Float(); got != 15 {
		t.Fatalf("credits after top-up: %s", credits.Raw)
	}
	// Another account's ids in a URL: not found.
	other := c.newTenant("organization", "1")
	otherKey := c.api("POST", "/keys", other.MgmtKey, `{"name":"theirs"}`).expect(t, 201).JSON.Get("data.hash").String()
	if status, _, _ := a.page("POST", "/dashboard/keys/"+otherKey+"/delete", a.form()); status != 404 {
		t.Fatalf("other account's key: %d", status)
	}
	c.api("GET", "/keys/"+otherKey, other.MgmtKey, nil).expect(t, 200)
	// Sign-out ends the session.
	a.page("GET", "/dashboard/", nil)
	if status, _, _ := a.page("POST", "/dashboard/signout", a.form()); status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", status)
	}
	if status, _, hdr := a.page("GET", "/dashboard/keys", nil); status != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/dashboard/signin") {
		t.Fatalf("after sign-out: %d", status)
	}
}

// A session follows the member's record at every request: an admin the
// operator demotes loses the admin's actions with the same cookie; a
// member the operator deactivates is signed out of every browser at once,
// and adding the member again does not bring the old sessions back.
func TestDashboardSessionFollowsTheMember(t *testing.T) {
	c := startDashboard(t)
	org := c.newTenant("organization", "10")
	admin := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@example.com","role":"admin"}`).expect(t, 201).JSON.Get("data.id").String()
	theirs := c.api("POST", "/keys", org.MgmtKey, `{"name":"theirs"}`).expect(t, 201).JSON.Get("data.hash").String()
	signIn := func() *browser {
		token, _ := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + admin + `"}`)
		b := newBrowser(t)
		if status, _, _ := b.page("POST", "/dashboard/signin", url.Values{"token": {token}}); status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", status)
		}
		b.page("GET", "/dashboard/settings", nil)
		return b
	}
	a, other := signIn(), signIn()
	if status, _, _ := a.page("POST", "/dashboard/settings/workspaces", a.form("name", "Before", "slug", "before")); status != http.StatusSeeOther {
		t.Fatalf("admin creates a workspace: %d", status)
	}
	c.operator("PATCH", "/accounts/"+org.AccountID+"/members/"+admin, `{"role":"member"}`).expect(t, 200)
	if status, _, _ := a.page("POST", "/dashboard/settings/workspaces", a.form("name", "After", "slug", "after")); status != http.StatusForbidden {
		t.Fatalf("demoted admin creates a workspace: %d", status)
	}
	if status, _, _ := a.page("POST", "/dashboard/keys/"+theirs+"/disable", a.form()); status != http.StatusNotFound {
		t.Fatalf("demoted admin disables another's key: %d", status)
	}
	if c.api("GET", "/keys/"+theirs, org.MgmtKey, nil).expect(t, 200).JSON.Get("data.disabled").Bool() {
		t.Fatal("a demoted admin disabled another's key")
	}
	if _, body, _ := a.page("GET", "/dashboard/keys", nil); strings.Contains(body, "theirs") {
		t.Fatal("a demoted admin lists every key")
	}
	c.operator("DELETE", "/accounts/"+org.AccountID+"/members/"+admin, nil).expect(t, 200)
	c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@example.com","role":"admin"}`).expect(t, 201)
	for _, b := range []*browser{a, other} {
		if status, _, hdr := b.page("GET", "/dashboard/keys", nil); status != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/dashboard/signin") {
			t.Fatalf("after deactivation: %d %q", status, hdr.Get("Location"))
		}
	}
}

// Behind a load balancer that ends TLS: the session cookie is Secure when
// the request came from one of the server's trusted_proxies with
// X-Forwarded-Proto: https; the same header from a client Caddy does not
// trust leaves it as the connection is (plain HTTP: not Secure).
func TestDashboardCookieSecureBehindATrustedProxy(t *testing.T) {
	for _, c := range []struct {
		name    string
		proxies string // the trusted_proxies ranges; the test client is 127.0.0.1
		secure  bool
	}{
		{"trusted", "127.0.0.1/32", true},
		{"untrusted", "10.0.0.0/8", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			startInProcessWith(t, func(cfg string) string {
				cfg = replaceOnce(t, cfg, "\tskip_install_trust\n", "\tskip_install_trust\n\tservers {\n\t\ttrusted_proxies static "+c.proxies+"\n\t}\n")
				return replaceOnce(t, cfg, "\ttollgate {\n\t\t# the gateway's options", "\ttollgate_dashboard {\n\t\tsignin_attempts 50\n\t}\n\ttollgate {\n\t\t# the gateway's options")
			})
			cl := newClient(t, gatewayAddr, adminAddr)
			org := cl.newTenant("organization", "1")
			token, _ := cl.signInLink(`{"account_id":"` + org.AccountID + `"}`)
			req, _ := http.NewRequest("POST", "http://"+gatewayAddr+"/dashboard/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("X-Forwarded-Proto", "https")
			b := newBrowser(t)
			res, err := b.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			var cookie *http.Cookie
			for _, ck := range res.Cookies() {
				if ck.Name == "tollgate_dashboard" {
					cookie = ck
				}
			}
			if res.StatusCode != http.StatusSeeOther || cookie == nil {
				t.Fatalf("sign-in: %d %v", res.StatusCode, res.Cookies())
			}
			if cookie.Secure != c.secure {
				t.Fatalf("cookie Secure %v, want %v (Set-Cookie %q)", cookie.Secure, c.secure, res.Header.Get("Set-Cookie"))
			}
		})
	}
}

// Daily use through Caddy: a key's creation answers with a redirect to a
// page that shows the key once (a refresh creates nothing and shows
// nothing); the static folder lists nothing; what an admin set on a
// member's key (through the management API) the member cannot undo from
// the dashboard.
func TestDashboardDailyUseThroughCaddy(t *testing.T) {
	c := startDashboard(t)
	org := c.newTenant("organization", "10")
	member := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"bob@example.com","first_name":"Bob"}`).expect(t, 201).JSON.Get("data.id").String()
	token, _ := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + member + `"}`)
	m := newBrowser(t)
	if status, _, _ := m.page("POST", "/dashboard/signin", url.Values{"token": {token}}); status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", status)
	}
	_, body, _ := m.page("GET", "/dashboard/keys", nil)
	if !strings.Contains(body, ">Bob</span>") {
		t.Fatal("the header does not name the member")
	}
	status, _, hdr := m.page("POST", "/dashboard/keys", m.form("name", "bob's"))
	loc := hdr.Get("Location")
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/dashboard/keys?created=") {
		t.Fatalf("create: %d %q", status, loc)
	}
	keyRE := regexp.MustCompile(`sk-tg-v1-[0-9a-f]{64}`)
	_, body, _ = m.page("GET", loc, nil)
	if keyRE.FindString(body) == "" {
		t.Fatal("the new key is not shown after the redirect")
	}
	_, body, _ = m.page("GET", loc, nil)
	if keyRE.FindString(body) != "" || !strings.Contains(body, "shown only once") {
		t.Fatal("a refresh shows the key again")
	}
	keys := c.api("GET", "/keys", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
	if len(keys) != 1 {
		t.Fatalf("%d keys after one creation and a refresh", len(keys))
	}
	hash := keys[0].Get("hash").String()

	// The static folder: files, not a listing.
	if status, _, _ := m.page("GET", "/dashboard/static/dashboard.css", nil); status != 200 {
		t.Fatalf("stylesheet: %d", status)
	}
	if status, body, _ := m.page("GET", "/dashboard/static/", nil); status != 404 || strings.Contains(body, `href="dashboard.js"`) {
		t.Fatalf("static folder: %d", status)
	}

	// The admin (the management key) caps and disables the member's key.
	c.api("PATCH", "/keys/"+hash, org.MgmtKey, `{"limit":5,"disabled":true}`).expect(t, 200)
	m.page("GET", "/dashboard/keys/"+hash, nil)
	for path, form := range map[string]url.Values{
		"/dashboard/keys/" + hash:             m.form("name", "bob's", "limit", "500"),
		"/dashboard/keys/" + hash + "#remove": m.form("name", "bob's", "limit", ""),
		"/dashboard/keys/" + hash + "/enable": m.form(),
	} {
		path, _, _ = strings.Cut(path, "#")
		if status, body, _ := m.page("POST", path, form); status != 403 || !strings.Contains(body, "only an admin can") {
			t.Fatalf("member %s: %d", path, status)
		}
	}
	k := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if k.Get("limit").Float() != 5 || !k.Get("disabled").Bool() {
		t.Fatalf("the member undid the admin's limit or disable: %s", k.Raw)
	}
	// The admin's own route changes it.
	c.api("PATCH", "/keys/"+hash, org.MgmtKey, `{"limit":null,"disabled":false}`).expect(t, 200)
	if status, _, _ := m.page("POST", "/dashboard/keys/"+hash, m.form("name", "bob's", "limit", "3")); status != http.StatusSeeOther {
		t.Fatalf("member's own limit: %d", status)
	}
}
