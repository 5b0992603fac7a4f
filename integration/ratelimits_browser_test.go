package integration

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// A key's rate limits are edited on its dashboard page in a browser, and
// the API then reports them (screenshot key-rate-limits.png).
func TestDashboardKeyRateLimitsInBrowser(t *testing.T) {
	c := startDashboard(t)
	dir := screenshotDir(t)
	org := c.newAccount(`{"name":"Acme Robotics","type":"organization"}`, "25")
	admin := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@acme.example","role":"admin","first_name":"Ada"}`).expect(t, 201).JSON.Get("data.id").String()
	_, hash := c.newKey(org.MgmtKey, `{"name":"limited","rate_limits":{"requests_per_day":1000}}`)

	ctx := headless(t)
	base := "http://" + gatewayAddr + "/dashboard"
	_, link := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + admin + `","base_url":"http://` + gatewayAddr + `"}`)
	// The sign-in page has an h1 too: wait for the overview's chart, or the
	// next navigation aborts the sign-in still under way.
	run(t, ctx, "sign in", chromedp.Navigate(link), chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`), chromedp.WaitVisible(`.chart svg`))

	var day string
	run(t, ctx, "key page", chromedp.Navigate(base+"/keys/"+hash), chromedp.WaitVisible(`#e-rl-requests_per_minute`),
		chromedp.Value(`#e-rl-requests_per_day`, &day))
	if day != "1000" {
		t.Fatalf("requests_per_day shown as %q", day)
	}
	var notice string
	run(t, ctx, "save limits", chromedp.SendKeys(`#e-rl-requests_per_minute`, "30"), chromedp.SendKeys(`#e-rl-concurrent_requests`, "4"),
		chromedp.Submit(`#e-rl-requests_per_minute`), chromedp.WaitVisible(`p.notice`), chromedp.Text(`p.notice`, &notice))
	if !strings.Contains(notice, "Saved") {
		t.Fatalf("notice %q", notice)
	}
	shot(t, ctx, dir, "key-rate-limits")
	rl := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200).JSON.Get("data.rate_limits")
	if rl.Get("requests_per_minute").Int() != 30 || rl.Get("concurrent_requests").Int() != 4 || rl.Get("requests_per_day").Int() != 1000 {
		t.Fatalf("rate_limits after the browser's edit: %s", rl.Raw)
	}
}
