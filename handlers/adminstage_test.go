package handlers

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

// The administrative stage within the pipeline: what the resources
// store reaches authentication and routing.

// byokFixture is testgw's BYOKAccounts on a chain.
type byokFixture struct {
	c *chain
	testgw.BYOKAccounts
}

func newBYOKFixture(t *testing.T) *byokFixture {
	t.Helper()
	c := newChain(t)
	f := &byokFixture{c: c, BYOKAccounts: testgw.NewBYOKAccounts(t, c.gw)}
	c.router.Gateway = c.gw
	return f
}

func (f *byokFixture) create(t *testing.T, mgmt, body string) testgw.Response {
	t.Helper()
	return f.c.do(t, "POST", "/api/v1/byok", mgmt, body).Must(t, http.StatusCreated)
}

func TestBYOKNotConfigured(t *testing.T) {
	f := newBYOKFixture(t)
	f.c.gw.Sealer = nil
	for _, rq := range []struct{ method, path, body string }{
		{"GET", "/api/v1/byok", ""},
		{"POST", "/api/v1/byok", `{"provider":"openai","key":"sk-x"}`},
		{"GET", "/api/v1/byok/abc", ""},
		{"PATCH", "/api/v1/byok/abc", `{}`},
		{"DELETE", "/api/v1/byok/abc", ""},
	} {
		f.c.do(t, rq.method, rq.path, f.Mgmt, rq.body).WantError(t, 400, "BYOK is not configured on this gateway: the operator must set byok_encryption_key")
	}
	// method errors still come first; a regular key is still 403
	f.c.do(t, "PUT", "/api/v1/byok", f.Mgmt, "").Must(t, 405)
	f.c.do(t, "GET", "/api/v1/byok", f.Regular, "").WantError(t, 403, msgManagementOnly)
	// no BYOK routing: the operator's key is used
	f.c.do(t, "POST", "/api/v1/chat/completions", f.Regular, `{"model":"paid","messages":[]}`).Must(t, http.StatusTeapot)
	if got := f.c.got.header.Get("Authorization"); got != "Bearer sk-openai" {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestBYOKCrossAccount(t *testing.T) {
	f := newBYOKFixture(t)
	const secret = "account-A-own-openai-key"
	id := f.create(t, f.Mgmt, `{"provider":"openai","key":"`+secret+`"}`).JSON.Get("data.id").String()
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		f.c.do(t, m, "/api/v1/byok/"+id, f.OtherMgmt, `{"disabled":true}`).WantError(t, 404, "BYOK credential not found")
	}
	l := f.c.do(t, "GET", "/api/v1/byok", f.OtherMgmt, "").Must(t, 200)
	if l.Body != "{\"data\":[],\"total_count\":0}\n" {
		t.Fatalf("other account's list: %s", l.Body)
	}
	// the credential is untouched and only its own account's requests use it
	if c, ok := f.c.gw.Storage.BYOK(f.Acct.ID, id); !ok || c.Disabled {
		t.Fatalf("credential after foreign PATCH: %+v %v", c, ok)
	}
	f.c.do(t, "POST", "/api/v1/chat/completions", f.OtherReg, `{"model":"paid","messages":[]}`).Must(t, http.StatusTeapot)
	if got := f.c.got.header.Get("Authorization"); got != "Bearer sk-openai" {
		t.Fatalf("other account's request used %q", got)
	}
	f.c.do(t, "POST", "/api/v1/chat/completions", f.Regular, `{"model":"paid","messages":[]}`).Must(t, http.StatusTeapot)
	if got := f.c.got.header.Get("Authorization"); got != "Bearer "+secret {
		t.Fatalf("own account's request used %q", got)
	}
}

func TestRouterPrefersBYOK(t *testing.T) {
	f := newBYOKFixture(t)
	var got *routed
	up := routeRecorder(t, &got)
	h := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return f.c.auth.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return routerMW{f.c.router}.ServeHTTP(w, r, up)
		}))
	})
	chat := func(model, key string) (testgw.Response, *http.Request) {
		t.Helper()
		got = nil
		r, repl := testgw.NewRequest("POST", "/api/v1/chat/completions", `{"model":"`+model+`","messages":[]}`, "Authorization", "Bearer "+key)
		return testgw.Serve(t, h, r, repl), r
	}
	// without credentials: the operator's keys; a keyless provider is unusable
	chat("second", f.Regular)
	if got.route.Provider.Name != "fallback" || got.auth != "Bearer key-2" || got.route.BYOK {
		t.Fatalf("no BYOK: provider %s auth %q byok %v", got.route.Provider.Name, got.auth, got.route.BYOK)
	}
	res, _ := chat("keyless", f.Regular)
	res.WantError(t, 503, "No provider is available for model keyless")

	// a credential for the first provider (no operator key) wins over the
	// operator's key of a later provider
	f.create(t, f.Mgmt, `{"provider":"first","key":"own-first-key"}`)
	res, r := chat("second", f.Regular)
	res.Must(t, http.StatusTeapot)
	if got.route.Provider.Name != "first" || got.auth != "Bearer own-first-key" || !got.route.BYOK || got.host != "one.test" {
		t.Fatalf("BYOK: provider %s auth %q byok %v host %s", got.route.Provider.Name, got.auth, got.route.BYOK, got.host)
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("the account's key leaked into the logged request's headers")
	}
	if v, _ := res.Repl.Get("tollgate.provider"); v != "first" {
		t.Errorf("tollgate.provider = %v", v)
	}
	// a BYOK-only provider becomes usable
	f.create(t, f.Mgmt, `{"provider":"byok-only","key":"own-byok-only-key"}`)
	chat("keyless", f.Regular)
	if got == nil || got.auth != "Bearer own-byok-only-key" || !got.route.BYOK {
		t.Fatalf("keyless via BYOK: %+v", got)
	}
	// preferred over the operator's key of the same provider
	id := f.create(t, f.Mgmt, `{"provider":"openai","key":"own-openai-key"}`).JSON.Get("data.id").String()
	chat("paid", f.Regular)
	if got.auth != "Bearer own-openai-key" || !got.route.BYOK || string(got.body) != `{"model":"gpt-x-2025","messages":[]}` {
		t.Fatalf("paid via BYOK: auth %q body %s", got.auth, got.body)
	}
	// a disabled credential is not used
	f.c.do(t, "PATCH", "/api/v1/byok/"+id, f.Mgmt, `{"disabled":true}`).Must(t, 200)
	chat("paid", f.Regular)
	if got.auth != "Bearer sk-openai" || got.route.BYOK {
		t.Fatalf("disabled credential: auth %q byok %v", got.auth, got.route.BYOK)
	}
	// an allowlist restricts which keys and models use a credential
	f.c.do(t, "PATCH", "/api/v1/byok/"+id, f.Mgmt, `{"disabled":false,"allowed_models":["mock"]}`).Must(t, 200)
	chat("paid", f.Regular)
	if got.route.BYOK {
		t.Fatal("allowed_models ignored")
	}
	f.c.do(t, "PATCH", "/api/v1/byok/"+id, f.Mgmt, `{"allowed_models":null,"allowed_api_key_hashes":["`+f.RegHash+`"]}`).Must(t, 200)
	chat("paid", f.Regular)
	if !got.route.BYOK || got.auth != "Bearer own-openai-key" {
		t.Fatal("allowed_api_key_hashes refused the allowed key")
	}
	_, second := f.c.gw.APIKey(t, f.Acct, storage.NewAPIKey{Name: "second"})
	chat("paid", second)
	if got.route.BYOK {
		t.Fatal("allowed_api_key_hashes admitted another key")
	}
}

