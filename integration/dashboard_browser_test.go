package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// chromiumPath is the headless browser of the browser tests (Debian's
// chromium package; CHROMIUM overrides it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	// As redis-server for the storage tests: a missing browser fails the
	// test rather than skipping it unseen (.ci/run installs it).
	t.Fatal("no chromium: install Debian's chromium package (.ci/run does) or set CHROMIUM")
	return ""
}

// screenshotDir is where the browser tests save a screenshot of every
// page: TOLLGATE_SCREENSHOT_DIR, or tollgate-dashboard-screenshots in the
// temporary directory.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("TOLLGATE_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "tollgate-dashboard-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// headless starts a headless Chromium with a 1280 px wide window.
func headless(t *testing.T) context.Context {
	t.Helper()
	// The profile is removed after the browser has stopped (cleanups run
	// last registered first), and again a moment later: Chromium's helper
	// processes may still write to it as the browser exits, which made
	// t.TempDir's single removal fail the test.
	profile, err := os.MkdirTemp("", "tollgate-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; os.RemoveAll(profile) != nil && i < 20; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.Flag("user-data-dir", profile))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// run runs browser actions, failing the test on the first error.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// shot saves a full-page screenshot of the current page as name.png.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	var png []byte
	run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The dashboard in a real headless Chromium: an admin signs in with a
// link, creates a key and sees it once, uses it through the API, sees its
// spend in Activity with a chart, disables it, signs out; a member's
// action beyond their role is refused; the operator sees every account.
// A screenshot of every page is saved (screenshotDir).
func TestDashboardInBrowser(t *testing.T) {
	c := startDashboard(t)
	dir := screenshotDir(t)
	org := c.newAccount(`{"name":"Acme Robotics","type":"organization"}`, "25")
	admin := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@acme.example","role":"admin","first_name":"Ada"}`).expect(t, 201).JSON.Get("data.id").String()
	member := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"bob@acme.example"}`).expect(t, 201).JSON.Get("data.id").String()
	// Some history, so that the charts have more than one bar.
	// The first key is used until its limit refuses it: near its limit.
	for i, model := range []string{"tollgate-mock", "mock/echo"} {
		key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"service-%d","limit":%s}`, i, []string{"0.001", "1"}[i]))
		for range 40 - 32*i {
			if r := c.api("POST", "/chat/completions", key, `{"model":"`+model+`","messages":[{"role":"user","content":"Hello there, how are you?"}]}`); r.Status != 200 {
				r.expect(t, 402)
				break
			}
		}
	}

	ctx := headless(t)
	base := "http://" + gatewayAddr + "/dashboard"
	_, link := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + admin + `","base_url":"http://` + gatewayAddr + `"}`)

	// Sign in with the link: a page with one button, then the overview.
	run(t, ctx, "open link", chromedp.Navigate(link), chromedp.WaitVisible(`button.primary`))
	shot(t, ctx, dir, "signin")
	var title string
	run(t, ctx, "sign in", chromedp.Click(`button.primary`), chromedp.WaitVisible(`.chart svg`), chromedp.Text(`h1`, &title))
	if title != "Acme Robotics" {
		t.Fatalf("overview title %q", title)
	}
	shot(t, ctx, dir, "overview")

	// Create a key: shown once, with a copy button.
	var secret string
	run(t, ctx, "create key", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(`#k-name`),
		chromedp.SendKeys(`#k-name`, "browser-key"), chromedp.SendKeys(`#k-limit`, "5"),
		chromedp.Submit(`#k-name`), chromedp.WaitVisible(`#new-key`), chromedp.Text(`#new-key`, &secret))
	if !strings.HasPrefix(secret, "sk-tg-v1-") {
		t.Fatalf("new key %q", secret)
	}
	shot(t, ctx, dir, "keys-created")
	var html string
	run(t, ctx, "reload keys", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(`table`), chromedp.OuterHTML(`html`, &html))
	if strings.Contains(html, secret) {
		t.Fatal("the key is shown a second time")
	}
	shot(t, ctx, dir, "keys")

	// Use it through the API; its spend appears in Activity, with a chart.
	for range 4 {
		c.api("POST", "/chat/completions", secret, `{"model":"tollgate-mock","messages":[{"role":"user","content":"Hello from the browser test"}]}`).expect(t, 200)
	}
	var table string
	run(t, ctx, "activity", chromedp.Navigate(base+"/activity?by=key"), chromedp.WaitVisible(`.chart svg rect`),
		chromedp.Text(`main`, &table))
	if !strings.Contains(table, "browser-key") {
		t.Fatal("Activity does not show the key's spend")
	}
	shot(t, ctx, dir, "activity")
	var top []byte
	run(t, ctx, "activity top", chromedp.CaptureScreenshot(&top))
	if err := os.WriteFile(filepath.Join(dir, "activity-top.png"), top, 0o644); err != nil {
		t.Fatal(err)
	}

	// Disable it: the API refuses it from then on.
	hash := c.api("GET", "/keys", org.MgmtKey, nil).JSON.Get(`data.#(name=="browser-key").hash`).String()
	run(t, ctx, "disable", chromedp.Navigate(base+"/keys/"+hash), chromedp.WaitVisible(`#e-name`))
	shot(t, ctx, dir, "key")
	var badge string
	run(t, ctx, "disable", chromedp.Click(`form[action$="/disable"] button`), chromedp.WaitVisible(`.badge.off`), chromedp.Text(`.badge.off`, &badge))
	if c.api("POST", "/chat/completions", secret, `{"model":"tollgate-mock","messages":[{"role":"user","content":"Hi"}]}`).Status/100 == 2 {
		t.Fatal("a disabled key still works")
	}
	run(t, ctx, "settings", chromedp.Navigate(base+"/settings"), chromedp.WaitVisible(`#workspaces`))
	shot(t, ctx, dir, "settings")

	// Sign out: back to the sign-in page, and the pages need a session.
	var url string
	run(t, ctx, "sign out", chromedp.Navigate(base+"/"), chromedp.WaitVisible(`.signout button`), chromedp.Click(`.signout button`),
		chromedp.WaitVisible(`#token`), chromedp.Location(&url))
	if !strings.Contains(url, "/dashboard/signin") {
		t.Fatalf("after sign-out at %s", url)
	}
	run(t, ctx, "signed out", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(`#token`), chromedp.Location(&url))
	if !strings.Contains(url, "return_to=") {
		t.Fatalf("signed-out page at %s", url)
	}

	// A member: their keys only, and creating a workspace (an admin's
	// action, which the page does not offer them) is refused.
	_, link = c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + member + `","base_url":"http://` + gatewayAddr + `"}`)
	run(t, ctx, "member sign-in", chromedp.Navigate(link), chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`),
		chromedp.WaitVisible(`.chart svg`), chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(`#k-name`), chromedp.OuterHTML(`html`, &html))
	if strings.Contains(html, "browser-key") || strings.Contains(html, "Management keys") {
		t.Fatal("a member sees an admin's key or the management keys")
	}
	shot(t, ctx, dir, "member-keys")
	run(t, ctx, "member forbidden", chromedp.Navigate(base+"/settings"), chromedp.WaitVisible(`#workspaces`),
		chromedp.Evaluate(`(function(){
			var f = document.createElement("form"); f.method = "post"; f.action = "`+base+`/settings/workspaces";
			var t = document.createElement("input"); t.name = "csrf_token"; t.value = document.querySelector("input[name=csrf_token]").value; f.appendChild(t);
			var n = document.createElement("input"); n.name = "name"; n.value = "sneaky"; f.appendChild(n);
			document.body.appendChild(f); f.submit(); return true;
		})()`, nil),
		chromedp.WaitVisible(`[role=alert]`), chromedp.Text(`h1`, &title))
	if title != "Not allowed" {
		t.Fatalf("member's forbidden action: %q", title)
	}
	shot(t, ctx, dir, "forbidden")
	if n := len(c.api("GET", "/workspaces", org.MgmtKey, nil).JSON.Get("data").Array()); n != 1 {
		t.Fatalf("%d workspaces after a member's refused creation", n)
	}

	// The operator: every account, top-ups, one account's spend.
	_, link = c.signInLink(`{"operator":true,"base_url":"http://` + gatewayAddr + `"}`)
	run(t, ctx, "operator", chromedp.Navigate(link), chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`),
		chromedp.WaitVisible(`table`))
	shot(t, ctx, dir, "operator")
	run(t, ctx, "top up", chromedp.SendKeys(`#t-`+org.AccountID, "10"), chromedp.Submit(`#t-`+org.AccountID), chromedp.WaitVisible(`.notice`))
	if got := c.operator("GET", "/accounts/"+org.AccountID, nil).JSON.Get("data.total_credits").Float(); got != 35 {
		t.Fatalf("credits after the operator's top-up: %v", got)
	}
	run(t, ctx, "operator account", chromedp.Navigate(base+"/operator/accounts/"+org.AccountID), chromedp.WaitVisible(`.chart svg`))
	shot(t, ctx, dir, "operator-account")

	// Forged link page, and a phone's width.
	run(t, ctx, "forged", chromedp.Navigate(base+"/signin?token=tgl_forged"), chromedp.WaitVisible(`button.primary`),
		chromedp.Click(`button.primary`), chromedp.WaitVisible(`[role=alert]`))
	shot(t, ctx, dir, "link-invalid")
	_, link = c.signInLink(`{"account_id":"` + org.AccountID + `","base_url":"http://` + gatewayAddr + `"}`)
	run(t, ctx, "phone", emulation.SetDeviceMetricsOverride(390, 844, 2, true), chromedp.Navigate(link),
		chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`), chromedp.WaitVisible(`.chart svg`))
	shot(t, ctx, dir, "overview-phone")
	run(t, ctx, "phone keys", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(`table`))
	shot(t, ctx, dir, "keys-phone")
}

// Daily use in a real Chromium: a new key's page after the redirect, and
// its refresh; a member's key with a limit and a disable an admin set;
// plain amounts and whole-number ticks in the charts; the header's names;
// the static folder. Screenshots of each (screenshotDir).
func TestDashboardDailyUseInBrowser(t *testing.T) {
	c := startDashboard(t)
	dir := screenshotDir(t)
	org := c.newAccount(`{"name":"Acme Robotics","type":"organization"}`, "25")
	admin := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"ada@acme.example","role":"admin","first_name":"Ada","last_name":"Lovelace"}`).expect(t, 201).JSON.Get("data.id").String()
	member := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"bob@acme.example"}`).expect(t, 201).JSON.Get("data.id").String()
	// A little spend (fractions of a cent) over three requests.
	key, _ := c.newKey(org.MgmtKey, `{"name":"service"}`)
	for range 3 {
		c.api("POST", "/chat/completions", key, `{"model":"tollgate-mock","messages":[{"role":"user","content":"Hi"}]}`).expect(t, 200)
	}
	ctx := headless(t)
	base := "http://" + gatewayAddr + "/dashboard"
	signIn := func(memberID string) {
		_, link := c.signInLink(`{"account_id":"` + org.AccountID + `","member_id":"` + memberID + `","base_url":"http://` + gatewayAddr + `"}`)
		run(t, ctx, "sign in", chromedp.Navigate(link), chromedp.WaitVisible(`button.primary`), chromedp.Click(`button.primary`),
			chromedp.WaitVisible(`.chart svg`))
	}
	signIn(admin)
	var who, svg string
	run(t, ctx, "overview", chromedp.Text(`.who`, &who), chromedp.OuterHTML(`.chart svg`, &svg))
	if !strings.Contains(who, "Acme Robotics") || !strings.Contains(who, "Ada Lovelace") || strings.Contains(who, "org_") {
		t.Fatalf("header %q", who)
	}
	if strings.Contains(svg, "e-0") {
		t.Fatal("the spend chart prints an amount in exponent notation")
	}
	shot(t, ctx, dir, "daily-overview")
	run(t, ctx, "activity", chromedp.Navigate(base+"/activity"), chromedp.WaitVisible(`.chart svg rect`))
	shot(t, ctx, dir, "daily-activity")

	// A key: the redirect's page shows it once; a reload shows it no more
	// and creates nothing.
	var secret, loc string
	run(t, ctx, "create key", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(`#k-name`),
		chromedp.SendKeys(`#k-name`, "once"), chromedp.Submit(`#k-name`), chromedp.WaitVisible(`#new-key`),
		chromedp.Text(`#new-key`, &secret), chromedp.Location(&loc))
	if !strings.HasPrefix(secret, "sk-tg-v1-") || !strings.Contains(loc, "/dashboard/keys?created=") {
		t.Fatalf("new key %q at %s", secret, loc)
	}
	shot(t, ctx, dir, "daily-key-created")
	var html string
	run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(`table`), chromedp.OuterHTML(`html`, &html))
	if strings.Contains(html, secret) || !strings.Contains(html, "shown only once") {
		t.Fatal("a reload shows the key again")
	}
	shot(t, ctx, dir, "daily-key-reloaded")
	if n := len(c.api("GET", "/keys", org.MgmtKey, nil).JSON.Get(`data.#(name=="once")#`).Array()); n != 1 {
		t.Fatalf("%d keys named once after a reload", n)
	}

	// The static folder lists nothing.
	var title string
	run(t, ctx, "static", chromedp.Navigate(base+"/static/"), chromedp.WaitVisible(`h1`), chromedp.Text(`h1`, &title))
	if title != "Page not found" {
		t.Fatalf("static folder: %q", title)
	}
	shot(t, ctx, dir, "daily-static-404")

	// The member's key, capped and disabled by the admin.
	mine := c.api("POST", "/keys", org.MgmtKey, `{"name":"bob's","creator_user_id":"`+member+`"}`).expect(t, 201).JSON.Get("data.hash").String()
	c.api("PATCH", "/keys/"+mine, org.MgmtKey, `{"limit":2,"disabled":true}`).expect(t, 200)
	run(t, ctx, "sign out", chromedp.Navigate(base+"/"), chromedp.WaitVisible(`.signout button`), chromedp.Click(`.signout button`),
		chromedp.WaitVisible(`#token`))
	signIn(member)
	var locked bool
	run(t, ctx, "member key", chromedp.Navigate(base+"/keys/"+mine), chromedp.WaitVisible(`#e-name`),
		chromedp.Evaluate(`document.querySelector("#e-limit").disabled && !document.querySelector('form[action$="/enable"]')`, &locked),
		chromedp.OuterHTML(`main`, &html))
	if !locked || !strings.Contains(html, "The limit was set by an organization admin") {
		t.Fatal("the member's key page offers to change what an admin set")
	}
	shot(t, ctx, dir, "daily-member-key-admin-set")
	// A forged form that lifts the limit: refused.
	run(t, ctx, "member lifts", chromedp.Evaluate(`(function(){
			var f = document.createElement("form"); f.method = "post"; f.action = "`+base+`/keys/`+mine+`";
			[["csrf_token", document.querySelector("input[name=csrf_token]").value], ["name", "bob's"], ["limit", "100"]].forEach(function(kv){
				var i = document.createElement("input"); i.name = kv[0]; i.value = kv[1]; f.appendChild(i);
			});
			document.body.appendChild(f); f.submit(); return true;
		})()`, nil), chromedp.WaitVisible(`.error, [role=alert]`), chromedp.OuterHTML(`main`, &html))
	if !strings.Contains(html, "only an admin can change or remove it") {
		t.Fatal("the member's lift of the admin's limit is not refused")
	}
	shot(t, ctx, dir, "daily-member-lift-refused")
	if got := c.api("GET", "/keys/"+mine, org.MgmtKey, nil).JSON.Get("data.limit").Float(); got != 2 {
		t.Fatalf("limit after the member's attempt: %v", got)
	}
}
