package integration

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/tollgate-dev/caddy-tollgate/handlers/connect"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// RFC 7636 Appendix B: a verifier and its S256 challenge.
const (
	pkceVerifier  = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	pkceChallenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
)

// connectCodeTTL is the test gateway's connect_code_ttl: short, so that a
// code's expiry is seen without a clock of the test's own.
const connectCodeTTL = 2 * time.Second

func withConnectCodeTTL(t *testing.T) func(string) string {
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tbrand service\n", fmt.Sprintf("\t\tbrand service\n\t\tconnect_code_ttl %v\n", connectCodeTTL))
	}
}

// authCode asks for a code with mgmt and returns it.
func authCode(t *testing.T, c *client, mgmt, body string) string {
	t.Helper()
	r := c.api("POST", "/auth/keys/code", mgmt, body).expect(t, 200)
	code := r.JSON.Get("data.id").Str
	if !strings.HasPrefix(code, "auth_code_") || r.JSON.Get("data.app_id").Int() <= 0 || r.JSON.Get("data.created_at").Str == "" {
		t.Fatalf("code answer %s", r.Body)
	}
	return code
}

func s256Code(callback, extra string) string {
	return `{"callback_url":"` + callback + `","code_challenge":"` + pkceChallenge + `","code_challenge_method":"S256"` + extra + `}`
}

func exchangeBody(code, verifier string) string {
	return `{"code":"` + code + `","code_verifier":"` + verifier + `","code_challenge_method":"S256"}`
}

