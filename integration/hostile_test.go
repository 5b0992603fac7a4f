package integration

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostileRoute is a write route and the caller it needs.
type hostileRoute struct {
	method, url, key string
}

// hostileBodies are refused on every write route: nesting far beyond 128
// levels (within the 1 MiB admin limit), repeated keys, numbers and
// strings where names belong, NaN text, invalid UTF-8, control
// characters, unpaired surrogates and a 1 MB name.
func hostileBodies() map[string]string {
	deep := 1<<20 - 64
	return map[string]string{
		"deep arrays":   `{"name":` + strings.Repeat("[", deep),
		"deep objects":  strings.Repeat(`{"name":`, deep/8),
		"closed deep":   `{"name":"x","x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`,
		"duplicate":     `{"name":"a","name":"b"}`,
		"nested dup":    `{"name":"a","config":{"x":1,"x":2}}`,
		"huge number":   `{"name":1` + strings.Repeat("0", 5000) + `}`,
		"1e308":         `{"name":1e308,"amount":1e308}`,
		"minus zero":    `{"name":-0,"amount":-0}`,
		"NaN":           `{"name":NaN}`,
		"invalid UTF-8": "{\"name\":\"a\xff\xfeb\",\"user\":\"\xc3\"}",
		"NUL":           `{"name":"a\u0000b","user":"a\u0000b","email":"a\u0000@example.com"}`,
		"control":       `{"name":"a\u001bb","user":"a\u0085b"}`,
		"surrogate":     `{"name":"\ud800","user":"\udfff","email":"\ud800@example.com"}`,
		"1 MB name":     `{"name":"` + strings.Repeat("a", 1_000_000) + `","user":"u"}`,
	}
}

