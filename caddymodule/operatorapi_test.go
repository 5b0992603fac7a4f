package caddymodule

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// newOperatorTest returns an in-memory store with a mux serving the
// operator routes the way Caddy's admin endpoint does, with an App backed
// by that store as the running app.
func newOperatorTest(t *testing.T) (*storage.Store, http.Handler) {
	_, s, h := newOperatorAPITest(t)
	return s, h
}

func newOperatorAPITest(t *testing.T) (*OperatorAPI, *storage.Store, http.Handler) {
	t.Helper()
	s, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	app := &App{dir: "in-memory", store: s, logger: zap.NewNop()}
	t.Cleanup(func() { _ = s.Close() })
	o := &OperatorAPI{running: func() *App { return app }, log: zap.NewNop()}
	mux := http.NewServeMux()
	for _, route := range o.Routes() {
		mux.HandleFunc(route.Pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := route.Handler.ServeHTTP(w, r); err != nil {
				t.Errorf("%s %s: handler returned %v; want errors written as JSON", r.Method, r.URL.Path, err)
			}
		})
	}
	return o, s, mux
}

type operatorResponse struct {
	status int
	header http.Header
	raw    string
	json   gjson.Result
}

func operatorDo(t *testing.T, h http.Handler, method, path, body string) operatorResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, rd))
	raw := rec.Body.String()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	if !gjson.Valid(raw) {
		t.Fatalf("%s %s: invalid JSON body %q", method, path, raw)
	}
	return operatorResponse{rec.Code, rec.Header(), raw, gjson.Parse(raw)}
}

// must checks the status and returns the response.
func (r operatorResponse) must(t *testing.T, status int) operatorResponse {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.raw)
	}
	return r
}

func (r operatorResponse) get(path string) gjson.Result { return r.json.Get(path) }

func createOperatorAccount(t *testing.T, h http.Handler, body string) gjson.Result {
	t.Helper()
	return operatorDo(t, h, http.MethodPost, "/tollgate/accounts", body).must(t, http.StatusCreated).get("data")
}

func TestOperatorAccounts(t *testing.T) {
	_, h := newOperatorTest(t)

	alice := createOperatorAccount(t, h, `{"name":"Alice","type":"personal"}`)
	if !strings.HasPrefix(alice.Get("id").Str, "user_") || alice.Get("type").Str != "personal" ||
		alice.Get("billing").Str != "prepaid" || alice.Get("rate_limit_exempt").Bool() {
		t.Errorf("personal account: %s", alice.Raw)
	}
	for _, f := range []string{"total_credits", "total_usage", "balance"} {
		if raw := alice.Get(f).Raw; raw != "0" {
			t.Errorf("%s = %s, want 0", f, raw)
		}
	}
	for _, f := range []string{"created_at", "updated_at"} {
		ts, err := time.Parse(time.RFC3339, alice.Get(f).Str)
		if err != nil || ts.Location() != time.UTC {
			t.Errorf("%s = %q: want an RFC 3339 UTC time (%v)", f, alice.Get(f).Str, err)
		}
	}
	if alice.Get("default_workspace_id").Str == "" || !alice.Get("is_filtered_model_catalog_enabled").IsBool() {
		t.Errorf("missing fields: %s", alice.Raw)
	}

	acme := createOperatorAccount(t, h, `{"name":"Acme","type":"organization","billing":"invoiced","rate_limit_exempt":true}`)
	if !strings.HasPrefix(acme.Get("id").Str, "org_") || acme.Get("billing").Str != "invoiced" || !acme.Get("rate_limit_exempt").Bool() {
		t.Errorf("organization account: %s", acme.Raw)
	}

	list := operatorDo(t, h, http.MethodGet, "/tollgate/accounts", "").must(t, http.StatusOK)
	if ids := list.get("data.#.id").Array(); len(ids) != 2 || ids[0].Str != alice.Get("id").Str || ids[1].Str != acme.Get("id").Str {
		t.Errorf("list, oldest first: %s", list.raw)
	}

	path := "/tollgate/accounts/" + acme.Get("id").Str
	got := operatorDo(t, h, http.MethodGet, path, "").must(t, http.StatusOK).get("data")
	if got.Raw != acme.Raw {
		t.Errorf("get: %s\nwant %s", got.Raw, acme.Raw)
	}
	// Caddy's mux also hands over paths with a trailing slash.
	operatorDo(t, h, http.MethodGet, path+"/", "").must(t, http.StatusOK)

	patched := operatorDo(t, h, http.MethodPatch, path, `{"name":"Acme Inc","billing":"enterprise","rate_limit_exempt":false}`).
		must(t, http.StatusOK).get("data")
	if patched.Get("name").Str != "Acme Inc" || patched.Get("billing").Str != "enterprise" || patched.Get("rate_limit_exempt").Bool() ||
		patched.Get("type").Str != "organization" {
		t.Errorf("patch: %s", patched.Raw)
	}
	// Absent fields are left alone.
	renamed := operatorDo(t, h, http.MethodPatch, path, `{"name":"Acme"}`).must(t, http.StatusOK).get("data")
	if renamed.Get("name").Str != "Acme" || renamed.Get("billing").Str != "enterprise" {
		t.Errorf("partial patch: %s", renamed.Raw)
	}
}

