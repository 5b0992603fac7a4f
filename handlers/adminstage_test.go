package handlers

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// The administrative stage within the pipeline: what the resources
// store reaches authentication and routing.

func byokSealer(t *testing.T, fill byte) *storage.Sealer {
	t.Helper()
	s, err := storage.NewSealer(bytes.Repeat([]byte{fill}, storage.SealerKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// byokFixture is a chain with BYOK on, the routed catalog, and two
// accounts each with a management and a regular key.
type byokFixture struct {
	c                  *chain
	acct, other        storage.Account
	mgmt, otherMgmt    string
	regular, otherReg  string
	regHash, otherHash string
}

func newBYOKFixture(t *testing.T) *byokFixture {
	t.Helper()
	c := newChain(t)
	c.gw.catalog = routedCatalog()
	c.gw.sealer = byokSealer(t, 9)
	c.router.gw = c.gw
	f := &byokFixture{c: c, acct: c.gw.account(t, storage.AccountOrganization), other: c.gw.account(t, storage.AccountOrganization)}
	_, f.mgmt = c.gw.mgmtKey(t, f.acct, nil)
	_, f.otherMgmt = c.gw.mgmtKey(t, f.other, nil)
	k, regular := c.gw.apiKey(t, f.acct, storage.NewAPIKey{})
	o, otherReg := c.gw.apiKey(t, f.other, storage.NewAPIKey{})
	f.regular, f.otherReg, f.regHash, f.otherHash = regular, otherReg, k.Hash, o.Hash
	return f
}

func (f *byokFixture) create(t *testing.T, mgmt, body string) response {
	t.Helper()
	return f.c.do(t, "POST", "/api/v1/byok", mgmt, body).must(t, http.StatusCreated)
}

func TestBYOKNotConfigured(t *testing.T) {
	f := newBYOKFixture(t)
	f.c.gw.sealer = nil
	for _, rq := range []struct{ method, path, body string }{
		{"GET", "/api/v1/byok", ""},
		{"POST", "/api/v1/byok", `{"provider":"openai","key":"sk-x"}`},
		{"GET", "/api/v1/byok/abc", ""},
		{"PATCH", "/api/v1/byok/abc", `{}`},
		{"DELETE", "/api/v1/byok/abc", ""},
	} {
		f.c.do(t, rq.method, rq.path, f.mgmt, rq.body).wantError(t, 400, "BYOK is not configured on this gateway: the operator must set byok_encryption_key")
	}
	// method errors still come first; a regular key is still 403
	f.c.do(t, "PUT", "/api/v1/byok", f.mgmt, "").must(t, 405)
	f.c.do(t, "GET", "/api/v1/byok", f.regular, "").wantError(t, 403, msgManagementOnly)
	// no BYOK routing: the operator's key is used
	f.c.do(t, "POST", "/api/v1/chat/completions", f.regular, `{"model":"paid","messages":[]}`).must(t, http.StatusTeapot)
	if got := f.c.got.header.Get("Authorization"); got != "Bearer sk-openai" {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestBYOKCrossAccount(t *testing.T) {
	f := newBYOKFixture(t)
	const secret = "account-A-own-openai-key"
	id := f.create(t, f.mgmt, `{"provider":"openai","key":"`+secret+`"}`).json.Get("data.id").String()
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		f.c.do(t, m, "/api/v1/byok/"+id, f.otherMgmt, `{"disabled":true}`).wantError(t, 404, "BYOK credential not found")
	}
	l := f.c.do(t, "GET", "/api/v1/byok", f.otherMgmt, "").must(t, 200)
	if l.body != "{\"data\":[],\"total_count\":0}\n" {
		t.Fatalf("other account's list: %s", l.body)
	}
	// the credential is untouched and only its own account's requests use it
	if c, ok := f.c.gw.store.BYOK(f.acct.ID, id); !ok || c.Disabled {
		t.Fatalf("credential after foreign PATCH: %+v %v", c, ok)
	}
	f.c.do(t, "POST", "/api/v1/chat/completions", f.otherReg, `{"model":"paid","messages":[]}`).must(t, http.StatusTeapot)
	if got := f.c.got.header.Get("Authorization"); got != "Bearer sk-openai" {
		t.Fatalf("other account's request used %q", got)
	}
	f.c.do(t, "POST", "/api/v1/chat/completions", f.regular, `{"model":"paid","messages":[]}`).must(t, http.StatusTeapot)
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
			return f.c.router.ServeHTTP(w, r, up)
		}))
	})
	chat := func(model, key string) (response, *http.Request) {
		t.Helper()
		got = nil
		r, repl := newRequest("POST", "/api/v1/chat/completions", `{"model":"`+model+`","messages":[]}`, "Authorization", "Bearer "+key)
		return serve(t, h, r, repl), r
	}
	// without credentials: the operator's keys; a keyless provider is unusable
	chat("second", f.regular)
	if got.route.Provider.Name != "fallback" || got.auth != "Bearer key-2" || got.route.BYOK {
		t.Fatalf("no BYOK: provider %s auth %q byok %v", got.route.Provider.Name, got.auth, got.route.BYOK)
	}
	res, _ := chat("keyless", f.regular)
	res.wantError(t, 503, "No provider is available for model keyless")

	// a credential for the first provider (no operator key) wins over the
	// operator's key of a later provider
	f.create(t, f.mgmt, `{"provider":"first","key":"own-first-key"}`)
	res, r := chat("second", f.regular)
	res.must(t, http.StatusTeapot)
	if got.route.Provider.Name != "first" || got.auth != "Bearer own-first-key" || !got.route.BYOK || got.host != "one.test" {
		t.Fatalf("BYOK: provider %s auth %q byok %v host %s", got.route.Provider.Name, got.auth, got.route.BYOK, got.host)
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("the account's key leaked into the logged request's headers")
	}
	if v, _ := res.repl.Get("tollgate.provider"); v != "first" {
		t.Errorf("tollgate.provider = %v", v)
	}
	// a BYOK-only provider becomes usable
	f.create(t, f.mgmt, `{"provider":"byok-only","key":"own-byok-only-key"}`)
	chat("keyless", f.regular)
	if got == nil || got.auth != "Bearer own-byok-only-key" || !got.route.BYOK {
		t.Fatalf("keyless via BYOK: %+v", got)
	}
	// preferred over the operator's key of the same provider
	id := f.create(t, f.mgmt, `{"provider":"openai","key":"own-openai-key"}`).json.Get("data.id").String()
	chat("paid", f.regular)
	if got.auth != "Bearer own-openai-key" || !got.route.BYOK || string(got.body) != `{"model":"gpt-x-2025","messages":[]}` {
		t.Fatalf("paid via BYOK: auth %q body %s", got.auth, got.body)
	}
	// a disabled credential is not used
	f.c.do(t, "PATCH", "/api/v1/byok/"+id, f.mgmt, `{"disabled":true}`).must(t, 200)
	chat("paid", f.regular)
	if got.auth != "Bearer sk-openai" || got.route.BYOK {
		t.Fatalf("disabled credential: auth %q byok %v", got.auth, got.route.BYOK)
	}
	// an allowlist restricts which keys and models use a credential
	f.c.do(t, "PATCH", "/api/v1/byok/"+id, f.mgmt, `{"disabled":false,"allowed_models":["mock"]}`).must(t, 200)
	chat("paid", f.regular)
	if got.route.BYOK {
		t.Fatal("allowed_models ignored")
	}
	f.c.do(t, "PATCH", "/api/v1/byok/"+id, f.mgmt, `{"allowed_models":null,"allowed_api_key_hashes":["`+f.regHash+`"]}`).must(t, 200)
	chat("paid", f.regular)
	if !got.route.BYOK || got.auth != "Bearer own-openai-key" {
		t.Fatal("allowed_api_key_hashes refused the allowed key")
	}
	_, second := f.c.gw.apiKey(t, f.acct, storage.NewAPIKey{Name: "second"})
	chat("paid", second)
	if got.route.BYOK {
		t.Fatal("allowed_api_key_hashes admitted another key")
	}
}