// TestHostileBodies sends every hostile body to every write route: each
// gets a 400 or 413, the gateway stays up and nothing changes.
func TestHostileBodies(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newOrg("10")
	key, hash := c.newKey(org.Mgmt, `{"name":"k"}`)
	ws := c.api("POST", "/workspaces", org.Mgmt, `{"name":"Research","slug":"research"}`).expect(t, 201).JSON.Get("data.id").Str
	gr := c.api("POST", "/guardrails", org.Mgmt, `{"name":"g"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/end-users", org.Mgmt, `{"user":"u1"}`).expect(t, 201)
	scimToken := c.operator("POST", "/accounts/"+org.AccountID+"/scim-token", nil).expect(t, 201).JSON.Get("token").Str
	acct := "/tollgate/accounts/" + org.AccountID
	api := c.gateway + "/api/v1"

	admin := []hostileRoute{
		{"POST", api + "/keys", org.Mgmt},
		{"PATCH", api + "/keys/" + hash, org.Mgmt},
		{"PATCH", api + "/organization/settings", org.Mgmt},
		{"POST", api + "/byok", org.Mgmt},
		{"POST", api + "/end-users", org.Mgmt},
		{"PATCH", api + "/end-users/u1", org.Mgmt},
		{"POST", api + "/generation/feedback", org.Mgmt},
		{"POST", api + "/analytics/query", org.Mgmt},
		{"POST", api + "/observability/destinations", org.Mgmt},
		{"POST", api + "/private-endpoints", org.Mgmt},
		{"POST", api + "/workspaces", org.Mgmt},
		{"PATCH", api + "/workspaces/" + ws, org.Mgmt},
		{"POST", api + "/workspaces/" + ws + "/members/add", org.Mgmt},
		{"POST", api + "/guardrails", org.Mgmt},
		{"PATCH", api + "/guardrails/" + gr, org.Mgmt},
		{"POST", api + "/guardrails/" + gr + "/assignments/keys", org.Mgmt},
		{"POST", api + "/scim/group-mappings", org.Mgmt},
		{"POST", c.admin + "/tollgate/accounts", ""},
		{"PATCH", c.admin + acct, ""},
		{"POST", c.admin + acct + "/credits", ""},
		{"POST", c.admin + acct + "/management-keys", ""},
		{"POST", c.admin + acct + "/members", ""},
		{"PATCH", c.admin + acct + "/members/" + org.Member, ""},
		{"POST", c.gateway + "/scim/v2/Users", scimToken},
		{"PATCH", c.gateway + "/scim/v2/Users/" + org.Member, scimToken},
	}
	inference := []hostileRoute{
		{"POST", api + "/chat/completions", key},
		{"POST", api + "/responses", key},
	}
	normal := `{"model":"mock/echo","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`

	before := hostileSnapshot(c, org, scimToken)
	refuse := func(rt hostileRoute, name, body string) {
		t.Helper()
		r, err := c.try(rt.method, rt.url, rt.key, body)
		if err != nil {
			t.Fatalf("%s %s, %s: %v", rt.method, rt.url, name, err)
		}
		if r.Status != 400 && r.Status != 413 {
			t.Errorf("%s %s, %s: %d %.200s", rt.method, rt.url, name, r.Status, r.Body)
		}
	}
	for name, body := range hostileBodies() {
		for _, rt := range append(admin, inference...) {
			refuse(rt, name, body)
		}
	}
	for _, rt := range inference {
		refuse(rt, "8 MiB of [", `{"model":"mock/echo","messages":`+strings.Repeat("[", 8<<20))
		refuse(rt, "duplicate model", `{"model":"mock/echo","messages":[],"model":"paid"}`)
		refuse(rt, "nested duplicate", `{"model":"mock/echo","messages":[{"role":"user","content":"a","content":"b"}]}`)
	}
	if after := hostileSnapshot(c, org, scimToken); after != before {
		t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
	}
	// Alive: a normal request is served and charged.
	c.api("POST", "/chat/completions", key, normal).expect(t, 200)
}

// hostileSnapshot is every list the write routes could change.
func hostileSnapshot(c *client, org orgFixture, scimToken string) string {
	c.t.Helper()
	var sb strings.Builder
	for _, p := range []string{"/keys", "/workspaces", "/guardrails", "/byok", "/end-users",
		"/private-endpoints", "/observability/destinations", "/credits", "/organization/settings", "/scim/group-mappings"} {
		sb.Write(c.api("GET", p, org.Mgmt, nil).expect(c.t, 200).Body)
	}
	acct := "/accounts/" + org.AccountID
	for _, p := range []string{"", "/members", "/credits", "/management-keys"} {
		sb.Write(c.operator("GET", acct+p, nil).expect(c.t, 200).Body)
	}
	sb.Write(c.operator("GET", "/accounts", nil).expect(c.t, 200).Body)
	sb.Write(c.do("GET", c.gateway+"/scim/v2/Users", scimToken, nil).expect(c.t, 200).Body)
	return sb.String()
}

// TestHostileBodiesMemory: eight concurrent bodies of 8 MiB of '[' leave
// the goroutine stacks small (the checks do not recurse) and the heap
// where it was once collected.
func TestHostileBodiesMemory(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("personal", "10")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"k"}`)
	body := `{"model":"mock/echo","messages":` + strings.Repeat("[", 8<<20)

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapInuse

	done := make(chan struct{})
	var peakStack uint64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			peakStack = max(peakStack, m.StackInuse)
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
			if err != nil || r.Status != 400 || !strings.Contains(r.JSON.Get("error.message").Str, "128") {
				t.Errorf("deep body: %v %d %.200s", err, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	close(done)
	sampler.Wait()

	// A recursive check of one such body needs gigabytes of stack.
	if peakStack > 64<<20 {
		t.Errorf("goroutine stacks peaked at %d MiB", peakStack>>20)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > heapBefore+64<<20 {
		t.Errorf("heap in use grew from %d to %d MiB", heapBefore>>20, ms.HeapInuse>>20)
	}
	c.api("POST", "/chat/completions", key, `{"model":"mock/echo","messages":[{"role":"user","content":"hi"}]}`).expect(t, 200)
}
