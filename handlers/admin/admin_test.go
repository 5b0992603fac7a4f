package admin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// keyFields is every field of the public API key schema, those the SDKs
// require included.
var keyFields = []string{
	"byok_usage", "byok_usage_daily", "byok_usage_monthly", "byok_usage_weekly",
	"created_at", "creator_user_id", "disabled", "expires_at", "external_user", "hash",
	"include_byok_in_limit", "label", "limit", "limit_remaining", "limit_reset", "name",
	"updated_at", "usage", "usage_daily", "usage_monthly", "usage_weekly", "workspace_id",
}

// currentKeyFields is every field of GET /key.
var currentKeyFields = []string{
	"allowed_data_regions",
	"byok_usage", "byok_usage_daily", "byok_usage_monthly", "byok_usage_weekly",
	"creator_user_id", "expires_at", "free_model_daily_requests", "include_byok_in_limit",
	"is_free_tier", "is_management_key", "is_provisioning_key", "label", "limit",
	"limit_remaining", "limit_reset", "organization_id", "rate_limit",
	"usage", "usage_daily", "usage_monthly", "usage_weekly", "workspace_id",
}

var counterFields = []string{
	"usage", "usage_daily", "usage_weekly", "usage_monthly",
	"byok_usage", "byok_usage_daily", "byok_usage_weekly", "byok_usage_monthly",
}

// objectKeys returns the sorted member names of a JSON object.
func objectKeys(v gjson.Result) []string {
	var out []string
	v.ForEach(func(k, _ gjson.Result) bool {
		out = append(out, k.String())
		return true
	})
	slices.Sort(out)
	return out
}

// wantRaw checks the exact JSON text of each path in v.
func wantRaw(t *testing.T, v gjson.Result, want map[string]string) {
	t.Helper()
	for path, w := range want {
		if got := v.Get(path).Raw; got != w {
			t.Errorf("%s = %s, want %s", path, got, w)
		}
	}
}

// adminFixture is testgw's AdminAccounts on a chain.
type adminFixture struct {
	c *chain
	testgw.AdminAccounts
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	c := newChain(t)
	return &adminFixture{c: c, AdminAccounts: testgw.NewAdminAccounts(t, c.gw)}
}

func TestAdminCreateKey(t *testing.T) {
	f := newAdminFixture(t)
	ws := f.Org.DefaultWorkspaceID
	member := f.member(t, f.Org)
	before := time.Now().UTC().Truncate(time.Second)
	body := `{"name":"ci","limit":12.5,"limit_reset":"daily","include_byok_in_limit":true,` +
		`"expires_at":"2099-01-02T03:04:05.5Z","creator_user_id":"` + member + `","external":{"user":"ext-7"},` +
		`"workspace_id":"` + ws + `"}`
	res := f.c.do(t, "POST", "/api/v1/keys", f.OrgMgmt, body, "Content-Type", "application/json").Must(t, 201)
	after := time.Now().UTC()
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cl := res.Header.Get("Content-Length"); cl != strconv.Itoa(len(res.Body)) {
		t.Errorf("Content-Length = %s, body is %d bytes", cl, len(res.Body))
	}
	if got := objectKeys(res.JSON); !slices.Equal(got, []string{"data", "key"}) {
		t.Errorf("top-level fields = %v", got)
	}
	data := res.JSON.Get("data")
	if got := objectKeys(data); !slices.Equal(got, keyFields) {
		t.Errorf("key fields = %v\nwant %v", got, keyFields)
	}
	secret := res.JSON.Get("key").String()
	if !strings.HasPrefix(secret, storage.APIKeyPrefix) || len(secret) != len(storage.APIKeyPrefix)+64 {
		t.Fatalf("key = %q", secret)
	}
	body64 := strings.TrimPrefix(secret, storage.APIKeyPrefix)
	hash := storage.HashSecret(secret)
	wantRaw(t, data, map[string]string{
		"hash":                  `"` + hash + `"`,
		"name":                  `"ci"`,
		"label":                 `"` + storage.APIKeyPrefix + body64[:3] + "..." + body64[61:] + `"`,
		"disabled":              `false`,
		"limit":                 `12.5`,
		"limit_remaining":       `12.5`,
		"limit_reset":           `"daily"`,
		"include_byok_in_limit": `true`,
		"expires_at":            `"2099-01-02T03:04:05.5Z"`,
		"creator_user_id":       `"` + member + `"`,
		"external_user":         `"ext-7"`,
		"workspace_id":          `"` + ws + `"`,
	})
	for _, c := range counterFields {
		if raw := data.Get(c).Raw; raw != "0" {
			t.Errorf("%s = %s, want 0", c, raw)
		}
	}
	created, err := time.Parse(time.RFC3339, data.Get("created_at").String())
	if err != nil || !strings.HasSuffix(data.Get("created_at").String(), "Z") {
		t.Errorf("created_at = %s (%v)", data.Get("created_at").Raw, err)
	}
	if created.Before(before) || created.After(after) {
		t.Errorf("created_at = %v, not within [%v, %v]", created, before, after)
	}
	if data.Get("updated_at").Raw != data.Get("created_at").Raw {
		t.Errorf("updated_at = %s, created_at = %s", data.Get("updated_at").Raw, data.Get("created_at").Raw)
	}

	// stored exactly, and usable at once
	k, ok := f.c.gw.Storage.APIKey(hash)
	if !ok {
		t.Fatal("key not in store")
	}
	if k.AccountID != f.Org.ID || k.Limit == nil || *k.Limit != 12_500_000_000 || k.LimitReset != money.IntervalDaily {
		t.Errorf("stored key = %+v", k)
	}
	cur := f.c.do(t, "GET", "/api/v1/key", secret, "").Must(t, 200)
	if cur.JSON.Get("data.label").Raw != data.Get("label").Raw {
		t.Errorf("GET /key label = %s", cur.JSON.Get("data.label").Raw)
	}
}