func TestRouterBYOKUnopenable(t *testing.T) {
	f := newBYOKFixture(t)
	core, logs := observer.New(zap.DebugLevel)
	f.c.router.Logger = zap.New(core)
	const secret = "sealed-under-the-old-key"
	f.create(t, f.Mgmt, `{"provider":"openai","key":"`+secret+`"}`)
	// the operator changed byok_encryption_key: the credential cannot be
	// opened, and the operator's key serves the request
	f.c.gw.Sealer = testgw.NewSealer(t, 10)
	f.c.do(t, "POST", "/api/v1/chat/completions", f.Regular, `{"model":"paid","messages":[]}`).Must(t, http.StatusTeapot)
	if got := f.c.got.header.Get("Authorization"); got != "Bearer sk-openai" {
		t.Fatalf("Authorization = %q", got)
	}
	if logs.Len() != 1 {
		t.Fatalf("%d log entries", logs.Len())
	}
	for _, e := range logs.All() {
		line := e.Message
		for k, v := range e.ContextMap() {
			line += " " + k + "=" + toString(v)
		}
		if strings.Contains(line, secret) {
			t.Fatalf("log carries the key: %s", line)
		}
	}
}

func TestEndUserRoutesAndDeactivation(t *testing.T) {
	f := newAdminFixture(t)
	c := f.c
	c.do(t, "POST", "/api/v1/end-users", f.OrgMgmt, `{"user":"u1","name":"One"}`).Must(t, 201)
	c.do(t, "POST", "/api/v1/end-users", f.OrgMgmt, `{"user":"u1"}`).WantError(t, 409, `End user "u1" already exists`)
	c.do(t, "POST", "/api/v1/end-users", f.OrgMgmt, `{"user":5}`).WantError(t, 400, "user: expected a string")
	c.do(t, "POST", "/api/v1/end-users", f.OrgMgmt, `{"user":"u\u0000"}`).WantError(t, 400, "user: control characters are not allowed")
	c.do(t, "POST", "/api/v1/end-users", f.OrgMgmt, `{"user":"\ud800"}`).WantError(t, 400, "user: unpaired UTF-16 surrogate")
	c.do(t, "POST", "/api/v1/end-users", f.OrgMgmt, `{"user":"u2","name":""}`).WantError(t, 400, "name: expected a non-empty string of at most 256 bytes, or null")
	c.do(t, "GET", "/api/v1/end-users?limit=0", f.OrgMgmt, "").WantError(t, 400, "limit: expected an integer from 1 to 1000")
	c.do(t, "PUT", "/api/v1/end-users/u1", f.OrgMgmt, "").Must(t, 405)
	c.do(t, "GET", "/api/v1/end-users/u1", f.PersMgmt, "").WantError(t, 404, "End user not found")
	c.do(t, "GET", "/api/v1/end-users", f.OrgKey, "").Must(t, 403)

	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"u1"}`
	c.do(t, "POST", "/api/v1/chat/completions", f.OrgKey, body).Must(t, 418)
	d := c.do(t, "DELETE", "/api/v1/end-users/u1", f.OrgMgmt, "").Must(t, 200).JSON.Get("data")
	if d.Get("is_active").Bool() || d.Get("deactivated_at").String() == "" || d.Get("name").String() != "One" {
		t.Fatalf("deactivated: %s", d.Raw)
	}
	c.do(t, "POST", "/api/v1/chat/completions", f.OrgKey, body).WantError(t, 403, `End user "u1" is deactivated`)
	if c.got != nil {
		t.Fatal("a deactivated end user's request reached the upstream")
	}
	// The same name in another account is another end user.
	c.do(t, "POST", "/api/v1/chat/completions", f.PersKey, body).Must(t, 418)
	list := c.do(t, "GET", "/api/v1/end-users?is_active=false", f.OrgMgmt, "").Must(t, 200).JSON
	if list.Get("total_count").Int() != 1 || list.Get("data.0.user").String() != "u1" {
		t.Fatalf("inactive list %s", list.Raw)
	}
	c.do(t, "PATCH", "/api/v1/end-users/u1", f.OrgMgmt, `{"is_active":"yes"}`).Must(t, 400)
	p := c.do(t, "PATCH", "/api/v1/end-users/u1", f.OrgMgmt, `{"is_active":true,"name":null}`).Must(t, 200).JSON.Get("data")
	if !p.Get("is_active").Bool() || p.Get("deactivated_at").Type.String() != "Null" || p.Get("name").Type.String() != "Null" {
		t.Fatalf("reactivated: %s", p.Raw)
	}
	c.do(t, "POST", "/api/v1/chat/completions", f.OrgKey, body).Must(t, 418)

	long := `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"` + strings.Repeat("é", 257) + `"}`
	c.do(t, "POST", "/api/v1/chat/completions", f.OrgKey, long).WantError(t, 400, "user: expected at most 256 characters")
	for _, user := range []string{`"a\u0000"`, `"a\nb"`, `"\udfff"`, `5`} {
		bad := `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":` + user + `}`
		if r := c.do(t, "POST", "/api/v1/chat/completions", f.OrgKey, bad); r.Status != 400 || !strings.Contains(r.Body, `"user: `) {
			t.Errorf("user %s: %d %s", user, r.Status, r.Body)
		}
	}
	c.do(t, "POST", "/api/v1/chat/completions", f.OrgKey, strings.Replace(long, "é", "", 1)).Must(t, 418)

	// Ids with a slash are addressed escaped.
	c.do(t, "POST", "/api/v1/end-users", f.OrgMgmt, `{"user":"team/a b"}`).Must(t, 201)
	if got := c.do(t, "GET", "/api/v1/end-users/team%2Fa%20b", f.OrgMgmt, "").Must(t, 200).JSON.Get("data.user").String(); got != "team/a b" {
		t.Fatalf("escaped id read %q", got)
	}
	c.do(t, "GET", "/api/v1/end-users/team/a", f.OrgMgmt, "").WantError(t, 404, "Not found: GET /api/v1/end-users/team/a")
}

