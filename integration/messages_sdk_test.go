package integration

import "testing"

// TestMessagesSDK runs the public @anthropic-ai/sdk (messages.create,
// messages.stream, tool use, a 402, a Claude-Code-like request) against
// the Messages route, with only the SDK's base URL changed.
func TestMessagesSDK(t *testing.T) {
	node := requireNode(t)
	startInProcessWith(t, withModels(t,
		apiModel("mx/tool", [4]string{"tooling", scriptedChatUpstream(t), "tool-up", "chat"}),
	))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-messages"}`)
	capped, _ := c.newKey(org.MgmtKey, `{"name":"sdk-messages-capped","limit":0.001}`)

	runSDKScript(t, node, "messages.mjs",
		"TOLLGATE_API_KEY="+key,
		"TOLLGATE_CAPPED_KEY="+capped,
		"TOLLGATE_TOOL_MODEL=mx/tool",
	)
}
