package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// scimClient talks to the SCIM 2.0 service as an identity provider would.
type scimClient struct {
	c     *client
	token string
}

func (s scimClient) do(method, path string, body string) response {
	s.c.t.Helper()
	var b any
	if body != "" {
		b = body
	}
	return s.c.do(method, s.c.gateway+"/scim/v2"+path, s.token, b)
}

// expectSCIMError checks the SCIM error shape (RFC 7644 3.12).
func expectSCIMError(t *testing.T, r response, status int) {
	t.Helper()
	r.expect(t, status)
	if got := r.JSON.Get("schemas.0").Str; got != "urn:ietf:params:scim:api:messages:2.0:Error" {
		t.Fatalf("SCIM error schemas %q; body %s", got, r.Body)
	}
	if got := r.JSON.Get("status").String(); got != fmt.Sprint(status) {
		t.Fatalf("SCIM error status %q, want %d; body %s", got, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/scim+json" {
		t.Fatalf("SCIM error Content-Type %q", ct)
	}
}

func newSCIMOrg(t *testing.T, c *client) (orgFixture, scimClient) {
	t.Helper()
	org := c.newOrg("10")
	tok := c.operator("POST", "/accounts/"+org.AccountID+"/scim-token", nil).expect(t, 201)
	token := tok.JSON.Get("token").Str
	if !strings.HasPrefix(token, "sk-tg-scim-v1-") || strings.Contains(tok.JSON.Get("data").Raw, token[14:]) {
		t.Fatalf("token answer %s", tok.Body)
	}
	return org, scimClient{c: c, token: token}
}

func workspaceMembers(t *testing.T, c *client, mgmt, ws string) map[string]string {
	t.Helper()
	r := c.api("GET", "/workspaces/"+ws+"/members", mgmt, nil).expect(t, 200)
	out := map[string]string{}
	for _, m := range r.JSON.Get("data").Array() {
		out[m.Get("user_id").Str] = m.Get("role").Str
	}
	return out
}

func runSync(t *testing.T, c *client, mgmt string) gjson.Result {
	t.Helper()
	r := c.api("POST", "/scim/sync-jobs", mgmt, nil).expect(t, 202)
	id := r.JSON.Get("data.id").Str
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := c.api("GET", "/scim/sync-jobs/"+id, mgmt, nil).expect(t, 200).JSON.Get("data")
		switch j.Get("status").Str {
		case "succeeded":
			return j
		case "failed":
			t.Fatalf("sync job failed: %s", j.Raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("sync job still %s", j.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An identity provider pushes users and groups over SCIM; a mapping and a
// sync job turn the group into workspace memberships; membership changes
// and a deactivation follow at the next sync; memberships added by hand
// are never touched.
func TestSCIMProvisioningAndSync(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org, idp := newSCIMOrg(t, c)

	// Discovery.
	spc := idp.do("GET", "/ServiceProviderConfig", "").expect(t, 200)
	if !spc.JSON.Get("filter.supported").Bool() || !spc.JSON.Get("patch.supported").Bool() {
		t.Fatalf("ServiceProviderConfig %s", spc.Body)
	}
	if n := idp.do("GET", "/ResourceTypes", "").expect(t, 200).JSON.Get("totalResults").Int(); n != 2 {
		t.Fatalf("ResourceTypes total %d", n)
	}
	idp.do("GET", "/Schemas/urn:ietf:params:scim:schemas:core:2.0:User", "").expect(t, 200)

	// Users: a lookup by userName first, as Okta and Entra do.
	none := idp.do("GET", `/Users?filter=userName%20eq%20%22bob@example.com%22`, "").expect(t, 200)
	if none.JSON.Get("totalResults").Int() != 0 {
		t.Fatalf("filter found %s", none.Body)
	}
	mkUser := func(email, given, family, ext string) string {
		r := idp.do("POST", "/Users", fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],
			"userName":%q,"externalId":%q,"name":{"givenName":%q,"familyName":%q},
			"emails":[{"value":%q,"primary":true,"type":"work"}],"active":true}`, email, ext, given, family, email)).expect(t, 201)
		if r.JSON.Get("userName").Str != email || r.JSON.Get("externalId").Str != ext || !r.JSON.Get("active").Bool() {
			t.Fatalf("created user %s", r.Body)
		}
		return r.JSON.Get("id").Str
	}
	bob := mkUser("bob@example.com", "Bob", "Stone", "okta-bob")
	cat := mkUser("cat@example.com", "Cat", "Reed", "okta-cat")
	dan := mkUser("dan@example.com", "Dan", "Moss", "okta-dan")
	expectSCIMError(t, idp.do("POST", "/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"bob@example.com"}`), 409)
	expectSCIMError(t, idp.do("POST", "/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"not an email"}`), 400)

	found := idp.do("GET", `/Users?filter=userName%20eq%20%22BOB@example.com%22`, "").expect(t, 200)
	if found.JSON.Get("totalResults").Int() != 1 || found.JSON.Get("Resources.0.id").Str != bob {
		t.Fatalf("filter by userName: %s", found.Body)
	}
	// The pushed users are organization members (plus the fixture's two).
	members := c.api("GET", "/organization/members", org.Mgmt, nil).expect(t, 200)
	if members.JSON.Get("total_count").Int() != 5 {
		t.Fatalf("members %s", members.Body)
	}
	all := idp.do("GET", "/Users?startIndex=2&count=2", "").expect(t, 200)
	if all.JSON.Get("totalResults").Int() != 5 || len(all.JSON.Get("Resources").Array()) != 2 || all.JSON.Get("startIndex").Int() != 2 {
		t.Fatalf("paged users %s", all.Body)
	}

	// Groups with members, found by displayName.
	grp := idp.do("POST", "/Groups", fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],
		"displayName":"Engineering","externalId":"okta-eng","members":[{"value":%q},{"value":%q}]}`, bob, cat)).expect(t, 201)
	eng := grp.JSON.Get("id").Str
	if len(grp.JSON.Get("members").Array()) != 2 {
		t.Fatalf("group %s", grp.Body)
	}
	expectSCIMError(t, idp.do("POST", "/Groups", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"Ghosts","members":[{"value":"user_nobody"}]}`), 400)
	byName := idp.do("GET", `/Groups?filter=displayName%20eq%20%22Engineering%22`, "").expect(t, 200)
	if byName.JSON.Get("totalResults").Int() != 1 || byName.JSON.Get("Resources.0.id").Str != eng {
		t.Fatalf("filter by displayName: %s", byName.Body)
	}
	ops := idp.do("POST", "/Groups", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"Ops"}`).expect(t, 201).JSON.Get("id").Str

	// The management side sees the pushed groups.
	groups := c.api("GET", "/scim/groups", org.Mgmt, nil).expect(t, 200)
	if groups.JSON.Get("total_count").Int() != 2 || groups.JSON.Get("data.0.display_name").Str != "Engineering" ||
		groups.JSON.Get("data.0.external_id").Str != "okta-eng" || groups.JSON.Get("data.0.organization_id").Str != org.AccountID {
		t.Fatalf("scim groups %s", groups.Body)
	}

	// Two workspaces: Engineering maps to "eng" as member and Ops to
	// "ops" as admin. "eng" also has a member added by hand.
	wsEng := c.api("POST", "/workspaces", org.Mgmt, `{"name":"Eng","slug":"eng"}`).expect(t, 201).JSON.Get("data.id").Str
	wsOps := c.api("POST", "/workspaces", org.Mgmt, `{"name":"Ops","slug":"ops"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/workspaces/eng/members/add", org.Mgmt, `{"user_ids":["`+org.Member+`"]}`).expect(t, 200)
	m1 := c.api("POST", "/scim/group-mappings", org.Mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":%q,"role":"member"}`, eng, wsEng)).expect(t, 201)
	if m1.JSON.Get("added_memberships").Int() != 2 {
		t.Fatalf("mapping create %s", m1.Body)
	}
	// The mapping applies at once; the same mapping again returns it and
	// re-applies it; another role for it is a conflict.
	want := map[string]string{bob: "member", cat: "member", org.Member: "member"}
	if got := workspaceMembers(t, c, org.Mgmt, wsEng); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("eng members %v, want %v", got, want)
	}
	again := c.api("POST", "/scim/group-mappings", org.Mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":"eng","role":"member"}`, eng)).expect(t, 201)
	if again.JSON.Get("data.id").Str != m1.JSON.Get("data.id").Str || again.JSON.Get("added_memberships").Int() != 0 {
		t.Fatalf("same mapping again %s", again.Body)
	}
	c.api("POST", "/scim/group-mappings", org.Mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":%q,"role":"admin"}`, eng, wsEng)).expectError(t, 409, "already mapped")
	c.api("POST", "/scim/group-mappings", org.Mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":%q,"role":"owner"}`, eng, wsEng)).expectError(t, 400, "role")
	c.api("POST", "/scim/group-mappings", org.Mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":%q,"role":"member"}`, "00000000-0000-4000-8000-000000000000", wsEng)).expectError(t, 404, "")
	c.api("POST", "/scim/group-mappings", org.Mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":%q,"role":"admin"}`, ops, wsOps)).expect(t, 201)
	mapping := m1.JSON.Get("data.id").Str

	j := runSync(t, c, org.Mgmt)
	if j.Get("synced_groups").Int() != 2 || j.Get("deleted_groups").Int() != 0 || j.Get("added_memberships").Int() != 0 ||
		j.Get("removed_memberships").Int() != 0 || j.Get("updated_memberships").Int() != 0 {
		t.Fatalf("first sync %s", j.Raw)
	}
	if got := workspaceMembers(t, c, org.Mgmt, wsEng); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("eng members %v, want %v", got, want)
	}

	// The IdP moves members: Dan joins Engineering and Ops, Cat leaves
	// Engineering (by filter, as Okta does), and the hand-added member is
	// pushed into the group too (its membership stays manual).
	idp.do("PATCH", "/Groups/"+eng, fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"add","path":"members","value":[{"value":%q},{"value":%q}]}]}`, dan, org.Member)).expect(t, 200)
	idp.do("PATCH", "/Groups/"+eng, fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"remove","path":"members[value eq \"%s\"]"}]}`, cat)).expect(t, 200)
	// Entra's style: op capitalized, members removed with a value list.
	idp.do("PATCH", "/Groups/"+ops, fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"Add","path":"members","value":[{"value":%q},{"value":%q}]},{"op":"Remove","path":"members","value":[{"value":%q}]}]}`, dan, cat, cat)).expect(t, 200)
	g := idp.do("GET", "/Groups/"+eng, "").expect(t, 200)
	var ids []string
	for _, m := range g.JSON.Get("members.#.value").Array() {
		ids = append(ids, m.Str)
	}
	wantIDs := []string{bob, dan, org.Member}
	sort.Strings(wantIDs)
	if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
		t.Fatalf("group members %v, want %v", ids, wantIDs)
	}

	j = runSync(t, c, org.Mgmt)
	if j.Get("synced_groups").Int() != 2 || j.Get("added_memberships").Int() != 2 || j.Get("removed_memberships").Int() != 1 {
		t.Fatalf("second sync %s", j.Raw)
	}
	want = map[string]string{bob: "member", dan: "member", org.Member: "member"}
	if got := workspaceMembers(t, c, org.Mgmt, wsEng); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("eng members %v, want %v", got, want)
	}
	if got := workspaceMembers(t, c, org.Mgmt, wsOps); fmt.Sprint(got) != fmt.Sprint(map[string]string{dan: "admin"}) {
		t.Fatalf("ops members %v", got)
	}

	// A role change of the mapping reaches the memberships it granted,
	// not the manual one.
	c.api("PATCH", "/scim/group-mappings/"+mapping, org.Mgmt, `{"role":"admin"}`).expect(t, 200)
	j = runSync(t, c, org.Mgmt)
	if j.Get("updated_memberships").Int() != 2 || j.Get("added_memberships").Int() != 0 {
		t.Fatalf("role sync %s", j.Raw)
	}
	want = map[string]string{bob: "admin", dan: "admin", org.Member: "member"}
	if got := workspaceMembers(t, c, org.Mgmt, wsEng); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("eng members %v, want %v", got, want)
	}

	// Deprovisioning: PATCH active=false (Okta's shape) deactivates Bob
	// at once (removed from every workspace, gone from the member list),
	// and the IdP still sees him, inactive.
	u := idp.do("PATCH", "/Users/"+bob, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"replace","value":{"active":false}}]}`).expect(t, 200)
	if u.JSON.Get("active").Bool() {
		t.Fatalf("patched user %s", u.Body)
	}
	if _, in := workspaceMembers(t, c, org.Mgmt, wsEng)[bob]; in {
		t.Fatal("a deactivated member is still in a workspace")
	}
	if c.api("GET", "/organization/members", org.Mgmt, nil).expect(t, 200).JSON.Get("total_count").Int() != 4 {
		t.Fatal("a deactivated member is still listed")
	}
	j = runSync(t, c, org.Mgmt)
	if j.Get("added_memberships").Int() != 0 || j.Get("removed_memberships").Int() != 0 {
		t.Fatalf("sync after deactivation %s", j.Raw)
	}
	// Reactivated (Entra sends a string boolean), he is back after a sync.
	idp.do("PATCH", "/Users/"+bob, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"Replace","path":"active","value":"True"}]}`).expect(t, 200)
	j = runSync(t, c, org.Mgmt)
	if j.Get("added_memberships").Int() != 1 {
		t.Fatalf("sync after reactivation %s", j.Raw)
	}

	// The IdP deletes the Ops group: the next sync removes what its
	// mapping granted, then the mapping.
	idp.do("DELETE", "/Groups/"+ops, "").expect(t, 204)
	j = runSync(t, c, org.Mgmt)
	if j.Get("deleted_groups").Int() != 1 || j.Get("removed_memberships").Int() != 1 || j.Get("synced_groups").Int() != 1 {
		t.Fatalf("sync after group delete %s", j.Raw)
	}
	if got := workspaceMembers(t, c, org.Mgmt, wsOps); len(got) != 0 {
		t.Fatalf("ops members %v", got)
	}
	if n := c.api("GET", "/scim/group-mappings", org.Mgmt, nil).expect(t, 200).JSON.Get("total_count").Int(); n != 1 {
		t.Fatalf("mappings left %d", n)
	}

	// Deleting the mapping without keep_members is refused; with false it
	// removes the memberships it granted and never the manual one.
	c.api("DELETE", "/scim/group-mappings/"+mapping, org.Mgmt, nil).expectError(t, 400, "keep_members")
	c.api("DELETE", "/scim/group-mappings/"+mapping+"?keep_members=false", org.Mgmt, nil).expect(t, 200)
	if got := workspaceMembers(t, c, org.Mgmt, wsEng); fmt.Sprint(got) != fmt.Sprint(map[string]string{org.Member: "member"}) {
		t.Fatalf("eng members after mapping delete %v", got)
	}

	// DELETE /Users deactivates and hides the user.
	idp.do("DELETE", "/Users/"+dan, "").expect(t, 204)
	expectSCIMError(t, idp.do("GET", "/Users/"+dan, ""), 404)
}

// SCIM routes refuse a missing, wrong, revoked or rotated token with a
// SCIM 401, and one organization's token never reaches another's users.
func TestSCIMTokenAuth(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org, idp := newSCIMOrg(t, c)
	other, otherIdP := newSCIMOrg(t, c)
	_ = other

	for _, tok := range []string{"", "sk-tg-scim-v1-" + strings.Repeat("0", 64), org.Mgmt} {
		r := scimClient{c: c, token: tok}.do("GET", "/Users", "")
		expectSCIMError(t, r, 401)
		if r.Header.Get("WWW-Authenticate") == "" {
			t.Fatal("401 without WWW-Authenticate")
		}
	}
	bob := idp.do("POST", "/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"bob@example.com"}`).expect(t, 201).JSON.Get("id").Str
	expectSCIMError(t, otherIdP.do("GET", "/Users/"+bob, ""), 404)
	// The SCIM token is no API key either.
	c.api("GET", "/keys", idp.token, nil).expectError(t, 401, "")

	info := c.operator("GET", "/accounts/"+org.AccountID+"/scim-token", nil).expect(t, 200)
	if strings.Contains(string(info.Body), idp.token[14:]) || info.JSON.Get("data.label").Str == "" {
		t.Fatalf("token info %s", info.Body)
	}
	rotated := c.operator("POST", "/accounts/"+org.AccountID+"/scim-token", nil).expect(t, 201).JSON.Get("token").Str
	expectSCIMError(t, idp.do("GET", "/Users", ""), 401)
	scimClient{c: c, token: rotated}.do("GET", "/Users/"+bob, "").expect(t, 200)
	c.operator("DELETE", "/accounts/"+org.AccountID+"/scim-token", nil).expect(t, 200)
	expectSCIMError(t, scimClient{c: c, token: rotated}.do("GET", "/Users", ""), 401)
	// A personal account has no SCIM service.
	p := c.newTenant("personal", "")
	c.operator("POST", "/accounts/"+p.AccountID+"/scim-token", nil).expectError(t, 400, "organizations")
}

