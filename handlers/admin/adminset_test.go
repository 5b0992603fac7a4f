package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
)

// A limit or a disable the management key (an admin) set on a member's
// key is refused to the member (the dashboard's member session, served
// through ServeForMember): 403, the field named, nothing changed; the
// admin changes it.
func TestMemberCannotLiftWhatAnAdminSet(t *testing.T) {
	f := newAdminFixture(t)
	member := f.member(t, f.Org)
	hash := f.c.do(t, "POST", "/api/v1/keys", f.OrgMgmt, `{"name":"bob's","limit":5,"creator_user_id":"`+member+`"}`,
		"Content-Type", "application/json").Must(t, 201).JSON.Get("data.hash").String()
	f.c.do(t, "PATCH", "/api/v1/keys/"+hash, f.OrgMgmt, `{"disabled":true}`, "Content-Type", "application/json").Must(t, 200)
	acct, _ := f.c.gw.Storage.Account(f.Org.ID)
	asMember := func(body string) (*httptest.ResponseRecorder, *apierror.Error) {
		r := httptest.NewRequest("PATCH", "/api/v1/keys/"+hash, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		return w, f.c.admin.ServeForMember(w, r, acct, member, "/keys/"+hash)
	}
	for body, field := range map[string]string{
		`{"limit":50}`:              "limit",
		`{"limit":null}`:            "limit",
		`{"limit_reset":"daily"}`:   "limit",
		`{"disabled":false}`:        "disabled",
		`{"name":"x","limit":null}`: "limit",
	} {
		_, e := asMember(body)
		if e == nil || e.Status != http.StatusForbidden || !strings.HasPrefix(e.Message, field+": ") {
			t.Fatalf("member %s: %+v", body, e)
		}
		// The route's answer is the standard error body.
		w := httptest.NewRecorder()
		apierror.Write(w, e)
		if got := gjson.Get(w.Body.String(), "error.code").Int(); w.Code != 403 || got != 403 || gjson.Get(w.Body.String(), "error.message").Str != e.Message {
			t.Fatalf("error body %d %s", w.Code, w.Body)
		}
	}
	k, _ := f.c.gw.Storage.APIKey(hash)
	if k.Limit == nil || k.Limit.Float64() != 5 || !k.Disabled || k.Name != "bob's" {
		t.Fatalf("a refused change changed the key: %+v", k)
	}
	// The member renames it: theirs.
	if w, e := asMember(`{"name":"mine"}`); e != nil || w.Code != 200 {
		t.Fatalf("member rename: %d %+v", w.Code, e)
	}
	// The admin lifts both.
	f.c.do(t, "PATCH", "/api/v1/keys/"+hash, f.OrgMgmt, `{"disabled":false,"limit":null}`, "Content-Type", "application/json").Must(t, 200)
	if w, e := asMember(`{"limit":1,"disabled":true}`); e != nil || w.Code != 200 {
		t.Fatalf("member's own limit and disable: %d %+v", w.Code, e)
	}
	if w, e := asMember(`{"limit":null,"disabled":false}`); e != nil || w.Code != 200 {
		t.Fatalf("member lifts their own: %d %+v", w.Code, e)
	}
}