func TestAdminUnservedManagementRoutes(t *testing.T) {
	c := newChain(t)
	_, mgmt := c.gw.ManagementKey(t, c.gw.Account(t, storage.AccountOrganization), nil)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/api/v1/private-endpoints/x/y/z"},
		{"POST", "/api/v1/generation/feedback/extra"},
		{"GET", "/api/v1/keys/a/b"},
		{"GET", "/api/v1/organization"},
		{"GET", "/api/v1/credits/coinbase"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			c.do(t, tt.method, tt.path, mgmt, "").WantError(t, 404, "Not found: "+tt.method+" "+tt.path)
			if c.got != nil {
				t.Error("management route reached the upstream")
			}
		})
	}
}

func TestAdminStoreUnavailable(t *testing.T) {
	c := newChain(t)
	acct := c.gw.Account(t, storage.AccountOrganization)
	_, mgmt := c.gw.ManagementKey(t, acct, nil)
	c.auth.gw = &brokenGateway{c.gw}
	c.do(t, "GET", "/api/v1/keys", mgmt, "").WantError(t, http.StatusServiceUnavailable, pipeline.MsgStoreUnavailable)
}

// brokenGateway fails to open its store.
type brokenGateway struct{ *testgw.Gateway }

func (brokenGateway) Store() (*storage.Store, error) { return nil, fmt.Errorf("disk on fire") }

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return ""
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

// The BYOK routes are management routes: authentication refuses a regular
// key and a missing one before they serve.
func TestBYOKRoutesNeedManagementKey(t *testing.T) {
	f := newBYOKFixture(t)
	f.c.do(t, "POST", "/api/v1/byok", f.Regular, `{"provider":"openai","key":"k"}`).WantError(t, 403, msgManagementOnly)
	f.c.do(t, "GET", "/api/v1/byok", "", "").WantError(t, 401, msgMissingAuth)
}
