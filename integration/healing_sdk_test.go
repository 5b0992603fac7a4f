package integration

import "testing"

// TestHealingSDK runs the openai SDK with the response-healing plugin as
// an extra body field against the strict mock's broken JSON
// (sdk/healing.mjs): what the SDK hands the application parses.
func TestHealingSDK(t *testing.T) {
	node := requireNode(t)
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-healing"}`)
	runSDKScript(t, node, "healing.mjs", "TOLLGATE_API_KEY="+key)
}