func TestOperatorErrors(t *testing.T) {
	_, h := newOperatorTest(t)
	acct := createOperatorAccount(t, h, `{"name":"A","type":"personal"}`).Get("id").Str
	accounts := "/tollgate/accounts"
	credits := accounts + "/" + acct + "/credits"
	keys := accounts + "/" + acct + "/management-keys"
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	for _, tc := range []struct {
		method, path, body string
		status             int
		msg                string // prefix of the error message
	}{
		{"POST", accounts, `{"type":"personal"}`, 400, "name:"},
		{"POST", accounts, `{"name":"  ","type":"personal"}`, 400, "name:"},
		{"POST", accounts, `{"name":5,"type":"personal"}`, 400, "name: must be a string"},
		{"POST", accounts, `{"name":"A"}`, 400, "type:"},
		{"POST", accounts, `{"name":"A","type":"team"}`, 400, "type:"},
		{"POST", accounts, `{"name":"A","type":"personal","billing":"free"}`, 400, "billing:"},
		{"POST", accounts, `{"name":"A","type":"personal","rate_limit_exempt":"yes"}`, 400, "rate_limit_exempt:"},
		{"POST", accounts, `{"name":"A","type":"personal","nmae":"x"}`, 400, "nmae: unknown field"},
		{"POST", accounts, `{"name":"A",`, 400, "request body is not valid JSON"},
		{"POST", accounts, `["A"]`, 400, "request body must be a JSON object"},
		{"POST", accounts, `{"name":"A","name":"B","type":"personal"}`, 400, "name: duplicate field"},
		{"POST", accounts, `{"name":"A","type":"personal","billing":` + strings.Repeat("[", 1<<19), 400, "request body nests deeper than 128 levels"},
		{"POST", accounts, "{\"name\":\"\xff\",\"type\":\"personal\"}", 400, "name: not valid UTF-8"},
		{"POST", accounts, `{"name":"A\u0000","type":"personal"}`, 400, "name: control characters are not allowed"},
		{"POST", accounts, `{"name":"A\nB","type":"personal"}`, 400, "name: control characters are not allowed"},
		{"POST", accounts, `{"name":"\udc00","type":"personal"}`, 400, "name: unpaired UTF-16 surrogate"},
		{"POST", accounts, `{"name":"` + strings.Repeat("é", 257) + `","type":"personal"}`, 400, "name: expected at most 256 characters"},
		{"POST", credits, `{"amount":1,"note":"` + strings.Repeat("n", 1025) + `"}`, 400, "note: expected at most 1024 characters"},
		{"PATCH", accounts + "/" + acct, `{"name":""}`, 400, "name:"},
		{"PATCH", accounts + "/" + acct, `{"billing":7}`, 400, "billing:"},
		{"PATCH", accounts + "/" + acct, `{"type":"organization"}`, 400, "type: unknown field"},
		{"POST", credits, `{"amount":-1}`, 400, "amount: must be a positive number"},
		{"POST", credits, `{"amount":0}`, 400, "amount: must be a positive number"},
		{"POST", credits, `{"amount":"abc"}`, 400, "amount: must be a positive number"},
		{"POST", credits, `{"amount":"1/2"}`, 400, "amount: must be a positive number"},
		{"POST", credits, `{"amount":true}`, 400, "amount: must be a positive number"},
		{"POST", credits, `{}`, 400, "amount: must be a positive number"},
		{"POST", credits, `{"amount":1e30}`, 400, "amount: out of range"},
		{"POST", credits, `{"amount":1,"note":1}`, 400, "note: must be a string"},
		{"POST", keys, `{}`, 400, "name:"},
		{"POST", keys, `{"name":"k","expires_at":"2000-01-01T00:00:00Z"}`, 400, "expires_at: must be in the future"},
		{"POST", keys, `{"name":"k","expires_at":"tomorrow"}`, 400, "expires_at: must be an RFC 3339"},
		{"POST", keys, `{"name":"k","expires_at":` + `"` + future + `","expires_in":"1h"}`, 400, "expires_in: cannot be combined with expires_at"},
		{"POST", keys, `{"name":"k","expires_in":"forever"}`, 400, "expires_in: must be a duration"},
		{"POST", keys, `{"name":"k","expires_in":"-1h"}`, 400, "expires_in: must be positive"},
		{"POST", keys, `{"name":"k","expires_in":720}`, 400, "expires_in: must be a string"},
		{"POST", keys, `{"name":"k","creator_user_id":""}`, 400, "creator_user_id:"},

		{"GET", accounts + "/user_nope", "", 404, "account user_nope not found"},
		{"PATCH", accounts + "/user_nope", `{"name":"x"}`, 404, "account user_nope not found"},
		{"POST", accounts + "/user_nope/credits", `{"amount":1}`, 404, "account user_nope not found"},
		{"GET", accounts + "/user_nope/credits", "", 404, "account user_nope not found"},
		{"POST", accounts + "/user_nope/management-keys", `{"name":"k"}`, 404, "account user_nope not found"},
		{"GET", accounts + "/user_nope/management-keys", "", 404, "account user_nope not found"},
		{"DELETE", "/tollgate/management-keys/abc", "", 404, "management key abc not found"},
		{"GET", accounts + "/" + acct + "/workspaces", "", 404, "no such route"},

		{"DELETE", accounts, "", 405, "method DELETE not allowed; use GET, POST"},
		{"DELETE", accounts + "/" + acct, "", 405, "method DELETE not allowed; use GET, PATCH"},
		{"PUT", credits, "", 405, "method PUT not allowed"},
		{"POST", "/tollgate/management-keys", `{}`, 405, "method POST not allowed; use GET"},
		{"GET", "/tollgate/management-keys/abc", "", 405, "method GET not allowed; use DELETE"},
	} {
		resp := operatorDo(t, h, tc.method, tc.path, tc.body)
		msg := resp.get("error.message").Str
		if resp.status != tc.status || resp.get("error.code").Int() != int64(tc.status) || !strings.HasPrefix(msg, tc.msg) {
			t.Errorf("%s %s %s: %d %s; want %d with message %q...", tc.method, tc.path, tc.body, resp.status, resp.raw, tc.status, tc.msg)
		}
		if tc.status == 405 && resp.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
}

func TestOperatorNotRunning(t *testing.T) {
	o, _, h := newOperatorAPITest(t)
	o.running = func() *App { return nil }
	resp := operatorDo(t, h, http.MethodGet, "/tollgate/accounts", "").must(t, http.StatusServiceUnavailable)
	if msg := resp.get("error.message").Str; msg != "tollgate app is not running" {
		t.Errorf("message %q", msg)
	}
}

// TestOperatorRoutes checks the table's order of answers: the account and
// member a path names, then the method; trailing slashes as before.
func TestOperatorRoutes(t *testing.T) {
	s, h := newOperatorTest(t)
	acct := createOperatorAccount(t, h, `{"name":"A","type":"organization"}`).Get("id").Str
	m, err := s.CreateMember(storage.NewMember{AccountID: acct, Email: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	members := "/tollgate/accounts/" + acct + "/members"
	operatorDo(t, h, "GET", "/tollgate/accounts/", "").must(t, 200)
	operatorDo(t, h, "GET", "/tollgate/management-keys/", "").must(t, 200)
	if got := operatorDo(t, h, "GET", members+"/"+m.ID+"/", "").must(t, 200).get("data.email").Str; got != "a@example.com" {
		t.Errorf("member email %q", got)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		msg, allow   string
	}{
		{"PUT", members + "/nope", 404, "member nope not found", ""},
		{"PUT", "/tollgate/accounts/nope/members", 404, "account nope not found", ""},
		{"PUT", members, 405, "method PUT not allowed; use GET, POST", "GET, POST"},
		{"POST", members + "/" + m.ID, 405, "method POST not allowed; use DELETE, GET, PATCH", "DELETE, GET, PATCH"},
		{"PATCH", "/tollgate/accounts/" + acct + "/scim-token", 405, "method PATCH not allowed; use DELETE, GET, POST", "DELETE, GET, POST"},
		{"GET", members + "/" + m.ID + "/x", 404, "no such route: " + members + "/" + m.ID + "/x", ""},
	} {
		resp := operatorDo(t, h, tc.method, tc.path, "")
		if resp.status != tc.status || resp.get("error.message").Str != tc.msg || resp.header.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d %s Allow %q; want %d %q Allow %q", tc.method, tc.path, resp.status, resp.raw,
				resp.header.Get("Allow"), tc.status, tc.msg, tc.allow)
		}
	}
}

// TestOperatorProvisioned checks that a provisioned OperatorAPI looks the
// app up in Caddy's running config: none runs in this test.
func TestOperatorProvisioned(t *testing.T) {
	o := new(OperatorAPI)
	if err := o.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	if err := o.serveHTTP(rec, httptest.NewRequest("GET", "/tollgate/accounts", nil)); err != nil || rec.Code != 503 {
		t.Errorf("status %d, err %v; want 503", rec.Code, err)
	}
}

func TestOperatorCreditsExact(t *testing.T) {
	_, h := newOperatorTest(t)
	id := createOperatorAccount(t, h, `{"name":"A","type":"organization"}`).Get("id").Str
	path := "/tollgate/accounts/" + id + "/credits"

	// 0.1 has no float64 representation; ten of them must still total 1.
	for i := range 10 {
		body := `{"amount":"0.1"}`
		if i%2 == 1 {
			body = `{"amount":0.1,"note":"top-up"}`
		}
		resp := operatorDo(t, h, http.MethodPost, path, body).must(t, http.StatusCreated)
		if raw := resp.get("data.amount").Raw; raw != "0.1" {
			t.Fatalf("purchase amount %s, want 0.1", raw)
		}
		if resp.get("data.account_id").Str != id || !strings.HasPrefix(resp.get("data.id").Str, "pur_") {
			t.Fatalf("purchase: %s", resp.raw)
		}
	}
	list := operatorDo(t, h, http.MethodGet, path, "").must(t, http.StatusOK)
	if n := len(list.get("data").Array()); n != 10 {
		t.Fatalf("%d purchases, want 10", n)
	}
	if list.get("total_credits").Raw != "1" || list.get("total_usage").Raw != "0" {
		t.Errorf("totals: %s", list.raw)
	}
	if list.get("data.1.note").Str != "top-up" || list.get("data.0.note").Str != "" {
		t.Errorf("notes: %s", list.raw)
	}

	// More significant digits than a float64 holds survive the round trip.
	resp := operatorDo(t, h, http.MethodPost, path, `{"amount":12345678.123456789}`).must(t, http.StatusCreated)
	if raw := resp.get("data.amount").Raw; raw != "12345678.123456789" {
		t.Errorf("amount %s", raw)
	}
	if raw := resp.get("account.total_credits").Raw; raw != "12345679.123456789" {
		t.Errorf("account total_credits %s", raw)
	}
	if raw := resp.get("account.balance").Raw; raw != "12345679.123456789" {
		t.Errorf("account balance %s", raw)
	}
}

func TestOperatorManagementKeys(t *testing.T) {
	s, h := newOperatorTest(t)
	acct := createOperatorAccount(t, h, `{"name":"A","type":"organization"}`).Get("id").Str
	other := createOperatorAccount(t, h, `{"name":"B","type":"personal"}`).Get("id").Str
	path := "/tollgate/accounts/" + acct + "/management-keys"

	// Only organization admins create management keys: once
	// the organization has members, the creator must be named and an admin.
	members := "/tollgate/accounts/" + acct + "/members"
	admin := operatorDo(t, h, http.MethodPost, members, `{"email":"ada@example.com","role":"admin"}`).must(t, http.StatusCreated).get("data.id").Str
	plain := operatorDo(t, h, http.MethodPost, members, `{"email":"bob@example.com","first_name":"Bob"}`).must(t, http.StatusCreated).get("data.id").Str
	operatorDo(t, h, http.MethodPost, path, `{"name":"ci","creator_user_id":"`+plain+`"}`).must(t, http.StatusForbidden)
	operatorDo(t, h, http.MethodPost, path, `{"name":"ci","creator_user_id":"user_unknown"}`).must(t, http.StatusForbidden)
	operatorDo(t, h, http.MethodPost, path, `{"name":"ci"}`).must(t, http.StatusBadRequest)
	operatorDo(t, h, http.MethodPost, members, `{"email":"ADA@example.com"}`).must(t, http.StatusConflict)

	created := operatorDo(t, h, http.MethodPost, path, `{"name":"ci","expires_in":"720h","creator_user_id":"`+admin+`"}`).
		must(t, http.StatusCreated)
	key := created.get("key").Str
	data := created.get("data")
	if !strings.HasPrefix(key, storage.ManagementKeyPrefix) || data.Get("hash").Str != storage.HashSecret(key) {
		t.Fatalf("create: %s", created.raw)
	}
	if strings.Contains(data.Raw, key) {
		t.Errorf("data holds the key string: %s", data.Raw)
	}
	exp, err := time.Parse(time.RFC3339, data.Get("expires_at").Str)
	if err != nil || time.Until(exp) < 719*time.Hour || data.Get("expired").Bool() {
		t.Errorf("expiry: %s", data.Raw)
	}
	if data.Get("account_id").Str != acct || data.Get("name").Str != "ci" || data.Get("creator_user_id").Str != admin ||
		data.Get("label").Str == "" || data.Get("created_at").Str == "" {
		t.Errorf("fields: %s", data.Raw)
	}
	p, err := s.Authenticate(key)
	if err != nil || !p.Management || p.AccountID != acct {
		t.Fatalf("authenticate: %+v, %v", p, err)
	}

	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	second := operatorDo(t, h, http.MethodPost, path, `{"name":"fixed","creator_user_id":"`+admin+`","expires_at":"`+at.Format(time.RFC3339)+`"}`).
		must(t, http.StatusCreated)
	if got := second.get("data.expires_at").Str; got != at.Format(time.RFC3339) {
		t.Errorf("expires_at %q, want %q", got, at.Format(time.RFC3339))
	}
	third := operatorDo(t, h, http.MethodPost, "/tollgate/accounts/"+other+"/management-keys", `{"name":"forever"}`).
		must(t, http.StatusCreated)
	if third.get("data.expires_at").Type != gjson.Null || third.get("data.creator_user_id").Type != gjson.Null {
		t.Errorf("no expiry: %s", third.raw)
	}

	list := operatorDo(t, h, http.MethodGet, path, "").must(t, http.StatusOK)
	if hashes := list.get("data.#.hash").Array(); len(hashes) != 2 {
		t.Errorf("account list: %s", list.raw)
	}
	all := operatorDo(t, h, http.MethodGet, "/tollgate/management-keys", "").must(t, http.StatusOK)
	if n := len(all.get("data").Array()); n != 3 {
		t.Errorf("all keys: %d, want 3", n)
	}

	// The create answer is the only place a key string appears.
	for _, resp := range []operatorResponse{
		list, all,
		operatorDo(t, h, http.MethodGet, "/tollgate/accounts", ""),
		operatorDo(t, h, http.MethodGet, "/tollgate/accounts/"+acct, ""),
	} {
		for _, k := range []string{key, second.get("key").Str, third.get("key").Str} {
			if strings.Contains(resp.raw, k) {
				t.Errorf("key string leaked: %s", resp.raw)
			}
		}
		if strings.Contains(resp.raw, `"key"`) {
			t.Errorf("key field in %s", resp.raw)
		}
	}

	hash := data.Get("hash").Str
	del := operatorDo(t, h, http.MethodDelete, "/tollgate/management-keys/"+hash, "").must(t, http.StatusOK)
	if del.raw != "{\"deleted\":true}\n" {
		t.Errorf("delete: %q", del.raw)
	}
	operatorDo(t, h, http.MethodDelete, "/tollgate/management-keys/"+hash, "").must(t, http.StatusNotFound)
	if _, err := s.Authenticate(key); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("revoked key still authenticates: %v", err)
	}
	list = operatorDo(t, h, http.MethodGet, path, "").must(t, http.StatusOK)
	if hashes := list.get("data.#.hash").Array(); len(hashes) != 1 || hashes[0].Str == hash {
		t.Errorf("after revoke: %s", list.raw)
	}
}