// TestSCIMSDK runs every scim.* method of @openrouter/sdk (strict zod
// schemas, no retries) against the gateway.
func TestSCIMSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: TestSCIMSDK needs Node.js and npm")
	}
	ensureSDKModules(t)
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org, idp := newSCIMOrg(t, c)
	bob := idp.do("POST", "/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"bob@example.com"}`).expect(t, 201).JSON.Get("id").Str
	idp.do("POST", "/Groups", fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"Engineering","members":[{"value":%q}]}`, bob)).expect(t, 201)
	ws := c.api("POST", "/workspaces", org.Mgmt, `{"name":"Eng","slug":"eng"}`).expect(t, 201).JSON.Get("data.id").Str

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "scim.mjs")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(),
		"TOLLGATE_BASE_URL=http://"+gatewayAddr+"/api/v1",
		"TOLLGATE_MGMT_KEY="+org.Mgmt,
		"TOLLGATE_WORKSPACE="+ws,
		"TOLLGATE_SCIM_USER="+bob,
	)
	if err := runLogged(t, cmd); err != nil {
		t.Fatalf("node scim.mjs: %v", err)
	}
}

// The operator issues the SCIM token with the CLI; everything the identity
// provider pushed, the mappings, the sync job's outcome and the memberships
// survive kill -9.
func TestSCIMCLIAndRestart(t *testing.T) {
	p := startProcess(t, t.TempDir())
	acct := cli(t, p, "account", "create", "--name", "Acme", "--type", "organization").Get("data.id").Str
	mgmt := cli(t, p, "mgmt-key", "create", "--account", acct, "--name", "ops").Get("key").Str
	rotated := cli(t, p, "scim-token", "rotate", "--account", acct)
	token := rotated.Get("token").Str
	if !strings.HasPrefix(token, "sk-tg-scim-v1-") || rotated.Get("scim_base_path").Str != "/scim/v2" {
		t.Fatalf("scim-token rotate: %s", rotated.Raw)
	}
	if shown := cli(t, p, "scim-token", "show", "--account", acct); strings.Contains(shown.Raw, token[14:]) || shown.Get("data.label").Str == "" {
		t.Fatalf("scim-token show: %s", shown.Raw)
	}

	c := newClient(t, p.gateway, p.admin)
	idp := scimClient{c: c, token: token}
	ann := idp.do("POST", "/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"ann@example.com","externalId":"e-ann"}`).expect(t, 201).JSON.Get("id").Str
	grp := idp.do("POST", "/Groups", fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"Eng","members":[{"value":%q}]}`, ann)).expect(t, 201).JSON.Get("id").Str
	ws := c.api("POST", "/workspaces", mgmt, `{"name":"Eng","slug":"eng"}`).expect(t, 201).JSON.Get("data.id").Str
	mapping := c.api("POST", "/scim/group-mappings", mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":%q,"role":"admin"}`, grp, ws)).expect(t, 201).JSON.Get("data.id").Str
	job := runSync(t, c, mgmt)

	p.kill()
	p.start(t)

	if got := workspaceMembers(t, c, mgmt, ws); fmt.Sprint(got) != fmt.Sprint(map[string]string{ann: "admin"}) {
		t.Fatalf("members after restart %v", got)
	}
	u := idp.do("GET", "/Users/"+ann, "").expect(t, 200)
	if u.JSON.Get("externalId").Str != "e-ann" {
		t.Fatalf("user after restart %s", u.Body)
	}
	if g := idp.do("GET", "/Groups/"+grp, "").expect(t, 200); g.JSON.Get("members.0.value").Str != ann {
		t.Fatalf("group after restart %s", g.Body)
	}
	c.api("GET", "/scim/group-mappings/"+mapping, mgmt, nil).expect(t, 200)
	again := c.api("GET", "/scim/sync-jobs/"+job.Get("id").Str, mgmt, nil).expect(t, 200).JSON.Get("data")
	if again.Raw != job.Raw {
		t.Fatalf("job after restart %s, before %s", again.Raw, job.Raw)
	}
	cli(t, p, "scim-token", "revoke", "--account", acct)
	expectSCIMError(t, idp.do("GET", "/Users", ""), 401)
}

