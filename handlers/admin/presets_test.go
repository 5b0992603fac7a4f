package admin

import (
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestPresetRoutes(t *testing.T) {
	f := newAdminFixture(t)
	ct := []string{"Content-Type", "application/json"}
	do := func(method, path, body string) testgw.Response {
		return f.c.do(t, method, "/api/v1"+path, f.OrgMgmt, body, ct...)
	}
	if empty := do("GET", "/presets", "").Must(t, 200).JSON; empty.Get("data").Raw != "[]" || empty.Get("total_count").Raw != "0" {
		t.Errorf("no presets: %s", empty.Raw)
	}
	do("POST", "/presets/Bad_Slug/chat/completions", `{"model":"m"}`).WantError(t, 400, `slug: "Bad_Slug" must be lower-case letters, digits, '-' and '_', starting with a letter or digit`)
	do("POST", "/presets/p/chat/completions", `{"model":"@preset/q"}`).WantError(t, 400, "model: expected a model id")
	do("POST", "/presets/p/chat/completions", `[1]`).WantError(t, 400, "the body must be a JSON object")

	p := do("POST", "/presets/triage/chat/completions",
		`{"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}],"model":"openai/gpt-4o","temperature":0.7,"stream":true}`).
		Must(t, 200).JSON.Get("data")
	want := []string{"id", "creator_user_id", "workspace_id", "name", "slug", "description", "status", "designated_version_id",
		"created_at", "updated_at", "status_updated_at", "designated_version"}
	slices.Sort(want)
	if got := objectKeys(p); !slices.Equal(got, want) {
		t.Errorf("preset members = %v", got)
	}
	dv := p.Get("designated_version")
	if p.Get("slug").Str != "triage" || p.Get("name").Str != "triage" || p.Get("status").Str != "active" ||
		p.Get("workspace_id").Str != f.Org.DefaultWorkspaceID || p.Get("designated_version_id").Str != dv.Get("id").Str ||
		dv.Get("version").Int() != 1 || dv.Get("config").Raw != `{"model":"openai/gpt-4o","temperature":0.7}` ||
		dv.Get("system_prompt").Str != "You are a helpful assistant." || dv.Get("preset_id").Str != p.Get("id").Str {
		t.Errorf("created: %s", p.Raw)
	}
	m := do("POST", "/presets/triage/messages", `{"max_tokens":1024,"messages":[{"role":"user","content":"Hello!"}],"model":"anthropic/claude-sonnet-4","system":"Be brief."}`).
		Must(t, 200).JSON.Get("data")
	if m.Get("id").Str != p.Get("id").Str || m.Get("designated_version.version").Int() != 2 ||
		m.Get("designated_version.config").Raw != `{"model":"anthropic/claude-sonnet-4","max_tokens":1024}` {
		t.Errorf("second version: %s", m.Raw)
	}
	r := do("POST", "/presets/other/responses", `{"input":"Hi","instructions":"Answer in French.","model":"openai/gpt-5"}`).Must(t, 200).JSON.Get("data")
	if r.Get("designated_version.system_prompt").Str != "Answer in French." {
		t.Errorf("from responses: %s", r.Raw)
	}

	list := do("GET", "/presets?limit=1", "").Must(t, 200).JSON
	if list.Get("total_count").Int() != 2 || list.Get("data.#").Int() != 1 || list.Get("data.0.designated_version").Exists() {
		t.Errorf("list: %s", list.Raw)
	}
	got := do("GET", "/presets/triage", "").Must(t, 200).JSON.Get("data")
	if got.Get("designated_version.version").Int() != 2 {
		t.Errorf("get: %s", got.Raw)
	}
	vs := do("GET", "/presets/triage/versions", "").Must(t, 200).JSON
	if vs.Get("total_count").Int() != 2 || vs.Get("data.0.version").Int() != 1 || vs.Get("data.1.version").Int() != 2 {
		t.Errorf("versions: %s", vs.Raw)
	}
	v1 := do("GET", "/presets/triage/versions/1", "").Must(t, 200).JSON.Get("data")
	wantV := []string{"id", "preset_id", "creator_id", "version", "system_prompt", "config", "created_at", "updated_at"}
	slices.Sort(wantV)
	if got := objectKeys(v1); !slices.Equal(got, wantV) || v1.Get("config.temperature").Float() != 0.7 {
		t.Errorf("version 1: %s", v1.Raw)
	}
	do("GET", "/presets/triage/versions/3", "").WantError(t, 404, "Preset version not found")
	do("GET", "/presets/triage/versions/one", "").WantError(t, 400, "version: expected a positive integer")
	do("GET", "/presets/nope", "").WantError(t, 404, "Preset not found")
	do("GET", "/presets/nope/versions", "").WantError(t, 404, "Preset not found")
	do("GET", "/presets?limit=0", "").WantError(t, 400, "limit: expected an integer from 1 to 100")
	// Name, description and status change with a management key; the
	// versions stay.
	u := do("PATCH", "/presets/triage", `{"name":"Ticket triage","description":"Sorts tickets","status":"disabled"}`).Must(t, 200).JSON.Get("data")
	if u.Get("name").Str != "Ticket triage" || u.Get("description").Str != "Sorts tickets" || u.Get("status").Str != "disabled" ||
		!u.Get("status_updated_at").Exists() || u.Get("status_updated_at").Type == gjson.Null || u.Get("designated_version.version").Int() != 2 {
		t.Errorf("patched: %s", u.Raw)
	}
	do("PATCH", "/presets/triage", `{"status":"gone"}`).WantError(t, 400, `status: "gone" is not one of active, disabled, archived`)
	do("PATCH", "/presets/triage", `{"name":""}`).WantError(t, 400, "name: required non-empty string")
	do("PATCH", "/presets/triage", `{"name":3}`).WantError(t, 400, "name: expected a string")
	do("PATCH", "/presets/nope", `{"name":"x"}`).WantError(t, 404, "Preset not found")
	f.c.do(t, "PATCH", "/api/v1/presets/triage", f.OrgKey, `{"status":"active"}`, ct...).WantError(t, 403, "Only management keys can perform this operation")
	// A regular key reads its account's presets and makes none.
	if got := f.c.do(t, "GET", "/api/v1/presets/triage", f.OrgKey, "").Must(t, 200).JSON; got.Get("data.slug").Str != "triage" {
		t.Errorf("read with a regular key: %s", got.Raw)
	}
	f.c.do(t, "POST", "/api/v1/presets/triage/chat/completions", f.OrgKey, `{"model":"x/y"}`, ct...).
		WantError(t, 403, "Only management keys can perform this operation")
	// Another account's management key sees none of it, and has its own
	// slugs.
	f.c.do(t, "GET", "/api/v1/presets/triage", f.PersMgmt, "").WantError(t, 404, "Preset not found")
	f.c.do(t, "GET", "/api/v1/presets/triage/versions/1", f.PersMgmt, "").WantError(t, 404, "Preset not found")
	own := f.c.do(t, "POST", "/api/v1/presets/triage/chat/completions", f.PersMgmt, `{"model":"x/y"}`, ct...).Must(t, 200).JSON.Get("data")
	if own.Get("designated_version.version").Int() != 1 || own.Get("id").Str == p.Get("id").Str {
		t.Errorf("another account's preset: %s", own.Raw)
	}
}