func TestAdminCreateKeyDefaults(t *testing.T) {
	f := newAdminFixture(t)
	tests := []struct {
		name    string
		mgmt    string
		acct    storage.Account
		creator string // raw JSON
	}{
		// keys of a personal account are created by its owner
		{"personal", f.PersMgmt, f.Personal, `"` + f.Personal.OwnerUserID + `"`},
		{"organization", f.OrgMgmt, f.Org, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.c.do(t, "POST", "/api/v1/keys", tt.mgmt, `{"name":"min","limit":null,"expires_at":null,"external":null}`).Must(t, 201)
			wantRaw(t, res.JSON.Get("data"), map[string]string{
				"name":                  `"min"`,
				"disabled":              `false`,
				"limit":                 `null`,
				"limit_remaining":       `null`,
				"limit_reset":           `null`,
				"include_byok_in_limit": `false`,
				"expires_at":            `null`,
				"creator_user_id":       tt.creator,
				"external_user":         `null`,
				"workspace_id":          `"` + tt.acct.DefaultWorkspaceID + `"`,
			})
		})
	}
	if f.Personal.OwnerUserID != f.Personal.ID {
		t.Errorf("personal owner = %q, id %q", f.Personal.OwnerUserID, f.Personal.ID)
	}
}

// member adds a member to the organization acct and returns its user id.
func (f *adminFixture) member(t *testing.T, acct storage.Account) string {
	t.Helper()
	m, err := f.c.gw.Storage.CreateMember(storage.NewMember{AccountID: acct.ID, Email: "m" + strconv.Itoa(int(time.Now().UnixNano()%1e9)) + "@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

func TestAdminCreateKeyErrors(t *testing.T) {
	f := newAdminFixture(t)
	other, err := f.c.gw.Storage.CreateAccount(storage.NewAccount{Name: "Other", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	othersMember := f.member(t, other)
	gone := f.member(t, f.Org)
	if _, err := f.c.gw.Storage.UpdateMember(f.Org.ID, gone, storage.MemberUpdate{Active: new(false)}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		body    string
		status  int
		message string
	}{
		{``, 400, "name: required non-empty string"},
		{`{}`, 400, "name: required non-empty string"},
		{`{"name":""}`, 400, "name: required non-empty string"},
		{`{"name":"   "}`, 400, "name: required non-empty string"},
		{`{"name":null}`, 400, "name: expected a string"},
		{`{"name":5}`, 400, "name: expected a string"},
		{`{"name":"k","limit":"5"}`, 400, "limit: expected a number or null"},
		{`{"name":"k","limit":-0.5}`, 400, "limit: must not be negative"},
		{`{"name":"k","limit":1e30}`, 400, "limit: expected a number within range"},
		{`{"name":"k","limit_reset":"yearly"}`, 400, "limit_reset: expected daily, weekly, monthly or null"},
		{`{"name":"k","limit_reset":1}`, 400, "limit_reset: expected a string or null"},
		{`{"name":"k","include_byok_in_limit":"true"}`, 400, "include_byok_in_limit: expected a boolean"},
		{`{"name":"k","expires_at":"tomorrow"}`, 400, "expires_at: expected an ISO 8601 timestamp such as 2027-12-31T23:59:59Z"},
		{`{"name":"k","expires_at":"2099-01-01T00:00:00+02:00"}`, 400, "expires_at: expected a UTC timestamp ending in Z"},
		{`{"name":"k","expires_at":"2099-01-01T00:00:00+00:00"}`, 400, "expires_at: expected a UTC timestamp ending in Z"},
		{`{"name":"k","expires_at":"2001-01-01T00:00:00Z"}`, 400, "expires_at: must be in the future"},
		{`{"name":"k","expires_at":5}`, 400, "expires_at: expected a string or null"},
		{`{"name":"k","creator_user_id":""}`, 400, "creator_user_id: must not be empty"},
		{`{"name":"k","creator_user_id":7}`, 400, "creator_user_id: expected a string or null"},
		{`{"name":"k","creator_user_id":"user_42"}`, 400, "creator_user_id: not a member of this account"},
		{`{"name":"k","creator_user_id":"` + othersMember + `"}`, 400, "creator_user_id: not a member of this account"},
		{`{"name":"k","creator_user_id":"` + gone + `"}`, 400, "creator_user_id: not a member of this account"},
		{`{"name":"k","creator_user_id":"` + f.Personal.OwnerUserID + `"}`, 400, "creator_user_id: not a member of this account"},
		{`{"name":"k","external":{"user":"` + strings.Repeat("u", 257) + `"}}`, 400, "external.user: expected at most 256 characters"},
		{`{"name":"k","external":{"user":"a\nb"}}`, 400, "external.user: control characters are not allowed"},
		{`{"name":"k","external":{"user":""}}`, 400, "external.user: must not be empty"},
		{`{"name":"k","external":"bob"}`, 400, "external.user: expected a string"},
		{`{"name":"k","external":{"user":7}}`, 400, "external.user: expected a string"},
		{`{"name":"k","external":{}}`, 400, "external.user: expected a string"},
		{`{"name":"k","workspace_id":7}`, 400, "workspace_id: expected a string"},
		{`{"name":"k","workspace_id":"` + f.Personal.DefaultWorkspaceID + `"}`, 404, "Workspace not found"},
		{`[{"name":"k"}]`, 400, "Request body must be a JSON object"},
		{`"k"`, 400, "Request body must be a JSON object"},
		{`{"name":"k"`, 400, "Request body is not valid JSON"},
		{`{"name":"k"} {}`, 400, "Request body is not valid JSON"},
		{`{"name":"` + strings.Repeat("x", maxAdminBody) + `"}`, 413, "Request body is larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		name := tt.body
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			f.c.do(t, "POST", "/api/v1/keys", f.OrgMgmt, tt.body).WantError(t, tt.status, tt.message)
		})
	}
	// nothing was created beyond the fixture's key
	if n := len(f.c.gw.Storage.ListAPIKeys(storage.KeyFilter{AccountID: f.Org.ID, IncludeDisabled: true})); n != 1 {
		t.Errorf("org has %d keys after refused creations, want 1", n)
	}
}

func TestAdminListKeys(t *testing.T) {
	c := newChain(t)
	acct := c.gw.Account(t, storage.AccountOrganization)
	other := c.gw.Account(t, storage.AccountOrganization)
	_, mgmt := c.gw.ManagementKey(t, acct, nil)
	_, otherMgmt := c.gw.ManagementKey(t, other, nil)
	for i := range 105 {
		k, _ := c.gw.APIKey(t, acct, storage.NewAPIKey{Name: fmt.Sprintf("k%03d", i)})
		if i == 50 {
			if _, err := c.gw.Storage.UpdateAPIKey(k.Hash, func(k *storage.APIKey) error { k.Disabled = true; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.gw.APIKey(t, other, storage.NewAPIKey{Name: "other"})

	// names returns k<from> down to k<to>, skipping skip.
	names := func(from, to, skip int) []string {
		var out []string
		for i := from; i >= to; i-- {
			if i != skip {
				out = append(out, fmt.Sprintf("k%03d", i))
			}
		}
		return out
	}
	tests := []struct {
		query string
		names []string
	}{
		{"", names(104, 4, 50)},
		{"?offset=0", names(104, 4, 50)},
		{"?offset=100", names(3, 0, -1)},
		{"?offset=103", []string{"k000"}},
		{"?offset=104", []string{}},
		{"?offset=1000", []string{}},
		{"?include_disabled=false", names(104, 4, 50)},
		{"?include_disabled=true", names(104, 5, -1)},
		{"?include_disabled=true&offset=100", names(4, 0, -1)},
		{"?offset=2&include_disabled=true", names(102, 3, -1)},
		{"?workspace_id=" + acct.DefaultWorkspaceID + "&offset=100", names(3, 0, -1)},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			res := c.do(t, "GET", "/api/v1/keys"+tt.query, mgmt, "").Must(t, 200)
			data := res.JSON.Get("data")
			if !data.IsArray() {
				t.Fatalf("data = %s, want an array", data.Raw)
			}
			var got []string
			for _, k := range data.Array() {
				got = append(got, k.Get("name").String())
				if fields := objectKeys(k); !slices.Equal(fields, keyFields) {
					t.Fatalf("key fields = %v", fields)
				}
			}
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, tt.names) {
				t.Errorf("names = %v\nwant %v", got, tt.names)
			}
		})
	}

	res := c.do(t, "GET", "/api/v1/keys", otherMgmt, "").Must(t, 200)
	if got := res.JSON.Get("data.#.name").Raw; got != `["other"]` {
		t.Errorf("other account lists %s", got)
	}

	errs := []struct {
		query   string
		status  int
		message string
	}{
		{"?offset=-1", 400, "offset: expected a non-negative integer"},
		{"?offset=x", 400, "offset: expected a non-negative integer"},
		{"?offset=1.5", 400, "offset: expected a non-negative integer"},
		{"?include_disabled=yes", 400, "include_disabled: expected true or false"},
		{"?include_disabled=1", 400, "include_disabled: expected true or false"},
		{"?workspace_id=" + other.DefaultWorkspaceID, 404, "Workspace not found"},
		{"?workspace_id=nope", 404, "Workspace not found"},
	}
	for _, tt := range errs {
		t.Run(tt.query, func(t *testing.T) {
			c.do(t, "GET", "/api/v1/keys"+tt.query, mgmt, "").WantError(t, tt.status, tt.message)
		})
	}
}

func TestAdminListKeysEmpty(t *testing.T) {
	c := newChain(t)
	acct := c.gw.Account(t, storage.AccountPersonal)
	_, mgmt := c.gw.ManagementKey(t, acct, nil)
	res := c.do(t, "GET", "/api/v1/keys/", mgmt, "").Must(t, 200)
	if res.Body != "{\"data\":[]}\n" {
		t.Errorf("body = %q", res.Body)
	}
}

func TestAdminGetPatchDeleteKey(t *testing.T) {
	f := newAdminFixture(t)
	path := "/api/v1/keys/" + f.OrgHash

	got := f.c.do(t, "GET", path, f.OrgMgmt, "").Must(t, 200)
	if fields := objectKeys(got.JSON.Get("data")); !slices.Equal(fields, keyFields) {
		t.Errorf("fields = %v", fields)
	}
	wantRaw(t, got.JSON.Get("data"), map[string]string{
		"hash": `"` + f.OrgHash + `"`, "name": `"org regular"`, "label": `"` + f.OrgRegular.Label + `"`,
	})

	steps := []struct {
		body string
		want map[string]string
	}{
		{`{"name":"renamed"}`, map[string]string{"name": `"renamed"`, "disabled": "false", "limit": "null"}},
		{`{"limit":0.1,"limit_reset":"weekly","include_byok_in_limit":true}`, map[string]string{
			"name": `"renamed"`, "limit": "0.1", "limit_remaining": "0.1", "limit_reset": `"weekly"`, "include_byok_in_limit": "true",
		}},
		{`{}`, map[string]string{"name": `"renamed"`, "limit": "0.1", "limit_reset": `"weekly"`}},
		{`{"disabled":true,"expires_at":"2099-01-01T00:00:00Z","hash":"x","workspace_id":"y"}`, map[string]string{
			"disabled": "true", "hash": `"` + f.OrgHash + `"`, "expires_at": "null", "workspace_id": `"` + f.Org.DefaultWorkspaceID + `"`,
		}},
		{`{"limit":null,"limit_reset":null,"disabled":false}`, map[string]string{
			"limit": "null", "limit_remaining": "null", "limit_reset": "null", "disabled": "false", "include_byok_in_limit": "true",
		}},
		{`{"limit":0}`, map[string]string{"limit": "0", "limit_remaining": "0"}},
	}
	for i, s := range steps {
		res := f.c.do(t, "PATCH", path, f.OrgMgmt, s.body).Must(t, 200)
		if fields := objectKeys(res.JSON.Get("data")); !slices.Equal(fields, keyFields) {
			t.Errorf("step %d: fields = %v", i, fields)
		}
		wantRaw(t, res.JSON.Get("data"), s.want)
		// GET agrees with the PATCH answer
		again := f.c.do(t, "GET", path, f.OrgMgmt, "").Must(t, 200)
		if again.Body != res.Body {
			t.Errorf("step %d: GET = %s\nPATCH = %s", i, again.Body, res.Body)
		}
	}

	patchErrs := []struct {
		body    string
		status  int
		message string
	}{
		{`{"name":""}`, 400, "name: must not be empty"},
		{`{"name":" "}`, 400, "name: must not be empty"},
		{`{"name":5}`, 400, "name: expected a string"},
		{`{"name":null}`, 400, "name: expected a string"},
		{`{"disabled":"true"}`, 400, "disabled: expected a boolean"},
		{`{"disabled":null}`, 400, "disabled: expected a boolean"},
		{`{"include_byok_in_limit":1}`, 400, "include_byok_in_limit: expected a boolean"},
		{`{"limit":-1}`, 400, "limit: must not be negative"},
		{`{"limit":"1"}`, 400, "limit: expected a number or null"},
		{`{"limit_reset":"hourly"}`, 400, "limit_reset: expected daily, weekly, monthly or null"},
		{`[]`, 400, "Request body must be a JSON object"},
		{`{`, 400, "Request body is not valid JSON"},
	}
	before := f.c.do(t, "GET", path, f.OrgMgmt, "").Must(t, 200).Body
	for _, tt := range patchErrs {
		t.Run("patch "+tt.body, func(t *testing.T) {
			f.c.do(t, "PATCH", path, f.OrgMgmt, tt.body).WantError(t, tt.status, tt.message)
		})
	}
	if after := f.c.do(t, "GET", path, f.OrgMgmt, "").Must(t, 200).Body; after != before {
		t.Errorf("refused PATCHes changed the key:\n%s\n%s", before, after)
	}

	del := f.c.do(t, "DELETE", path, f.OrgMgmt, "").Must(t, 200)
	if del.Body != "{\"deleted\":true}\n" {
		t.Errorf("DELETE body = %q", del.Body)
	}
	if _, ok := f.c.gw.Storage.APIKey(f.OrgHash); ok {
		t.Error("key still in store")
	}
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		f.c.do(t, m, path, f.OrgMgmt, `{}`).WantError(t, 404, "API key not found")
	}
	f.c.do(t, "GET", "/api/v1/key", f.OrgKey, "").WantError(t, 401, msgInvalidKey)
}

func TestAdminCrossAccount(t *testing.T) {
	f := newAdminFixture(t)
	before, _ := f.c.gw.Storage.APIKey(f.OrgHash)
	tests := []struct {
		method string
		path   string
		body   string
	}{
		{"GET", "/api/v1/keys/" + f.OrgHash, ""},
		{"PATCH", "/api/v1/keys/" + f.OrgHash, `{"name":"stolen","disabled":true}`},
		{"DELETE", "/api/v1/keys/" + f.OrgHash, ""},
		{"GET", "/api/v1/keys/" + strings.Repeat("0", 64), ""},
		{"GET", "/api/v1/keys/" + f.OrgMgmtKey.Hash, ""}, // management keys are not API keys
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			f.c.do(t, tt.method, tt.path, f.PersMgmt, tt.body).WantError(t, 404, "API key not found")
		})
	}
	after, ok := f.c.gw.Storage.APIKey(f.OrgHash)
	if !ok || after.Name != before.Name || after.Disabled || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("other account's key changed: %+v", after)
	}
	res := f.c.do(t, "GET", "/api/v1/keys", f.PersMgmt, "").Must(t, 200)
	if got := res.JSON.Get("data.#.hash").Raw; got != `["`+f.PersHash+`"]` {
		t.Errorf("personal list = %s", got)
	}
}

func TestAdminMethodNotAllowed(t *testing.T) {
	f := newAdminFixture(t)
	tests := []struct {
		method string
		path   string
		key    string
		allow  []string
	}{
		{"PUT", "/api/v1/keys", f.OrgMgmt, []string{"GET", "POST"}},
		{"DELETE", "/api/v1/keys", f.OrgMgmt, []string{"GET", "POST"}},
		{"POST", "/api/v1/keys/" + f.OrgHash, f.OrgMgmt, []string{"DELETE", "GET", "PATCH"}},
		{"PUT", "/api/v1/keys/nope", f.OrgMgmt, []string{"DELETE", "GET", "PATCH"}},
		{"POST", "/api/v1/key", f.OrgKey, []string{"GET"}},
		{"DELETE", "/api/v1/key", f.OrgMgmt, []string{"GET"}},
		{"PUT", "/api/v1/organization/settings", f.OrgMgmt, []string{"GET", "PATCH"}},
		{"POST", "/api/v1/credits", f.OrgMgmt, []string{"GET"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			res := f.c.do(t, tt.method, tt.path, tt.key, `{}`)
			res.WantError(t, 405, "Method "+tt.method+" is not allowed on "+tt.path)
			allow := strings.Split(res.Header.Get("Allow"), ", ")
			slices.Sort(allow)
			if !slices.Equal(allow, tt.allow) {
				t.Errorf("Allow = %q, want %v", res.Header.Get("Allow"), tt.allow)
			}
		})
	}
}

func TestAdminOrganizationSettings(t *testing.T) {
	f := newAdminFixture(t)
	const personalMsg = "Organization not found: this management key belongs to a personal account"
	f.c.do(t, "GET", "/api/v1/organization/settings", f.PersMgmt, "").WantError(t, 404, personalMsg)
	f.c.do(t, "PATCH", "/api/v1/organization/settings", f.PersMgmt, `{"is_filtered_model_catalog_enabled":true}`).WantError(t, 404, personalMsg)
	if a, _ := f.c.gw.Storage.Account(f.Personal.ID); a.FilteredModelCatalog {
		t.Error("personal account setting changed")
	}

	settings := func(on bool) string {
		return `{"data":{"id":"` + f.Org.ID + `","is_filtered_model_catalog_enabled":` + strconv.FormatBool(on) + "}}\n"
	}
	steps := []struct {
		method, body, want string
	}{
		{"GET", "", settings(false)},
		{"PATCH", `{"is_filtered_model_catalog_enabled":true}`, settings(true)},
		{"GET", "", settings(true)},
		{"PATCH", `{"is_filtered_model_catalog_enabled":true,"id":"org_other"}`, settings(true)},
		{"PATCH", `{"is_filtered_model_catalog_enabled":false}`, settings(false)},
		{"GET", "", settings(false)},
	}
	for i, s := range steps {
		res := f.c.do(t, s.method, "/api/v1/organization/settings", f.OrgMgmt, s.body).Must(t, 200)
		if res.Body != s.want {
			t.Errorf("step %d %s: body = %s want %s", i, s.method, res.Body, s.want)
		}
	}
	if _, err := f.c.gw.Storage.UpdateAccount(f.Org.ID, func(a *storage.Account) error { a.FilteredModelCatalog = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if res := f.c.do(t, "GET", "/api/v1/organization/settings", f.OrgMgmt, "").Must(t, 200); res.Body != settings(true) {
		t.Errorf("GET after store update = %s", res.Body)
	}

	errs := []struct{ body, message string }{
		{`{}`, "is_filtered_model_catalog_enabled: required boolean"},
		{``, "is_filtered_model_catalog_enabled: required boolean"},
		{`{"is_filtered_model_catalog_enabled":"yes"}`, "is_filtered_model_catalog_enabled: expected a boolean"},
		{`{"is_filtered_model_catalog_enabled":null}`, "is_filtered_model_catalog_enabled: expected a boolean"},
		{`true`, "Request body must be a JSON object"},
	}
	for _, tt := range errs {
		t.Run(tt.body, func(t *testing.T) {
			f.c.do(t, "PATCH", "/api/v1/organization/settings", f.OrgMgmt, tt.body).WantError(t, 400, tt.message)
		})
	}
}

func TestAdminCredits(t *testing.T) {
	f := newAdminFixture(t)
	steps := []struct {
		purchase money.Amount
		cost     money.Amount
		byok     bool
		want     string
	}{
		{0, 0, false, `{"data":{"total_credits":0,"total_usage":0}}`},
		{8_990_000_000, 0, false, `{"data":{"total_credits":8.99,"total_usage":0}}`},
		{10_000_000, 1_500_000_000, false, `{"data":{"total_credits":9,"total_usage":1.5}}`},
		{1, 1, false, `{"data":{"total_credits":9.000000001,"total_usage":1.500000001}}`},
		// BYOK spending uses no credits
		{0, 2_000_000_000, true, `{"data":{"total_credits":9.000000001,"total_usage":1.500000001}}`},
	}
	for i, s := range steps {
		if s.purchase > 0 {
			if _, _, err := f.c.gw.Storage.RecordPurchase(f.Org.ID, s.purchase, "test"); err != nil {
				t.Fatal(err)
			}
		}
		if s.cost > 0 {
			charge(t, f.c.gw.Storage, f.Org.ID, f.OrgHash, s.cost, s.byok)
		}
		res := f.c.do(t, "GET", "/api/v1/credits", f.OrgMgmt, "").Must(t, 200)
		if res.Body != s.want+"\n" {
			t.Errorf("step %d: body = %s want %s", i, res.Body, s.want)
		}
	}
	// another account's purchases are not visible
	res := f.c.do(t, "GET", "/api/v1/credits", f.PersMgmt, "").Must(t, 200)
	if res.Body != `{"data":{"total_credits":0,"total_usage":0}}`+"\n" {
		t.Errorf("personal credits = %s", res.Body)
	}
}

// charge settles one request of the given cost against the account and key,
// through the store's ledger, at the store's (real) clock.
func charge(t *testing.T, s *storage.Store, accountID, keyHash string, cost money.Amount, byok bool) {
	t.Helper()
	res, err := s.Reserve(accountID, keyHash, storage.Holds{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(res, storage.Charge{Cost: cost, BYOK: byok}); err != nil {
		t.Fatal(err)
	}
}

func TestAdminCurrentKeyRegular(t *testing.T) {
	f := newAdminFixture(t)
	creator := f.member(t, f.Org)
	limit := money.Amount(2_500_000_000)
	expires := time.Date(2099, 5, 6, 7, 8, 9, 0, time.UTC)
	_, secret := f.c.gw.APIKey(t, f.Org, storage.NewAPIKey{
		Name: "capped", Limit: &limit, LimitReset: money.IntervalWeekly, IncludeBYOKInLimit: true,
		ExpiresAt: &expires, CreatorUserID: &creator,
	})
	res := f.c.do(t, "GET", "/api/v1/key", secret, "").Must(t, 200)
	if got := objectKeys(res.JSON); !slices.Equal(got, []string{"data"}) {
		t.Errorf("top-level fields = %v", got)
	}
	data := res.JSON.Get("data")
	if got := objectKeys(data); !slices.Equal(got, currentKeyFields) {
		t.Errorf("fields = %v\nwant %v", got, currentKeyFields)
	}
	body := strings.TrimPrefix(secret, storage.APIKeyPrefix)
	wantRaw(t, data, map[string]string{
		"label":                     `"` + storage.APIKeyPrefix + body[:3] + "..." + body[61:] + `"`,
		"limit":                     `2.5`,
		"limit_remaining":           `2.5`,
		"limit_reset":               `"weekly"`,
		"include_byok_in_limit":     `true`,
		"is_free_tier":              `true`,
		"is_management_key":         `false`,
		"is_provisioning_key":       `false`,
		"free_model_daily_requests": `{"used":0,"limit":50,"remaining":50}`,
		"rate_limit":                `{"requests":-1,"interval":"10s","note":"This field is deprecated and safe to ignore."}`,
		"creator_user_id":           `"` + creator + `"`,
		"expires_at":                `"2099-05-06T07:08:09Z"`,
		"organization_id":           `"` + f.Org.ID + `"`,
		"workspace_id":              `"` + f.Org.DefaultWorkspaceID + `"`,
		"allowed_data_regions":      `["global","europe","us"]`,
	})
	for _, c := range counterFields {
		if raw := data.Get(c).Raw; raw != "0" {
			t.Errorf("%s = %s, want 0", c, raw)
		}
	}

	pers := f.c.do(t, "GET", "/api/v1/key", f.PersKey, "").Must(t, 200).JSON.Get("data")
	wantRaw(t, pers, map[string]string{
		"label":           `"` + f.PersRegular.Label + `"`,
		"limit":           `null`,
		"limit_remaining": `null`,
		"limit_reset":     `null`,
		"creator_user_id": `"` + f.Personal.ID + `"`,
		"expires_at":      `null`,
		"organization_id": `null`,
		"workspace_id":    `"` + f.Personal.DefaultWorkspaceID + `"`,
	})
}

func TestAdminCurrentKeyManagement(t *testing.T) {
	f := newAdminFixture(t)
	expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	mk, secret := f.c.gw.ManagementKey(t, f.Org, &expires)
	tests := []struct {
		name   string
		secret string
		label  string
		org    string
		exp    string
	}{
		{"organization", secret, mk.Label, `"` + f.Org.ID + `"`, `"` + expires.Format(time.RFC3339) + `"`},
		{"personal", f.PersMgmt, "", `null`, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := f.c.do(t, "GET", "/api/v1/key", tt.secret, "").Must(t, 200).JSON.Get("data")
			if got := objectKeys(data); !slices.Equal(got, currentKeyFields) {
				t.Errorf("fields = %v", got)
			}
			want := map[string]string{
				"limit":               `null`,
				"limit_remaining":     `null`,
				"limit_reset":         `null`,
				"is_management_key":   `true`,
				"is_provisioning_key": `true`,
				"creator_user_id":     `null`,
				"expires_at":          tt.exp,
				"organization_id":     tt.org,
				"workspace_id":        `null`,
				// no guardrail applies to a management key
				"allowed_data_regions": `["global","europe","us"]`,
			}
			if tt.label != "" {
				want["label"] = `"` + tt.label + `"`
			}
			wantRaw(t, data, want)
			if !strings.HasPrefix(data.Get("label").String(), storage.ManagementKeyPrefix) {
				t.Errorf("label = %s", data.Get("label").Raw)
			}
		})
	}
}

func TestAdminCurrentKeyFreeModelTier(t *testing.T) {
	defaults := gateway.FreeModelLimits{}.WithDefaults()
	custom := gateway.FreeModelLimits{PerDay: 3, PerDayPaid: 7, PaidThreshold: money.AmountScale}.WithDefaults()
	tests := []struct {
		name      string
		limits    gateway.FreeModelLimits
		purchases []money.Amount
		used      int64
		freeTier  bool
		limit     int64
		remaining int64
	}{
		{"never paid", defaults, nil, 0, true, 50, 50},
		{"never paid, some used", defaults, nil, 12, true, 50, 38},
		{"below threshold", defaults, []money.Amount{8_990_000_000}, 0, false, 50, 50},
		{"one nano below threshold", defaults, []money.Amount{8_999_999_999}, 3, false, 50, 47},
		{"threshold reached over two purchases", defaults, []money.Amount{8_990_000_000, 10_000_000}, 0, false, 1000, 1000},
		{"exactly 9", defaults, []money.Amount{9 * money.AmountScale}, 60, false, 1000, 940},
		{"over the cap", defaults, []money.Amount{1 * money.AmountScale}, 60, false, 50, 0},
		{"custom lower tier", custom, []money.Amount{500_000_000}, 1, false, 3, 2},
		{"custom paid tier", custom, []money.Amount{money.AmountScale}, 1, false, 7, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChain(t)
			c.gw.Limits = tt.limits
			acct := c.gw.Account(t, storage.AccountPersonal)
			_, secret := c.gw.APIKey(t, acct, storage.NewAPIKey{})
			_, mgmt := c.gw.ManagementKey(t, acct, nil)
			for _, p := range tt.purchases {
				if _, _, err := c.gw.Storage.RecordPurchase(acct.ID, p, ""); err != nil {
					t.Fatal(err)
				}
			}
			day, used := countFreeRequests(t, c.gw.Storage, acct.ID, tt.used)
			testgw.SetClock(t, &now, day.Add(12*time.Hour))
			remaining := tt.remaining
			if used != tt.used { // a UTC midnight passed while counting
				remaining = max(tt.limit-used, 0)
			}
			want := fmt.Sprintf(`{"used":%d,"limit":%d,"remaining":%d}`, used, tt.limit, remaining)
			for _, key := range []string{secret, mgmt} {
				data := c.do(t, "GET", "/api/v1/key", key, "").Must(t, 200).JSON.Get("data")
				wantRaw(t, data, map[string]string{
					"is_free_tier":              strconv.FormatBool(tt.freeTier),
					"free_model_daily_requests": want,
				})
			}
		})
	}
}

// countFreeRequests counts n free-model requests for the account as the meter
// does (a reservation that counts one, then released), and returns the start
// of the UTC day the store counted them in and how many that day holds: n, or
// fewer when a UTC midnight passed while counting. The store's clock is the
// real one, so callers compute their expectations from what it returns.
func countFreeRequests(t *testing.T, s *storage.Store, accountID string, n int64) (day time.Time, counted int64) {
	t.Helper()
	if n == 0 {
		return time.Now().UTC().Truncate(24 * time.Hour), 0
	}
	for range n {
		res, err := s.Reserve(accountID, "", storage.Holds{CountFree: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(res); err != nil {
			t.Fatal(err)
		}
	}
	a, ok := s.Account(accountID)
	if !ok {
		t.Fatalf("account %s is gone", accountID)
	}
	day = time.Unix(a.FreeModelRequests.Period*86400, 0).UTC()
	counted = a.FreeModelRequestsToday(day)
	if counted < 1 || counted > n {
		t.Fatalf("counted %d free-model requests, want %d", counted, n)
	}
	return day, counted
}

func TestAdminCurrentKeyFreeModelDayRollover(t *testing.T) {
	c := newChain(t)
	acct := c.gw.Account(t, storage.AccountPersonal)
	_, secret := c.gw.APIKey(t, acct, storage.NewAPIKey{})
	day, used := countFreeRequests(t, c.gw.Storage, acct.ID, 7)
	lastInstant := day.AddDate(0, 0, 1).Add(-time.Nanosecond)
	counted := fmt.Sprintf(`{"used":%d,"limit":50,"remaining":%d}`, used, 50-used)
	const none = `{"used":0,"limit":50,"remaining":50}`
	tests := []struct {
		name string
		at   time.Time
		want string
	}{
		{"start of the day", day, counted},
		{"last instant of the day", lastInstant, counted},
		{"UTC midnight", lastInstant.Add(time.Nanosecond), none},
		{"same instant in another zone", lastInstant.In(time.FixedZone("UTC+5", 5*3600)), counted},
		{"day before", day.Add(-time.Second), none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testgw.SetClock(t, &now, tt.at)
			data := c.do(t, "GET", "/api/v1/key", secret, "").Must(t, 200).JSON.Get("data")
			if got := data.Get("free_model_daily_requests").Raw; got != tt.want {
				t.Errorf("free_model_daily_requests = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestAdminLimitRemainingDailyReset(t *testing.T) {
	c := newChain(t)
	acct := c.gw.Account(t, storage.AccountOrganization)
	_, mgmt := c.gw.ManagementKey(t, acct, nil)
	limit := money.Amount(5 * money.AmountScale)
	// The store records charges at its own clock: find the UTC day it
	// used. If a UTC midnight fell between the two charges, a fresh key
	// is charged again; the next midnight is a day away.
	var (
		k      storage.APIKey
		secret string
		day    time.Time
	)
	for attempt := 1; ; attempt++ {
		k, secret = c.gw.APIKey(t, acct, storage.NewAPIKey{Limit: &limit, LimitReset: money.IntervalDaily, IncludeBYOKInLimit: true})
		charge(t, c.gw.Storage, acct.ID, k.Hash, 1_250_000_000, false)
		charge(t, c.gw.Storage, acct.ID, k.Hash, 500_000_000, true)
		stored, _ := c.gw.Storage.APIKey(k.Hash)
		if stored.BYOKUsage.Daily.Period == stored.Usage.Daily.Period {
			day = time.Unix(stored.Usage.Daily.Period*86400, 0).UTC()
			break
		}
		if attempt == 2 {
			t.Fatalf("charges in different UTC days twice: %+v", stored)
		}
	}
	next := day.AddDate(0, 0, 1)
	sameWeek := money.PeriodID(money.IntervalWeekly, day) == money.PeriodID(money.IntervalWeekly, next)
	sameMonth := money.PeriodID(money.IntervalMonthly, day) == money.PeriodID(money.IntervalMonthly, next)
	ifSame := func(same bool, v string) string {
		if same {
			return v
		}
		return "0"
	}
	tests := []struct {
		name string
		at   time.Time
		want map[string]string
	}{
		{"start of the charged day", day, map[string]string{
			"limit": "5", "limit_remaining": "3.25", "usage": "1.25", "usage_daily": "1.25",
			"usage_weekly": "1.25", "usage_monthly": "1.25",
			"byok_usage": "0.5", "byok_usage_daily": "0.5", "byok_usage_weekly": "0.5", "byok_usage_monthly": "0.5",
		}},
		{"last instant of the charged day", next.Add(-time.Nanosecond), map[string]string{
			"limit_remaining": "3.25", "usage_daily": "1.25", "byok_usage_daily": "0.5",
		}},
		{"UTC midnight", next, map[string]string{
			"limit": "5", "limit_remaining": "5", "usage": "1.25", "usage_daily": "0",
			"usage_weekly": ifSame(sameWeek, "1.25"), "usage_monthly": ifSame(sameMonth, "1.25"),
			"byok_usage": "0.5", "byok_usage_daily": "0", "byok_usage_weekly": ifSame(sameWeek, "0.5"),
		}},
		{"the day before", day.Add(-time.Nanosecond), map[string]string{
			"limit_remaining": "5", "usage_daily": "0", "usage": "1.25",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testgw.SetClock(t, &now, tt.at)
			cur := c.do(t, "GET", "/api/v1/key", secret, "").Must(t, 200).JSON.Get("data")
			wantRaw(t, cur, tt.want)
			view := c.do(t, "GET", "/api/v1/keys/"+k.Hash, mgmt, "").Must(t, 200).JSON.Get("data")
			wantRaw(t, view, tt.want)
		})
	}

	// without include_byok_in_limit only credit spending counts
	if _, err := c.gw.Storage.UpdateAPIKey(k.Hash, func(k *storage.APIKey) error { k.IncludeBYOKInLimit = false; return nil }); err != nil {
		t.Fatal(err)
	}
	testgw.SetClock(t, &now, day)
	cur := c.do(t, "GET", "/api/v1/key", secret, "").Must(t, 200).JSON.Get("data")
	wantRaw(t, cur, map[string]string{"limit_remaining": "3.75", "include_byok_in_limit": "false"})

	// a cap smaller than the spending reads as zero left, not negative
	small := c.do(t, "PATCH", "/api/v1/keys/"+k.Hash, mgmt, `{"limit":1}`).Must(t, 200).JSON.Get("data")
	wantRaw(t, small, map[string]string{"limit": "1", "limit_remaining": "0"})
}
