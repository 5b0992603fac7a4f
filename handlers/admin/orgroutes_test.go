package admin

import (
	"slices"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// The workspace and guardrail routes check their input with a 400 naming
// the field, and answer with the public shapes.
func TestWorkspaceRoutesValidate(t *testing.T) {
	f := newAdminFixture(t)
	ct := []string{"Content-Type", "application/json"}
	do := func(method, path, body string) testgw.Response {
		return f.c.do(t, method, "/api/v1"+path, f.OrgMgmt, body, ct...)
	}
	do("POST", "/workspaces", `{"slug":"x"}`).WantError(t, 400, "name: required non-empty string")
	do("POST", "/workspaces", `{"name":"X"}`).WantError(t, 400, "slug: required string")
	do("POST", "/workspaces", `{"name":"X","slug":"Not A Slug"}`).WantError(t, 400, "slug: expected lowercase letters, digits and hyphens (at most 64)")
	do("POST", "/workspaces", `{"name":"X","slug":"x","io_logging_sampling_rate":2}`).WantError(t, 400, "io_logging_sampling_rate: expected a number from 0 to 1")
	do("POST", "/workspaces", `{"name":"X","slug":"x","io_logging_api_key_ids":["a"]}`).WantError(t, 400, "io_logging_api_key_ids: expected an array of integers or null")
	ws := do("POST", "/workspaces", `{"name":"X","slug":"x"}`).Must(t, 201).JSON.Get("data")
	want := []string{"id", "name", "slug", "description", "created_by", "default_guardrail_id", "default_image_model",
		"default_provider_sort", "default_text_model", "disabled_server_tools", "include_byok_in_budgets",
		"io_logging_api_key_ids", "io_logging_sampling_rate", "is_data_discount_logging_enabled",
		"is_observability_broadcast_enabled", "is_observability_io_logging_enabled", "created_at", "updated_at"}
	slices.Sort(want)
	if got := objectKeys(ws); !slices.Equal(got, want) {
		t.Errorf("workspace fields %v", got)
	}
	do("POST", "/workspaces", `{"name":"Y","slug":"x"}`).WantError(t, 400, `slug: a workspace with slug "x" already exists`)
	do("PATCH", "/workspaces/x", `{"name":""}`).WantError(t, 400, "name: must not be empty")
	do("GET", "/workspaces/nope", "").WantError(t, 404, "Workspace not found")
	do("GET", "/workspaces?limit=101", "").WantError(t, 400, "limit: expected an integer from 1 to 100")
	do("PUT", "/workspaces/x/budgets/yearly", `{"limit_usd":1}`).WantError(t, 400, "interval: expected daily, weekly, monthly or lifetime")
	do("PUT", "/workspaces/x/budgets/daily", `{}`).WantError(t, 400, "limit_usd: required number")
	do("PUT", "/workspaces/x/budgets/daily", `{"limit_usd":-1}`).WantError(t, 400, "limit_usd: must not be negative")
	do("GET", "/workspaces/x/budgets/daily", "").WantError(t, 404, "No daily budget is set for this workspace")
	do("DELETE", "/workspaces/x/budgets/daily", "").WantError(t, 404, "no daily budget")
	do("POST", "/workspaces/x/members/add", `{"user_ids":"u"}`).WantError(t, 400, "user_ids: expected a non-empty array of strings")
	do("DELETE", "/workspaces/x", "").Must(t, 200)
	do("PUT", "/workspaces/x", "").WantError(t, 405, "Method PUT is not allowed on /api/v1/workspaces/x")
}

func TestGuardrailRoutesValidate(t *testing.T) {
	f := newAdminFixture(t)
	ct := []string{"Content-Type", "application/json"}
	do := func(method, path, body string) testgw.Response {
		return f.c.do(t, method, "/api/v1"+path, f.OrgMgmt, body, ct...)
	}
	do("POST", "/guardrails", `{}`).WantError(t, 400, "name: required non-empty string")
	do("POST", "/guardrails", `{"name":"g","limit_usd":5}`).WantError(t, 400, "reset_interval: required with limit_usd (daily, weekly or monthly)")
	do("POST", "/guardrails", `{"name":"g","reset_interval":"yearly"}`).WantError(t, 400, "reset_interval: expected daily, weekly, monthly or null")
	do("POST", "/guardrails", `{"name":"g","allowed_models":"m"}`).WantError(t, 400, "allowed_models: expected an array of strings or null")
	do("POST", "/guardrails", `{"name":"g","allowed_data_regions":["mars"]}`).WantError(t, 400, "allowed_data_regions: expected global, europe or us")
	do("POST", "/guardrails", `{"name":"g","enforce_zdr":"yes"}`).WantError(t, 400, "enforce_zdr: expected a boolean or null")
	do("POST", "/guardrails", `{"name":"g","workspace_id":"nope"}`).WantError(t, 400, "workspace_id: no such workspace")
	g := do("POST", "/guardrails", `{"name":"g","content_filters":[{"pattern":"x","action":"block"}]}`).Must(t, 201).JSON.Get("data")
	if g.Get("content_filters.0.pattern").Str != "x" || g.Get("workspace_id").Str != f.Org.DefaultWorkspaceID {
		t.Errorf("created: %s", g.Raw)
	}
	id := g.Get("id").Str
	do("POST", "/guardrails/"+id+"/assignments/keys", `{"key_hashes":["`+f.PersHash+`"]}`).WantError(t, 404, "API key "+f.PersHash+" not found")
	do("POST", "/guardrails/"+id+"/assignments/members", `{"member_user_ids":["user_x"]}`).WantError(t, 404, "user user_x is not a member of this organization")
	do("POST", "/guardrails/"+id+"/assignments/keys", `{"key_hashes":[]}`).WantError(t, 400, "key_hashes: expected a non-empty array of strings")
	do("GET", "/guardrails/"+id+"/assignments/keys?offset=-1", "").WantError(t, 400, "offset: expected a non-negative integer")
	do("GET", "/guardrails/nope/assignments/members", "").WantError(t, 404, "Guardrail not found")
	do("POST", "/guardrails/"+id+"/assignments/members/remove", `{"member_user_ids":["user_x"]}`).Must(t, 200)
	do("POST", "/guardrails/"+id+"/assignments/keys/remove", `{"key_hashes":"x"}`).WantError(t, 400, "key_hashes: expected a non-empty array of strings")
	gp := "/guardrails/" + id + "/assignments/"
	do("GET", gp+"keys/remove", "").WantError(t, 405, "Method GET is not allowed on /api/v1"+gp+"keys/remove")
	do("DELETE", gp+"members", "").WantError(t, 405, "Method DELETE is not allowed on /api/v1"+gp+"members")
	do("GET", gp+"teams", "").WantError(t, 404, "Not found: GET /api/v1"+gp+"teams")
	do("POST", gp+"keys/undo", "").WantError(t, 404, "Not found: POST /api/v1"+gp+"keys/undo")
	// Another account's management key sees none of it.
	f.c.do(t, "GET", "/api/v1/guardrails/"+id, f.PersMgmt, "").WantError(t, 404, "Guardrail not found")
	if gs := f.c.gw.Storage.Guardrails(f.Org.ID, ""); len(gs) != 1 || gs[0].Keys == nil {
		t.Fatalf("store: %+v", gs)
	}
	if _, ok := f.c.gw.Storage.Guardrail(f.Personal.ID, id); ok {
		t.Fatal("guardrail visible to another account")
	}
}
