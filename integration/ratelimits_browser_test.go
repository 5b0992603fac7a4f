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

// A workspace's rate limits are set in the dashboard's settings by an
// organization admin in a browser: a bad one is shown next to its field,
// the saved ones stay shown, and the API then reports them (screenshot
// workspace-rate-limits.png).
func TestDashboardWorkspaceRateLimitsInBrowser(t *testing.T) {
	c := startDashboard(t)
	dir := screenshotDir(t)
	org := c.newAccount(`{"name":"Acme Robotics","type":"organization"}`, "25")
	admin := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@acme.example","role":"admin","first_name":"Ada"}`).expect(t, 201).JSON.Get("data.id").String()
	ws := c.api("POST", "/workspaces", org.MgmtKey, `{"name":"Research","slug":"research","rate_limits":{"requests_per_day":5000}}`).expect(t, 201).JSON.Get("data.id").String()

	ctx := headless(t)
	base := "http://" + gatewayAddr + "/dashboard"
	_, link := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + admin + `","base_url":"http://` + gatewayAddr + `"}`)
	run(t, ctx, "sign in", chromedp.Navigate(link), chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`), chromedp.WaitVisible(`.chart svg`))

	field := func(name string) string { return `[id="rl-` + ws + `-` + name + `"]` }
	var day string
	run(t, ctx, "settings", chromedp.Navigate(base+"/settings"), chromedp.Click(`[id="ws-`+ws+`"] summary`),
		chromedp.WaitVisible(field("requests_per_minute")), chromedp.Value(field("requests_per_day"), &day))
	if day != "5000" {
		t.Fatalf("requests_per_day shown as %q", day)
	}
	var fieldErr string
	run(t, ctx, "a bad limit", chromedp.SetValue(field("requests_per_minute"), "120"), chromedp.SetValue(field("concurrent_requests"), "1.5"),
		chromedp.Submit(field("requests_per_minute")), chromedp.WaitVisible(field("concurrent_requests")+` + span.error`),
		chromedp.Text(field("concurrent_requests")+` + span.error`, &fieldErr))
	if !strings.Contains(fieldErr, "expected an integer") {
		t.Fatalf("the bad limit's error %q", fieldErr)
	}
	var notice, shown string
	run(t, ctx, "save limits", chromedp.SetValue(field("concurrent_requests"), "8"), chromedp.Submit(field("requests_per_minute")),
		chromedp.WaitVisible(`p.notice`), chromedp.Text(`p.notice`, &notice),
		chromedp.WaitVisible(field("concurrent_requests")), chromedp.Value(field("concurrent_requests"), &shown))
	if !strings.Contains(notice, "Saved") || shown != "8" {
		t.Fatalf("notice %q, concurrent requests shown as %q", notice, shown)
	}
	shot(t, ctx, dir, "workspace-rate-limits")
	rl := c.api("GET", "/workspaces/research", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.rate_limits")
	if rl.Get("requests_per_minute").Int() != 120 || rl.Get("concurrent_requests").Int() != 8 || rl.Get("requests_per_day").Int() != 5000 {
		t.Fatalf("rate_limits after the browser's edit: %s", rl.Raw)
	}
}
