package integration

import (
	"testing"
)

// TestResponsesSDK runs the public openai SDK (responses.create,
// responses.stream) and @openrouter/sdk (responses.send), plain and
// streamed, against the Responses route for a model served by a chat-only
// provider (translated) and one passed through to a provider that speaks
// Responses, with annotations in the conversation and in the answers; a
// stream that breaks mid-answer; a function call through the translation.
func TestResponsesSDK(t *testing.T) {
	node := requireNode(t)

	via := "http://" + mockAddr + "/v1"
	startInProcessWith(t, withModels(t,
		apiModel("rt/chat", [4]string{"chatty", via, "tollgate-mock-cite", "chat"}),
		apiModel("rt/native", [4]string{"native", via, "tollgate-mock-cite", "responses"}),
		apiModel("rt/break", [4]string{"chatty", via, "rt-stream-break", "chat"}),
		apiModel("rt/tool", [4]string{"tooling", scriptedChatUpstream(t), "tool-up", "chat"}),
	))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-responses"}`)

	runSDKScript(t, node, "responses.mjs",
		"TOLLGATE_API_KEY="+key,
		"TOLLGATE_MODELS=rt/chat,rt/native",
		"TOLLGATE_BREAK_MODEL=rt/break",
		"TOLLGATE_TOOL_MODEL=rt/tool",
	)
}
