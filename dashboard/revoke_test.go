package dashboard

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// A session's rights follow the member's record at every request: an
// admin demoted to member loses the admin's pages and actions with the
// same cookie, whatever the sign-in method.
func TestDemotedAdminLosesAdminRightsWithTheSameCookie(t *testing.T) {
	for _, method := range []string{"link", "oidc"} {
		t.Run(method, func(t *testing.T) {
			d, st := testDashboard(t)
			a, admin, _ := org(t, st)
			other, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: a.ID, Name: "someone else's"})
			if err != nil {
				t.Fatal(err)
			}
			c := &client{t: t, d: d}
			if method == "link" {
				c.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID, Operator: true})
			} else {
				token, _, err := StoreOf(st).createSession(Principal{AccountID: a.ID, MemberID: admin.ID, Method: "oidc"}, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				c.cookie = &http.Cookie{Name: CookieName, Value: token}
			}
			if w := c.do("POST", "/dashboard/settings/workspaces", c.form("name", "Before", "slug", "before")); w.Code != http.StatusSeeOther {
				t.Fatalf("admin creates a workspace: %d", w.Code)
			}
			role := storage.RoleMember
			if _, err := st.UpdateMember(a.ID, admin.ID, storage.MemberUpdate{Role: &role}); err != nil {
				t.Fatal(err)
			}
			if w := c.do("POST", "/dashboard/settings/workspaces", c.form("name", "After", "slug", "after")); w.Code != http.StatusForbidden {
				t.Fatalf("demoted admin creates a workspace: %d", w.Code)
			}
			if _, ok := st.Workspace(a.ID, "after"); ok {
				t.Fatal("a demoted admin created a workspace")
			}
			if w := c.do("POST", "/dashboard/keys/"+other.Hash+"/disable", c.form()); w.Code != http.StatusNotFound {
				t.Fatalf("demoted admin disables another's key: %d", w.Code)
			}
			if k, _ := st.APIKey(other.Hash); k.Disabled {
				t.Fatal("a demoted admin disabled another member's key")
			}
			w := c.do("GET", "/dashboard/keys", nil)
			if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "someone else") {
				t.Fatalf("demoted admin's key list: %d, shows another's key: %v", w.Code, strings.Contains(w.Body.String(), "someone else"))
			}
			if !strings.Contains(w.Body.String(), "· member") {
				t.Fatal("the header does not show the member's role now")
			}
		})
	}
}

// Deactivating a member ends every session of theirs at once (every
// browser), and reactivating the member does not bring them back.
func TestDeactivatedMemberSessionsEnd(t *testing.T) {
	d, st := testDashboard(t)
	a, admin, _ := org(t, st)
	c1, c2 := &client{t: t, d: d}, &client{t: t, d: d}
	c1.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID, Operator: true})
	c2.signIn(st, Principal{AccountID: a.ID, MemberID: admin.ID})
	cookie1, cookie2 := c1.cookie, c2.cookie
	if _, err := st.DeactivateMember(a.ID, admin.ID); err != nil {
		t.Fatal(err)
	}
	ds := StoreOf(st)
	for _, ck := range []*http.Cookie{cookie1, cookie2} {
		if _, ok := ds.session(ck.Value); ok {
			t.Fatal("a deactivated member's session is still stored")
		}
	}
	// Reactivated (the same email added again: the same member id).
	if _, err := st.CreateMember(storage.NewMember{AccountID: a.ID, Email: admin.Email, Role: storage.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client{c1, c2} {
		for _, path := range []string{"/dashboard/", "/dashboard/operator"} {
			if w := c.do("GET", path, nil); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/dashboard/signin") {
				t.Fatalf("%s after deactivation: %d %q", path, w.Code, w.Header().Get("Location"))
			}
		}
	}
}

// The header names the account and the member where known, not their ids.
func TestHeaderShowsNames(t *testing.T) {
	d, st := testDashboard(t)
	a, _, _ := org(t, st)
	first, last := "Grace", "Hopper"
	m, err := st.CreateMember(storage.NewMember{AccountID: a.ID, Email: "grace@example.com", FirstName: &first, LastName: &last})
	if err != nil {
		t.Fatal(err)
	}
	noName, _ := st.CreateMember(storage.NewMember{AccountID: a.ID, Email: "anon@example.com"})
	for member, want := range map[string]string{m.ID: "(<span title=\"" + m.ID + "\">Grace Hopper</span>)", noName.ID: ">anon@example.com</span>"} {
		c := &client{t: t, d: d}
		c.signIn(st, Principal{AccountID: a.ID, MemberID: member})
		body := c.do("GET", "/dashboard/", nil).Body.String()
		who := body[strings.Index(body, `class="who"`):]
		who = who[:strings.Index(who, "</form>")]
		if !strings.Contains(who, ">Acme</span>") || !strings.Contains(who, want) {
			t.Fatalf("header %s", who)
		}
	}
}
