package integration

import (
	"strings"
	"testing"
)

// startLookupCatalog is the test gateway with mock/echo-2 before mock/echo:
// the newest of the echo family, on a provider with zero data retention.
func startLookupCatalog(t *testing.T) *client {
	t.Helper()
	startInProcessWith(t, func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel mock/echo {", `		model mock/echo-2 {
			context_length 16000
			pricing {
				prompt 0.000003
				completion 0.000004
			}
			provider mock http://`+mockAddr+`/v1 {
				model tollgate-mock
				api_key mock
				zdr
			}
		}
		model mock/echo {`)
	})
	return newClient(t, gatewayAddr, adminAddr)
}

// TestModelLookupRoutes: GET /model/{author}/{slug}, GET /endpoints/zdr
// and the filters of GET /models through Caddy.
func TestModelLookupRoutes(t *testing.T) {
	c := startLookupCatalog(t)
	all := "tollgate-mock,tollgate-mock:free,mock/echo-2,mock/echo"
	if got := modelIDs(c.api("GET", "/models", "", nil).expect(t, 200).JSON); got != all {
		t.Fatalf("GET /models = %s", got)
	}

	for path, want := range map[string]string{
		"/model/mock/echo": "mock/echo", "/model/~mock/echo-latest": "mock/echo-2", "/model/mock/echo:floor": "mock/echo",
	} {
		res := c.api("GET", path, "", nil).expect(t, 200)
		if got := res.JSON.Get("data.id").Str; got != want || res.JSON.Get("data.links.details").Str != "/api/v1/models/"+want+"/endpoints" {
			t.Errorf("GET %s: %s", path, res.Body)
		}
	}
	c.api("GET", "/model/mock/none", "", nil).expectError(t, 404, "Model not found: mock/none")
	c.api("GET", "/model/~mock/none-latest", "", nil).expectError(t, 404, "Model not found: ~mock/none-latest")

	zdr := c.api("GET", "/endpoints/zdr", "", nil).expect(t, 200).JSON.Get("data")
	if n := len(zdr.Array()); n != 1 || zdr.Get("0.model_id").Str != "mock/echo-2" || zdr.Get("0.provider_name").Str != "mock" ||
		zdr.Get("0.pricing.prompt").Str != "0.000003" || zdr.Get("0.context_length").Int() != 16000 {
		t.Errorf("GET /endpoints/zdr: %s", zdr.Raw)
	}

	for query, want := range map[string]string{
		"?zdr=true":                         "mock/echo-2",
		"?q=ECHO":                           "mock/echo-2,mock/echo",
		"?context=10000":                    "mock/echo-2",
		"?max_price=1":                      "tollgate-mock,tollgate-mock:free,mock/echo",
		"?sort=pricing-high-to-low&q=echo":  "mock/echo-2,mock/echo",
		"?model_authors=mock":               "mock/echo-2,mock/echo",
		"?output_modalities=image":          "",
		"?output_modalities=all&providers=": all,
	} {
		if got := modelIDs(c.api("GET", "/models"+query, "", nil).expect(t, 200).JSON); got != want {
			t.Errorf("GET /models%s = %q, want %q", query, got, want)
		}
	}
	page := c.api("GET", "/models?q=echo&limit=1", "", nil).expect(t, 200)
	if modelIDs(page.JSON) != "mock/echo-2" || page.JSON.Get("total_count").Int() != 2 || page.JSON.Get("links.next").Str != "/api/v1/models?offset=1&limit=1&q=echo" {
		t.Errorf("filtered page: %s", page.Body)
	}
	c.api("GET", "/models?sort=most-popular", "", nil).expectError(t, 400, "sort: \"most-popular\": the gateway does not rank models by popularity")
	c.api("GET", "/models?category=programming", "", nil).expectError(t, 400, "category: ")
	c.api("GET", "/models?min_intelligence_index=50", "", nil).expectError(t, 400, "min_intelligence_index: ")
	if n := c.api("GET", "/models/count?output_modalities=text", "", nil).expect(t, 200).JSON.Get("data.count").Int(); n != 4 {
		t.Errorf("models/count = %d", n)
	}
}

// TestModelAlias: ~mock/echo-latest is served by mock/echo-2 on every
// route that names a model, and the answers and the records name it.
func TestModelAlias(t *testing.T) {
	c := startLookupCatalog(t)
	c.api("GET", "/models", "", nil).expect(t, 200)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"alias"}`)

	chat := c.api("POST", "/chat/completions", key, `{"model":"~mock/echo-latest","messages":[{"role":"user","content":"hi alias"}]}`).expect(t, 200)
	if chat.JSON.Get("model").Str != "mock/echo-2" {
		t.Errorf("chat answer: %s", chat.Body)
	}
	g := c.api("GET", "/generation?id="+chat.JSON.Get("id").Str, key, nil).expect(t, 200).JSON.Get("data")
	if g.Get("model").Str != "mock/echo-2" {
		t.Errorf("generation record: %s", g.Raw)
	}
	stream := c.api("POST", "/chat/completions", key, `{"model":"~mock/echo-latest","stream":true,"messages":[{"role":"user","content":"hi"}]}`).expect(t, 200)
	if !strings.Contains(string(stream.Body), `"model":"mock/echo-2"`) || strings.Contains(string(stream.Body), "echo-latest") {
		t.Errorf("stream: %s", stream.Body)
	}
	msg := c.api("POST", "/messages", key, `{"model":"~mock/echo-latest","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`).expect(t, 200)
	if msg.JSON.Get("model").Str != "mock/echo-2" {
		t.Errorf("messages answer: %s", msg.Body)
	}
	resp := c.api("POST", "/responses", key, `{"model":"~mock/echo-latest","input":"hi"}`).expect(t, 200)
	// A Responses answer passed through keeps the provider's own fields;
	// its record names the catalog model.
	if g := c.api("GET", "/generation?id="+resp.JSON.Get("id").Str, key, nil).expect(t, 200).JSON.Get("data"); g.Get("model").Str != "mock/echo-2" {
		t.Errorf("responses record: %s", g.Raw)
	}
	if n := c.api("POST", "/messages/count_tokens", key, `{"model":"~mock/echo-latest","messages":[{"role":"user","content":"hi"}]}`).
		expect(t, 200).JSON.Get("input_tokens").Int(); n <= 0 {
		t.Errorf("count_tokens = %d", n)
	}
	c.api("POST", "/responses/input_tokens", key, `{"model":"~mock/echo-latest","input":"hi"}`).expect(t, 200)
	if ep := c.api("GET", "/models/~mock/echo-latest/endpoints", "", nil).expect(t, 200); ep.JSON.Get("data.id").Str != "mock/echo-2" {
		t.Errorf("endpoints: %s", ep.Body)
	}

	c.api("POST", "/chat/completions", key, `{"model":"~mock/none-latest","messages":[{"role":"user","content":"hi"}]}`).
		expectError(t, 400, `model: unknown model "~mock/none-latest"`)
	c.api("POST", "/messages/count_tokens", key, `{"model":"~mock/none-latest","messages":[{"role":"user","content":"hi"}]}`).
		expectError(t, 400, `model: unknown model "~mock/none-latest"`)
}
