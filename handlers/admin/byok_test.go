package admin

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// byokFields is every field of the public BYOK credential schema (the
// SDK's strict schema), plus updated_at.
var byokFields = []string{
	"allowed_api_key_hashes", "allowed_models", "allowed_user_ids", "created_at", "declared_zdr",
	"disabled", "id", "is_byok_only", "is_fallback", "is_required", "label", "name", "provider",
	"sort_order", "updated_at", "workspace_id",
}

// byokFixture is testgw's BYOKAccounts on a chain.
type byokFixture struct {
	c *chain
	testgw.BYOKAccounts
}

func newBYOKFixture(t *testing.T) *byokFixture {
	t.Helper()
	c := newChain(t)
	return &byokFixture{c: c, BYOKAccounts: testgw.NewBYOKAccounts(t, c.gw)}
}

func (f *byokFixture) create(t *testing.T, mgmt, body string) testgw.Response {
	t.Helper()
	return f.c.do(t, "POST", "/api/v1/byok", mgmt, body).Must(t, http.StatusCreated)
}

// noSecret fails when a response carries a provider key.
func noSecret(t *testing.T, r testgw.Response, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(r.Body, s) {
			t.Fatalf("response carries the provider key: %s", r.Body)
		}
	}
	if r.JSON.Get("data.key").Exists() || r.JSON.Get("key").Exists() || r.JSON.Get("data.sealed").Exists() {
		t.Fatalf("response has a key field: %s", r.Body)
	}
}

