package integration

import "testing"

// TestSDKPresets makes and reads presets through @openrouter/sdk
// (presets.*) and names one as the model through the openai SDK.
func TestSDKPresets(t *testing.T) {
	node := requireNode(t)
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-presets"}`)
	runSDKScript(t, node, "presets.mjs", "TOLLGATE_MGMT_KEY="+org.MgmtKey, "TOLLGATE_API_KEY="+key)
}