// Concurrent group changes from the identity provider and concurrent sync
// jobs through a real Caddy: every job's counts are exact, so the
// memberships they report adding and removing add up to the final
// membership, which equals the final group.
func TestSCIMConcurrentSyncJobs(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org, idp := newSCIMOrg(t, c)
	var users []string
	for i := range 24 {
		users = append(users, idp.do("POST", "/Users", fmt.Sprintf(`{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"u%d@example.com"}`, i)).
			expect(t, 201).JSON.Get("id").Str)
	}
	// Every third user starts in the group and leaves it; the others join.
	var initial []string
	for i, u := range users {
		if i%3 == 0 {
			initial = append(initial, fmt.Sprintf(`{"value":%q}`, u))
		}
	}
	grp := idp.do("POST", "/Groups", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group"],"displayName":"G","members":[`+strings.Join(initial, ",")+`]}`).
		expect(t, 201).JSON.Get("id").Str
	ws := c.api("POST", "/workspaces", org.Mgmt, `{"name":"W","slug":"w"}`).expect(t, 201).JSON.Get("data.id").Str
	net := c.api("POST", "/scim/group-mappings", org.Mgmt, fmt.Sprintf(`{"scim_group_id":%q,"workspace_id":%q,"role":"member"}`, grp, ws)).
		expect(t, 201).JSON.Get("added_memberships").Int()

	errs := make(chan error, 2*len(users))
	jobs := make(chan string, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Add(2)
		go func() {
			defer wg.Done()
			op := fmt.Sprintf(`{"op":"add","path":"members","value":[{"value":%q}]}`, u)
			if i%3 == 0 {
				op = fmt.Sprintf(`{"op":"remove","path":"members[value eq \"%s\"]"}`, u)
			}
			r, err := c.try("PATCH", c.gateway+"/scim/v2/Groups/"+grp, idp.token,
				`{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[`+op+`]}`)
			if err == nil && r.Status != 200 {
				err = fmt.Errorf("PATCH group: %d %s", r.Status, r.Body)
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			r, err := c.try("POST", c.gateway+"/api/v1/scim/sync-jobs", org.Mgmt, nil)
			if err == nil && r.Status != 202 {
				err = fmt.Errorf("POST sync-jobs: %d %s", r.Status, r.Body)
			}
			if err == nil {
				jobs <- r.JSON.Get("data.id").Str
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	close(jobs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for id := range jobs {
		deadline := time.Now().Add(10 * time.Second)
		for {
			j := c.api("GET", "/scim/sync-jobs/"+id, org.Mgmt, nil).expect(t, 200).JSON.Get("data")
			if j.Get("status").Str == "succeeded" {
				net += j.Get("added_memberships").Int() - j.Get("removed_memberships").Int()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s", j.Raw)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	j := runSync(t, c, org.Mgmt)
	net += j.Get("added_memberships").Int() - j.Get("removed_memberships").Int()
	got := workspaceMembers(t, c, org.Mgmt, ws)
	if len(got) != 16 || net != 16 {
		t.Fatalf("members %d, net added by jobs %d; want 16", len(got), net)
	}
	for i, u := range users {
		if _, in := got[u]; in != (i%3 != 0) {
			t.Fatalf("user %d membership %v", i, in)
		}
	}
}