// TestConnectFlowThroughCaddy: the connect flow's two routes, their bad
// input, single use, expiry, and the key that results: the member's,
// recorded with its app, usable, listed to a management key, which cannot
// change or delete it; its expiry is an expired OAuth session.
func TestConnectFlowThroughCaddy(t *testing.T) {
	startInProcessWith(t, withConnectCodeTTL(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	regular, _ := c.newKey(org.Mgmt, `{"name":"regular"}`)
	keyCount := func() int {
		return len(c.api("GET", "/keys?include_disabled=true", org.Mgmt, nil).expect(t, 200).JSON.Get("data").Array())
	}
	before := keyCount()

	// Bad input names the field; the wrong key kinds are refused.
	for _, tc := range []struct{ body, msg string }{
		{`{}`, "callback_url: required"},
		{`{"callback_url":"http://myapp.com/cb","code_challenge":"` + pkceChallenge + `"}`, "callback_url: must be https"},
		{`{"callback_url":"myapp://cb","code_challenge":"` + pkceChallenge + `"}`, "callback_url:"},
		{`{"callback_url":"https://myapp.com/cb"}`, "code_challenge: required"},
		{`{"callback_url":"https://myapp.com/cb","code_challenge":"` + pkceChallenge + `","code_challenge_method":"S512"}`, "code_challenge_method: expected S256 or plain"},
		{s256Code("https://myapp.com/cb", `,"limit":-1`), "limit: must not be negative"},
		{s256Code("https://myapp.com/cb", `,"expires_at":"2001-01-01T00:00:00Z"`), "expires_at: must be in the future"},
	} {
		c.api("POST", "/auth/keys/code", org.Mgmt, tc.body).expectError(t, 400, tc.msg)
	}
	good := s256Code("http://localhost:5555/callback", `,"limit":1.5,"key_label":"My IDE"`)
	c.api("POST", "/auth/keys/code", "", good).expectError(t, 401, "Missing Authentication header")
	c.api("POST", "/auth/keys/code", regular, good).expectError(t, 403, "Only management keys")
	c.api("POST", "/auth/keys/code", org.MgmtKey, good).expectError(t, 403, "no creator member")
	c.api("GET", "/auth/keys/code", org.Mgmt, nil).expectError(t, 405, "")
	c.api("GET", "/auth/keys", "", nil).expectError(t, 405, "")

	// A wrong verifier: 403, the code is spent, nothing created. A key
	// sent along with the exchange is not looked at.
	code := authCode(t, c, org.Mgmt, good)
	wrong := strings.Replace(pkceVerifier, "d", "e", 1)
	c.api("POST", "/auth/keys", "sk-tg-v1-not-a-key", exchangeBody(code, wrong)).expectError(t, 403, "code_verifier does not match")
	c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expectError(t, 400, "code: unknown or already used")
	c.api("POST", "/auth/keys", "", `{"code_verifier":"`+pkceVerifier+`"}`).expectError(t, 400, "code: required")
	c.api("POST", "/auth/keys", "", `{"code":"auth_code_x"}`).expectError(t, 400, "code_verifier: required")
	c.api("POST", "/auth/keys", "", `{"code":"auth_code_x","code_verifier":"`+pkceVerifier+`","code_challenge_method":"S1"}`).
		expectError(t, 400, "code_challenge_method")

	// An exchange refused before its verifier is looked at (none, a bad
	// method, a malformed field) uses the code up all the same.
	for _, tc := range []struct{ body, msg string }{
		{`{"code":"%s"}`, "code_verifier: required"},
		{`{"code":"%s","code_verifier":"` + pkceVerifier + `","code_challenge_method":"S1"}`, "code_challenge_method"},
		{`{"code":"%s","code_verifier":7}`, "code_verifier"},
	} {
		code := authCode(t, c, org.Mgmt, good)
		c.api("POST", "/auth/keys", "", fmt.Sprintf(tc.body, code)).expectError(t, 400, tc.msg)
		c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expectError(t, 400, "code: unknown or already used")
	}

	// One origin, one app id: the default port and an internationalised
	// host written in Unicode or in its ASCII form are the same origin.
	appID := func(callback string) int64 {
		return c.api("POST", "/auth/keys/code", org.Mgmt, s256Code(callback, "")).expect(t, 200).JSON.Get("data.app_id").Int()
	}
	if appID("https://app.example:443/cb") != appID("https://app.example/cb") ||
		appID("https://\u0430pple.com/cb") != appID("https://xn--pple-43d.com/other") ||
		appID("https://\u0430pple.com/cb") == appID("https://apple.com/cb") {
		t.Fatal("one origin written two ways has two app ids, or two origins one")
	}

	// The exchange: the member's key, once.
	code = authCode(t, c, org.Mgmt, good)
	r := c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expect(t, 200)
	key := r.JSON.Get("key").Str
	if !strings.HasPrefix(key, "sk-tg-v1-") || r.JSON.Get("user_id").Str != org.Admin {
		t.Fatalf("exchange answer %s", r.Body)
	}
	c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expectError(t, 400, "code: unknown or already used")
	if n := keyCount(); n != before+1 {
		t.Fatalf("%d keys, want %d: a refused exchange created one", n, before+1)
	}

	// It answers on the API, with the limit the member approved.
	me := c.api("GET", "/key", key, nil).expect(t, 200).JSON.Get("data")
	if me.Get("limit").Float() != 1.5 || me.Get("creator_user_id").Str != org.Admin {
		t.Fatalf("GET /key: %s", me.Raw)
	}
	c.api("POST", "/chat/completions", key, `{"model":"mock/echo","messages":[{"role":"user","content":"hello"}]}`).expect(t, 200)

	// A management key lists it, with its app, but cannot change or delete it.
	var hash string
	for _, k := range c.api("GET", "/keys", org.Mgmt, nil).expect(t, 200).JSON.Get("data").Array() {
		if k.Get("connect").Exists() {
			hash = k.Get("hash").Str
			if k.Get("name").Str != "My IDE" || k.Get("connect.origin").Str != "http://localhost:5555" ||
				k.Get("connect.name").Str != "localhost:5555" || k.Get("connect.app_id").Int() != connect.AppID("http://localhost:5555") ||
				k.Get("creator_user_id").Str != org.Admin || k.Get("limit").Float() != 1.5 {
				t.Fatalf("connect key in the list: %s", k.Raw)
			}
		}
	}
	if hash == "" {
		t.Fatal("the connect key is not in the list")
	}
	c.api("GET", "/keys/"+hash, org.Mgmt, nil).expect(t, 200)
	c.api("PATCH", "/keys/"+hash, org.Mgmt, `{"disabled":true}`).expectError(t, 403, "provisioned by a connect client")
	c.api("DELETE", "/keys/"+hash, org.Mgmt, nil).expectError(t, 403, "provisioned by a connect client")
	c.api("GET", "/key", key, nil).expect(t, 200)

	// plain: the verifier is the challenge.
	code = authCode(t, c, org.Mgmt, `{"callback_url":"https://chat.example/cb","code_challenge":"`+pkceVerifier+`","code_challenge_method":"plain"}`)
	c.api("POST", "/auth/keys", "", `{"code":"`+code+`","code_verifier":"`+pkceVerifier+`"}`).expect(t, 200)

	// A code waits connect_code_ttl for its exchange.
	code = authCode(t, c, org.Mgmt, good)
	issued := time.Now()
	time.Sleep(time.Until(issued.Add(connectCodeTTL + 100*time.Millisecond))) // the code's lifetime, not a wait for an event
	c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expectError(t, 400, "code: expired")

	// The key's expiry the app asked for ends its OAuth session: 401.
	at := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	code = authCode(t, c, org.Mgmt, s256Code("https://chat.example/cb", `,"expires_at":"`+at+`"`))
	short := c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expect(t, 200).JSON.Get("key").Str
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := c.api("GET", "/key", short, nil)
		if r.Status == 401 {
			break
		}
		if r.Status != 200 || time.Now().After(deadline) {
			t.Fatalf("before it expires: %d %s", r.Status, r.Body)
		}
	}
	c.api("GET", "/key", short, nil).expectError(t, 401, "OAuth session expired")
	c.api("POST", "/chat/completions", short, `{"model":"mock/echo","messages":[{"role":"user","content":"hi"}]}`).
		expectError(t, 401, "OAuth session expired")

	// A personal account's management key asks for its owner.
	personal := c.newTenant("personal", "1")
	code = authCode(t, c, personal.MgmtKey, good)
	r = c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expect(t, 200)
	if r.JSON.Get("user_id").Str != personal.AccountID {
		t.Fatalf("personal: %s", r.Body)
	}
}

// TestReplicasConnectCodeOnce: a code issued at one replica is exchanged
// once, whichever replicas its concurrent exchanges reach.
func TestReplicasConnectCodeOnce(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv)}
	cs := replicaClients(t, ps)
	org := cs[0].newOrg("10")
	for round := range 3 {
		code := authCode(t, cs[0], org.Mgmt, s256Code("https://app.example/cb", ""))
		var mu sync.Mutex
		statuses := map[int]int{}
		var keys []string
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				r, err := cs[i%2].try("POST", cs[i%2].gateway+"/api/v1/auth/keys", "", exchangeBody(code, pkceVerifier))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				statuses[r.Status]++
				if r.Status == http.StatusOK {
					keys = append(keys, r.JSON.Get("key").Str)
				}
			})
		}
		wg.Wait()
		if statuses[200] != 1 || statuses[400] != 7 {
			t.Fatalf("round %d: statuses %v; want one 200", round, statuses)
		}
		// The key works at both replicas.
		for _, c := range cs {
			within(t, time.Second, "the key reaches every replica", func() bool {
				return c.api("GET", "/key", keys[0], nil).Status == 200
			})
		}
	}
}

