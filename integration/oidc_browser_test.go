package integration

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testissuer"
)

// The identity provider sign-in in a real headless Chromium: the sign-in
// page's entry, the organization's ID, the link to its provider, the
// provider and back to the overview as the member; a stranger gets the
// refusal page. A screenshot of every page is saved (screenshotDir).
func TestOIDCInBrowser(t *testing.T) {
	c := startDashboard(t)
	dir := screenshotDir(t)
	org := c.newOrg("10")
	is := testissuer.New(t, "tollgate", oidcSecret)
	c.operator("PUT", "/accounts/"+org.AccountID+"/oidc", `{"issuer":"`+is.URL+`","client_id":"tollgate","client_secret":"`+oidcSecret+`"}`).expect(t, 201)
	is.SignIn(testissuer.User{Subject: "idp-ada", Email: "ada@example.com", EmailVerified: true})

	ctx := headless(t)
	base := "http://" + gatewayAddr + "/dashboard"
	run(t, ctx, "sign-in page", chromedp.Navigate(base+"/signin"), chromedp.WaitVisible(`a.button[href$="/signin/oidc"]`))
	shot(t, ctx, dir, "oidc-signin")
	run(t, ctx, "organization page", chromedp.Click(`a.button[href$="/signin/oidc"]`), chromedp.WaitVisible(`#account`))
	shot(t, ctx, dir, "oidc-organization")
	var text string
	run(t, ctx, "find", chromedp.SendKeys(`#account`, org.AccountID), chromedp.Submit(`#account`),
		chromedp.WaitVisible(`a.button.primary`), chromedp.Text(`main`, &text))
	if !strings.Contains(text, "test organization signs in through its identity provider") {
		t.Fatalf("continue page: %q", text)
	}
	shot(t, ctx, dir, "oidc-continue")
	var title, url string
	run(t, ctx, "to the provider and back", chromedp.Click(`a.button.primary`), chromedp.WaitVisible(`.chart svg`),
		chromedp.Text(`h1`, &title), chromedp.Location(&url))
	if title != "test organization" || !strings.HasSuffix(url, "/dashboard/") {
		t.Fatalf("after sign-in: %q at %s", title, url)
	}
	shot(t, ctx, dir, "oidc-overview")

	// Signed out, a stranger at the provider gets a page, no session.
	run(t, ctx, "sign out", chromedp.Click(`.signout button`), chromedp.WaitVisible(`#token`))
	is.SignIn(testissuer.User{Subject: "idp-zed", Email: "zed@example.com", EmailVerified: true})
	run(t, ctx, "stranger", chromedp.Navigate(base+"/signin/oidc?account="+org.AccountID), chromedp.WaitVisible(`[role=alert]`),
		chromedp.Text(`h1`, &title))
	if title != "You are not a member of test organization" {
		t.Fatalf("stranger: %q", title)
	}
	shot(t, ctx, dir, "oidc-refused")
	run(t, ctx, "no session", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(`#token`), chromedp.Location(&url))
	if !strings.Contains(url, "/dashboard/signin") {
		t.Fatalf("a refused sign-in reached %s", url)
	}
}
