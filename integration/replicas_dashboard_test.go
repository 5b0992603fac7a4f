package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// startDashboardReplica is startReplica with the dashboard at /dashboard
// (a generous sign-in attempt limit: the test polls sign-ins).
func startDashboardReplica(t *testing.T, srv *redistest.Server) *process {
	t.Helper()
	p := &process{gateway: freeport.Addr(t), admin: freeport.Addr(t), mock: freeport.Addr(t), log: new(lockedBuffer)}
	p.config = filepath.Join(t.TempDir(), "Caddyfile")
	dir := t.TempDir()
	cfg := gatewayCaddyfile(p.admin, dir, p.gateway, p.mock, "1ms")
	cfg = replaceOnce(t, cfg, "data_dir "+dir, fmt.Sprintf(`storage redis {
			address %s
			password {env.TOLLGATE_TEST_REDIS_PASSWORD}
			key_prefix replicas:
		}`, srv.Addr))
	cfg = replaceOnce(t, cfg, "\ttollgate {\n\t\t# the gateway's options", "\ttollgate_dashboard {\n\t\tsignin_attempts 10000\n\t}\n\ttollgate {\n\t\t# the gateway's options")
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t)
	return p
}

// dashClient is a browser of one replica's dashboard that keeps no
// cookie of its own: the test hands the session cookie from replica to
// replica.
type dashClient struct {
	t    *testing.T
	base string
	http *http.Client
}

func newDashClient(t *testing.T, gateway string) *dashClient {
	return &dashClient{t: t, base: "http://" + gateway, http: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a GET (form nil) or a form POST with the session cookie (if
// any); it returns the status, the body and the headers.
func (c *dashClient) do(path, cookie string, form url.Values) (int, string, http.Header) {
	c.t.Helper()
	method, body := "GET", io.Reader(nil)
	if form != nil {
		method, body = "POST", strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "tollgate_dashboard", Value: cookie})
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// signedIn reports whether the cookie is a live session here: the
// overview, not the redirect to sign in.
func (c *dashClient) signedIn(cookie string) bool {
	status, _, _ := c.do("/dashboard/", cookie, nil)
	return status == http.StatusOK
}

// sessionCookie is the session cookie a sign-in set.
func sessionCookie(t *testing.T, h http.Header) string {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "tollgate_dashboard" && c.Value != "" {
			return c.Value
		}
	}
	t.Fatalf("no session cookie in %v", h)
	return ""
}

// Two gateway replicas on one redis-server share the dashboard's sign-in
// links and sessions: a link issued at A is used at B, once (A refuses
// it then); a session started at A is valid at B; a sign-out at B ends
// it at A.
func TestReplicasShareDashboardSessionsAndLinks(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startDashboardReplica(t, srv), startDashboardReplica(t, srv)}
	cs := replicaClients(t, ps)
	a, b := newDashClient(t, ps[0].gateway), newDashClient(t, ps[1].gateway)
	org := cs[0].newTenant("organization", "10")
	link := func() string {
		token, _ := cs[0].signInLink(`{"account_id":"` + org.AccountID + `"}`)
		return token
	}
	const feed = 5 * time.Second // the bound on a record reaching the other replica

	// A link issued at A, used at B (once the record reached B).
	token := link()
	var cookie string
	within(t, feed, "a link issued at replica A signs in at replica B", func() bool {
		status, body, h := b.do("/dashboard/signin", "", url.Values{"token": {token}})
		switch {
		case status == http.StatusSeeOther:
			cookie = sessionCookie(t, h)
			return true
		case status == http.StatusBadRequest && strings.Contains(body, "not valid"):
			time.Sleep(10 * time.Millisecond) // not there yet
			return false
		}
		t.Fatalf("sign-in at B: %d %s", status, body)
		return false
	})
	// Used once: refused at A at once (Redis holds the claim, whether or
	// not A's copy of the link is gone yet) and again at B.
	for _, c := range []*dashClient{a, b} {
		if status, body, h := c.do("/dashboard/signin", "", url.Values{"token": {token}}); status != http.StatusBadRequest ||
			!strings.Contains(body, "not valid") || h.Get("Set-Cookie") != "" {
			t.Fatalf("a used link at %s: %d %v\n%s", c.base, status, h, body)
		}
	}
	if !b.signedIn(cookie) {
		t.Fatal("the session of B's sign-in is not valid at B")
	}
	within(t, feed, "a session started at B is valid at A", func() bool { return a.signedIn(cookie) })

	// A session started at A is valid at B; a sign-out at B ends it at A.
	status, body, h := a.do("/dashboard/signin", "", url.Values{"token": {link()}})
	if status != http.StatusSeeOther {
		t.Fatalf("sign-in at A: %d %s", status, body)
	}
	cookie = sessionCookie(t, h)
	if !a.signedIn(cookie) {
		t.Fatal("the session of A's sign-in is not valid at A")
	}
	d := within(t, feed, "a session started at A is valid at B", func() bool { return b.signedIn(cookie) })
	t.Logf("session valid at B after %v", d)
	_, page, _ := b.do("/dashboard/", cookie, nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on B's page:\n%s", page)
	}
	if status, body, _ := b.do("/dashboard/signout", cookie, url.Values{"csrf_token": {m[1]}}); status != http.StatusSeeOther {
		t.Fatalf("sign-out at B: %d %s", status, body)
	}
	if b.signedIn(cookie) {
		t.Fatal("signed out at B, still signed in at B")
	}
	d = within(t, feed, "a sign-out at B ends the session at A", func() bool { return !a.signedIn(cookie) })
	t.Logf("session ended at A after %v", d)
	// Ended: A sends the cookie's bearer to sign in.
	if status, _, h := a.do("/dashboard/keys", cookie, nil); status != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "/dashboard/signin") {
		t.Fatalf("after sign-out, A's keys page: %d %v", status, h)
	}
}