func TestBYOKCreateGetListPatchDelete(t *testing.T) {
	f := newBYOKFixture(t)
	const secret = "sk-proj-OWN-openai-key-0123456789"
	r := f.create(t, f.Mgmt, `{"provider":"openai","key":"  `+secret+`\n","name":"Prod OpenAI"}`)
	noSecret(t, r, secret, "OWN-openai")
	d := r.JSON.Get("data")
	if got := objectKeys(d); !slices.Equal(got, byokFields) {
		t.Fatalf("fields = %v\nwant     %v", got, byokFields)
	}
	id := d.Get("id").String()
	if len(id) != 36 || strings.Count(id, "-") != 4 {
		t.Errorf("id %q is not a UUID", id)
	}
	wantRaw(t, d, map[string]string{
		"provider": `"openai"`, "name": `"Prod OpenAI"`, "label": `"sk-...6789"`, "disabled": "false",
		"is_fallback": "false", "is_byok_only": "false", "is_required": "false", "declared_zdr": "null",
		"allowed_models": "null", "allowed_api_key_hashes": "null", "allowed_user_ids": "null", "sort_order": "0",
		"workspace_id": strconv.Quote(f.Acct.DefaultWorkspaceID),
	})
	if !strings.HasSuffix(d.Get("created_at").String(), "Z") {
		t.Errorf("created_at = %s", d.Get("created_at").Raw)
	}

	// every optional field
	r = f.create(t, f.Mgmt, `{"provider":"openai","key":"second-openai-key","name":null,"disabled":true,
		"is_fallback":true,"is_byok_only":true,"is_required":true,"declared_zdr":true,
		"allowed_models":["paid"],"allowed_api_key_hashes":["`+f.RegHash+`"],"allowed_user_ids":["u1"],
		"workspace_id":"`+f.Acct.DefaultWorkspaceID+`"}`)
	id2 := r.JSON.Get("data.id").String()
	wantRaw(t, r.JSON.Get("data"), map[string]string{
		"name": "null", "disabled": "true", "is_fallback": "true", "is_byok_only": "true", "is_required": "true",
		"declared_zdr": "true", "allowed_models": `["paid"]`, "allowed_api_key_hashes": `["` + f.RegHash + `"]`,
		"allowed_user_ids": `["u1"]`, "sort_order": "1", "label": `"sec...-key"`,
	})
	r = f.create(t, f.Mgmt, `{"provider":"mock","key":"mock-own-key"}`)
	id3 := r.JSON.Get("data.id").String()

	g := f.c.do(t, "GET", "/api/v1/byok/"+id, f.Mgmt, "").Must(t, 200)
	noSecret(t, g, secret)
	if g.JSON.Get("data.id").String() != id || !slices.Equal(objectKeys(g.JSON.Get("data")), byokFields) {
		t.Fatalf("get: %s", g.Body)
	}

	l := f.c.do(t, "GET", "/api/v1/byok", f.Mgmt, "").Must(t, 200)
	noSecret(t, l, secret)
	if got := objectKeys(l.JSON); !slices.Equal(got, []string{"data", "total_count"}) {
		t.Fatalf("list fields %v", got)
	}
	var ids []string
	for _, v := range l.JSON.Get("data").Array() {
		ids = append(ids, v.Get("id").String())
	}
	if !slices.Equal(ids, []string{id3, id2, id}) || l.JSON.Get("total_count").Int() != 3 {
		t.Fatalf("list = %v total %d", ids, l.JSON.Get("total_count").Int())
	}
	l = f.c.do(t, "GET", "/api/v1/byok?offset=1&limit=1", f.Mgmt, "").Must(t, 200)
	if n := l.JSON.Get("data.#").Int(); n != 1 || l.JSON.Get("data.0.id").String() != id2 || l.JSON.Get("total_count").Int() != 3 {
		t.Fatalf("page: %s", l.Body)
	}
	l = f.c.do(t, "GET", "/api/v1/byok?provider=openai&workspace_id="+f.Acct.DefaultWorkspaceID, f.Mgmt, "").Must(t, 200)
	if l.JSON.Get("total_count").Int() != 2 || l.JSON.Get("data.#").Int() != 2 {
		t.Fatalf("provider filter: %s", l.Body)
	}
	l = f.c.do(t, "GET", "/api/v1/byok?offset=10", f.Mgmt, "").Must(t, 200)
	if l.JSON.Get("data").Raw != "[]" || l.JSON.Get("total_count").Int() != 3 {
		t.Fatalf("past the end: %s", l.Body)
	}

	// patch: rename, disable, rotate the key, clear an allowlist
	const rotated = "rotated-openai-key-ABCDEFGH"
	p := f.c.do(t, "PATCH", "/api/v1/byok/"+id2, f.Mgmt,
		`{"name":"renamed","disabled":false,"key":"`+rotated+`","allowed_api_key_hashes":null,"declared_zdr":null,"is_fallback":false}`).Must(t, 200)
	noSecret(t, p, rotated)
	wantRaw(t, p.JSON.Get("data"), map[string]string{
		"id": strconv.Quote(id2), "name": `"renamed"`, "disabled": "false", "label": `"rot...EFGH"`,
		"allowed_api_key_hashes": "null", "declared_zdr": "null", "is_fallback": "false",
		"allowed_models": `["paid"]`, "sort_order": "1", "provider": `"openai"`,
	})
	cred, _ := f.c.gw.Storage.BYOK(f.Acct.ID, id2)
	if plain, err := cred.Open(f.c.gw.Sealer); err != nil || plain != rotated {
		t.Fatalf("rotated key = %q, %v", plain, err)
	}
	// an empty patch changes nothing but is allowed
	f.c.do(t, "PATCH", "/api/v1/byok/"+id2, f.Mgmt, `{}`).Must(t, 200)

	del := f.c.do(t, "DELETE", "/api/v1/byok/"+id3, f.Mgmt, "").Must(t, 200)
	if del.Body != "{\"deleted\":true}\n" {
		t.Fatalf("delete body %q", del.Body)
	}
	f.c.do(t, "GET", "/api/v1/byok/"+id3, f.Mgmt, "").WantError(t, 404, "BYOK credential not found")
	f.c.do(t, "DELETE", "/api/v1/byok/"+id3, f.Mgmt, "").WantError(t, 404, "BYOK credential not found")
	f.c.do(t, "GET", "/api/v1/byok/"+id+"/x", f.Mgmt, "").WantError(t, 404, "Not found: GET /api/v1/byok/"+id+"/x")
	if f.c.got != nil {
		t.Fatal("a BYOK route reached the upstream")
	}
}

