package dashboard

import (
	"net/http"
	"strings"
	"testing"
)

// What an admin set on a member's key (a limit, a disable) the member
// cannot undo from the dashboard: 403, the key unchanged; the rest of the
// key stays theirs.
func TestMemberCannotUndoWhatAnAdminSetOnTheirKey(t *testing.T) {
	d, st := testDashboard(t)
	a, admin, member := org(t, st)
	m := &client{t: t, d: d}
	m.signIn(st, Principal{AccountID: a.ID, MemberID: member.ID})
	p, _ := st.Authenticate(keyString.FindString(m.created(m.do("POST", "/dashboard/keys", m.form("name", "bob's"))).Body.String()))
	hash := p.Key.Hash
	// The admin caps it and disables it.
	ad := &client{t: t, d: d}
	ad.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID})
	if w := ad.do("POST", "/dashboard/keys/"+hash, ad.form("name", "bob's", "limit", "5", "limit_reset", "monthly")); w.Code != http.StatusSeeOther {
		t.Fatalf("admin sets the limit: %d %s", w.Code, w.Body)
	}
	if w := ad.do("POST", "/dashboard/keys/"+hash+"/disable", ad.form()); w.Code != http.StatusSeeOther {
		t.Fatalf("admin disables: %d", w.Code)
	}
	// The member: lift, remove, enable: refused.
	for _, c := range []struct {
		path string
		form []string
		want string
	}{
		{"/dashboard/keys/" + hash, []string{"name", "bob's", "limit", "500", "limit_reset", "monthly"}, "only an admin can change or remove it"},
		{"/dashboard/keys/" + hash, []string{"name", "bob's", "limit", "", "limit_reset", ""}, "only an admin can change or remove it"},
		{"/dashboard/keys/" + hash + "/enable", nil, "only an admin can enable it"},
	} {
		w := m.do("POST", c.path, m.form(c.form...))
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), c.want) {
			t.Fatalf("member %s %v: %d", c.path, c.form, w.Code)
		}
	}
	k, _ := st.APIKey(hash)
	if k.Limit == nil || k.Limit.Float64() != 5 || !k.Disabled {
		t.Fatalf("the member undid the admin's limit or disable: %+v", k)
	}
	// Their key page says so, without the fields and the button; renaming
	// it (the form without the limit's fields) is theirs.
	body := m.do("GET", "/dashboard/keys/"+hash, nil).Body.String()
	if !strings.Contains(body, "The limit was set by an organization admin") || strings.Contains(body, "/enable") {
		t.Fatal("the member's key page offers to change what an admin set")
	}
	if w := m.do("POST", "/dashboard/keys/"+hash, m.form("name", "renamed")); w.Code != http.StatusSeeOther {
		t.Fatalf("member renames: %d %s", w.Code, w.Body)
	}
	if k, _ := st.APIKey(hash); k.Name != "renamed" || k.Limit == nil || k.Limit.Float64() != 5 {
		t.Fatalf("after the member's rename: %+v", k)
	}
	// The admin enables it and removes the limit; the member's own limit
	// is theirs again.
	ad.do("POST", "/dashboard/keys/"+hash+"/enable", ad.form())
	ad.do("POST", "/dashboard/keys/"+hash, ad.form("name", "renamed", "limit", ""))
	if w := m.do("POST", "/dashboard/keys/"+hash, m.form("name", "renamed", "limit", "2")); w.Code != http.StatusSeeOther {
		t.Fatalf("member's own limit: %d", w.Code)
	}
	if w := m.do("POST", "/dashboard/keys/"+hash, m.form("name", "renamed", "limit", "")); w.Code != http.StatusSeeOther {
		t.Fatalf("member lifts their own limit: %d", w.Code)
	}
}