// Across replicas: a member demoted at replica A is a member at replica B
// at the next request (B reads the member's record from Redis, not only
// its memory, which the feed updates a moment later); a key created at A
// is shown once by B, right after A's redirect.
func TestReplicasDashboardFollowsTheMemberAndShowsKeysOnce(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startDashboardReplica(t, srv), startDashboardReplica(t, srv)}
	cs := replicaClients(t, ps)
	a, b := newDashClient(t, ps[0].gateway), newDashClient(t, ps[1].gateway)
	org := cs[0].newTenant("organization", "10")
	admin := cs[0].operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@example.com","role":"admin"}`).expect(t, 201).JSON.Get("data.id").String()
	token, _ := cs[0].signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + admin + `"}`)
	var cookie string
	within(t, 5*time.Second, "sign-in at A", func() bool {
		status, _, h := a.do("/dashboard/signin", "", url.Values{"token": {token}})
		if status == http.StatusSeeOther {
			cookie = sessionCookie(t, h)
		}
		return cookie != ""
	})
	within(t, 5*time.Second, "the session at B", func() bool { return b.signedIn(cookie) })
	csrf := func(c *dashClient) string {
		_, page, _ := c.do("/dashboard/keys", cookie, nil)
		m := csrfField.FindStringSubmatch(page)
		if m == nil {
			t.Fatal("no CSRF token")
		}
		return m[1]
	}
	// A key created at A, shown at B at once, and only once.
	status, _, h := a.do("/dashboard/keys", cookie, url.Values{"csrf_token": {csrf(a)}, "name": {"replicated"}})
	loc := h.Get("Location")
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/dashboard/keys?created=") {
		t.Fatalf("create at A: %d %q", status, loc)
	}
	keyRE := regexp.MustCompile(`sk-tg-v1-[0-9a-f]{64}`)
	if _, page, _ := b.do(loc, cookie, nil); keyRE.FindString(page) == "" {
		t.Fatal("B does not show the key A created")
	}
	for _, c := range []*dashClient{a, b} {
		if _, page, _ := c.do(loc, cookie, nil); keyRE.FindString(page) != "" {
			t.Fatalf("%s shows the key a second time", c.base)
		}
	}
	// Demoted at A: at B the next request is a member's.
	token2 := csrf(b)
	cs[0].operator("PATCH", "/accounts/"+org.AccountID+"/members/"+admin, `{"role":"member"}`).expect(t, 200)
	if status, _, _ := b.do("/dashboard/settings/workspaces", cookie, url.Values{"csrf_token": {token2}, "name": {"late"}}); status != http.StatusForbidden {
		t.Fatalf("demoted at A, creates a workspace at B: %d", status)
	}
	// Deactivated at A: signed out at B.
	cs[0].operator("DELETE", "/accounts/"+org.AccountID+"/members/"+admin, nil).expect(t, 200)
	if b.signedIn(cookie) {
		t.Fatal("deactivated at A, still signed in at B")
	}
}