func TestBYOKValidation(t *testing.T) {
	f := newBYOKFixture(t)
	tests := []struct{ body, message string }{
		{``, "provider: required string"},
		{`{"key":"k"}`, "provider: required string"},
		{`{"provider":"","key":"k"}`, "provider: required string"},
		{`{"provider":5,"key":"k"}`, "provider: expected a string"},
		{`{"provider":"anthropic","key":"k"}`, `provider: unknown provider "anthropic"; expected one of: byok-only, fallback, first, mock, openai`},
		{`{"provider":"openai"}`, "key: required non-empty string"},
		{`{"provider":"openai","key":""}`, "key: expected a non-empty string"},
		{`{"provider":"openai","key":"   "}`, "key: expected a non-empty string"},
		{`{"provider":"openai","key":7}`, "key: expected a string"},
		{`{"provider":"openai","key":"a b"}`, "key: expected printable ASCII characters without spaces"},
		{`{"provider":"openai","key":"a\r\nX-Evil: 1"}`, "key: expected printable ASCII characters without spaces"},
		{`{"provider":"openai","key":"` + strings.Repeat("k", 8193) + `"}`, "key: expected at most 8192 characters"},
		{`{"provider":"openai","key":"k","name":5}`, "name: expected a string or null"},
		{`{"provider":"openai","key":"k","name":"` + strings.Repeat("n", 256) + `"}`, "name: expected at most 255 characters"},
		{`{"provider":"openai","key":"k","disabled":"yes"}`, "disabled: expected a boolean"},
		{`{"provider":"openai","key":"k","is_fallback":1}`, "is_fallback: expected a boolean"},
		{`{"provider":"openai","key":"k","declared_zdr":"x"}`, "declared_zdr: expected a boolean or null"},
		{`{"provider":"openai","key":"k","allowed_api_key_hashes":[]}`, "allowed_api_key_hashes: expected null or an array of 1 to 100 strings"},
		{`{"provider":"openai","key":"k","allowed_api_key_hashes":["abc"]}`, "allowed_api_key_hashes: expected entries that are a key hash (64 lowercase hex digits)"},
		{`{"provider":"openai","key":"k","allowed_api_key_hashes":["` + f.OtherHash + `"]}`, `allowed_api_key_hashes: "` + f.OtherHash + `" is not an API key of this account`},
		{`{"provider":"openai","key":"k","allowed_models":"paid"}`, "allowed_models: expected an array of strings or null"},
		{`{"provider":"openai","key":"k","allowed_models":[1]}`, "allowed_models: expected non-empty strings"},
		{`{"provider":"openai","key":"k","allowed_user_ids":[""]}`, "allowed_user_ids: expected non-empty strings"},
		{`{"provider":"openai","key":"k","workspace_id":1}`, "workspace_id: expected a string"},
		{`[]`, "Request body must be a JSON object"},
	}
	for _, tt := range tests {
		r := f.c.do(t, "POST", "/api/v1/byok", f.Mgmt, tt.body)
		r.WantError(t, 400, tt.message)
		if strings.Contains(tt.body, `"a b"`) && strings.Contains(r.Body, "a b") {
			t.Errorf("error echoes the key: %s", r.Body)
		}
	}
	f.c.do(t, "POST", "/api/v1/byok", f.Mgmt, `{"provider":"openai","key":"k","workspace_id":"`+f.Other.DefaultWorkspaceID+`"}`).
		WantError(t, 400, `workspace_id: "`+f.Other.DefaultWorkspaceID+`" is not a workspace of this account`)
	f.c.do(t, "POST", "/api/v1/byok", f.Mgmt, `{"provider":"openai","key":"k","workspace_id":"no-such-slug"}`).
		WantError(t, 400, `workspace_id: "no-such-slug" is not a workspace of this account`)

	id := f.create(t, f.Mgmt, `{"provider":"openai","key":"k-1"}`).JSON.Get("data.id").String()
	for _, tt := range []struct{ body, message string }{
		{`{"key":""}`, "key: expected a non-empty string"},
		{`{"name":false}`, "name: expected a string or null"},
		{`{"disabled":null}`, "disabled: expected a boolean"},
		{`{"allowed_api_key_hashes":[]}`, "allowed_api_key_hashes: expected null or an array of 1 to 100 strings"},
		{`{"allowed_api_key_hashes":["` + f.OtherHash + `"]}`, `allowed_api_key_hashes: "` + f.OtherHash + `" is not an API key of this account`},
	} {
		f.c.do(t, "PATCH", "/api/v1/byok/"+id, f.Mgmt, tt.body).WantError(t, 400, tt.message)
	}
	for _, q := range []struct{ query, message string }{
		{"limit=0", "limit: expected an integer from 1 to 100"},
		{"limit=101", "limit: expected an integer from 1 to 100"},
		{"limit=x", "limit: expected an integer from 1 to 100"},
		{"offset=-1", "offset: expected a non-negative integer"},
	} {
		f.c.do(t, "GET", "/api/v1/byok?"+q.query, f.Mgmt, "").WantError(t, 400, q.message)
	}
	f.c.do(t, "GET", "/api/v1/byok?workspace_id="+f.Other.DefaultWorkspaceID, f.Mgmt, "").
		WantError(t, 400, `workspace_id: "`+f.Other.DefaultWorkspaceID+`" is not a workspace of this account`)
}

