package handlers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestClassifyRoute(t *testing.T) {
	tests := []struct {
		path string
		kind admin.RouteKind
		sub  string
		ok   bool
	}{
		{"/", admin.RouteUnknown, "", false},
		{"/health", admin.RouteUnknown, "", false},
		{"/api", admin.RouteUnknown, "", false},
		{"/api/v10/keys", admin.RouteUnknown, "", false},
		{"/api/v1keys", admin.RouteUnknown, "", false},
		{"/v1/chat/completions", admin.RouteUnknown, "", false},
		{"/api/v1", admin.RouteUnknown, "", true},
		{"/api/v1/", admin.RouteUnknown, "", true},
		{"/api/v1/unknown", admin.RouteUnknown, "/unknown", true},
		{"/api/v1/chat", admin.RouteUnknown, "/chat", true},
		{"/api/v1/keyz", admin.RouteUnknown, "/keyz", true},

		{"/api/v1/key", admin.RouteAnyKey, "/key", true},
		{"/api/v1/key/", admin.RouteAnyKey, "/key", true},

		{"/api/v1/chat/completions", admin.RouteInference, "/chat/completions", true},
		{"/api/v1/chat/completions/", admin.RouteInference, "/chat/completions", true},
		{"/api/v1/completions", admin.RouteInference, "/completions", true},
		{"/api/v1/responses", admin.RouteInference, "/responses", true},
		{"/api/v1/responses/resp_1", admin.RouteInference, "/responses/resp_1", true},
		{"/api/v1/embeddings", admin.RouteInference, "/embeddings", true},
		{"/api/v1/messages", admin.RouteInference, "/messages", true},
		{"/api/v1/models/user", admin.RouteInference, "/models/user", true},
		{"/api/v1/generation", admin.RouteAnyKey, "/generation", true},

		{"/api/v1/models", admin.RoutePublic, "/models", true},
		{"/api/v1/models/", admin.RoutePublic, "/models", true},
		{"/api/v1/models/openai/gpt-4o/endpoints", admin.RoutePublic, "/models/openai/gpt-4o/endpoints", true},
		{"/api/v1/models/count", admin.RoutePublic, "/models/count", true},

		{"/api/v1/keys", admin.RouteManagement, "/keys", true},
		{"/api/v1/keys/", admin.RouteManagement, "/keys", true},
		{"/api/v1/keys/abc", admin.RouteManagement, "/keys/abc", true},
		{"/api/v1/activity", admin.RouteManagement, "/activity", true},
		{"/api/v1/analytics/query", admin.RouteManagement, "/analytics/query", true},
		{"/api/v1/byok/1", admin.RouteManagement, "/byok/1", true},
		{"/api/v1/credits", admin.RouteManagement, "/credits", true},
		{"/api/v1/end-users/u1", admin.RouteManagement, "/end-users/u1", true},
		{"/api/v1/generation/feedback", admin.RouteManagement, "/generation/feedback", true},
		{"/api/v1/guardrails/g1/assignments/keys/remove", admin.RouteManagement, "/guardrails/g1/assignments/keys/remove", true},
		{"/api/v1/observability/destinations", admin.RouteManagement, "/observability/destinations", true},
		{"/api/v1/organization/settings", admin.RouteManagement, "/organization/settings", true},
		{"/api/v1/organization/members", admin.RouteManagement, "/organization/members", true},
		{"/api/v1/private-endpoints/p1/activate", admin.RouteManagement, "/private-endpoints/p1/activate", true},
		{"/api/v1/scim/sync-jobs/1", admin.RouteManagement, "/scim/sync-jobs/1", true},
		{"/api/v1/workspaces/w/budgets/daily", admin.RouteManagement, "/workspaces/w/budgets/daily", true},
	}
	for _, tt := range tests {
		api, ok := admin.ClassifyRoute(tt.path)
		if api.Kind != tt.kind || api.Sub != tt.sub || ok != tt.ok {
			t.Errorf("admin.ClassifyRoute(%q) = %d, %q, %v; want %d, %q, %v", tt.path, api.Kind, api.Sub, ok, tt.kind, tt.sub, tt.ok)
		}
	}
}

