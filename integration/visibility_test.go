package integration

// The filtered model catalog: with
// is_filtered_model_catalog_enabled, GET /models called with one of the
// organization's keys answers as GET /models/user; without a key, or for
// other accounts, it stays the public catalog.

import (
	"strings"
	"testing"
)

func TestFilteredModelCatalog(t *testing.T) {
	// own/only has no operator key: usable only through BYOK, so the
	// per-user catalog differs from the public one.
	startInProcessWith(t, withModels(t, modelBlock("own/only", "0.000001", "0.000002",
		testProvider{name: "ownonly", baseURL: "http://" + mockAddr + "/v1", model: "tollgate-mock"})))
	c := newClient(t, gatewayAddr, adminAddr)
	const publicIDs = "tollgate-mock,own/only,tollgate-mock:free,mock/echo"
	const userIDs = "tollgate-mock,tollgate-mock:free,mock/echo"

	public := c.api("GET", "/models", "", nil).expect(t, 200)
	if got := modelIDs(public.JSON); got != publicIDs || public.JSON.Get("total_count").Int() != 4 {
		t.Fatalf("public catalog: %s", public.Body)
	}
	org := c.newTenant("organization", "1")
	key, _ := c.newKey(org.MgmtKey, `{"name":"catalog"}`)
	user := c.api("GET", "/models/user", key, nil).expect(t, 200)
	if got := modelIDs(user.JSON); got != userIDs || user.JSON.Get("total_count").Int() != 3 {
		t.Fatalf("per-user catalog: %s", user.Body)
	}
	other := c.newTenant("organization", "1")
	otherKey, _ := c.newKey(other.MgmtKey, `{"name":"other org"}`)
	personal := c.newTenant("personal", "1")
	personalKey, _ := c.newKey(personal.MgmtKey, `{"name":"personal"}`)

	// expect checks GET /models (whole and paged) with key against want.
	expect := func(t *testing.T, key string, want response, wantPath, what string) {
		t.Helper()
		got := c.api("GET", "/models", key, nil).expect(t, 200)
		if string(got.Body) != string(want.Body) {
			t.Fatalf("%s: GET /models\n%s\nwant\n%s", what, got.Body, want.Body)
		}
		page := c.api("GET", "/models?offset=1&limit=1", key, nil).expect(t, 200)
		wantPage := c.api("GET", wantPath+"?offset=1&limit=1", key, nil).expect(t, 200)
		if modelIDs(page.JSON) != modelIDs(wantPage.JSON) || page.JSON.Get("total_count").Int() != wantPage.JSON.Get("total_count").Int() {
			t.Fatalf("%s: GET /models page %s, want the data of %s", what, page.Body, wantPage.Body)
		}
		if next := page.JSON.Get("links.next").Str; next != "/api/v1/models?offset=2&limit=1" {
			t.Fatalf("%s: links.next %q", what, next)
		}
	}

	// Off (the default): every key sees the public catalog.
	if c.api("GET", "/organization/settings", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.is_filtered_model_catalog_enabled").Bool() {
		t.Fatal("the setting is on by default")
	}
	expect(t, key, public, "/models", "setting off")

	// On: the organization's keys get the per-user catalog.
	s := c.api("PATCH", "/organization/settings", org.MgmtKey, `{"is_filtered_model_catalog_enabled":true}`).expect(t, 200)
	if !s.JSON.Get("data.is_filtered_model_catalog_enabled").Bool() || s.JSON.Get("data.id").Str != org.AccountID {
		t.Fatalf("PATCH settings: %s", s.Body)
	}
	expect(t, key, user, "/models/user", "setting on")
	newKey, _ := c.newKey(org.MgmtKey, `{"name":"created after"}`)
	expect(t, newKey, user, "/models/user", "setting on, a new key")
	// Without a key, and for other accounts, nothing changes.
	expect(t, "", public, "/models", "no key")
	expect(t, otherKey, public, "/models", "another organization")
	expect(t, personalKey, public, "/models", "a personal account")
	// The per-user route itself is unchanged.
	if got := c.api("GET", "/models/user", key, nil).expect(t, 200); string(got.Body) != string(user.Body) {
		t.Fatalf("GET /models/user with the setting on: %s", got.Body)
	}

	// A personal account cannot have the setting.
	c.api("GET", "/organization/settings", personal.MgmtKey, nil).expectError(t, 404, "")
	c.api("PATCH", "/organization/settings", personal.MgmtKey, `{"is_filtered_model_catalog_enabled":true}`).expectError(t, 404, "")
	expect(t, personalKey, public, "/models", "a personal account after its PATCH")

	// Off again: the public catalog.
	c.api("PATCH", "/organization/settings", org.MgmtKey, `{"is_filtered_model_catalog_enabled":false}`).expect(t, 200)
	expect(t, key, public, "/models", "setting off again")

	t.Run("reachable only through BYOK", func(t *testing.T) {
		c.api("PATCH", "/organization/settings", org.MgmtKey, `{"is_filtered_model_catalog_enabled":true}`).expect(t, 200)
		c.api("POST", "/byok", org.MgmtKey, `{"provider":"ownonly","key":"sk-own-only-provider-key-42"}`).expect(t, 201)
		// The organization can use the model through its own key...
		r := c.mustPost("/chat/completions", key, chatBody("own/only", ""), nil).expect(t, 200)
		if !strings.Contains(r.JSON.Get("choices.0.message.content").Str, "Mock answer from tollgate-mock:") {
			t.Fatalf("own/only through BYOK: %s", r.Body)
		}
		// ...so its per-user catalog should list it.
		u := c.api("GET", "/models/user", key, nil).expect(t, 200)
		if got := modelIDs(u.JSON); got != publicIDs {
			t.Fatalf("GET /models/user omits own/only, which the key can call through BYOK: %s", got)
		}
		expect(t, key, u, "/models/user", "BYOK model, setting on")
		c.mustPost("/chat/completions", otherKey, chatBody("own/only", ""), nil).expectError(t, 503, "No provider is available for model own/only")
		if got := modelIDs(c.api("GET", "/models/user", otherKey, nil).expect(t, 200).JSON); got != userIDs {
			t.Fatalf("another organization's per-user catalog lists the BYOK model: %s", got)
		}
	})
}
