package integration

import (
	"testing"
)

// TestOpenRouterSDKModels lists the model catalog through the public
// @openrouter/sdk (models.list, models.listForUser), whose zod schemas
// validate every model strictly.
func TestOpenRouterSDKModels(t *testing.T) {
	node := requireNode(t)

	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	// A GET first: the client retries it on a keep-alive connection the
	// previous test's server closed.
	c.api("GET", "/models", "", nil).expect(t, 200)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-models"}`)

	runSDKScript(t, node, "models.mjs",
		"TOLLGATE_API_KEY="+key,
		"TOLLGATE_MGMT_KEY="+org.MgmtKey,
	)
}
