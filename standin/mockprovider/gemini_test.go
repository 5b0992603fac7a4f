package mockprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/testgw"
)

func TestGeminiRefusesWhatGoogleRefuses(t *testing.T) {
	srv := mockServer(t, &Handler{})
	const path = "/v1beta/models/gemini-x:generateContent"
	const ok = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
	key := []string{"X-Goog-Api-Key", "AIza-test"}
	for _, tc := range []struct {
		name, path, body string
		header           []string
		status           int
		msg              string
	}{
		{"no key", path, ok, nil, http.StatusForbidden, "unregistered callers"},
		{"a bearer token at AI Studio", path, ok, append([]string{"Authorization", "Bearer x"}, key...), http.StatusUnauthorized, "OAuth 2"},
		{"vertex without a token", "/v1/projects/p/locations/l/publishers/google/models/gemini-x:generateContent", ok, []string{"Authorization", "Bearer forged"}, http.StatusUnauthorized, "OAuth 2"},
		{"unknown member", path, `{"model":"x","contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, key, http.StatusBadRequest, `Unknown name "model"`},
		{"unknown config", path, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"max_tokens":3}}`, key, http.StatusBadRequest, `Unknown name "max_tokens"`},
		{"unknown part", path, `{"contents":[{"role":"user","parts":[{"type":"text","text":"hi"}]}]}`, key, http.StatusBadRequest, `Unknown name "type"`},
		{"bad role", path, `{"contents":[{"role":"assistant","parts":[{"text":"hi"}]}]}`, key, http.StatusBadRequest, "valid role"},
		{"no contents", path, `{}`, key, http.StatusBadRequest, "contents is not specified"},
		{"ok", path, ok, key, http.StatusOK, ""},
	} {
		res := testgw.Post(t, srv, tc.path, tc.body, tc.header...)
		if res.Status != tc.status || !strings.Contains(gjson.Get(res.Body, "error.message").Str, tc.msg) {
			t.Errorf("%s: %d %s", tc.name, res.Status, res.Body)
		}
	}
	res := testgw.Post(t, srv, path, `{"contents":[{"role":"user","parts":[{"text":"one two"}]}],"generationConfig":{"maxOutputTokens":2}}`, key...)
	if a := gjson.Parse(res.Body); a.Get("candidates.0.finishReason").Str != "MAX_TOKENS" || a.Get("usageMetadata.candidatesTokenCount").Int() != 2 {
		t.Errorf("limited answer %s", res.Body)
	}
}

// A thinking model signs its function calls and, as Gemini 3, refuses a
// tool loop turn whose calls come back without their signature.
func TestGeminiThoughtSignatures(t *testing.T) {
	srv := mockServer(t, &Handler{})
	const path = "/v1beta/models/gemini-thinking:generateContent"
	key := []string{"X-Goog-Api-Key", "AIza-test"}
	tools := `"tools":[{"functionDeclarations":[{"name":"f"}]}]`
	res := testgw.Post(t, srv, path, `{"contents":[{"role":"user","parts":[{"text":"mock-tool-call: f {}"}]}],`+tools+`}`, key...)
	call := gjson.Get(res.Body, `candidates.0.content.parts.#(functionCall)`)
	if call.Get("thoughtSignature").Str != mockThoughtSignature {
		t.Fatalf("answer %s", res.Body)
	}
	loop := func(part string) string {
		return `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[` + part + `]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"ok":true}}}]}],` + tools + `}`
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"kept", path, loop(call.Raw), 200, ""},
		{"lost", path, loop(`{"functionCall":{"name":"f","args":{}}}`), 400, "missing a thought_signature"},
		{"forged", path, loop(`{"functionCall":{"name":"f","args":{}},"thoughtSignature":"Zm9yZ2Vk"}`), 400, "Corrupted thought signature"},
		{"a model that does not think", "/v1beta/models/gemini-x:generateContent", loop(`{"functionCall":{"name":"f","args":{}}}`), 200, ""},
		{"budget and level", "/v1beta/models/gemini-x:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":512,"thinkingLevel":"low"}}}`, 400, "only set one"},
		{"unknown level", "/v1beta/models/gemini-x:generateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingLevel":"max"}}}`, 400, "thinking_level"},
	} {
		res := testgw.Post(t, srv, tc.path, tc.body, key...)
		if res.Status != tc.status || !strings.Contains(gjson.Get(res.Body, "error.message").Str, tc.msg) {
			t.Errorf("%s: %d %s", tc.name, res.Status, res.Body)
		}
	}
}

// batchEmbedContents: one embedding per request, refused as Google
// refuses a member it does not define, another model or a part that is
// not text.
func TestGeminiEmbeddings(t *testing.T) {
	srv := mockServer(t, &Handler{})
	const path = "/v1beta/models/gemini-embedding:batchEmbedContents"
	key := []string{"X-Goog-Api-Key", "AIza-test"}
	res := testgw.Post(t, srv, path, `{"requests":[{"model":"models/gemini-embedding","content":{"parts":[{"text":"a"}]},"taskType":"RETRIEVAL_QUERY"},`+
		`{"model":"models/gemini-embedding","content":{"parts":[{"text":"b"}]},"outputDimensionality":3}]}`, key...)
	if e := gjson.Get(res.Body, "embeddings"); res.Status != 200 || len(e.Get("0.values").Array()) != 8 || len(e.Get("1.values").Array()) != 3 {
		t.Fatalf("%d %s", res.Status, res.Body)
	}
	for body, msg := range map[string]string{
		`{"requests":[{"model":"models/other","content":{"parts":[{"text":"a"}]}}]}`:                  "Model names should be the same",
		`{"requests":[{"model":"models/gemini-embedding","content":{"parts":[{"inlineData":{}}]}}]}`:  "only text parts",
		`{"requests":[{"model":"models/gemini-embedding","content":{"parts":[{"text":"a"}]},"x":1}]}`: `Unknown name "x"`,
		`{"requests":[],"model":"m"}`: `Unknown name "model"`,
		`{"requests":[{"model":"models/gemini-embedding","content":{"parts":[{"text":"a"}]},"taskType":"QUERY"}]}`: "task_type",
	} {
		if res := testgw.Post(t, srv, path, body, key...); res.Status != 400 || !strings.Contains(gjson.Get(res.Body, "error.message").Str, msg) {
			t.Errorf("%s: %d %s", body, res.Status, res.Body)
		}
	}
}