// useConnectSecrets runs the connect flow's routes with the secrets they
// take (codes, verifiers, the key they give) on success and refusal, and
// returns them by name for the log test; with consent, the gateway's
// dashboard issues a code on its consent page too.
func useConnectSecrets(t *testing.T, c *client, consent bool) map[string]string {
	t.Helper()
	tn := c.newTenant("personal", "1")
	verifier := "log-test-verifier-0123456789-abcdefghijklmnopqrstuvwxyz"
	challenge := connect.ChallengeS256(verifier)
	body := `{"callback_url":"http://localhost:5555/cb","code_challenge":"` + challenge + `","code_challenge_method":"S256"}`
	refused := authCode(t, c, tn.MgmtKey, body)
	c.api("POST", "/auth/keys", "", exchangeBody(refused, verifier+"x")).expect(t, 403)
	code := authCode(t, c, tn.MgmtKey, body)
	key := c.api("POST", "/auth/keys", "", exchangeBody(code, verifier)).expect(t, 200).JSON.Get("key").Str
	c.api("POST", "/auth/keys", "", exchangeBody(code, verifier)).expect(t, 400)
	c.api("GET", "/key", key, nil).expect(t, 200)
	plain := "log-test-plain-verifier-9876543210-zyxwvutsrqponmlkjihgf"
	code2 := authCode(t, c, tn.MgmtKey, `{"callback_url":"https://app.example/cb","code_challenge":"`+plain+`","code_challenge_method":"plain"}`)
	c.api("POST", "/auth/keys", "", `{"code":"`+code2+`","code_verifier":"`+plain+`"}`).expect(t, 200)
	secrets := map[string]string{"connect code": code, "refused connect code": refused, "plain connect code": code2,
		"PKCE verifier": verifier, "plain PKCE verifier": plain, "connect key": key}
	if consent {
		secrets["consent page's code"] = consentCode(t, c, challenge)
	}
	return secrets
}