func TestRouterBYOKUnopenable(t *testing.T) {
	f := newBYOKFixture(t)
	core, logs := observer.New(zap.DebugLevel)
	f.c.router.logger = zap.New(core)
	const secret = "sealed-under-the-old-key"
	f.create(t, f.mgmt, `{"provider":"openai","key":"`+secret+`"}`)
	// the operator changed byok_encryption_key: the credential cannot be
	// opened, and the operator's key serves the request
	f.c.gw.sealer = byokSealer(t, 10)
	f.c.do(t, "POST", "/api/v1/chat/completions", f.regular, `{"model":"paid","messages":[]}`).must(t, http.StatusTeapot)
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
	c.do(t, "POST", "/api/v1/end-users", f.orgMgmt, `{"user":"u1","name":"One"}`).must(t, 201)
	c.do(t, "POST", "/api/v1/end-users", f.orgMgmt, `{"user":"u1"}`).wantError(t, 409, `End user "u1" already exists`)
	c.do(t, "POST", "/api/v1/end-users", f.orgMgmt, `{"user":5}`).wantError(t, 400, "user: expected a string")
	c.do(t, "POST", "/api/v1/end-users", f.orgMgmt, `{"user":"u\u0000"}`).wantError(t, 400, "user: control characters are not allowed")
	c.do(t, "POST", "/api/v1/end-users", f.orgMgmt, `{"user":"\ud800"}`).wantError(t, 400, "user: unpaired UTF-16 surrogate")
	c.do(t, "POST", "/api/v1/end-users", f.orgMgmt, `{"user":"u2","name":""}`).wantError(t, 400, "name: expected a non-empty string of at most 256 bytes, or null")
	c.do(t, "GET", "/api/v1/end-users?limit=0", f.orgMgmt, "").wantError(t, 400, "limit: expected an integer from 1 to 1000")
	c.do(t, "PUT", "/api/v1/end-users/u1", f.orgMgmt, "").must(t, 405)
	c.do(t, "GET", "/api/v1/end-users/u1", f.persMgmt, "").wantError(t, 404, "End user not found")
	c.do(t, "GET", "/api/v1/end-users", f.orgKey, "").must(t, 403)

	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"u1"}`
	c.do(t, "POST", "/api/v1/chat/completions", f.orgKey, body).must(t, 418)
	d := c.do(t, "DELETE", "/api/v1/end-users/u1", f.orgMgmt, "").must(t, 200).json.Get("data")
	if d.Get("is_active").Bool() || d.Get("deactivated_at").String() == "" || d.Get("name").String() != "One" {
		t.Fatalf("deactivated: %s", d.Raw)
	}
	c.do(t, "POST", "/api/v1/chat/completions", f.orgKey, body).wantError(t, 403, `End user "u1" is deactivated`)
	if c.got != nil {
		t.Fatal("a deactivated end user's request reached the upstream")
	}
	// The same name in another account is another end user.
	c.do(t, "POST", "/api/v1/chat/completions", f.persKey, body).must(t, 418)
	list := c.do(t, "GET", "/api/v1/end-users?is_active=false", f.orgMgmt, "").must(t, 200).json
	if list.Get("total_count").Int() != 1 || list.Get("data.0.user").String() != "u1" {
		t.Fatalf("inactive list %s", list.Raw)
	}
	c.do(t, "PATCH", "/api/v1/end-users/u1", f.orgMgmt, `{"is_active":"yes"}`).must(t, 400)
	p := c.do(t, "PATCH", "/api/v1/end-users/u1", f.orgMgmt, `{"is_active":true,"name":null}`).must(t, 200).json.Get("data")
	if !p.Get("is_active").Bool() || p.Get("deactivated_at").Type.String() != "Null" || p.Get("name").Type.String() != "Null" {
		t.Fatalf("reactivated: %s", p.Raw)
	}
	c.do(t, "POST", "/api/v1/chat/completions", f.orgKey, body).must(t, 418)

	long := `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"` + strings.Repeat("é", 257) + `"}`
	c.do(t, "POST", "/api/v1/chat/completions", f.orgKey, long).wantError(t, 400, "user: expected at most 256 characters")
	for _, user := range []string{`"a\u0000"`, `"a\nb"`, `"\udfff"`, `5`} {
		bad := `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":` + user + `}`
		if r := c.do(t, "POST", "/api/v1/chat/completions", f.orgKey, bad); r.status != 400 || !strings.Contains(r.body, `"user: `) {
			t.Errorf("user %s: %d %s", user, r.status, r.body)
		}
	}
	c.do(t, "POST", "/api/v1/chat/completions", f.orgKey, strings.Replace(long, "é", "", 1)).must(t, 418)

	// Ids with a slash are addressed escaped.
	c.do(t, "POST", "/api/v1/end-users", f.orgMgmt, `{"user":"team/a b"}`).must(t, 201)
	if got := c.do(t, "GET", "/api/v1/end-users/team%2Fa%20b", f.orgMgmt, "").must(t, 200).json.Get("data.user").String(); got != "team/a b" {
		t.Fatalf("escaped id read %q", got)
	}
	c.do(t, "GET", "/api/v1/end-users/team/a", f.orgMgmt, "").wantError(t, 404, "Not found: GET /api/v1/end-users/team/a")
}

