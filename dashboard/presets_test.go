package dashboard

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/presets"
)

// An admin makes a preset and its next version on the presets pages; a
// bad config comes back next to its field; a member sees the presets and
// makes none.
func TestPresetsPages(t *testing.T) {
	d, st := testDashboard(t)
	a, admin, member := org(t, st)
	c := &client{t: t, d: d}
	c.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID, Role: "admin"})
	if body := c.do("GET", "/dashboard/presets", nil).Body.String(); !strings.Contains(body, "No presets.") || !strings.Contains(body, `href="/dashboard/presets" aria-current="page"`) {
		t.Fatalf("empty list: %s", body)
	}
	w := c.do("POST", "/dashboard/presets", c.form("slug", "triage", "config", "[1]", "system_prompt", ""))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "expected a JSON object") {
		t.Fatalf("a bad config: %d %s", w.Code, w.Body)
	}
	w = c.do("POST", "/dashboard/presets", c.form("slug", "Bad Slug", "config", `{"model":"m/x"}`))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "must be lower-case letters") {
		t.Fatalf("a bad slug: %d %s", w.Code, w.Body)
	}
	w = c.do("POST", "/dashboard/presets", c.form("slug", "triage", "config", `{"model":"m/x","temperature":0.25}`, "system_prompt", "Sort the ticket."))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/dashboard/presets/triage?saved=1" {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	v, ok := presets.StoreOf(st).Get(a.ID, "triage")
	if !ok || v.Designated.Config != `{"model":"m/x","temperature":0.25}` || *v.Designated.SystemPrompt != "Sort the ticket." {
		t.Fatalf("stored: %+v", v)
	}
	page := c.do("GET", "/dashboard/presets/triage", nil).Body.String()
	if !strings.Contains(page, "@preset/triage") || !strings.Contains(page, "Sort the ticket.") || !strings.Contains(page, `&#34;temperature&#34;: 0.25`) {
		t.Fatalf("preset page: %s", page)
	}
	w = c.do("POST", "/dashboard/presets/triage", c.form("config", `{"model":"m/y"}`, "system_prompt", "Sort it."))
	if w.Code != http.StatusSeeOther {
		t.Fatalf("new version: %d %s", w.Code, w.Body)
	}
	if v, _ := presets.StoreOf(st).Get(a.ID, "triage"); v.Versions != 2 || v.Designated.Config != `{"model":"m/y"}` {
		t.Fatalf("after the edit: %+v", v)
	}
	w = c.do("POST", "/dashboard/presets/triage/details", c.form("name", "Triage", "status", "paused"))
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "is not one of active, disabled, archived") {
		t.Fatalf("a bad status: %d %s", w.Code, w.Body)
	}
	if w = c.do("POST", "/dashboard/presets/triage/details", c.form("name", "Triage", "status", "archived")); w.Code != http.StatusSeeOther {
		t.Fatalf("details: %d %s", w.Code, w.Body)
	}
	if v, _ := presets.StoreOf(st).Get(a.ID, "triage"); v.Name != "Triage" || v.Status != "archived" {
		t.Fatalf("after the details: %+v", v.Preset)
	}
	if w = c.do("GET", "/dashboard/presets/nope", nil); w.Code != http.StatusNotFound {
		t.Fatalf("unknown preset: %d", w.Code)
	}

	m := &client{t: t, d: d}
	m.signIn(st, Principal{AccountID: a.ID, MemberID: member.ID, Role: "member"})
	if body := m.do("GET", "/dashboard/presets", nil).Body.String(); !strings.Contains(body, "triage") || strings.Contains(body, "New preset") {
		t.Fatalf("a member's list: %s", body)
	}
	if w = m.do("POST", "/dashboard/presets/triage", m.form("config", `{"model":"m/z"}`)); w.Code != http.StatusForbidden {
		t.Fatalf("a member's edit: %d", w.Code)
	}
	if v, _ := presets.StoreOf(st).Get(a.ID, "triage"); v.Versions != 2 {
		t.Fatalf("a member made a version: %+v", v)
	}
}