// consentCode approves an S256 request on the consent page of the
// gateway's dashboard (as a personal account's owner) and returns the
// code the page sends back to the app.
func consentCode(t *testing.T, c *client, challenge string) string {
	t.Helper()
	tn := c.newTenant("personal", "1")
	token, _ := c.signInLink(`{"account_id":"` + tn.AccountID + `"}`)
	b := newBrowser(t)
	b.base = c.gateway
	if status, _, _ := b.page("POST", "/dashboard/signin", url.Values{"token": {token}}); status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", status)
	}
	query := consentQuery("http://localhost:5555/cb", challenge)
	b.page("GET", "/dashboard/connect?"+query, nil)
	v, _ := url.ParseQuery(query)
	v.Set("decision", "approve")
	v.Set("csrf_token", b.csrf)
	_, body, _ := b.page("POST", "/dashboard/connect", v)
	code := returnedTo(t, body).Query().Get("code")
	if code == "" {
		t.Fatalf("no code from the consent page:\n%s", body)
	}
	return code
}

// startConnectDashboard runs the test gateway with the dashboard at
// /dashboard and the short connect_code_ttl.
func startConnectDashboard(t *testing.T) *client {
	t.Helper()
	startInProcessWith(t, func(cfg string) string {
		cfg = withConnectCodeTTL(t)(cfg)
		return replaceOnce(t, cfg, "\ttollgate {\n\t\t# the gateway's options", "\ttollgate_dashboard {\n\t\tsignin_attempts 50\n\t}\n\ttollgate {\n\t\t# the gateway's options")
	})
	return newClient(t, gatewayAddr, adminAddr)
}

