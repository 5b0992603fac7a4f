package integration

import (
	"fmt"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// orgFixture is an organization with an admin and a member, and a
// management key created for the admin.
type orgFixture struct {
	tenant
	Admin, Member string // user ids
	Mgmt          string // management key created by Admin
}

func (c *client) newOrg(credits string) orgFixture {
	c.t.Helper()
	org := c.newTenant("organization", credits)
	members := "/accounts/" + org.AccountID + "/members"
	admin := c.operator("POST", members, `{"email":"ada@example.com","role":"admin","first_name":"Ada"}`).expect(c.t, 201)
	member := c.operator("POST", members, `{"email":"mia@example.com","first_name":"Mia","last_name":"Lee"}`).expect(c.t, 201)
	f := orgFixture{tenant: org, Admin: admin.JSON.Get("data.id").Str, Member: member.JSON.Get("data.id").Str}
	// Once the organization has members, only an admin's management key
	// can be created.
	c.operator("POST", "/accounts/"+org.AccountID+"/management-keys", `{"name":"by member","creator_user_id":"`+f.Member+`"}`).
		expectError(c.t, 403, "only organization admins")
	f.Mgmt = c.operator("POST", "/accounts/"+org.AccountID+"/management-keys", `{"name":"by admin","creator_user_id":"`+f.Admin+`"}`).
		expect(c.t, 201).JSON.Get("key").Str
	return f
}

// TestOrgSDK runs every workspaces.*, guardrails.* and
// organization.listMembers method of @openrouter/sdk (strict zod schemas,
// no retries) against the gateway, and GET /key of a key through its
// guardrails.
func TestOrgSDK(t *testing.T) {
	node := requireNode(t)
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	key, hash := c.newKey(org.Mgmt, `{"name":"sdk key","creator_user_id":"`+org.Admin+`"}`)

	runSDKScript(t, node, "orgs.mjs",
		"TOLLGATE_MGMT_KEY="+org.Mgmt,
		"TOLLGATE_ADMIN_USER="+org.Admin,
		"TOLLGATE_MEMBER_USER="+org.Member,
		"TOLLGATE_KEY_HASH="+hash,
		"TOLLGATE_KEY="+key,
	)
}

// Keys live in workspaces: created in one by id or slug, listed by
// workspace; a workspace that holds keys, and the default workspace, cannot
// be deleted; members inherit their organization role when bulk-added, and
// one with keys in a workspace cannot be removed from it.
func TestWorkspaceKeysMembersAndDeletes(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	ws := c.api("POST", "/workspaces", org.Mgmt, `{"name":"Research","slug":"research"}`).expect(t, 201).JSON.Get("data")
	wsID := ws.Get("id").Str
	if ws.Get("created_by").Str != org.Admin {
		t.Errorf("created_by %s, want the management key's creator %s", ws.Get("created_by").Raw, org.Admin)
	}
	def := c.api("GET", "/workspaces/default", org.Mgmt, nil).expect(t, 200).JSON.Get("data.id").Str

	_, inDefault := c.newKey(org.Mgmt, `{"name":"default key"}`)
	_, bySlug := c.newKey(org.Mgmt, `{"name":"research key","workspace_id":"research","creator_user_id":"`+org.Member+`"}`)
	_, byID := c.newKey(org.Mgmt, `{"name":"research key 2","workspace_id":"`+wsID+`"}`)
	c.api("POST", "/keys", org.Mgmt, `{"name":"nowhere","workspace_id":"nope"}`).expectError(t, 404, "Workspace not found")

	hashes := func(r response) []string {
		var out []string
		for _, k := range r.JSON.Get("data").Array() {
			out = append(out, k.Get("hash").Str)
			if k.Get("workspace_id").Type != gjson.String {
				t.Errorf("key without workspace_id: %s", k.Raw)
			}
		}
		return out
	}
	if got := hashes(c.api("GET", "/keys", org.Mgmt, nil).expect(t, 200)); len(got) != 1 || got[0] != inDefault {
		t.Errorf("default listing %v, want [%s]", got, inDefault)
	}
	if got := hashes(c.api("GET", "/keys?workspace_id="+wsID, org.Mgmt, nil).expect(t, 200)); len(got) != 2 || got[0] != byID || got[1] != bySlug {
		t.Errorf("workspace listing %v, want [%s %s]", got, byID, bySlug)
	}
	if got := c.api("GET", "/keys/"+bySlug, org.Mgmt, nil).expect(t, 200).JSON.Get("data.workspace_id").Str; got != wsID {
		t.Errorf("workspace_id %s, want %s", got, wsID)
	}

	// Role inheritance on bulk add.
	added := c.api("POST", "/workspaces/research/members/add", org.Mgmt,
		fmt.Sprintf(`{"user_ids":[%q,%q]}`, org.Admin, org.Member)).expect(t, 200).JSON
	if added.Get("added_count").Int() != 2 {
		t.Fatalf("added: %s", added.Raw)
	}
	for _, m := range added.Get("data").Array() {
		want := map[string]string{org.Admin: "admin", org.Member: "member"}[m.Get("user_id").Str]
		if m.Get("role").Str != want || m.Get("workspace_id").Str != wsID {
			t.Errorf("membership %s, want role %s", m.Raw, want)
		}
	}
	// Adding again adds nobody; an unknown user is a 404.
	c.api("POST", "/workspaces/research/members/add", org.Mgmt, `{"user_ids":["`+org.Admin+`"]}`).expect(t, 200)
	c.api("POST", "/workspaces/research/members/add", org.Mgmt, `{"user_ids":["user_ghost"]}`).expectError(t, 404, "user_ghost")
	c.api("POST", "/workspaces/research/members/add", org.Mgmt, `{"user_ids":[]}`).expectError(t, 400, "user_ids")

	// A member with keys in the workspace stays.
	c.api("POST", "/workspaces/research/members/remove", org.Mgmt, `{"user_ids":["`+org.Member+`"]}`).
		expectError(t, 400, "still has API keys")
	// Refusals of deletes.
	c.api("DELETE", "/workspaces/"+def, org.Mgmt, nil).expectError(t, 403, "default workspace cannot be deleted")
	c.api("DELETE", "/workspaces/research", org.Mgmt, nil).expectError(t, 400, "still holds 2 API key(s)")
	c.api("DELETE", "/keys/"+bySlug, org.Mgmt, nil).expect(t, 200)
	c.api("DELETE", "/workspaces/research", org.Mgmt, nil).expectError(t, 400, "still holds 1 API key(s)")
	c.api("POST", "/workspaces/research/members/remove", org.Mgmt, `{"user_ids":["`+org.Member+`"]}`).expect(t, 200)
	c.api("DELETE", "/keys/"+byID, org.Mgmt, nil).expect(t, 200)
	c.api("DELETE", "/workspaces/research", org.Mgmt, nil).expect(t, 200)
	c.api("GET", "/workspaces/"+wsID, org.Mgmt, nil).expectError(t, 404, "Workspace not found")
	c.api("DELETE", "/workspaces/research", org.Mgmt, nil).expectError(t, 404, "")

	// A personal account has workspaces but no organization members.
	personal := c.newTenant("personal", "")
	c.api("GET", "/organization/members", personal.MgmtKey, nil).expectError(t, 404, "personal account")
	if n := c.api("GET", "/workspaces", personal.MgmtKey, nil).expect(t, 200).JSON.Get("total_count").Int(); n != 1 {
		t.Errorf("personal workspaces: %d", n)
	}
}

const guardBody = `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"hello"}]}`

// Guardrails are enforced on the request path: a model or provider they do
// not allow is a 403 naming the guardrail, before any upstream call; the
// per-key model list follows them; an assignment change is visible on the
// next request; a guardrail's budget is a 402.
func TestGuardrailEnforcement(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	key, hash := c.newKey(org.Mgmt, `{"name":"guarded","creator_user_id":"`+org.Member+`"}`)
	c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)

	only := c.api("POST", "/guardrails", org.Mgmt, `{"name":"Echo only","allowed_models":["mock/echo"]}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+only+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	r := c.mustPost("/chat/completions", key, guardBody, nil)
	r.expectError(t, 403, `Model "tollgate-mock" is not allowed by guardrail "Echo only"`)
	if r.JSON.Get("error.metadata.guardrail_id").Str != only {
		t.Errorf("metadata: %s", r.Body)
	}
	c.mustPost("/chat/completions", key, `{"model":"mock/echo","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, nil).expect(t, 200)
	models := func() []string {
		var ids []string
		for _, m := range c.api("GET", "/models/user", key, nil).expect(t, 200).JSON.Get("data").Array() {
			ids = append(ids, m.Get("id").Str)
		}
		return ids
	}
	if got := models(); len(got) != 1 || got[0] != "mock/echo" {
		t.Errorf("/models/user %v, want [mock/echo]", got)
	}

	// The next request sees the unassignment.
	c.api("POST", "/guardrails/"+only+"/assignments/keys/remove", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)
	if got := models(); len(got) != 3 {
		t.Errorf("/models/user %v after unassigning", got)
	}

	// A member guardrail that excludes the only provider.
	noMock := c.api("POST", "/guardrails", org.Mgmt, `{"name":"No mock","ignored_providers":["mock"]}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+noMock+"/assignments/members", org.Mgmt, `{"member_user_ids":["`+org.Member+`"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, guardBody, nil).expectError(t, 403, `Provider "mock" is not allowed by guardrail "No mock"`)
	if got := models(); len(got) != 0 {
		t.Errorf("/models/user %v with every provider excluded", got)
	}
	// A key of another member is not affected.
	other, _ := c.newKey(org.Mgmt, `{"name":"admin's","creator_user_id":"`+org.Admin+`"}`)
	c.mustPost("/chat/completions", other, guardBody, nil).expect(t, 200)
	c.api("DELETE", "/guardrails/"+noMock, org.Mgmt, nil).expect(t, 200)
	c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)

	// The workspace default guardrail applies to all of the workspace's traffic.
	wsGuard := c.api("GET", "/workspaces/default", org.Mgmt, nil).expect(t, 200).JSON.Get("data.default_guardrail_id").Str
	c.api("PATCH", "/guardrails/"+wsGuard, org.Mgmt, `{"allowed_providers":["elsewhere"]}`).expect(t, 200)
	c.mustPost("/chat/completions", other, guardBody, nil).expectError(t, 403, "is not allowed by guardrail")
	c.api("PATCH", "/guardrails/"+wsGuard, org.Mgmt, `{"name":"renamed"}`).expectError(t, 400, "name")
	c.api("PATCH", "/guardrails/"+wsGuard, org.Mgmt, `{"allowed_providers":null}`).expect(t, 200)
	c.mustPost("/chat/completions", other, guardBody, nil).expect(t, 200)

	// A guardrail budget: spent by this key over the interval, holds
	// included.
	spent := c.api("GET", "/keys/"+hash, org.Mgmt, nil).expect(t, 200).JSON.Get("data.usage_daily")
	// Room for one hold, not for a second after one request is charged.
	limit := creditAmount(t, spent) + holdOf(guardBody, 5) + 1
	budget := c.api("POST", "/guardrails", org.Mgmt, fmt.Sprintf(`{"name":"Tight","limit_usd":%s,"reset_interval":"daily"}`, limit)).
		expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+budget+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)
	r = c.mustPost("/chat/completions", key, guardBody, nil)
	expect402(t, r, "service_guardrail_budget", "", false)
	// Not exhausted: what the first request left does not cover this one's
	// prompt (a token per byte) and max_tokens.
	if msg := r.JSON.Get("error.message").Str; msg != "This request requires more credits, or fewer max_tokens. You requested up to 5 tokens, but can only afford 0" {
		t.Errorf("message %q", msg)
	}
	// Once the budget is spent, the message says so.
	c.api("PATCH", "/guardrails/"+budget, org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, creditAmount(t, c.api("GET", "/keys/"+hash, org.Mgmt, nil).expect(t, 200).JSON.Get("data.usage_daily")))).expect(t, 200)
	r = c.mustPost("/chat/completions", key, guardBody, nil)
	expect402(t, r, "service_guardrail_budget", "", false)
	if msg := r.JSON.Get("error.message").Str; msg != `Guardrail "Tight" budget is exhausted for this API key` {
		t.Errorf("message %q", msg)
	}
	// Raising the limit is visible at once.
	c.api("PATCH", "/guardrails/"+budget, org.Mgmt, `{"limit_usd":100}`).expect(t, 200)
	c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)
	// A member budget counts the member's keys together.
	c.api("PATCH", "/guardrails/"+budget, org.Mgmt, `{"limit_usd":0.000001}`).expect(t, 200)
	c.api("POST", "/guardrails/"+budget+"/assignments/keys/remove", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	c.api("POST", "/guardrails/"+budget+"/assignments/members", org.Mgmt, `{"member_user_ids":["`+org.Member+`"]}`).expect(t, 200)
	fresh, _ := c.newKey(org.Mgmt, `{"name":"fresh","creator_user_id":"`+org.Member+`"}`)
	r = c.mustPost("/chat/completions", fresh, guardBody, nil)
	expect402(t, r, "service_guardrail_budget", "", false)
	if msg := r.JSON.Get("error.message").Str; msg != `Guardrail "Tight" budget is exhausted for this member` {
		t.Errorf("message %q", msg)
	}
}

// A workspace budget holds against 100 concurrent requests of two keys: the
// ones that do not fit get 402 service_workspace_budget, and the
// workspace's charges never pass the budget.
func TestWorkspaceBudgetConcurrent(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("1000")
	c.api("POST", "/workspaces", org.Mgmt, `{"name":"Capped","slug":"capped"}`).expect(t, 201)
	k1, h1 := c.newKey(org.Mgmt, `{"name":"one","workspace_id":"capped"}`)
	k2, h2 := c.newKey(org.Mgmt, `{"name":"two","workspace_id":"capped"}`)
	const n, fit = 100, 12
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"one of many concurrent requests"}]}`
	hold := holdOf(body, 20)
	budget := hold*fit + hold/2
	c.api("PUT", "/workspaces/capped/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, budget)).expect(t, 200)

	charged := burst(t, c, []string{k1, k2}, n, fit, body, "service_workspace_budget")
	var usage money.Amount
	for _, h := range []string{h1, h2} {
		usage += creditAmount(t, c.api("GET", "/keys/"+h+"?workspace_id=capped", org.Mgmt, nil).expect(t, 200).JSON.Get("data.usage_daily"))
	}
	if usage != charged {
		t.Fatalf("keys' usage %s, sum of answers %s", usage, charged)
	}
	if charged > budget {
		t.Fatalf("workspace spent %s, over its budget %s", charged, budget)
	}
	// Once the budget is exhausted, nothing more passes; deleting it lifts it.
	c.api("PUT", "/workspaces/capped/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, charged)).expect(t, 200)
	expect402(t, c.mustPost("/chat/completions", k1, body, nil), "service_workspace_budget", "", false)
	c.api("DELETE", "/workspaces/capped/budgets/daily", org.Mgmt, nil).expect(t, 200)
	c.mustPost("/chat/completions", k1, body, nil).expect(t, 200)
	// Keys of other workspaces never counted against it.
	other, _ := c.newKey(org.Mgmt, `{"name":"default"}`)
	c.api("PUT", "/workspaces/capped/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, charged)).expect(t, 200)
	c.mustPost("/chat/completions", other, body, nil).expect(t, 200)
}

// burst sends n requests at once, spread over keys, each slow enough that
// none finishes before all are admitted; it checks that fit passed
// (checkFit) and that every refusal is a 402 with limit_source source, and
// returns the sum of the charges.
func burst(t *testing.T, c *client, keys []string, n, fit int, body, source string) money.Amount {
	t.Helper()
	results, errs, _ := postAtOnce(t, c, n, func(i int) string { return keys[i%len(keys)] }, body)
	ok, refused, charged := tallyCharges(t, results, errs, source)
	t.Logf("%d passed, %d refused", ok, refused)
	checkFit(t, results, ok, fit)
	return charged
}

// A member guardrail's budget is the member's total across its keys: 60
// concurrent requests of two of its keys, and exactly the ones that fit
// pass; a key of another member is not limited by it.
func TestGuardrailMemberBudgetConcurrent(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("1000")
	k1, h1 := c.newKey(org.Mgmt, `{"name":"one","creator_user_id":"`+org.Member+`"}`)
	k2, h2 := c.newKey(org.Mgmt, `{"name":"two","creator_user_id":"`+org.Member+`"}`)
	const n, fit = 60, 8
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"one of many concurrent requests"}]}`
	hold := holdOf(body, 20)
	limit := hold*fit + hold/2
	g := c.api("POST", "/guardrails", org.Mgmt, fmt.Sprintf(`{"name":"Per member","limit_usd":%s,"reset_interval":"monthly"}`, limit)).
		expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/members", org.Mgmt, `{"member_user_ids":["`+org.Member+`"]}`).expect(t, 200)

	charged := burst(t, c, []string{k1, k2}, n, fit, body, "service_guardrail_budget")
	var usage money.Amount
	for _, h := range []string{h1, h2} {
		usage += creditAmount(t, c.api("GET", "/keys/"+h, org.Mgmt, nil).expect(t, 200).JSON.Get("data.usage_monthly"))
	}
	if usage != charged || charged > limit {
		t.Fatalf("keys' usage %s, sum of answers %s, limit %s", usage, charged, limit)
	}
	admins, _ := c.newKey(org.Mgmt, `{"name":"admin's","creator_user_id":"`+org.Admin+`"}`)
	c.mustPost("/chat/completions", admins, body, nil).expect(t, 200)
}

