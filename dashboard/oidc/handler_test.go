package oidc

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/dashboard/oidc/testissuer"
)

// A browser's whole sign-in over HTTP: the sign-in address, the
// provider, the callback, then the host's own answer.
func TestHandlerSignsInOverHTTP(t *testing.T) {
	f := newFixture(t)
	h := &Handler{Service: f.svc, SignInPage: "/dashboard/signin", SignedIn: func(w http.ResponseWriter, _ *http.Request, id Identity) {
		_, _ = io.WriteString(w, "signed in as "+id.MemberID+" ("+string(id.Role)+")")
	}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	get := func(path string) (int, string) {
		t.Helper()
		res, err := browser.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	f.is.SignIn(testissuer.User{Subject: "idp-mia", Email: "mia@acme.test", EmailVerified: true})
	if code, body := get(BeginPath + "?account=" + f.acct.ID); code != 200 || body != "signed in as "+f.member.ID+" (member)" {
		t.Fatalf("%d %s", code, body)
	}
	f.is.SignIn(testissuer.User{Subject: "idp-zed", Email: "zed@acme.test", EmailVerified: true})
	if code, body := get(BeginPath + "?account=" + f.acct.ID); code != 403 || !strings.Contains(body, "You are not a member of Acme") || !strings.Contains(body, `href="/dashboard/signin"`) {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := get(BeginPath); code != 400 || !strings.Contains(body, "names no organization") {
		t.Fatalf("%d %s", code, body)
	}
	if code, _ := get(BeginPath + "?account=org_nope"); code != 404 {
		t.Fatalf("unknown account: %d", code)
	}
	// The callback alone, in a browser that began nothing.
	if code, body := get(CallbackPath + "?code=x&state=y"); code != 400 || !strings.Contains(body, "Start the sign-in again") {
		t.Fatalf("%d %s", code, body)
	}
	res, err := browser.Post(srv.URL+CallbackPath, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 405 || res.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d", res.StatusCode)
	}
}