// runOperatorCommand runs `caddy tollgate args...` on a fresh command tree.
func runOperatorCommand(args ...string) (string, error) {
	root := &cobra.Command{Use: "tollgate", SilenceUsage: true, SilenceErrors: true}
	buildTollgateCommand(root)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestOperatorCommand(t *testing.T) {
	if _, ok := caddycmd.Commands()["tollgate"]; !ok {
		t.Fatal("tollgate command not registered")
	}
	_, h := newOperatorTest(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	addr := "--address=" + srv.Listener.Addr().String()

	run := func(args ...string) gjson.Result {
		t.Helper()
		out, err := runOperatorCommand(append(args, addr)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !gjson.Valid(out) || !strings.Contains(out, "\n  ") {
			t.Fatalf("%v: want indented JSON, got %q", args, out)
		}
		return gjson.Parse(out)
	}

	acct := run("account", "create", "--name", "Acme", "--type", "organization", "--billing", "invoiced", "--exempt").Get("data")
	id := acct.Get("id").Str
	if acct.Get("billing").Str != "invoiced" || !acct.Get("rate_limit_exempt").Bool() {
		t.Errorf("account create: %s", acct.Raw)
	}
	if got := run("account", "update", id, "--exempt=false").Get("data.rate_limit_exempt"); got.Bool() {
		t.Errorf("account update: %s", got.Raw)
	}
	if n := len(run("account", "list", "--json").Get("data").Array()); n != 1 {
		t.Errorf("account list: %d accounts", n)
	}
	if got := run("account", "get", id).Get("data.name").Str; got != "Acme" {
		t.Errorf("account get: name %q", got)
	}
	// The amount travels as a string, so it stays exact.
	if got := run("credits", "add", "--account", id, "--amount", "10.000000001", "--note", "wire").Get("account.total_credits").Raw; got != "10.000000001" {
		t.Errorf("credits add: total %s", got)
	}
	if got := run("credits", "list", "--account", id).Get("data.0.note").Str; got != "wire" {
		t.Errorf("credits list: note %q", got)
	}
	// Only organization admins create management keys.
	admin := run("member", "create", "--account", id, "--email", "ada@example.com", "--role", "admin").Get("data")
	if admin.Get("role").Str != "admin" || admin.Get("email").Str != "ada@example.com" {
		t.Errorf("member create: %s", admin.Raw)
	}
	if n := len(run("member", "list", "--account", id).Get("data").Array()); n != 1 {
		t.Errorf("member list: %d members", n)
	}
	adminID := admin.Get("id").Str
	created := run("mgmt-key", "create", "--account", id, "--name", "ci", "--expires-in", "1h", "--creator-user-id", adminID)
	if !strings.HasPrefix(created.Get("key").Str, storage.ManagementKeyPrefix) || created.Get("data.creator_user_id").Str != adminID {
		t.Errorf("mgmt-key create: %s", created.Raw)
	}
	if n := len(run("mgmt-key", "list", "--account", id).Get("data").Array()); n != 1 {
		t.Errorf("mgmt-key list --account: %d keys", n)
	}
	if n := len(run("mgmt-key", "list").Get("data").Array()); n != 1 {
		t.Errorf("mgmt-key list: %d keys", n)
	}
	if !run("mgmt-key", "revoke", created.Get("data.hash").Str).Get("deleted").Bool() {
		t.Error("mgmt-key revoke")
	}

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"account", "create", "--name", "A"}, `required flag(s) "type" not set`},
		{[]string{"credits", "add", "--account", id}, `required flag(s) "amount" not set`},
		{[]string{"credits", "list"}, `required flag(s) "account" not set`},
		{[]string{"mgmt-key", "create", "--account", id}, `required flag(s) "name" not set`},
		{[]string{"mgmt-key", "create", "--account", id, "--name", "k", "--expires-in", "1h", "--expires-at", "2030-01-01T00:00:00Z"}, "none of the others can be"},
		{[]string{"account", "get"}, "accepts 1 arg(s)"},
		{[]string{"mgmt-key", "revoke"}, "accepts 1 arg(s)"},
		// API errors carry the API's message.
		{[]string{"credits", "add", "--account", id, "--amount", "-1"}, "HTTP 400: amount: must be a positive number"},
		{[]string{"account", "get", "user_nope"}, "HTTP 404: account user_nope not found"},
	} {
		out, err := runOperatorCommand(append(tc.args, addr)...)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
		}
		if out != "" {
			t.Errorf("%v: printed %q on failure", tc.args, out)
		}
	}
}

