package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// csrfForm is a form with the client's CSRF token.
func (c *client) form(kv ...string) url.Values {
	v := url.Values{"csrf_token": {c.csrf()}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v
}

var keyString = regexp.MustCompile(`sk-tg-v1-[0-9a-f]{64}`)

// created follows the redirect that answers a key's creation to the page
// that shows the key once.
func (c *client) created(w *httptest.ResponseRecorder) *httptest.ResponseRecorder {
	c.t.Helper()
	loc := w.Header().Get("Location")
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/dashboard/keys?created=") {
		c.t.Fatalf("create: %d %q %s", w.Code, loc, w.Body)
	}
	if keyString.MatchString(w.Body.String()) {
		c.t.Fatal("the redirect carries the key")
	}
	page := c.do("GET", loc, nil)
	if page.Code != http.StatusOK {
		c.t.Fatalf("the new key's page: %d", page.Code)
	}
	return page
}

func TestEveryPageRendersForEveryRole(t *testing.T) {
	d, st := testDashboard(t)
	a, admin, member := org(t, st)
	for _, p := range []Principal{{AccountID: a.ID}, {AccountID: a.ID, MemberID: admin.ID}, {AccountID: a.ID, MemberID: member.ID},
		{AccountID: a.ID, Operator: true}} {
		c := &client{t: t, d: d}
		c.signIn(st, p)
		for _, path := range []string{"/dashboard/", "/dashboard/keys", "/dashboard/activity", "/dashboard/activity?by=key&days=7",
			"/dashboard/activity?by=provider&days=365", "/dashboard/settings"} {
			if w := c.do("GET", path, nil); w.Code != http.StatusOK {
				t.Fatalf("%+v %s: %d %s", p, path, w.Code, w.Body)
			}
		}
		want := http.StatusForbidden
		if p.Operator {
			want = http.StatusOK
		}
		for _, path := range []string{"/dashboard/operator", "/dashboard/operator/accounts/" + a.ID} {
			if w := c.do("GET", path, nil); w.Code != want {
				t.Fatalf("%+v %s: %d, want %d", p, path, w.Code, want)
			}
		}
	}
	// An operator without an account sees the operator pages only.
	c := &client{t: t, d: d}
	c.signIn(st, Principal{Operator: true})
	if w := c.do("GET", "/dashboard/", nil); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard/operator" {
		t.Fatalf("operator home: %d", w.Code)
	}
	if w := c.do("GET", "/dashboard/keys", nil); w.Code != http.StatusForbidden {
		t.Fatalf("operator keys: %d", w.Code)
	}
}

func TestKeyLifecycleThroughTheAPIsCode(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID})
	// A field error comes back next to its field, in the API's words.
	w := c.do("POST", "/dashboard/keys", c.form("name", "ci", "limit", "-1"))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "must not be negative") {
		t.Fatalf("negative limit: %d", w.Code)
	}
	w = c.created(c.do("POST", "/dashboard/keys", c.form("name", "ci", "limit", "10", "limit_reset", "monthly")))
	secret := keyString.FindString(w.Body.String())
	if secret == "" {
		t.Fatal("the new key is not shown")
	}
	p, err := st.Authenticate(secret)
	if err != nil || p.Key.Limit == nil || p.Key.Limit.Float64() != 10 || p.Key.LimitReset != "monthly" {
		t.Fatalf("created key: %+v %v", p.Key, err)
	}
	hash := p.Hash
	// Shown once: the list and the key's page never show it again.
	for _, path := range []string{"/dashboard/keys", "/dashboard/keys/" + hash} {
		if w := c.do("GET", path, nil); strings.Contains(w.Body.String(), secret) {
			t.Fatalf("%s shows the key again", path)
		}
	}
	w = c.do("POST", "/dashboard/keys/"+hash, c.form("name", "ci-2", "limit", "", "include_byok_in_limit", "on"))
	if w.Code != http.StatusSeeOther {
		t.Fatalf("update: %d %s", w.Code, w.Body)
	}
	k, _ := st.APIKey(hash)
	if k.Name != "ci-2" || k.Limit != nil || !k.IncludeBYOKInLimit {
		t.Fatalf("updated key: %+v", k)
	}
	if w := c.do("POST", "/dashboard/keys/"+hash+"/disable", c.form()); w.Code != http.StatusSeeOther {
		t.Fatalf("disable: %d", w.Code)
	}
	if k, _ := st.APIKey(hash); !k.Disabled {
		t.Fatal("not disabled")
	}
	// Without the CSRF token nothing changes.
	if w := c.do("POST", "/dashboard/keys/"+hash+"/delete", url.Values{}); w.Code != http.StatusForbidden {
		t.Fatalf("delete without CSRF: %d", w.Code)
	}
	if _, ok := st.APIKey(hash); !ok {
		t.Fatal("deleted without CSRF")
	}
	if w := c.do("GET", "/dashboard/keys/"+hash+"/delete", nil); w.Code != http.StatusOK {
		t.Fatalf("delete confirmation: %d", w.Code)
	}
	if w := c.do("POST", "/dashboard/keys/"+hash+"/delete", c.form()); w.Code != http.StatusSeeOther {
		t.Fatalf("delete: %d", w.Code)
	}
	if _, ok := st.APIKey(hash); ok {
		t.Fatal("not deleted")
	}
}

