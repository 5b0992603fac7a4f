package integration

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// keyFields are the fields every key record must carry (public schema).
var keyFields = []string{
	"hash", "name", "label", "disabled", "limit", "limit_remaining", "limit_reset",
	"include_byok_in_limit", "usage", "usage_daily", "usage_weekly", "usage_monthly",
	"byok_usage", "byok_usage_daily", "byok_usage_weekly", "byok_usage_monthly",
	"created_at", "updated_at", "creator_user_id", "workspace_id", "expires_at", "external_user",
}

func checkKeyRecord(t *testing.T, rec gjson.Result) {
	t.Helper()
	for _, f := range keyFields {
		if !rec.Get(f).Exists() {
			t.Fatalf("key record lacks %q: %s", f, rec.Raw)
		}
	}
}

func TestOperatorFlowAndKeyManagement(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")

	// Create, with every optional field.
	exp := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	created := c.api("POST", "/keys", org.MgmtKey,
		fmt.Sprintf(`{"name":"customer-1","limit":25.5,"limit_reset":"weekly","include_byok_in_limit":true,"expires_at":%q}`, exp)).expect(t, 201)
	key := created.JSON.Get("key").String()
	rec := created.JSON.Get("data")
	checkKeyRecord(t, rec)
	hash := rec.Get("hash").String()
	if !strings.HasPrefix(key, "sk-tg-v1-") || strings.Contains(string(created.Body[:strings.Index(string(created.Body), `"key"`)]), key) {
		t.Fatalf("key string must appear once, under \"key\": %s", created.Body)
	}
	if rec.Get("limit").Float() != 25.5 || rec.Get("limit_remaining").Float() != 25.5 || rec.Get("limit_reset").String() != "weekly" ||
		!rec.Get("include_byok_in_limit").Bool() || rec.Get("expires_at").String() != exp || rec.Get("label").String() == key {
		t.Fatalf("created record: %s", rec.Raw)
	}

	// Get and list never show the key string.
	got := c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200)
	checkKeyRecord(t, got.JSON.Get("data"))
	list := c.api("GET", "/keys", org.MgmtKey, nil).expect(t, 200)
	if strings.Contains(string(got.Body)+string(list.Body), key) {
		t.Fatal("full key returned after creation")
	}
	if n := len(list.JSON.Get("data").Array()); n != 1 {
		t.Fatalf("list has %d keys", n)
	}

	// Patch every field; nulls clear.
	patched := c.api("PATCH", "/keys/"+hash, org.MgmtKey,
		`{"name":"renamed","limit":null,"limit_reset":null,"include_byok_in_limit":false}`).expect(t, 200).JSON.Get("data")
	checkKeyRecord(t, patched)
	if patched.Get("name").String() != "renamed" || patched.Get("limit").Type != gjson.Null ||
		patched.Get("limit_remaining").Type != gjson.Null || patched.Get("limit_reset").Type != gjson.Null || patched.Get("include_byok_in_limit").Bool() {
		t.Fatalf("patched: %s", patched.Raw)
	}
	c.api("PATCH", "/keys/"+hash, org.MgmtKey, `{"limit":3,"limit_reset":"daily"}`).expect(t, 200)

	// GET /key with the regular key.
	me := c.api("GET", "/key", key, nil).expect(t, 200).JSON.Get("data")
	for _, f := range []string{"label", "limit", "limit_remaining", "limit_reset", "include_byok_in_limit", "usage", "usage_daily",
		"usage_weekly", "usage_monthly", "byok_usage", "byok_usage_daily", "byok_usage_weekly", "byok_usage_monthly",
		"is_free_tier", "is_management_key", "is_provisioning_key", "free_model_daily_requests.used",
		"free_model_daily_requests.limit", "free_model_daily_requests.remaining", "rate_limit.requests",
		"creator_user_id", "organization_id", "workspace_id", "allowed_data_regions"} {
		if !me.Get(f).Exists() {
			t.Fatalf("/key lacks %s: %s", f, me.Raw)
		}
	}
	if me.Get("limit").Int() != 3 || me.Get("limit_reset").String() != "daily" || me.Get("is_free_tier").Bool() ||
		me.Get("is_management_key").Bool() || me.Get("free_model_daily_requests.limit").Int() != 1000 ||
		me.Get("organization_id").String() != org.AccountID {
		t.Fatalf("/key: %s", me.Raw)
	}

	// Credits and the inference pass-through.
	credits := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if credits.Get("total_credits").Float() != 10 || credits.Get("total_usage").Float() != 0 {
		t.Fatalf("credits: %s", credits.Raw)
	}
	chat := c.api("POST", "/chat/completions", key, `{"model":"mock/echo","messages":[{"role":"user","content":"hello gateway"}]}`).expect(t, 200)
	if !strings.Contains(chat.JSON.Get("choices.0.message.content").String(), "hello gateway") {
		t.Fatalf("chat: %s", chat.Body)
	}
	resp := c.api("POST", "/responses", key, `{"model":"mock/echo","input":"hello responses"}`).expect(t, 200)
	if resp.JSON.Get("object").String() != "response" {
		t.Fatalf("responses: %s", resp.Body)
	}

	// Disable: 401; enable: works again.
	c.api("PATCH", "/keys/"+hash, org.MgmtKey, `{"disabled":true}`).expect(t, 200)
	c.api("POST", "/chat/completions", key, `{"model":"m","messages":[]}`).expectError(t, 401, "disabled")
	c.api("GET", "/key", key, nil).expectError(t, 401, "disabled")
	if n := len(c.api("GET", "/keys", org.MgmtKey, nil).JSON.Get("data").Array()); n != 0 {
		t.Fatalf("disabled key listed without include_disabled: %d", n)
	}
	if n := len(c.api("GET", "/keys?include_disabled=true", org.MgmtKey, nil).JSON.Get("data").Array()); n != 1 {
		t.Fatalf("include_disabled list: %d", n)
	}
	c.api("PATCH", "/keys/"+hash, org.MgmtKey, `{"disabled":false}`).expect(t, 200)
	c.api("GET", "/key", key, nil).expect(t, 200)

	// Delete: gone for good.
	del := c.api("DELETE", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200)
	if del.JSON.Get("deleted").Raw != "true" {
		t.Fatalf("delete: %s", del.Body)
	}
	c.api("GET", "/keys/"+hash, org.MgmtKey, nil).expectError(t, 404, "")
	c.api("GET", "/key", key, nil).expectError(t, 401, "")
}