// TestOperatorAccountKeys checks that the operator manages an account's
// API keys and reads its activity through the public routes' own code:
// the same answers, and another account's key is not found.
func TestOperatorAccountKeys(t *testing.T) {
	_, h := newOperatorTest(t)
	acct := createOperatorAccount(t, h, `{"name":"A","type":"organization"}`).Get("id").Str
	other := createOperatorAccount(t, h, `{"name":"B","type":"personal"}`).Get("id").Str
	keys := "/tollgate/accounts/" + acct + "/keys"
	created := operatorDo(t, h, "POST", keys, `{"name":"ci","limit":5}`).must(t, 201)
	hash := created.get("data.hash").Str
	if !strings.HasPrefix(created.get("key").Str, "sk-tg-v1-") || created.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %s %v", created.raw, created.header)
	}
	if got := operatorDo(t, h, "GET", keys, "").must(t, 200).get("data.#").Int(); got != 1 {
		t.Errorf("list: %d keys", got)
	}
	if got := operatorDo(t, h, "PATCH", keys+"/"+hash, `{"disabled":true}`).must(t, 200).get("data.disabled").Bool(); !got {
		t.Error("disable: not disabled")
	}
	if got := operatorDo(t, h, "GET", keys, "").must(t, 200).get("data.#").Int(); got != 0 {
		t.Errorf("list without disabled keys: %d", got)
	}
	// The public route's rules: a bad field is a 400 naming it.
	if got := operatorDo(t, h, "POST", keys, `{"name":"x","limit_reset":"hourly"}`).must(t, 400).get("error.message").Str; !strings.HasPrefix(got, "limit_reset:") {
		t.Errorf("bad limit_reset: %q", got)
	}
	operatorDo(t, h, "GET", "/tollgate/accounts/"+other+"/keys/"+hash, "").must(t, 404)
	operatorDo(t, h, "GET", "/tollgate/accounts/nope/keys", "").must(t, 404)
	operatorDo(t, h, "GET", "/tollgate/accounts/"+acct+"/activity", "").must(t, 200)
	if got := operatorDo(t, h, "GET", "/tollgate/accounts/"+acct+"/activity?date=bad", "").must(t, 400).get("error.message").Str; !strings.HasPrefix(got, "date:") {
		t.Errorf("bad date: %q", got)
	}
	operatorDo(t, h, "POST", "/tollgate/accounts/"+acct+"/analytics/query", `{"metrics":["usage"],"granularity":"day"}`).must(t, 200)
	if got := operatorDo(t, h, "DELETE", keys+"/"+hash, "").must(t, 200).get("deleted").Bool(); !got {
		t.Error("delete")
	}
	operatorDo(t, h, "GET", "/tollgate/generations/gen-nope", "").must(t, 404)
	operatorDo(t, h, "PUT", keys, "").must(t, 405)
}