func TestMembersActWithinTheirRole(t *testing.T) {
	d, st := testDashboard(t)
	a, _, member := org(t, st)
	other, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: a.ID, Name: "admin's"})
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID, MemberID: member.ID})
	// A member's key is theirs.
	w := c.created(c.do("POST", "/dashboard/keys", c.form("name", "mine")))
	p, _ := st.Authenticate(keyString.FindString(w.Body.String()))
	if p.Key.CreatorUserID == nil || *p.Key.CreatorUserID != member.ID {
		t.Fatalf("member's key creator: %v", p.Key.CreatorUserID)
	}
	// Another's key: not found, unchanged.
	for _, path := range []string{"/dashboard/keys/" + other.Hash + "/disable", "/dashboard/keys/" + other.Hash + "/delete"} {
		if w := c.do("POST", path, c.form()); w.Code != http.StatusNotFound {
			t.Fatalf("member on another's key %s: %d", path, w.Code)
		}
	}
	if k, ok := st.APIKey(other.Hash); !ok || k.Disabled {
		t.Fatal("a member changed another's key")
	}
	if strings.Contains(c.do("GET", "/dashboard/keys", nil).Body.String(), "admin&#39;s") {
		t.Fatal("a member sees another's key")
	}
	// Account settings are an admin's.
	for _, f := range []struct{ path string }{{"/dashboard/settings/organization"}, {"/dashboard/settings/workspaces"}, {"/dashboard/settings/guardrails"}} {
		if w := c.do("POST", f.path, c.form("name", "x", "is_filtered_model_catalog_enabled", "on")); w.Code != http.StatusForbidden {
			t.Fatalf("member %s: %d", f.path, w.Code)
		}
	}
	if acct, _ := st.Account(a.ID); acct.FilteredModelCatalog || len(st.Workspaces(a.ID)) != 1 {
		t.Fatal("a member changed the organization")
	}
}

func TestAdminManagesTheOrganization(t *testing.T) {
	d, st := testDashboard(t)
	a, admin, member := org(t, st)
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID})
	if w := c.do("POST", "/dashboard/settings/organization", c.form("is_filtered_model_catalog_enabled", "on")); w.Code != http.StatusSeeOther {
		t.Fatalf("org settings: %d", w.Code)
	}
	if acct, _ := st.Account(a.ID); !acct.FilteredModelCatalog {
		t.Fatal("org setting not saved")
	}
	if w := c.do("POST", "/dashboard/settings/workspaces", c.form("name", "Research", "slug", "research")); w.Code != http.StatusSeeOther {
		t.Fatalf("workspace: %d %s", w.Code, w.Body)
	}
	// A duplicate slug: the API's 400, on the page.
	if w := c.do("POST", "/dashboard/settings/workspaces", c.form("name", "Again", "slug", "research")); w.Code != http.StatusBadRequest {
		t.Fatalf("duplicate slug: %d", w.Code)
	}
	ws, _ := st.Workspace(a.ID, "research")
	if w := c.do("POST", "/dashboard/settings/workspaces/"+ws.ID+"/budgets", c.form("interval", "monthly", "limit_usd", "50")); w.Code != http.StatusSeeOther {
		t.Fatalf("budget: %d %s", w.Code, w.Body)
	}
	if w := c.do("POST", "/dashboard/settings/workspaces/"+ws.ID+"/members", c.form("user_ids", member.ID)); w.Code != http.StatusSeeOther {
		t.Fatalf("add member: %d %s", w.Code, w.Body)
	}
	ws, _ = st.Workspace(a.ID, "research")
	if ws.Members[member.ID] == nil || len(ws.Budgets) != 1 {
		t.Fatalf("workspace: %+v", ws)
	}
	if w := c.do("POST", "/dashboard/settings/guardrails", c.form("name", "cheap", "allowed_models", "tollgate-mock")); w.Code != http.StatusSeeOther {
		t.Fatalf("guardrail: %d %s", w.Code, w.Body)
	}
	if gs := st.Guardrails(a.ID, ""); len(gs) != 1 {
		t.Fatalf("guardrails: %+v", gs)
	}
	if w := c.do("GET", "/dashboard/settings", nil); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "cheap") {
		t.Fatalf("settings: %d", w.Code)
	}
}

