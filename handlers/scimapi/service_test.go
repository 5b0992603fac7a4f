package scimapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	scimlib "github.com/elimity-com/scim"
	filter "github.com/scim2/filter-parser/v2"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/scim"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

func scimPath(t *testing.T, p string) *filter.Path {
	t.Helper()
	path, err := filter.ParsePath([]byte(p))
	if err != nil {
		t.Fatal(err)
	}
	return &path
}

func TestPatchGroupMembers(t *testing.T) {
	g := &scim.Group{DisplayName: "G", Members: map[string]bool{"a": true, "b": true}}
	steps := []struct {
		op    scimlib.PatchOperation
		want  string
		fails bool
	}{
		{op: scimlib.PatchOperation{Op: "add", Path: scimPath(t, "members"), Value: []any{map[string]any{"value": "c"}}}, want: "a b c"},
		{op: scimlib.PatchOperation{Op: "remove", Path: scimPath(t, `members[value eq "a"]`)}, want: "b c"},
		{op: scimlib.PatchOperation{Op: "remove", Path: scimPath(t, "members"), Value: []any{map[string]any{"value": "b"}}}, want: "c"},
		{op: scimlib.PatchOperation{Op: "replace", Path: scimPath(t, "members"), Value: []any{map[string]any{"value": "d"}, map[string]any{"value": "e"}}}, want: "d e"},
		{op: scimlib.PatchOperation{Op: "replace", Value: map[string]any{"displayName": "H", "members": []any{map[string]any{"value": "f"}}}}, want: "f"},
		{op: scimlib.PatchOperation{Op: "remove", Path: scimPath(t, `members[display eq "x"]`)}, want: "f", fails: true},
		{op: scimlib.PatchOperation{Op: "add", Path: scimPath(t, "members"), Value: []any{map[string]any{"display": "no value"}}}, want: "f", fails: true},
		{op: scimlib.PatchOperation{Op: "remove", Path: scimPath(t, "members")}, want: ""},
	}
	for i, st := range steps {
		err := patchGroup(g, st.op)
		if (err != nil) != st.fails {
			t.Fatalf("step %d: error %v", i, err)
		}
		if got := strings.Join(g.MemberIDs(), " "); got != st.want {
			t.Fatalf("step %d: members %q, want %q", i, got, st.want)
		}
	}
	if g.DisplayName != "H" {
		t.Fatalf("displayName %q", g.DisplayName)
	}
}

func TestPatchUserAndInput(t *testing.T) {
	a := scimlib.ResourceAttributes{"userName": "bob@example.com", "active": true,
		"emails": []any{map[string]any{"value": "bob@example.com", "primary": true}}}
	for _, op := range []scimlib.PatchOperation{
		{Op: "replace", Value: map[string]any{"active": false, "name.givenName": "Bob"}},
		{Op: "replace", Path: scimPath(t, `emails[type eq "work"].value`), Value: "robert@example.com"},
		{Op: "add", Path: scimPath(t, "name.familyName"), Value: "Stone"},
		{Op: "replace", Path: scimPath(t, "externalId"), Value: "ext-1"},
	} {
		if err := patchUser(a, op); err != nil {
			t.Fatal(err)
		}
	}
	in, err := userInput(a)
	if err != nil {
		t.Fatal(err)
	}
	if in.Active || in.Email != "robert@example.com" || *in.FirstName != "Bob" || *in.LastName != "Stone" || *in.ExternalID != "ext-1" {
		t.Fatalf("input %+v", in)
	}
	if _, err := userInput(scimlib.ResourceAttributes{"userName": "x", "active": "maybe"}); err == nil {
		t.Fatal("a non-boolean active is accepted")
	}
	if in, _ := userInput(scimlib.ResourceAttributes{"userName": "ann@example.com", "active": "False"}); in.Active || in.Email != "ann@example.com" {
		t.Fatalf("string boolean and userName as email: %+v", in)
	}
	if err := patchUser(a, scimlib.PatchOperation{Op: "remove", Path: scimPath(t, "emails")}); err != nil {
		t.Fatal(err)
	}
	if _, err := userInput(a); err != nil {
		t.Fatal(err) // falls back to userName, an address
	}
}

// The SCIM service answers a SCIM 401 without a valid token, and serves
// the organization of a valid one.
func TestSCIMServiceAuth(t *testing.T) {
	store, acct, token := newTestOrg(t)
	srv := newTestService(t, store)
	call := func(tok, method, path, body string) (*http.Response, gjson.Result) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Result(), gjson.ParseBytes(b)
	}
	for _, tok := range []string{"", "nope", scim.TokenPrefix + strings.Repeat("a", 64)} {
		res, body := call(tok, "GET", "/scim/v2/Users", "")
		if res.StatusCode != 401 || body.Get("status").Str != "401" || res.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %q: %d %s", tok, res.StatusCode, body.Raw)
		}
	}
	res, body := call(token, "POST", "/scim/v2/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"ann@example.com"}`)
	if res.StatusCode != 201 || body.Get("emails.0.value").Str != "ann@example.com" {
		t.Fatalf("create: %d %s", res.StatusCode, body.Raw)
	}
	if m, ok := store.MemberByEmail(acct.ID, "ann@example.com"); !ok || m.ID != body.Get("id").Str || m.Role != storage.RoleMember {
		t.Fatalf("member %+v", m)
	}
	res, body = call(token, "GET", `/scim/v2/Users?filter=userName+eq+%22ann@example.com%22`, "")
	if res.StatusCode != 200 || body.Get("totalResults").Int() != 1 {
		t.Fatalf("filter: %d %s", res.StatusCode, body.Raw)
	}
	res, _ = call(token, "GET", `/scim/v2/Users?filter=userName+eq`, "")
	if res.StatusCode != 400 {
		t.Fatalf("bad filter: %d", res.StatusCode)
	}
}

