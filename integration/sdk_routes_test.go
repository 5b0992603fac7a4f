package integration

import "testing"

// TestSDKRoutes reranks and generates images through @openrouter/sdk
// (rerank.rerank, images.generate) and the openai SDK (images.generate),
// against the strict Cohere-style and OpenAI-images doubles.
func TestSDKRoutes(t *testing.T) {
	node := requireNode(t)
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string {
		return withImageModels(t, proxy)(withRerankModels(t, proxy)(withCountingProxy(proxy)(cfg)))
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-routes"}`)
	runSDKScript(t, node, "routes.mjs", "TOLLGATE_API_KEY="+key)
}