func TestActivityCSVAndMembersSeeTheirOwnUsage(t *testing.T) {
	d, st := testDashboard(t)
	a, _, member := org(t, st)
	mine, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: a.ID, Name: "mine", CreatorUserID: &member.ID})
	if err != nil {
		t.Fatal(err)
	}
	theirs, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: a.ID, Name: "theirs"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []storage.APIKey{mine, theirs} {
		res, err := st.Reserve(a.ID, k.Hash, storage.Holds{Hold: 1})
		if err != nil {
			t.Fatal(err)
		}
		g := storage.Generation{ID: storage.NewGenerationID(now()), AccountID: a.ID, KeyHash: k.Hash,
			Model: "model-of-" + k.Name, Provider: "p", Status: "completed", PromptTokens: 10, CompletionTokens: 5, Cost: 1000, CreatedAt: now()}
		if err := st.Settle(res, storage.Charge{Cost: 1000, Generation: &g}); err != nil {
			t.Fatal(err)
		}
	}
	admin := &client{t: t, d: d}
	admin.signIn(st, Principal{AccountID: a.ID})
	w := admin.do("GET", "/dashboard/activity.csv?by=model", nil)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/csv") ||
		!strings.Contains(w.Body.String(), "model-of-mine") || !strings.Contains(w.Body.String(), "model-of-theirs") {
		t.Fatalf("admin CSV: %d %s", w.Code, w.Body)
	}
	m := &client{t: t, d: d}
	m.signIn(st, Principal{AccountID: a.ID, MemberID: member.ID})
	for _, path := range []string{"/dashboard/activity.csv?by=model", "/dashboard/activity?by=model"} {
		body := m.do("GET", path, nil).Body.String()
		if !strings.Contains(body, "model-of-mine") || strings.Contains(body, "model-of-theirs") {
			t.Fatalf("member's %s shows another's usage:\n%s", path, body)
		}
	}
	// The overview: the member's spend (one generation of 1000), the
	// admin's the account's (two).
	if body := m.do("GET", "/dashboard/", nil).Body.String(); !strings.Contains(body, "Your spend today</div><div class=\"value\">$0.000001</div>") {
		t.Fatalf("member's overview:\n%s", body)
	}
	if body := admin.do("GET", "/dashboard/", nil).Body.String(); !strings.Contains(body, "Spend today</div><div class=\"value\">$0.000002</div>") {
		t.Fatalf("admin's overview:\n%s", body)
	}
}

func TestRefusalsAreLoggedWithoutTheToken(t *testing.T) {
	st := openStore(t)
	core, logs := observer.New(zap.InfoLevel)
	d := &Dashboard{}
	if err := d.setup(fakeGateway{st}, zap.New(core)); err != nil {
		t.Fatal(err)
	}
	a, _, _ := org(t, st)
	token, _, _ := StoreOf(st).IssueLink(Principal{AccountID: a.ID}, time.Minute)
	c := &client{t: t, d: d}
	c.do("POST", "/dashboard/signin", url.Values{"token": {token}})
	c.do("POST", "/dashboard/signin", url.Values{"token": {token}})
	c.do("POST", "/dashboard/signin", url.Values{"token": {"tgl_forged-secret"}})
	c.do("POST", "/dashboard/keys", url.Values{"name": {"x"}})
	if logs.Len() < 3 {
		t.Fatalf("%d log entries", logs.Len())
	}
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		for _, secret := range []string{token, "forged-secret", c.cookie.Value} {
			if strings.Contains(line, secret) {
				t.Fatalf("log entry %q carries a secret", line)
			}
		}
	}
}

// A workspace's admin adds members to it; a plain member cannot.
func TestWorkspaceAdminsAddMembers(t *testing.T) {
	d, st := testDashboard(t)
	a, _, lead := org(t, st)
	plain, err := st.CreateMember(storage.NewMember{AccountID: a.ID, Email: "cy@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	newcomer, err := st.CreateMember(storage.NewMember{AccountID: a.ID, Email: "di@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := st.CreateWorkspace(a.ID, func(w *storage.Workspace) { w.Name, w.Slug = "Research", "research" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddWorkspaceMembers(a.ID, ws.ID, []string{lead.ID, plain.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetWorkspaceMember(a.ID, ws.ID, lead.ID, storage.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	p := &client{t: t, d: d}
	p.signIn(st, Principal{AccountID: a.ID, MemberID: plain.ID})
	if w := p.do("POST", "/dashboard/settings/workspaces/"+ws.ID+"/members", p.form("user_ids", newcomer.ID)); w.Code != http.StatusForbidden {
		t.Fatalf("plain member adds a member: %d", w.Code)
	}
	l := &client{t: t, d: d}
	l.signIn(st, Principal{AccountID: a.ID, MemberID: lead.ID})
	if w := l.do("GET", "/dashboard/settings", nil); !strings.Contains(w.Body.String(), "Add members") {
		t.Fatal("the workspace admin is not offered to add members")
	}
	if w := l.do("POST", "/dashboard/settings/workspaces/"+ws.ID+"/members", l.form("user_ids", newcomer.ID)); w.Code != http.StatusSeeOther {
		t.Fatalf("workspace admin adds a member: %d %s", w.Code, w.Body)
	}
	if w, _ := st.Workspace(a.ID, ws.ID); w.Members[newcomer.ID] == nil {
		t.Fatal("member not added")
	}
}