// The payloads Okta and Microsoft Entra send when they provision a user.
func TestSCIMIdPPayloads(t *testing.T) {
	store, acct, token := newTestOrg(t)
	srv := newTestService(t, store)
	call := func(method, path, body string) (int, gjson.Result) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/scim+json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Result().StatusCode, gjson.ParseBytes(b)
	}
	okta := `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"ann@example.com",
		"name":{"givenName":"Ann","familyName":"Lee"},"emails":[{"primary":true,"value":"ann@example.com","type":"work"}],
		"displayName":"Ann Lee","locale":"en-US","externalId":"00u1","groups":[],"password":"x-Secret-1","active":true}`
	if st, body := call("POST", "/scim/v2/Users", okta); st != 201 || body.Get("name.givenName").Str != "Ann" || body.Get("password").Exists() {
		t.Fatalf("okta create: %d %s", st, body.Raw)
	}
	entra := `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User","urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
		"externalId":"e-1","userName":"Ben@Example.com","active":true,"displayName":"Ben Roe",
		"emails":[{"primary":true,"type":"work","value":"ben@example.com"}],"meta":{"resourceType":"User"},
		"name":{"formatted":"Ben Roe","familyName":"Roe","givenName":"Ben"},
		"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User":{"department":"R&D"}}`
	st, body := call("POST", "/scim/v2/Users", entra)
	if st != 201 {
		t.Fatalf("entra create: %d %s", st, body.Raw)
	}
	id := body.Get("id").Str
	// Entra's deprovisioning PATCH.
	st, body = call("PATCH", "/scim/v2/Users/"+id, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
		"Operations":[{"op":"Replace","path":"active","value":"False"}]}`)
	if st != 200 || body.Get("active").Bool() {
		t.Fatalf("entra deactivate: %d %s", st, body.Raw)
	}
	if m, _ := store.Member(acct.ID, id); m.Active {
		t.Fatal("member still active")
	}
}

// TestSCIMHostileBodies: bodies are checked (size, depth, repeated keys,
// UTF-8) before the SCIM library decodes them; nothing is provisioned.
func TestSCIMHostileBodies(t *testing.T) {
	store, acct, token := newTestOrg(t)
	srv := newTestService(t, store)
	const user = `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"ann@example.com"`
	tests := []struct {
		body   string
		status int
		detail string
	}{
		{user + `,"userName":"bob@example.com"}`, 400, "userName: duplicate field"},
		{user + `,"x":` + strings.Repeat("[", 1<<19) + `}`, 400, "Request body nests deeper than 128 levels"},
		{user + ",\"displayName\":\"\xff\"}", 400, "displayName: not valid UTF-8"},
		{user + `,"displayName":"a\u0000"}`, 400, "displayName: control characters are not allowed"},
		{user + `,"displayName":"\ud800"}`, 400, "displayName: unpaired UTF-16 surrogate"},
		{user + `,"displayName":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "Request body is larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/scim/v2/Users", strings.NewReader(tt.body))
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		body := gjson.Parse(w.Body.String())
		if w.Code != tt.status || body.Get("detail").Str != tt.detail {
			t.Errorf("%.40s: %d %.200s, want %d %q", tt.body, w.Code, w.Body.String(), tt.status, tt.detail)
		}
	}
	if ms := store.Members(acct.ID); len(ms) != 0 {
		t.Errorf("members %+v", ms)
	}
}

// newTestOrg opens an in-memory store with an organization and its SCIM
// token.
func newTestOrg(t *testing.T) (*storage.Store, storage.Account, string) {
	t.Helper()
	st, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	acct, err := st.CreateAccount(storage.NewAccount{Name: "Acme", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := scim.StoreOf(st).RotateToken(acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st, acct, token
}

func newTestService(t *testing.T, st *storage.Store) *Service {
	t.Helper()
	srv, err := NewService(func() (*storage.Store, error) { return st, nil }, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// Without a store the service answers a SCIM 500, not a panic or a
// gateway error body.
func TestSCIMServiceWithoutStore(t *testing.T) {
	srv, err := NewService(func() (*storage.Store, error) { return nil, io.ErrClosedPipe }, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest("GET", "/scim/v2/Users", nil))
	if w.Code != 500 || gjson.Get(w.Body.String(), "status").Str != "500" || w.Header().Get("Content-Type") != "application/scim+json" {
		t.Fatalf("%d %s %q", w.Code, w.Body.String(), w.Header().Get("Content-Type"))
	}
}
