package integration

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestModelCatalog: the gateway serves the catalog of gatewayCaddyfile
// itself and routes inference to the model's provider, the mock.
func TestModelCatalog(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	wantIDs := "tollgate-mock,tollgate-mock:free,mock/echo"

	// The public list needs no key. (A GET first: the client retries it on
	// a keep-alive connection the previous test's server closed.)
	list := c.api("GET", "/models", "", nil).expect(t, 200)
	if got := modelIDs(list.JSON); got != wantIDs || list.JSON.Get("total_count").Int() != 3 ||
		list.JSON.Get("links.next").Type != gjson.Null {
		t.Fatalf("GET /models: %s", list.Body)
	}
	paid := list.JSON.Get("data.0")
	for path, want := range map[string]string{
		"pricing.prompt": "0.000001", "pricing.completion": "0.000002", "canonical_slug": "tollgate-mock",
		"links.details": "/api/v1/models/tollgate-mock/endpoints", "architecture.modality": "text->text",
	} {
		if got := paid.Get(path).String(); got != want {
			t.Errorf("tollgate-mock %s = %q, want %q", path, got, want)
		}
	}
	if strings.Contains(string(list.Body), "127.0.0.1") || strings.Contains(string(list.Body), "api_key") {
		t.Errorf("provider details in the public list: %s", list.Body)
	}
	page := c.api("GET", "/models?offset=1&limit=1", "", nil).expect(t, 200)
	if modelIDs(page.JSON) != "tollgate-mock:free" || page.JSON.Get("links.next").String() != "/api/v1/models?offset=2&limit=1" {
		t.Errorf("page: %s", page.Body)
	}
	c.api("GET", "/models?limit=5000", "", nil).expectError(t, 400, "limit")

	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"models"}`)

	// The per-user list needs a regular key.
	user := c.api("GET", "/models/user", key, nil).expect(t, 200)
	if modelIDs(user.JSON) != wantIDs {
		t.Errorf("GET /models/user: %s", user.Body)
	}
	c.api("GET", "/models/user", "", nil).expectError(t, 401, "")
	c.api("GET", "/models/user", org.MgmtKey, nil).expectError(t, 403, "")

	// Routed by the catalog: the free variant reaches the mock under the
	// provider's model id.
	chat := c.api("POST", "/chat/completions", key,
		`{"model":"tollgate-mock:free","messages":[{"role":"user","content":"hello catalog"}]}`).expect(t, 200)
	if !strings.Contains(chat.JSON.Get("choices.0.message.content").String(), "from tollgate-mock: hello catalog") {
		t.Fatalf("chat: %s", chat.Body)
	}
	stream := c.api("POST", "/chat/completions?x=1", key,
		`{"model":"tollgate-mock","stream":true,"messages":[{"role":"user","content":"streamed"}]}`).expect(t, 200)
	if !strings.Contains(string(stream.Body), "data: [DONE]") {
		t.Fatalf("stream: %s", stream.Body)
	}
	resp := c.api("POST", "/responses", key, `{"model":"mock/echo","input":"hello responses"}`).expect(t, 200)
	if resp.JSON.Get("object").String() != "response" {
		t.Fatalf("responses: %s", resp.Body)
	}

	c.api("POST", "/chat/completions", key, `{"model":"no/such-model","messages":[]}`).
		expectError(t, 400, `model: unknown model "no/such-model"`)
}

func modelIDs(list gjson.Result) string {
	var ids []string
	for _, m := range list.Get("data").Array() {
		ids = append(ids, m.Get("id").String())
	}
	return strings.Join(ids, ",")
}