// Credentials in another workspace: created by id or slug, listed per
// workspace (the default one when workspace_id is omitted).
func TestBYOKWorkspaces(t *testing.T) {
	f := newBYOKFixture(t)
	ws, err := f.c.gw.Storage.CreateWorkspace(f.Acct.ID, func(w *storage.Workspace) { w.Name, w.Slug = "Research", "research" })
	if err != nil {
		t.Fatal(err)
	}
	def := f.create(t, f.Mgmt, `{"provider":"openai","key":"default-ws-key-1"}`).JSON.Get("data")
	bySlug := f.create(t, f.Mgmt, `{"provider":"openai","key":"research-key-1","workspace_id":"research"}`).JSON.Get("data")
	byID := f.create(t, f.Mgmt, `{"provider":"openai","key":"research-key-2","workspace_id":"`+ws.ID+`"}`).JSON.Get("data")
	wantRaw(t, def, map[string]string{"workspace_id": strconv.Quote(f.Acct.DefaultWorkspaceID), "sort_order": "0"})
	wantRaw(t, bySlug, map[string]string{"workspace_id": strconv.Quote(ws.ID), "sort_order": "0"})
	wantRaw(t, byID, map[string]string{"workspace_id": strconv.Quote(ws.ID), "sort_order": "1"})
	wantRaw(t, f.c.do(t, "GET", "/api/v1/byok/"+bySlug.Get("id").Str, f.Mgmt, "").Must(t, 200).JSON.Get("data"),
		map[string]string{"workspace_id": strconv.Quote(ws.ID)})

	ids := func(query string) []string {
		t.Helper()
		l := f.c.do(t, "GET", "/api/v1/byok"+query, f.Mgmt, "").Must(t, 200).JSON
		var out []string
		for _, c := range l.Get("data").Array() {
			out = append(out, c.Get("id").Str)
		}
		if int(l.Get("total_count").Int()) != len(out) {
			t.Fatalf("%s: total_count %d for %d entries", query, l.Get("total_count").Int(), len(out))
		}
		return out
	}
	research := []string{byID.Get("id").Str, bySlug.Get("id").Str}
	for query, want := range map[string][]string{
		"": {def.Get("id").Str},
		"?workspace_id=" + f.Acct.DefaultWorkspaceID: {def.Get("id").Str},
		"?workspace_id=research":                     research,
		"?workspace_id=" + ws.ID:                     research,
		"?workspace_id=" + ws.ID + "&provider=mock":  nil,
	} {
		if got := ids(query); !slices.Equal(got, want) {
			t.Errorf("GET /byok%s = %v, want %v", query, got, want)
		}
	}
	// the other account's management key cannot reach the workspace
	f.c.do(t, "GET", "/api/v1/byok?workspace_id="+ws.ID, f.OtherMgmt, "").
		WantError(t, 400, `workspace_id: "`+ws.ID+`" is not a workspace of this account`)
	f.c.do(t, "POST", "/api/v1/byok", f.OtherMgmt, `{"provider":"openai","key":"k-1","workspace_id":"research"}`).
		WantError(t, 400, `workspace_id: "research" is not a workspace of this account`)
}
