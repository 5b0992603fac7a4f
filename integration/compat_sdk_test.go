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