func TestKeyListPaging(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "")
	var hashes []string
	for i := range 105 {
		_, h := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"k%d"}`, i))
		hashes = append(hashes, h)
	}
	first := c.api("GET", "/keys", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
	second := c.api("GET", "/keys?offset=100", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
	if len(first) != 100 || len(second) != 5 {
		t.Fatalf("pages of %d and %d", len(first), len(second))
	}
	if first[0].Get("hash").String() != hashes[104] || second[4].Get("hash").String() != hashes[0] {
		t.Fatal("pages are not most recent first")
	}
	ws := c.api("GET", "/key", "", nil) // no key
	ws.expectError(t, 401, "Missing Authentication")
}

func TestErrorsAndValidation(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	// Funded: an account that cannot pay is refused (402) before its
	// inference body is read, so only a paying key sees the body's 400s.
	org := c.newTenant("organization", "5")
	key, hash := c.newKey(org.MgmtKey, `{"name":"k"}`)

	for _, tc := range []struct {
		method, path, body, field string
	}{
		{"POST", "/keys", `{}`, "name"},
		{"POST", "/keys", `{"name":""}`, "name"},
		{"POST", "/keys", `{"name":5}`, "name"},
		{"POST", "/keys", `{"name":"x","limit":"10"}`, "limit"},
		{"POST", "/keys", `{"name":"x","limit":-1}`, "limit"},
		{"POST", "/keys", `{"name":"x","limit_reset":"hourly"}`, "limit_reset"},
		{"POST", "/keys", `{"name":"x","include_byok_in_limit":"yes"}`, "include_byok_in_limit"},
		{"POST", "/keys", `{"name":"x","expires_at":"tomorrow"}`, "expires_at"},
		{"POST", "/keys", `{"name":"x","expires_at":"2099-01-01T00:00:00+02:00"}`, "expires_at"},
		{"POST", "/keys", `{"name":"x","expires_at":"2001-01-01T00:00:00Z"}`, "expires_at"},
		{"POST", "/keys", `{"name":`, "JSON"},
		{"POST", "/keys", `[1]`, "object"},
		{"PATCH", "/keys/" + hash, `{"disabled":"true"}`, "disabled"},
		{"PATCH", "/keys/" + hash, `{"name":""}`, "name"},
		{"GET", "/keys?offset=-1", "", "offset"},
		{"GET", "/keys?include_disabled=maybe", "", "include_disabled"},
		{"PATCH", "/organization/settings", `{"is_filtered_model_catalog_enabled":1}`, "is_filtered_model_catalog_enabled"},
		{"PATCH", "/organization/settings", `{}`, "is_filtered_model_catalog_enabled"},
	} {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		c.api(tc.method, tc.path, org.MgmtKey, body).expectError(t, 400, tc.field)
	}
	// Nothing half-written: the failed creations left only the first key.
	if n := len(c.api("GET", "/keys?include_disabled=true", org.MgmtKey, nil).JSON.Get("data").Array()); n != 1 {
		t.Fatalf("%d keys after failed creations", n)
	}
	// Inference bodies.
	for _, tc := range []struct{ body, field string }{
		{`{"messages":[]}`, "model"},
		{`{"model":3,"messages":[]}`, "model"},
		{`{"model":"m"}`, "messages"},
		{`{"model":"m","messages":[],"stream":"yes"}`, "stream"},
		{`{"model":"m","messages":[],"max_tokens":0}`, "max_tokens"},
		{`{"model":"m","messages":[],"max_tokens":1.5}`, "max_tokens"},
		{`not json`, "JSON"},
	} {
		c.api("POST", "/chat/completions", key, tc.body).expectError(t, 400, tc.field)
	}
	broke := c.newTenant("organization", "")
	brokeKey, _ := c.newKey(broke.MgmtKey, `{"name":"k"}`)
	c.api("POST", "/chat/completions", brokeKey, `not json`).expectError(t, 402, "Insufficient credits")
	c.api("POST", "/responses", key, `{"model":"m","input":5}`).expectError(t, 400, "input")

	// Authentication and permission.
	c.api("GET", "/keys", "", nil).expectError(t, 401, "Missing Authentication header")
	c.api("GET", "/keys", "sk-tg-v1-0000", nil).expectError(t, 401, "Invalid API key")
	c.api("GET", "/keys", key, nil).expectError(t, 403, "Only management keys")
	c.api("GET", "/credits", key, nil).expectError(t, 403, "")
	c.api("POST", "/chat/completions", org.MgmtKey, `{"model":"m","messages":[]}`).expectError(t, 403, "Management keys cannot")
	c.api("GET", "/no-such-route", key, nil).expectError(t, 404, "")
	c.api("PUT", "/keys", org.MgmtKey, `{}`).expectError(t, 405, "")
}

func TestManagementKeyExpires(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "")
	mk := c.operator("POST", "/accounts/"+org.AccountID+"/management-keys", `{"name":"short","expires_in":"1s"}`).expect(t, 201)
	short := mk.JSON.Get("key").String()
	c.api("GET", "/keys", short, nil).expect(t, 200)
	me := c.api("GET", "/key", short, nil).expect(t, 200).JSON.Get("data")
	if !me.Get("is_management_key").Bool() || me.Get("expires_at").String() == "" {
		t.Fatalf("/key with a management key: %s", me.Raw)
	}
	// Poll until the second has passed (no fixed sleep): 200 until then.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := c.api("GET", "/keys", short, nil)
		if r.Status == 401 {
			break
		}
		if r.Status != 200 || time.Now().After(deadline) {
			t.Fatalf("before it expires: %d %s", r.Status, r.Body)
		}
	}
	c.api("GET", "/keys", short, nil).expectError(t, 401, "API key expired")
	c.api("GET", "/organization/settings", short, nil).expectError(t, 401, "API key expired")
	// The key stays listed until deleted.
	listed := c.operator("GET", "/accounts/"+org.AccountID+"/management-keys", nil).expect(t, 200)
	if !strings.Contains(string(listed.Body), mk.JSON.Get("data.hash").String()) {
		t.Fatal("expired key no longer listed")
	}
	// Revocation works at once.
	c.operator("DELETE", "/management-keys/"+org.MgmtKeyHash(t, c), nil).expect(t, 200)
	c.api("GET", "/keys", org.MgmtKey, nil).expectError(t, 401, "Invalid API key")
}

// MgmtKeyHash finds the hash of the tenant's first management key.
func (tn tenant) MgmtKeyHash(t *testing.T, c *client) string {
	t.Helper()
	for _, k := range c.operator("GET", "/accounts/"+tn.AccountID+"/management-keys", nil).JSON.Get("data").Array() {
		if k.Get("name").String() == "ops" {
			return k.Get("hash").String()
		}
	}
	t.Fatal("no ops key")
	return ""
}

func TestOrganizationSettings(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "")
	personal := c.newTenant("personal", "")

	s := c.api("GET", "/organization/settings", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if s.Get("id").String() != org.AccountID || s.Get("is_filtered_model_catalog_enabled").Bool() {
		t.Fatalf("settings: %s", s.Raw)
	}
	s = c.api("PATCH", "/organization/settings", org.MgmtKey, `{"is_filtered_model_catalog_enabled":true}`).expect(t, 200).JSON.Get("data")
	if !s.Get("is_filtered_model_catalog_enabled").Bool() {
		t.Fatalf("patched settings: %s", s.Raw)
	}
	s = c.api("GET", "/organization/settings", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if !s.Get("is_filtered_model_catalog_enabled").Bool() {
		t.Fatal("setting not persisted")
	}
	c.api("GET", "/organization/settings", personal.MgmtKey, nil).expectError(t, 404, "")
	c.api("PATCH", "/organization/settings", personal.MgmtKey, `{"is_filtered_model_catalog_enabled":true}`).expectError(t, 404, "")

	// A personal account's keys: creator is the owner, no organization.
	pkey, _ := c.newKey(personal.MgmtKey, `{"name":"mine"}`)
	me := c.api("GET", "/key", pkey, nil).expect(t, 200).JSON.Get("data")
	if me.Get("organization_id").Type != gjson.Null || me.Get("creator_user_id").String() != personal.AccountID || !me.Get("is_free_tier").Bool() ||
		me.Get("free_model_daily_requests.limit").Int() != 50 {
		t.Fatalf("personal /key: %s", me.Raw)
	}
}

func TestCrossAccountIsolation(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	a := c.newTenant("organization", "5")
	b := c.newTenant("organization", "7")
	_, aHash := c.newKey(a.MgmtKey, `{"name":"a-key"}`)
	c.newKey(b.MgmtKey, `{"name":"b-key"}`)

	c.api("GET", "/keys/"+aHash, b.MgmtKey, nil).expectError(t, 404, "")
	c.api("PATCH", "/keys/"+aHash, b.MgmtKey, `{"disabled":true}`).expectError(t, 404, "")
	c.api("DELETE", "/keys/"+aHash, b.MgmtKey, nil).expectError(t, 404, "")
	bList := c.api("GET", "/keys", b.MgmtKey, nil).expect(t, 200)
	if strings.Contains(string(bList.Body), aHash) || len(bList.JSON.Get("data").Array()) != 1 {
		t.Fatalf("b sees a's keys: %s", bList.Body)
	}
	aKey := c.api("GET", "/keys/"+aHash, a.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if aKey.Get("disabled").Bool() {
		t.Fatal("b disabled a's key")
	}
	if c.api("GET", "/credits", b.MgmtKey, nil).JSON.Get("data.total_credits").Float() != 7 {
		t.Fatal("credits leak across accounts")
	}
	if c.api("GET", "/organization/settings", b.MgmtKey, nil).JSON.Get("data.id").String() != b.AccountID {
		t.Fatal("settings of another organization")
	}
	// A workspace of another account cannot be named.
	aWS := c.operator("GET", "/accounts/"+a.AccountID, nil).JSON.Get("data.default_workspace_id").String()
	c.api("POST", "/keys", b.MgmtKey, fmt.Sprintf(`{"name":"x","workspace_id":%q}`, aWS)).expectError(t, 404, "")
	c.api("GET", "/keys?workspace_id="+aWS, b.MgmtKey, nil).expectError(t, 404, "")
}

// A config reload in the middle of traffic loses nothing: every key created
// before, during and after the reload is there and works.
func TestReloadUnderTrafficLosesNoData(t *testing.T) {
	dir := startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "1")

	var mu sync.Mutex
	created := map[string]string{} // hash -> key
	var failures []string
	var transportErrors int
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := c.try("POST", c.gateway+"/api/v1/keys", org.MgmtKey, fmt.Sprintf(`{"name":"w%d-%d"}`, w, i))
				mu.Lock()
				if err != nil {
					// A connection closed by the old server's shutdown is
					// not data loss: that request's outcome is unknown.
					transportErrors++
				} else if r.Status == 201 {
					created[r.JSON.Get("data.hash").String()] = r.JSON.Get("key").String()
				} else {
					failures = append(failures, fmt.Sprintf("%d %s", r.Status, r.Body))
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	// Reload: same data directory, a changed config.
	cfg := gatewayCaddyfile(adminAddr, dir, gatewayAddr, mockAddr, "2ms")
	for range 2 {
		c.doWithType("POST", c.admin+"/load", "text/caddyfile", cfg).expect(t, 200)
		time.Sleep(300 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed during reload, first: %s", len(failures), failures[0])
	}
	if transportErrors > 0 {
		t.Logf("%d requests saw a closed connection during the reload", transportErrors)
	}
	if len(created) < 10 {
		t.Fatalf("only %d keys created", len(created))
	}
	all := map[string]bool{}
	for offset := 0; ; offset += 100 {
		page := c.api("GET", fmt.Sprintf("/keys?offset=%d", offset), org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
		for _, k := range page {
			all[k.Get("hash").String()] = true
		}
		if len(page) < 100 {
			break
		}
	}
	for hash, key := range created {
		if !all[hash] {
			t.Fatalf("key %s lost in reload", hash)
		}
		c.api("GET", "/key", key, nil).expect(t, 200)
	}
}