// BYOK requests spend no credits: workspace budgets and guardrail limits
// count them only with include_byok_in_budgets.
func TestBudgetsIncludeBYOK(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	c.api("POST", "/byok", org.Mgmt, `{"provider":"mock","key":"own-mock-key-for-budgets"}`).expect(t, 201)
	key, hash := c.newKey(org.Mgmt, `{"name":"byok"}`)
	first := c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)
	if byok := c.api("GET", "/keys/"+hash, org.Mgmt, nil).expect(t, 200).JSON.Get("data.byok_usage").Float(); byok <= 0 {
		t.Fatalf("the request did not go through BYOK: %s", first.Body)
	}

	// A zero workspace budget: BYOK traffic passes until BYOK counts.
	c.api("PUT", "/workspaces/default/budgets/monthly", org.Mgmt, `{"limit_usd":0}`).expect(t, 200)
	c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)
	c.api("PUT", "/workspaces/default/budgets/monthly", org.Mgmt, `{"limit_usd":0,"include_byok_in_budgets":true}`).expect(t, 200)
	expect402(t, c.mustPost("/chat/completions", key, guardBody, nil), "service_workspace_budget", "", false)
	c.api("DELETE", "/workspaces/default/budgets/monthly", org.Mgmt, nil).expect(t, 200)

	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"Zero","limit_usd":0,"reset_interval":"daily"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
	c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200)
	c.api("PATCH", "/guardrails/"+g, org.Mgmt, `{"include_byok_in_budgets":true}`).expect(t, 200)
	expect402(t, c.mustPost("/chat/completions", key, guardBody, nil), "service_guardrail_budget", "", false)
}