// consentQuery is an app's request, as the query of the consent page.
func consentQuery(callback, challenge string, extra ...string) string {
	v := url.Values{"callback_url": {callback}, "code_challenge": {challenge}, "code_challenge_method": {"S256"}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v.Encode()
}

var returnURL = regexp.MustCompile(`<meta http-equiv="refresh" content="0; url=([^"]+)">`)

// returnedTo is the URL the page that returns to the app leads to.
func returnedTo(t *testing.T, body string) *url.URL {
	t.Helper()
	m := returnURL.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no return to the app in:\n%s", body)
	}
	u, err := url.Parse(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestConnectConsentThroughCaddy: the consent page under the dashboard:
// sign-in first (with the page as return_to), what the person sees, a
// request that breaks the rules shown and not sent back, a form without
// its CSRF token refused, refusal and approval sent back to the app, the
// code exchanged for the member's key, the member's connected apps and
// their revocation; a session without a member cannot connect apps.
func TestConnectConsentThroughCaddy(t *testing.T) {
	c := startConnectDashboard(t)
	org := c.newOrg("10")
	signIn := func(body string) *browser {
		token, _ := c.signInLink(body)
		b := newBrowser(t)
		if status, _, _ := b.page("POST", "/dashboard/signin", url.Values{"token": {token}}); status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d", status)
		}
		return b
	}
	query := consentQuery("http://localhost:5555/callback?state=s1", pkceChallenge, "limit", "2.5", "usage_limit_type", "monthly", "key_label", "Chat app")

	// Not signed in: to the sign-in page, coming back to the request.
	anon := newBrowser(t)
	status, _, hdr := anon.page("GET", "/dashboard/connect?"+query, nil)
	if status != http.StatusSeeOther || hdr.Get("Location") != "/dashboard/signin?return_to="+url.QueryEscape("/dashboard/connect?"+query) {
		t.Fatalf("signed out: %d %s", status, hdr.Get("Location"))
	}

	m := signIn(`{"account_id":"` + org.AccountID + `","member_id":"` + org.Member + `"}`)
	status, body, _ := m.page("GET", "/dashboard/connect?"+query, nil)
	for _, want := range []string{"http://localhost:5555</strong> asks for an API key", "$2.5, reset monthly", "Chat app",
		"http://localhost:5555/callback?state=s1", `value="approve"`, `value="refuse"`} {
		if status != 200 || !strings.Contains(body, want) {
			t.Fatalf("consent page %d lacks %q:\n%s", status, want, body)
		}
	}
	// An internationalised host: its ASCII form is the origin, shown beside
	// the Unicode form the app wrote, with a warning.
	status, body, _ = m.page("GET", "/dashboard/connect?"+consentQuery("https://\u0430pple.com/cb", pkceChallenge), nil)
	for _, want := range []string{"https://xn--pple-43d.com</strong> asks for an API key", "role=\"alert\"",
		"shows as <strong class=\"mono\">\u0430pple.com</strong> but is <strong class=\"mono\">xn--pple-43d.com</strong>"} {
		if status != 200 || !strings.Contains(body, want) {
			t.Fatalf("consent page for an internationalised host %d lacks %q:\n%s", status, want, body)
		}
	}
	if _, body, _ := m.page("GET", "/dashboard/connect?"+query, nil); strings.Contains(body, "outside the Latin alphabet") {
		t.Fatal("an ASCII host is warned about")
	}
	// A request that breaks the rules: a page naming the field, no way back.
	for _, tc := range []struct{ q, msg string }{
		{consentQuery("http://evil.example/cb", pkceChallenge), "callback_url: must be https"},
		{consentQuery("https://app.example/cb", ""), "code_challenge: required"},
		{strings.Replace(query, "code_challenge_method=S256", "code_challenge_method=S512", 1), "code_challenge_method: expected S256 or plain"},
	} {
		status, body, _ := m.page("GET", "/dashboard/connect?"+tc.q, nil)
		if status != 400 || !strings.Contains(body, tc.msg) || strings.Contains(body, "refresh") {
			t.Fatalf("%s: %d\n%s", tc.q, status, body)
		}
	}
	keys := func() int {
		return len(c.api("GET", "/keys?include_disabled=true", org.Mgmt, nil).expect(t, 200).JSON.Get("data").Array())
	}
	before := keys()
	form := func(decision string, withCSRF bool) url.Values {
		v, _ := url.ParseQuery(query)
		v.Set("decision", decision)
		if withCSRF {
			v.Set("csrf_token", m.csrf)
		}
		return v
	}
	// Without the CSRF token: refused, no code.
	if status, body, _ := m.page("POST", "/dashboard/connect", form("approve", false)); status != 403 || strings.Contains(body, "code=") {
		t.Fatalf("no CSRF: %d", status)
	}
	// Refused: back to the app with error=access_denied and its state.
	_, body, _ = m.page("POST", "/dashboard/connect", form("refuse", true))
	back := returnedTo(t, body)
	if back.Host != "localhost:5555" || back.Query().Get("error") != "access_denied" || back.Query().Get("state") != "s1" || back.Query().Has("code") {
		t.Fatalf("refusal returns to %s", back)
	}
	// Approved: back with the code, which the app exchanges for the member's key.
	m.page("GET", "/dashboard/connect?"+query, nil)
	status, body, hdr = m.page("POST", "/dashboard/connect", form("approve", true))
	back = returnedTo(t, body)
	code := back.Query().Get("code")
	if status != 200 || hdr.Get("Location") != "" || back.Path != "/callback" || back.Query().Get("state") != "s1" || !strings.HasPrefix(code, "auth_code_") {
		t.Fatalf("approval: %d, returns to %s", status, back)
	}
	r := c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expect(t, 200)
	key := r.JSON.Get("key").Str
	if r.JSON.Get("user_id").Str != org.Member || keys() != before+1 {
		t.Fatalf("exchange: %s", r.Body)
	}
	me := c.api("GET", "/key", key, nil).expect(t, 200).JSON.Get("data")
	if me.Get("limit").Float() != 2.5 || me.Get("limit_reset").Str != "monthly" {
		t.Fatalf("the approved key: %s", me.Raw)
	}
	c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expectError(t, 400, "already used")

	// The member's connected apps; another member cannot revoke it.
	status, body, _ = m.page("GET", "/dashboard/apps", nil)
	hash := regexp.MustCompile(`/dashboard/apps/([0-9a-f]{64})/revoke`).FindStringSubmatch(body)
	if status != 200 || hash == nil || !strings.Contains(body, "localhost:5555") || !strings.Contains(body, "Chat app") {
		t.Fatalf("connected apps %d:\n%s", status, body)
	}
	a := signIn(`{"account_id":"` + org.AccountID + `","member_id":"` + org.Admin + `"}`)
	a.page("GET", "/dashboard/apps", nil)
	if status, _, _ := a.page("POST", "/dashboard/apps/"+hash[1]+"/revoke", a.form()); status != 404 {
		t.Fatalf("another member's revocation: %d", status)
	}
	if status, _, _ := m.page("POST", "/dashboard/apps/"+hash[1]+"/revoke", url.Values{}); status != 403 {
		t.Fatalf("revocation without CSRF: %d", status)
	}
	c.api("GET", "/key", key, nil).expect(t, 200)
	m.page("GET", "/dashboard/apps", nil)
	if status, _, hdr := m.page("POST", "/dashboard/apps/"+hash[1]+"/revoke", m.form()); status != http.StatusSeeOther ||
		hdr.Get("Location") != "/dashboard/apps?revoked" {
		t.Fatalf("revocation: %d", status)
	}
	c.api("GET", "/key", key, nil).expectError(t, 401, "Invalid API key")

	// An organization spoken for as a whole has no member to give a key to.
	whole := signIn(`{"account_id":"` + org.AccountID + `"}`)
	if status, body, _ := whole.page("GET", "/dashboard/connect?"+query, nil); status != 403 || !strings.Contains(body, "Sign in as yourself") {
		t.Fatalf("organization as a whole: %d", status)
	}
}

// TestConnectInBrowser: the connect flow in a real headless Chromium. An
// app (a local callback server) sends the person to the consent page;
// they sign in with their link, see the app's origin and the key's limit,
// approve, and are sent back to the app with a code; the app exchanges it
// with its verifier for the person's key, which answers on the API; a
// management key cannot delete it; the person revokes it under Connected
// apps and it is refused from then on. Screenshots: connect-consent (and
// -phone), connect-return, connect-apps, connect-revoked.
func TestConnectInBrowser(t *testing.T) {
	c := startConnectDashboard(t)
	dir := screenshotDir(t)
	org := c.newOrg("10")
	codes := make(chan url.Values, 4)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		codes <- r.URL.Query()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Chat app</title><h1 id="connected">Chat app: connecting…</h1>`)
	}))
	t.Cleanup(app.Close)
	callback := app.URL + "/callback" // http://127.0.0.1:<port>: a tool on the person's machine

	ctx := headless(t)
	consent := "/dashboard/connect?" + consentQuery(callback+"?state=xyz", pkceChallenge, "limit", "5", "usage_limit_type", "monthly", "key_label", "Chat app")
	_, link := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + org.Member + `","base_url":"http://` + gatewayAddr + `"}`)
	run(t, ctx, "sign in on the way", chromedp.Navigate(link+"&return_to="+url.QueryEscape(consent)),
		chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`), chromedp.WaitVisible(`button[value=approve]`))
	var text string
	run(t, ctx, "consent page", chromedp.Text(`main`, &text))
	for _, want := range []string{strings.TrimPrefix(app.URL, "http://") + " asks for an API key", "$5, reset monthly", "Chat app", "Approve", "Refuse"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the consent page lacks %q:\n%s", want, text)
		}
	}
	shot(t, ctx, dir, "connect-consent")
	run(t, ctx, "phone", emulation.SetDeviceMetricsOverride(390, 844, 2, true))
	shot(t, ctx, dir, "connect-consent-phone")
	run(t, ctx, "desktop", emulation.ClearDeviceMetricsOverride())

	// An internationalised host: the page shows its ASCII form and warns.
	run(t, ctx, "internationalised host", chromedp.Navigate("http://"+gatewayAddr+"/dashboard/connect?"+consentQuery("https://\u0430pple.com/callback", pkceChallenge)),
		chromedp.WaitVisible(`button[value=approve]`), chromedp.Text(`main`, &text))
	for _, want := range []string{"https://xn--pple-43d.com asks for an API key", "shows as \u0430pple.com but is xn--pple-43d.com"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the consent page for an internationalised host lacks %q:\n%s", want, text)
		}
	}
	shot(t, ctx, dir, "connect-consent-idn")
	run(t, ctx, "back to the app's request", chromedp.Navigate("http://"+gatewayAddr+consent), chromedp.WaitVisible(`button[value=approve]`))

	var at string
	run(t, ctx, "approve", chromedp.Click(`button[value=approve]`), chromedp.WaitVisible(`#connected`), chromedp.Location(&at))
	got := <-codes
	code := got.Get("code")
	if !strings.HasPrefix(at, callback+"?") || got.Get("state") != "xyz" || !strings.HasPrefix(code, "auth_code_") {
		t.Fatalf("back at %s with %v", at, got)
	}
	shot(t, ctx, dir, "connect-return")

	// The app's exchange; the key answers; a management key cannot delete it.
	r := c.api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier)).expect(t, 200)
	key := r.JSON.Get("key").Str
	c.api("POST", "/chat/completions", key, `{"model":"mock/echo","messages":[{"role":"user","content":"hello from the app"}]}`).expect(t, 200)
	hash := c.api("GET", "/keys", org.Mgmt, nil).JSON.Get(`data.#(name=="Chat app").hash`).Str
	c.api("DELETE", "/keys/"+hash, org.Mgmt, nil).expectError(t, 403, "provisioned by a connect client")
	c.api("GET", "/key", key, nil).expect(t, 200)

	// The person revokes it.
	run(t, ctx, "connected apps", chromedp.Navigate("http://"+gatewayAddr+"/dashboard/apps"),
		chromedp.WaitVisible(`form[action$="/revoke"] button`), chromedp.Text(`main`, &text))
	if !strings.Contains(text, "Chat app") || !strings.Contains(text, app.URL) {
		t.Fatalf("connected apps:\n%s", text)
	}
	shot(t, ctx, dir, "connect-apps")
	run(t, ctx, "revoke", chromedp.Click(`form[action$="/revoke"] button`), chromedp.WaitVisible(`.notice`))
	c.api("GET", "/key", key, nil).expectError(t, 401, "Invalid API key")
	c.api("POST", "/chat/completions", key, `{"model":"mock/echo","messages":[{"role":"user","content":"hi"}]}`).expectError(t, 401, "")
	shot(t, ctx, dir, "connect-revoked")
}

