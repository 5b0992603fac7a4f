package integration

import "testing"

// TestSDKCompatStrictProvider runs both public SDKs against the gateway in
// front of the strict mock (sdk/compat.mjs): the gateway's own fields never
// reach the provider, streams end with usage although the client did not
// ask, answers carry the generation id, and the ids the client sees find
// the generation.
func TestSDKCompatStrictProvider(t *testing.T) {
	node := requireNode(t)
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	c.api("GET", "/models", "", nil).expect(t, 200)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-compat"}`)
	runSDKScript(t, node, "compat.mjs", "TOLLGATE_API_KEY="+key, "TOLLGATE_MGMT_KEY="+org.MgmtKey)
}

// TestGenerationLookupIsPerAccount: GET /generation finds the account's own
// generations by any id its client saw, and nobody else's.
func TestGenerationLookupIsPerAccount(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	other := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"a"}`)
	otherKey, _ := c.newKey(other.MgmtKey, `{"name":"b"}`)
	res := c.api("POST", "/responses", key, `{"model":"mock/echo","input":"hi"}`).expect(t, 200)
	respID, genID := res.JSON.Get("id").Str, res.Header.Get("X-Generation-Id")
	for _, id := range []string{genID, respID} {
		g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200)
		if g.JSON.Get("data.id").Str != genID || g.JSON.Get("data.upstream_id").Str != respID {
			t.Errorf("%s: %s", id, g.Body)
		}
		c.api("GET", "/generation?id="+id, org.MgmtKey, nil).expect(t, 200)
		c.api("GET", "/generation?id="+id, otherKey, nil).expectError(t, 404, "Generation not found")
	}
	c.api("GET", "/generation", key, nil).expectError(t, 400, "id")
	if n := c.api("GET", "/models/count", "", nil).expect(t, 200).JSON.Get("data.count").Int(); n != 3 {
		t.Errorf("models/count %d", n)
	}
	c.api("GET", "/models/tollgate/none/endpoints", "", nil).expectError(t, 404, "Model not found")
}