func TestBearer(t *testing.T) {
	tests := []struct {
		header string
		key    string
		ok     bool
	}{
		{"", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"Basic dXNlcjpwdw==", "", false},
		{"Bearer sk-1", "sk-1", true},
		{"bearer sk-1", "sk-1", true},
		{"BEARER sk-1", "sk-1", true},
		{"Bearer   sk-1  ", "sk-1", true},
	}
	for _, tt := range tests {
		r, _ := testgw.NewRequest("GET", "/api/v1/key", "", "Authorization", tt.header)
		key, ok := bearer(r)
		if key != tt.key || ok != tt.ok {
			t.Errorf("bearer(%q) = %q, %v; want %q, %v", tt.header, key, ok, tt.key, tt.ok)
		}
	}
}

// authFixture holds an account with one key of each kind plus refused keys.
type authFixture struct {
	c         *chain
	acct      storage.Account
	regular   string
	regHash   string
	mgmt      string
	mgmtHash  string
	disabled  string
	expiring  string // regular key expiring at expiry
	mgmtExpir string // management key expiring at expiry
	expiry    time.Time
}

func newAuthFixture(t *testing.T) *authFixture {
	t.Helper()
	c := newChain(t)
	f := &authFixture{c: c, acct: c.gw.Account(t, storage.AccountOrganization)}
	k, secret := c.gw.APIKey(t, f.acct, storage.NewAPIKey{Name: "regular"})
	f.regular, f.regHash = secret, k.Hash
	m, msecret := c.gw.ManagementKey(t, f.acct, nil)
	f.mgmt, f.mgmtHash = msecret, m.Hash
	d, dsecret := c.gw.APIKey(t, f.acct, storage.NewAPIKey{Name: "disabled"})
	if _, err := c.gw.Storage.UpdateAPIKey(d.Hash, func(k *storage.APIKey) error { k.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	f.disabled = dsecret
	f.expiry = time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	_, f.expiring = c.gw.APIKey(t, f.acct, storage.NewAPIKey{Name: "expiring", ExpiresAt: &f.expiry})
	_, f.mgmtExpir = c.gw.ManagementKey(t, f.acct, &f.expiry)
	return f
}

func TestAuthRefusals(t *testing.T) {
	f := newAuthFixture(t)
	tests := []struct {
		name    string
		method  string
		path    string
		header  string // Authorization header; "" for none
		status  int
		message string
	}{
		{"no header", "POST", "/api/v1/chat/completions", "", 401, msgMissingAuth},
		{"no header on admin", "GET", "/api/v1/keys", "", 401, msgMissingAuth},
		{"no header on key", "GET", "/api/v1/key", "", 401, msgMissingAuth},
		{"no header on models/user", "GET", "/api/v1/models/user", "", 401, msgMissingAuth},
		{"basic scheme", "GET", "/api/v1/key", "Basic " + f.regular, 401, msgMissingAuth},
		{"empty bearer", "GET", "/api/v1/key", "Bearer ", 401, msgMissingAuth},
		{"invalid key", "GET", "/api/v1/key", "Bearer sk-tg-v1-nope", 401, msgInvalidKey},
		{"invalid key on admin", "GET", "/api/v1/keys", "Bearer sk-tg-mgmt-v1-nope", 401, msgInvalidKey},
		{"invalid key on models", "GET", "/api/v1/models", "Bearer sk-tg-v1-nope", 401, msgInvalidKey},
		{"key hash is not a key", "GET", "/api/v1/key", "Bearer " + f.regHash, 401, msgInvalidKey},
		{"disabled key", "POST", "/api/v1/chat/completions", "Bearer " + f.disabled, 401, msgDisabledKey},
		{"disabled key on models", "GET", "/api/v1/models", "Bearer " + f.disabled, 401, msgDisabledKey},
		{"management key on chat", "POST", "/api/v1/chat/completions", "Bearer " + f.mgmt, 403, msgNoInference},
		{"management key on responses", "POST", "/api/v1/responses", "Bearer " + f.mgmt, 403, msgNoInference},
		{"management key on models/user", "GET", "/api/v1/models/user", "Bearer " + f.mgmt, 403, msgNoInference},
		{"management key on embeddings", "POST", "/api/v1/embeddings", "Bearer " + f.mgmt, 403, msgNoInference},
		{"regular key on keys", "GET", "/api/v1/keys", "Bearer " + f.regular, 403, msgManagementOnly},
		{"regular key on key hash", "DELETE", "/api/v1/keys/" + f.regHash, "Bearer " + f.regular, 403, msgManagementOnly},
		{"regular key on credits", "GET", "/api/v1/credits", "Bearer " + f.regular, 403, msgManagementOnly},
		{"regular key on org settings", "PATCH", "/api/v1/organization/settings", "Bearer " + f.regular, 403, msgManagementOnly},
		{"regular key on workspaces", "GET", "/api/v1/workspaces", "Bearer " + f.regular, 403, msgManagementOnly},
		{"regular key on generation feedback", "POST", "/api/v1/generation/feedback", "Bearer " + f.regular, 403, msgManagementOnly},
		{"unknown route without key", "GET", "/api/v1/unknown", "", 404, "Not found: GET /api/v1/unknown"},
		{"unknown route with key", "POST", "/api/v1/chat", "Bearer " + f.regular, 404, "Not found: POST /api/v1/chat"},
		{"api root", "GET", "/api/v1", "", 404, "Not found: GET /api/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var headers []string
			if tt.header != "" {
				headers = []string{"Authorization", tt.header}
			}
			res := f.c.do(t, tt.method, tt.path, "", `{"model":"m","messages":[]}`, headers...)
			res.WantError(t, tt.status, tt.message)
			if f.c.got != nil {
				t.Errorf("request reached the upstream: %+v", f.c.got)
			}
			for _, p := range []string{"tollgate.key.hash", "http.auth.user.id"} {
				if v, ok := res.Repl.Get(p); ok {
					t.Errorf("placeholder %s = %v on a refused request", p, v)
				}
			}
		})
	}
}

func TestAuthExpiry(t *testing.T) {
	f := newAuthFixture(t)
	tests := []struct {
		name   string
		at     time.Time
		path   string
		key    string
		status int
	}{
		{"regular before expiry", f.expiry.Add(-time.Nanosecond), "/api/v1/key", f.expiring, 200},
		{"regular at expiry", f.expiry, "/api/v1/key", f.expiring, 401},
		{"regular after expiry", f.expiry.Add(time.Hour), "/api/v1/chat/completions", f.expiring, 401},
		{"management before expiry", f.expiry.Add(-time.Nanosecond), "/api/v1/keys", f.mgmtExpir, 200},
		{"management at expiry", f.expiry, "/api/v1/keys", f.mgmtExpir, 401},
		{"management after expiry", f.expiry.Add(24 * time.Hour), "/api/v1/key", f.mgmtExpir, 401},
		// an expired management key hears about its expiry, not about the route
		{"management after expiry on inference", f.expiry.Add(time.Hour), "/api/v1/chat/completions", f.mgmtExpir, 401},
		{"unexpiring regular later", f.expiry.Add(24 * time.Hour), "/api/v1/key", f.regular, 200},
		{"unexpiring management later", f.expiry.Add(24 * time.Hour), "/api/v1/key", f.mgmt, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testgw.SetClock(t, &now, tt.at)
			method := "GET"
			if tt.path == "/api/v1/chat/completions" {
				method = "POST"
			}
			res := f.c.do(t, method, tt.path, tt.key, `{"model":"m","messages":[]}`)
			if tt.status == 401 {
				res.WantError(t, 401, msgExpiredKey)
				return
			}
			res.Must(t, tt.status)
		})
	}
}