// TestReplicasConnectRevocation: on two replicas of one Redis, the person
// approves at one (their session and the code are shared records), the
// app exchanges the code at the other, and the person's revocation at the
// first is refused at the second within 100 ms.
func TestReplicasConnectRevocation(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv)}
	for _, p := range ps {
		// The dashboard beside the gateway, as in Caddyfile.example.
		cfg, err := os.ReadFile(p.config)
		if err != nil {
			t.Fatal(err)
		}
		cfg = []byte(replaceOnce(t, string(cfg), "\ttollgate {\n\t\t# the gateway's options", "\ttollgate_dashboard\n\ttollgate {\n\t\t# the gateway's options"))
		if err := os.WriteFile(p.config, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		p.stop(t)
		p.start(t)
	}
	cs := replicaClients(t, ps)
	org := cs[0].newOrg("10")
	token, _ := cs[0].signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + org.Member + `"}`)
	b := newBrowser(t)
	b.base = cs[0].gateway
	if status, _, _ := b.page("POST", "/dashboard/signin", url.Values{"token": {token}}); status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", status)
	}
	query := consentQuery("https://app.example/cb", pkceChallenge)
	b.page("GET", "/dashboard/connect?"+query, nil)
	v, _ := url.ParseQuery(query)
	v.Set("decision", "approve")
	v.Set("csrf_token", b.csrf)
	_, body, _ := b.page("POST", "/dashboard/connect", v)
	code := returnedTo(t, body).Query().Get("code")
	var key string
	within(t, time.Second, "the code reaches the other replica", func() bool {
		r := cs[1].api("POST", "/auth/keys", "", exchangeBody(code, pkceVerifier))
		key = r.JSON.Get("key").Str
		return r.Status == 200
	})
	cs[1].api("GET", "/key", key, nil).expect(t, 200)
	within(t, time.Second, "the key reaches the first replica", func() bool { return cs[0].api("GET", "/key", key, nil).Status == 200 })

	_, body, _ = b.page("GET", "/dashboard/apps", nil)
	hash := regexp.MustCompile(`/dashboard/apps/([0-9a-f]{64})/revoke`).FindStringSubmatch(body)
	if hash == nil {
		t.Fatalf("connected apps:\n%s", body)
	}
	if status, _, _ := b.page("POST", "/dashboard/apps/"+hash[1]+"/revoke", b.form()); status != http.StatusSeeOther {
		t.Fatalf("revocation: %d", status)
	}
	cs[0].api("GET", "/key", key, nil).expectError(t, 401, "Invalid API key")
	took := within(t, feedBound, "the revocation reaches the other replica", func() bool {
		return cs[1].api("GET", "/key", key, nil).Status == 401
	})
	t.Logf("revoked at the other replica after %v", took)
	cs[1].api("POST", "/chat/completions", key, `{"model":"mock/echo","messages":[{"role":"user","content":"hi"}]}`).expectError(t, 401, "Invalid API key")
}