// Killing the process keeps members, workspaces, budgets, guardrails, their
// assignments and the workspace's spending: after the restart they are
// enforced as before.
func TestRestartKeepsWorkspacesAndGuardrails(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	c := newClient(t, p.gateway, p.admin)
	org := c.newOrg("10")
	c.api("POST", "/workspaces", org.Mgmt, `{"name":"Kept","slug":"kept"}`).expect(t, 201)
	c.api("POST", "/workspaces/kept/members/add", org.Mgmt, `{"user_ids":["`+org.Member+`"]}`).expect(t, 200)
	key, hash := c.newKey(org.Mgmt, `{"name":"k","workspace_id":"kept","creator_user_id":"`+org.Member+`"}`)
	spent := creditAmount(t, c.mustPost("/chat/completions", key, guardBody, nil).expect(t, 200).JSON.Get("usage.cost"))
	// The budget is what was spent: the next request no longer fits.
	c.api("PUT", "/workspaces/kept/budgets/weekly", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, spent)).expect(t, 200)
	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"Echo only","allowed_models":["mock/echo"]}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)

	p.kill()
	p.start(t)
	c = newClient(t, p.gateway, p.admin)

	if n := c.api("GET", "/organization/members", org.Mgmt, nil).expect(t, 200).JSON.Get("total_count").Int(); n != 2 {
		t.Fatalf("%d members after restart", n)
	}
	ms := c.api("GET", "/workspaces/kept/members", org.Mgmt, nil).expect(t, 200).JSON
	if ms.Get("total_count").Int() != 1 || ms.Get("data.0.user_id").Str != org.Member {
		t.Fatalf("workspace members after restart: %s", ms.Raw)
	}
	c.mustPost("/chat/completions", key, guardBody, nil).expectError(t, 403, `guardrail "Echo only"`)
	echo := `{"model":"mock/echo","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	expect402(t, c.mustPost("/chat/completions", key, echo, nil), "service_workspace_budget", "", false)
	c.api("DELETE", "/workspaces/kept/budgets/weekly", org.Mgmt, nil).expect(t, 200)
	c.mustPost("/chat/completions", key, echo, nil).expect(t, 200)
	if a := c.api("GET", "/guardrails/assignments/keys", org.Mgmt, nil).expect(t, 200).JSON; a.Get("data.0.key_hash").Str != hash {
		t.Fatalf("assignments after restart: %s", a.Raw)
	}
}