func TestAuthDisabledThenEnabled(t *testing.T) {
	f := newAuthFixture(t)
	f.c.do(t, "GET", "/api/v1/key", f.regular, "").Must(t, 200)
	if _, err := f.c.gw.Storage.UpdateAPIKey(f.regHash, func(k *storage.APIKey) error { k.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	f.c.do(t, "GET", "/api/v1/key", f.regular, "").WantError(t, 401, msgDisabledKey)
	if _, err := f.c.gw.Storage.UpdateAPIKey(f.regHash, func(k *storage.APIKey) error { k.Disabled = false; return nil }); err != nil {
		t.Fatal(err)
	}
	f.c.do(t, "GET", "/api/v1/key", f.regular, "").Must(t, 200)
	if err := f.c.gw.Storage.DeleteAPIKey(f.regHash); err != nil {
		t.Fatal(err)
	}
	f.c.do(t, "GET", "/api/v1/key", f.regular, "").WantError(t, 401, msgInvalidKey)
	if err := f.c.gw.Storage.DeleteManagementKey(f.mgmtHash); err != nil {
		t.Fatal(err)
	}
	f.c.do(t, "GET", "/api/v1/keys", f.mgmt, "").WantError(t, 401, msgInvalidKey)
}

func TestAuthGetKeyBothKinds(t *testing.T) {
	f := newAuthFixture(t)
	for _, tt := range []struct {
		name string
		key  string
		mgmt bool
	}{{"regular", f.regular, false}, {"management", f.mgmt, true}} {
		t.Run(tt.name, func(t *testing.T) {
			res := f.c.do(t, "GET", "/api/v1/key", tt.key, "").Must(t, 200)
			if got := res.JSON.Get("data.is_management_key").Bool(); got != tt.mgmt {
				t.Errorf("is_management_key = %v, want %v", got, tt.mgmt)
			}
			if f.c.got != nil {
				t.Error("GET /key reached the upstream")
			}
		})
	}
}

func TestAuthPassesThrough(t *testing.T) {
	f := newAuthFixture(t)
	ws := f.acct.DefaultWorkspaceID
	models := `{"data":[` + string(f.c.gw.ModelCatalog.Models()[0].Public) + `],"total_count":1,"links":{"next":null}}` + "\n"
	const (
		passed       = iota // reaches the upstream without the client's Authorization
		kept                // reaches the upstream with Authorization unchanged
		routed              // reaches the upstream with the provider's key
		unknownModel        // the router answers 404: the catalog has no such model
		answered            // the router answers with the model list
	)
	tests := []struct {
		name      string
		method    string
		path      string
		header    string
		hash      string // "" for no identity
		kind      string
		workspace string
		outcome   int
	}{
		{"public models without key", "GET", "/api/v1/models", "", "", "", "", answered},
		{"public model endpoints without key", "GET", "/api/v1/models/openai/gpt-4o/endpoints", "", "", "", "", unknownModel},
		{"public models with regular key", "GET", "/api/v1/models?q=m", "Bearer " + f.regular, f.regHash, "regular", ws, answered},
		{"public model endpoints with regular key", "GET", "/api/v1/models/a/m/endpoints", "Bearer " + f.regular, f.regHash, "regular", ws, unknownModel},
		{"public models with basic auth", "GET", "/api/v1/models", "Basic dXNlcjpwdw==", "", "", "", answered},
		{"public model endpoints with basic auth", "GET", "/api/v1/models/a/m/endpoints", "Basic dXNlcjpwdw==", "", "", "", unknownModel},
		{"public models with empty bearer", "GET", "/api/v1/models", "Bearer ", "", "", "", answered},
		{"public models with management key", "GET", "/api/v1/models", "Bearer " + f.mgmt, f.mgmtHash, "management", "", answered},
		{"public model endpoints with management key", "GET", "/api/v1/models/a/m/endpoints", "Bearer " + f.mgmt, f.mgmtHash, "management", "", unknownModel},
		{"inference with regular key", "POST", "/api/v1/chat/completions", "Bearer " + f.regular, f.regHash, "regular", ws, routed},
		{"models/user with regular key", "GET", "/api/v1/models/user", "bearer " + f.regular, f.regHash, "regular", ws, answered},
		{"management route unserved by admin", "GET", "/api/v1/keys/a/b", "Bearer " + f.mgmt, f.mgmtHash, "management", "", passed},
		{"outside api with header", "GET", "/health", "Bearer " + f.regular, "", "", "", kept},
		{"outside api with bad header", "POST", "/v1/chat/completions", "Bearer nope", "", "", "", kept},
		{"outside api without header", "GET", "/", "", "", "", "", passed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var headers []string
			if tt.header != "" {
				headers = []string{"Authorization", tt.header}
			}
			body := `{"model":"m","messages":[]}`
			res := f.c.do(t, tt.method, tt.path, "", body, headers...)
			if tt.path == "/api/v1/keys/a/b" {
				// the admin handler answers the management group itself
				res.WantError(t, 404, "Not found: GET /api/v1/keys/a/b")
				checkIdentityPlaceholders(t, res, tt.hash, tt.kind, f.acct.ID, tt.workspace)
				return
			}
			if tt.outcome == unknownModel {
				res.WantError(t, 404, "Model not found: "+strings.TrimSuffix(strings.TrimPrefix(tt.path, "/api/v1/models/"), "/endpoints"))
				if f.c.got != nil {
					t.Errorf("the endpoints list reached the upstream: %+v", f.c.got)
				}
				if tt.hash != "" {
					checkIdentityPlaceholders(t, res, tt.hash, tt.kind, f.acct.ID, tt.workspace)
				}
				return
			}
			if tt.outcome == answered {
				res.Must(t, http.StatusOK)
				if res.Body != models {
					t.Errorf("body = %s\nwant %s", res.Body, models)
				}
				if f.c.got != nil {
					t.Errorf("the model list reached the upstream: %+v", f.c.got)
				}
				if tt.hash == "" {
					checkNoIdentityPlaceholders(t, res)
				} else {
					checkIdentityPlaceholders(t, res, tt.hash, tt.kind, f.acct.ID, tt.workspace)
				}
				return
			}
			res.Must(t, http.StatusTeapot)
			got := f.c.got
			if got == nil {
				t.Fatal("upstream not reached")
			}
			wantAuth := ""
			switch tt.outcome {
			case kept:
				wantAuth = tt.header
			case routed:
				wantAuth = "Bearer " + testgw.UpstreamKey
			}
			if auth := got.header.Get("Authorization"); auth != wantAuth {
				t.Errorf("upstream Authorization = %q, want %q", auth, wantAuth)
			}
			if tt.outcome == routed && (string(got.body) != forUpstream(body) || got.route == nil || got.route.Model.ID != "m") {
				t.Errorf("routed body %q, route %+v", got.body, got.route)
			}
			if tt.hash == "" {
				if got.identity != nil {
					t.Errorf("identity = %+v, want none", got.identity)
				}
				checkNoIdentityPlaceholders(t, res)
				return
			}
			id := got.identity
			if id == nil {
				t.Fatal("no identity on the upstream request")
			}
			if id.Hash != tt.hash || id.AccountID != f.acct.ID || id.Account.ID != f.acct.ID || id.Management != (tt.kind == "management") {
				t.Errorf("identity = hash %s account %s/%s management %v", id.Hash, id.AccountID, id.Account.ID, id.Management)
			}
			if tt.kind == "regular" && id.Key.Hash != tt.hash {
				t.Errorf("identity key = %q", id.Key.Hash)
			}
			if tt.kind == "management" && id.MgmtKey.Hash != tt.hash {
				t.Errorf("identity management key = %q", id.MgmtKey.Hash)
			}
			checkIdentityPlaceholders(t, res, tt.hash, tt.kind, f.acct.ID, tt.workspace)
		})
	}
}

func checkNoIdentityPlaceholders(t *testing.T, res testgw.Response) {
	t.Helper()
	for _, p := range []string{"tollgate.key.hash", "tollgate.key.kind", "tollgate.account.id", "tollgate.workspace.id", "http.auth.user.id"} {
		if v, ok := res.Repl.Get(p); ok {
			t.Errorf("placeholder %s = %v, want unset", p, v)
		}
	}
}

func checkIdentityPlaceholders(t *testing.T, res testgw.Response, hash, kind, account, workspace string) {
	t.Helper()
	want := map[string]string{
		"http.auth.user.id":     hash,
		"tollgate.key.hash":     hash,
		"tollgate.key.kind":     kind,
		"tollgate.account.id":   account,
		"tollgate.workspace.id": workspace,
	}
	for p, w := range want {
		if v, ok := res.Repl.Get(p); !ok || v != w {
			t.Errorf("placeholder %s = %v (set %v), want %q", p, v, ok, w)
		}
	}
}

func TestAuthWithoutReplacer(t *testing.T) {
	f := newAuthFixture(t)
	// Auth must not depend on a replacer being present.
	r, _ := testgw.NewRequest("GET", "/api/v1/key", "", "Authorization", "Bearer "+f.regular)
	r = r.WithContext(t.Context())
	res := testgw.Serve(t, f.c.handler(t), r, nil)
	res.Must(t, 200)
}

func TestAdminWithoutAuth(t *testing.T) {
	gw := testgw.New(t)
	a := adminStage{admin.New(gw, zap.NewNop(), nil)}
	r, repl := testgw.NewRequest("GET", "/api/v1/keys", "")
	next := newChain(t).upstream(t)
	res := testgw.Serve(t, handlerOf(a, next), r, repl)
	res.WantError(t, 500, "Internal Server Error")
}
