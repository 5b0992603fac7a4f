package integration

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// An admin makes a preset and its next version on the dashboard's presets
// pages in a browser; the API then serves them (screenshot presets.png,
// preset.png).
func TestDashboardPresetsInBrowser(t *testing.T) {
	c := startDashboard(t)
	dir := screenshotDir(t)
	org := c.newAccount(`{"name":"Acme Robotics","type":"organization"}`, "25")
	admin := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@acme.example","role":"admin","first_name":"Ada"}`).expect(t, 201).JSON.Get("data.id").String()
	c.api("POST", "/presets/support/messages", org.MgmtKey, `{"model":"tollgate-mock","max_tokens":300,"system":"Answer support tickets politely.","messages":[]}`).expect(t, 200)

	ctx := headless(t)
	base := "http://" + gatewayAddr + "/dashboard"
	_, link := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + admin + `","base_url":"http://` + gatewayAddr + `"}`)
	run(t, ctx, "sign in", chromedp.Navigate(link), chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`), chromedp.WaitVisible(`.chart svg`))

	run(t, ctx, "presets page", chromedp.Navigate(base+"/presets"), chromedp.WaitVisible(`#p-slug`))
	run(t, ctx, "create a preset", chromedp.SendKeys(`#p-slug`, "triage"),
		chromedp.SetValue(`#p-config`, `{"model":"tollgate-mock","temperature":0.2,"provider":{"sort":"price"}}`),
		chromedp.SendKeys(`#p-system`, "Sort the ticket into billing, bug or question."),
		chromedp.Submit(`#p-slug`), chromedp.WaitVisible(`p.notice`))
	run(t, ctx, "a new version", chromedp.SetValue(`#e-config`, `{"model":"tollgate-mock","temperature":0.1}`),
		chromedp.Submit(`#e-config`), chromedp.WaitVisible(`p.notice`))
	var versions string
	run(t, ctx, "versions", chromedp.Text(`#versions`, &versions))
	if !strings.Contains(versions, `"temperature":0.1`) || !strings.Contains(versions, `"temperature":0.2`) {
		t.Fatalf("versions shown: %q", versions)
	}
	shot(t, ctx, dir, "preset")
	run(t, ctx, "back to the list", chromedp.Navigate(base+"/presets"), chromedp.WaitVisible(`#presets table`))
	shot(t, ctx, dir, "presets")

	p := c.api("GET", "/presets/triage", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.designated_version")
	if p.Get("version").Int() != 2 || p.Get("config").Raw != `{"model":"tollgate-mock","temperature":0.1}` ||
		p.Get("system_prompt").Str != "Sort the ticket into billing, bug or question." {
		t.Fatalf("after the browser's edits: %s", p.Raw)
	}
	key, _ := c.newKey(org.MgmtKey, `{"name":"app"}`)
	r := c.mustPost("/chat/completions", key, `{"model":"@preset/triage","messages":[{"role":"user","content":"My invoice is wrong"}]}`, nil)
	r.expect(t, 200)
	if r.JSON.Get("model").Str != "tollgate-mock" {
		t.Fatalf("answer: %s", r.Body)
	}
}