func TestAdminUnservedManagementRoutes(t *testing.T) {
	c := newChain(t)
	_, mgmt := c.gw.mgmtKey(t, c.gw.account(t, storage.AccountOrganization), nil)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/api/v1/private-endpoints/x/y/z"},
		{"POST", "/api/v1/generation/feedback/extra"},
		{"GET", "/api/v1/keys/a/b"},
		{"GET", "/api/v1/organization"},
		{"GET", "/api/v1/credits/coinbase"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			c.do(t, tt.method, tt.path, mgmt, "").wantError(t, 404, "Not found: "+tt.method+" "+tt.path)
			if c.got != nil {
				t.Error("management route reached the upstream")
			}
		})
	}
}

func TestAdminStoreUnavailable(t *testing.T) {
	c := newChain(t)
	acct := c.gw.account(t, storage.AccountOrganization)
	_, mgmt := c.gw.mgmtKey(t, acct, nil)
	c.auth.gw = &brokenGateway{c.gw}
	c.do(t, "GET", "/api/v1/keys", mgmt, "").wantError(t, http.StatusInternalServerError, "Internal Server Error")
}

// brokenGateway fails to open its store.
type brokenGateway struct{ *fakeGateway }

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

// adminFixture is an organization and a personal account, each with a
// management key and a regular key.
type adminFixture struct {
	c                  *chain
	org, personal      storage.Account
	orgMgmt, persMgmt  string
	orgKey, persKey    string
	orgHash, persHash  string
	orgMgmtKey         storage.ManagementKey
	orgRegular, persKK storage.APIKey
}

