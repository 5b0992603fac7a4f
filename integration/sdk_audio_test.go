package integration

import "testing"

// TestSDKAudio speaks and transcribes through @openrouter/sdk
// (tts.createSpeech, stt.createTranscription and its multipart form) and
// the openai SDK (audio.speech.create, audio.transcriptions.create),
// against the strict OpenAI-audio double.
func TestSDKAudio(t *testing.T) {
	node := requireNode(t)
	proxy := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string { return withAudioModels(t, proxy)(withCountingProxy(proxy)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-audio"}`)
	runSDKScript(t, node, "audio.mjs", "TOLLGATE_API_KEY="+key)
}