func newAdminFixture(t *testing.T) *adminFixture {
	t.Helper()
	c := newChain(t)
	f := &adminFixture{c: c}
	f.org = c.gw.account(t, storage.AccountOrganization)
	f.personal = c.gw.account(t, storage.AccountPersonal)
	f.orgMgmtKey, f.orgMgmt = c.gw.mgmtKey(t, f.org, nil)
	_, f.persMgmt = c.gw.mgmtKey(t, f.personal, nil)
	f.orgRegular, f.orgKey = c.gw.apiKey(t, f.org, storage.NewAPIKey{Name: "org regular"})
	f.persKK, f.persKey = c.gw.apiKey(t, f.personal, storage.NewAPIKey{Name: "personal regular"})
	f.orgHash, f.persHash = f.orgRegular.Hash, f.persKK.Hash
	return f
}

// The BYOK routes are management routes: authentication refuses a regular
// key and a missing one before they serve.
func TestBYOKRoutesNeedManagementKey(t *testing.T) {
	f := newBYOKFixture(t)
	f.c.do(t, "POST", "/api/v1/byok", f.regular, `{"provider":"openai","key":"k"}`).wantError(t, 403, msgManagementOnly)
	f.c.do(t, "GET", "/api/v1/byok", "", "").wantError(t, 401, msgMissingAuth)
}
