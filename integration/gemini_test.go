package integration

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
)

// Gemini providers (style gemini) through a real Caddy: the mock's Gemini
// API (as strict as Google's: unknown members refused, API key or OAuth
// token required) behind a proxy that records what reaches it; on Google
// AI Studio with an API key, and on Vertex AI with a service account key
// exchanged for tokens at the mock's token endpoint.

// serviceAccountFile writes a service account JSON key whose token_uri is
// the mock's token endpoint.
func serviceAccountFile(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "acme-prod", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "tollgate@acme-prod.iam.gserviceaccount.com", "client_id": "1",
		"token_uri": "http://" + mockAddr + "/token",
	})
	path := filepath.Join(t.TempDir(), "vertex-sa.json")
	if err := os.WriteFile(path, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// withGeminiModels adds google/gemini-mock (AI Studio), its thinking and
// cached variant, an embedding model, a safety-blocked one, a rate-limited one that falls
// back to an Azure deployment, a broken stream, and google/vertex (Vertex
// AI), all through tap.
func withGeminiModels(t *testing.T, tap *callTap, saFile string) func(string) string {
	pricing := "\t\t\tpricing {\n\t\t\t\tprompt 0.000003\n\t\t\t\tcompletion 0.000015\n\t\t\t\tinput_cache_read 0.0000003\n\t\t\t}\n"
	studio := func(model string) string {
		return fmt.Sprintf("\t\t\tprovider google %s/v1beta {\n\t\t\t\tstyle gemini\n\t\t\t\tmodel %s\n\t\t\t\tapi_key goog-operator-key\n\t\t\t}\n", tap.srv.URL, model)
	}
	model := func(id, providers string) string {
		return "\t\tmodel " + id + " {\n\t\t\tcontext_length 8192\n\t\t\tmax_completion_tokens 1000\n" + pricing + providers + "\t\t}\n"
	}
	block := model("google/gemini-mock", studio("gemini-mock")) +
		model("google/gemini-thinking", studio("gemini-thinking-cached")) +
		model("google/gemini-safety", studio("gemini-safety")) +
		model("google/gemini-embed", studio("gemini-embedding")) +
		model("google/gemini-break", studio("gemini-stream-break")) +
		model("google/gemini-garbage", studio("gemini-error-garbage")) +
		model("google/gemini-fallback", studio("gemini-error-429")+fmt.Sprintf("\t\t\tprovider azure %s {\n\t\t\t\tstyle azure\n\t\t\t\tmodel gpt-mock\n"+
			"\t\t\t\tdeployment gpt-prod\n\t\t\t\tapi_version 2024-10-21\n\t\t\t\tapi_key az-operator-key\n\t\t\t}\n", tap.srv.URL)) +
		model("google/vertex", fmt.Sprintf("\t\t\tprovider vertex %s/v1/projects/acme-prod/locations/us-central1/publishers/google {\n"+
			"\t\t\t\tstyle gemini\n\t\t\t\tauth service_account\n\t\t\t\tmodel gemini-mock\n\t\t\t\tapi_key {file.%s}\n\t\t\t}\n", tap.srv.URL, saFile))
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// expectGeminiCall checks that one request reached AI Studio as Google
// wants it and returns it.
func expectGeminiCall(t *testing.T, calls []azureCall, method string) azureCall {
	t.Helper()
	if len(calls) != 1 {
		t.Fatalf("%d upstream calls, want 1", len(calls))
	}
	c := calls[0]
	query := ""
	if method == "streamGenerateContent" {
		query = "alt=sse"
	}
	if c.path != "/v1beta/models/gemini-mock:"+method || c.query != query || c.header.Get("X-Goog-Api-Key") != "goog-operator-key" ||
		c.header.Get("Authorization") != "" {
		t.Errorf("upstream call %s?%s x-goog-api-key %q authorization %q", c.path, c.query, c.header.Get("X-Goog-Api-Key"), c.header.Get("Authorization"))
	}
	return c
}

func TestGeminiProvider(t *testing.T) {
	tap := newCallTap(t)
	startInProcessWith(t, withGeminiModels(t, tap, serviceAccountFile(t)))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"gemini"}`)
	const text = "Mock answer from gemini-mock: hello gemini"

	t.Run("chat", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"google/gemini-mock","messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"hello gemini"}],"max_tokens":40,"top_k":3,"logit_bias":{"1":2}}`, nil).expect(t, 200)
		call := expectGeminiCall(t, tap.take(), "generateContent")
		b := call.body
		if b.Get("systemInstruction.parts.0.text").Str != "Be brief" || b.Get("contents.0.role").Str != "user" ||
			b.Get("generationConfig.maxOutputTokens").Int() != 40 || b.Get("generationConfig.topK").Int() != 3 || b.Get("model").Exists() {
			t.Errorf("upstream body %s", b.Raw)
		}
		a := r.JSON
		if a.Get("choices.0.message.content").Str != text || a.Get("choices.0.finish_reason").Str != "stop" ||
			a.Get("provider").Str != "google" || a.Get("model").Str != "google/gemini-mock" || !strings.HasPrefix(a.Get("id").Str, "gen-") {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, a.Get("usage"), 0) // the Claude test model's prices

		evs := c.streamOf(t, "/chat/completions", key, `{"model":"google/gemini-mock","stream":true,"messages":[{"role":"user","content":"hello gemini"}]}`)
		expectGeminiCall(t, tap.take(), "streamGenerateContent")
		s := parseStream(t, evs)
		if !s.done || s.text != text {
			t.Errorf("stream text %q done %v", s.text, s.done)
		}
		expectClaudeCost(t, s.usage, 0)
	})

	t.Run("output limit", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"google/gemini-mock","messages":[{"role":"user","content":"hello gemini"}],"max_completion_tokens":3}`, nil).expect(t, 200)
		call := expectGeminiCall(t, tap.take(), "generateContent")
		if call.body.Get("generationConfig.maxOutputTokens").Int() != 3 || r.JSON.Get("choices.0.finish_reason").Str != "length" ||
			r.JSON.Get("usage.completion_tokens").Int() != 3 {
			t.Errorf("upstream %s answer %s", call.body.Raw, r.Body)
		}
	})

	t.Run("responses and messages", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/responses", key, `{"model":"google/gemini-mock","instructions":"Be brief","input":"hello gemini","max_output_tokens":50}`, nil).expect(t, 200)
		call := expectGeminiCall(t, tap.take(), "generateContent")
		if call.body.Get("systemInstruction.parts.0.text").Str != "Be brief" || call.body.Get("generationConfig.maxOutputTokens").Int() != 50 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		if r.JSON.Get("output.0.content.0.text").Str != text {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, r.JSON.Get("usage"), 0)
		evs := c.streamOf(t, "/responses", key, `{"model":"google/gemini-mock","input":"hello gemini","stream":true}`)
		expectGeminiCall(t, tap.take(), "streamGenerateContent")
		if s := parseStream(t, evs); s.finalEvent != "response.completed" || s.text != text {
			t.Errorf("stream %q ended by %s", s.text, s.finalEvent)
		}

		r = c.mustPost("/messages", key, `{"model":"google/gemini-mock","max_tokens":60,"system":"Be brief","messages":[{"role":"user","content":"hello gemini"}]}`, nil).expect(t, 200)
		call = expectGeminiCall(t, tap.take(), "generateContent")
		if call.body.Get("generationConfig.maxOutputTokens").Int() != 60 {
			t.Errorf("upstream body %s", call.body.Raw)
		}
		if r.JSON.Get("type").Str != "message" || r.JSON.Get("content.0.text").Str != text || r.JSON.Get("usage.output_tokens").Int() == 0 {
			t.Errorf("answer %s", r.Body)
		}
		res, err := c.send("/messages", key, `{"model":"google/gemini-mock","max_tokens":60,"stream":true,"messages":[{"role":"user","content":"hello gemini"}]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(stream), "event: message_stop") || !strings.Contains(string(stream), `"text":" gemini"`) {
			t.Errorf("messages stream %d %s", res.StatusCode, stream)
		}
		expectGeminiCall(t, tap.take(), "streamGenerateContent")
	})

	t.Run("tool calls", func(t *testing.T) {
		tap.take()
		tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		r := c.mustPost("/chat/completions", key, `{"model":"google/gemini-mock",`+tools+`,"messages":[{"role":"user","content":"mock-tool-call: get_weather {\"city\":\"Paris\"}"}]}`, nil).expect(t, 200)
		call := r.JSON.Get("choices.0.message.tool_calls.0")
		if r.JSON.Get("choices.0.finish_reason").Str != "tool_calls" || call.Get("function.name").Str != "get_weather" ||
			gjson.Get(call.Get("function.arguments").Str, "city").Str != "Paris" {
			t.Fatalf("answer %s", r.Body)
		}
		up := expectGeminiCall(t, tap.take(), "generateContent")
		if up.body.Get("tools.0.functionDeclarations.0.name").Str != "get_weather" || !up.body.Get("tools.0.functionDeclarations.0.parametersJsonSchema").IsObject() {
			t.Errorf("upstream tools %s", up.body.Get("tools").Raw)
		}
		next := `{"model":"google/gemini-mock",` + tools + `,"messages":[{"role":"user","content":"weather?"},` +
			`{"role":"assistant","content":null,"tool_calls":[` + call.Raw + `]},{"role":"tool","tool_call_id":"` + call.Get("id").Str + `","content":"sunny, 21C"}]}`
		r = c.mustPost("/chat/completions", key, next, nil).expect(t, 200)
		up = expectGeminiCall(t, tap.take(), "generateContent")
		if up.body.Get("contents.1.parts.0.functionCall.name").Str != "get_weather" || up.body.Get("contents.2.parts.0.functionResponse.response.content").Str != "sunny, 21C" {
			t.Errorf("upstream contents %s", up.body.Get("contents").Raw)
		}
		if got := r.JSON.Get("choices.0.message.content").Str; got != "Mock answer from gemini-mock: tool result sunny, 21C" {
			t.Errorf("answer %q", got)
		}
	})

	t.Run("thinking tool loop", func(t *testing.T) {
		tap.take()
		tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		ask := `{"role":"user","content":"mock-tool-call: get_weather {\"city\":\"Paris\"}"}`
		first := c.mustPost("/chat/completions", key, `{"model":"google/gemini-thinking",`+tools+`,"messages":[`+ask+`]}`, nil).expect(t, 200)
		tap.take()
		msg := first.JSON.Get("choices.0.message")
		call := msg.Get("tool_calls.0")
		sig := msg.Get(`reasoning_details.#(type=="reasoning.encrypted")`)
		if sig.Get("format").Str != "google-gemini-v1" || sig.Get("id").Str != call.Get("id").Str || sig.Get("data").Str == "" {
			t.Fatalf("answer %s", first.Body)
		}
		result := `{"role":"tool","tool_call_id":"` + call.Get("id").Str + `","content":"sunny, 21C"}`
		// The message as the answer gave it: the signature goes back on
		// its function call's part.
		r := c.mustPost("/chat/completions", key, `{"model":"google/gemini-thinking",`+tools+`,"messages":[`+ask+`,`+msg.Raw+`,`+result+`]}`, nil).expect(t, 200)
		calls := tap.take()
		if len(calls) != 1 {
			t.Fatalf("%d upstream calls", len(calls))
		}
		if p := calls[0].body.Get("contents.1.parts.0"); p.Get("thoughtSignature").Str != sig.Get("data").Str || !p.Get("functionCall").Exists() {
			t.Errorf("upstream contents %s", calls[0].body.Get("contents").Raw)
		}
		if got := r.JSON.Get("choices.0.message.content").Str; got != "Mock answer from gemini-thinking-cached: tool result sunny, 21C" {
			t.Errorf("answer %s", r.Body)
		}
		// Streamed, the signature is a delta's reasoning_details entry.
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"google/gemini-thinking","stream":true,`+tools+`,"messages":[`+ask+`]}`)
		tap.take()
		streamed := ""
		for _, ev := range evs {
			for _, d := range gjson.Get(ev.Data, "choices.0.delta.reasoning_details").Array() {
				if d.Get("type").Str == "reasoning.encrypted" && d.Get("id").Str == call.Get("id").Str {
					streamed = d.Get("data").Str
				}
			}
		}
		if streamed != sig.Get("data").Str {
			t.Errorf("streamed signature %q", streamed)
		}
		// Without it, the thinking model refuses the turn.
		bare, _ := sjson.Delete(msg.Raw, "reasoning_details")
		res := c.mustPost("/chat/completions", key, `{"model":"google/gemini-thinking",`+tools+`,"messages":[`+ask+`,`+bare+`,`+result+`]}`, nil)
		tap.take()
		if res.Status != 400 || !strings.Contains(string(res.Body), "missing a thought_signature") {
			t.Errorf("without reasoning_details: %d %s", res.Status, res.Body)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		tap.take()
		ekey, _ := c.newKey(org.MgmtKey, `{"name":"embeddings"}`)
		before := c.snapshot(ekey, org.MgmtKey)
		r := c.mustPost("/embeddings", ekey, `{"model":"google/gemini-embed","input":["hello gemini","second text"],"dimensions":4,"input_type":"search_query"}`, nil).expect(t, 200)
		calls := tap.take()
		if len(calls) != 1 || calls[0].path != "/v1beta/models/gemini-embedding:batchEmbedContents" || calls[0].header.Get("X-Goog-Api-Key") != "goog-operator-key" ||
			calls[0].body.Get("requests.1.content.parts.0.text").Str != "second text" || calls[0].body.Get("requests.0.taskType").Str != "RETRIEVAL_QUERY" ||
			calls[0].body.Get("requests.0.outputDimensionality").Int() != 4 {
			t.Fatalf("upstream calls %+v", calls)
		}
		a := r.JSON
		if a.Get("object").Str != "list" || len(a.Get("data").Array()) != 2 || len(a.Get("data.1.embedding").Array()) != 4 ||
			a.Get("data.1.index").Int() != 1 || a.Get("data.0.object").Str != "embedding" {
			t.Errorf("answer %s", r.Body)
		}
		// Gemini reports no token count: the gateway's count is the usage,
		// charged at the prompt price.
		prompt := a.Get("usage.prompt_tokens").Int()
		want, _ := billing.Cost(billing.Pricing{Prompt: mustParsePrice("0.000003")}, billing.Usage{PromptTokens: prompt})
		if prompt < 1 || a.Get("usage.total_tokens").Int() != prompt || creditAmount(t, a.Get("usage.cost")) != want {
			t.Errorf("usage %s, want cost %s", a.Get("usage").Raw, want)
		}
		expectCharged(t, before, c.snapshot(ekey, org.MgmtKey), want, "gemini embeddings")

		// Inputs Gemini's embedding models do not take: 400 naming them,
		// nothing sent.
		for body, msg := range map[string]string{
			`{"model":"google/gemini-embed","input":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`: `input[0].content[0].type: "image_url" is not taken by Gemini providers' embeddings`,
			`{"model":"google/gemini-embed","input":[[1,2,3]]}`:                                                                             "input[0]: token ids are not taken by Gemini providers",
		} {
			c.mustPost("/embeddings", ekey, body, nil).expectError(t, 400, msg)
		}
		if calls := tap.take(); len(calls) != 0 {
			t.Errorf("refused inputs reached the provider: %+v", calls)
		}
		// A chat model of the same provider still answers chat.
		c.mustPost("/chat/completions", ekey, `{"model":"google/gemini-mock","messages":[{"role":"user","content":"hello"}]}`, nil).expect(t, 200)
		tap.take()
	})

	t.Run("safety block", func(t *testing.T) {
		r := c.mustPost("/chat/completions", key, `{"model":"google/gemini-safety","messages":[{"role":"user","content":"hello"}]}`, nil).expect(t, 200)
		if r.JSON.Get("choices.0.finish_reason").Str != "content_filter" || r.JSON.Get("choices.0.message.content").Str != "" {
			t.Errorf("answer %s", r.Body)
		}
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"google/gemini-safety","stream":true,"messages":[{"role":"user","content":"hello"}]}`)
		finish := ""
		for _, ev := range evs {
			if f := gjson.Get(ev.Data, "choices.0.finish_reason").Str; f != "" {
				finish = f
			}
		}
		if finish != "content_filter" || evs[len(evs)-1].Data != "[DONE]" {
			t.Errorf("stream %+v", evs)
		}
	})

	t.Run("cached and thinking tokens priced", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"google/gemini-thinking","reasoning":{"effort":"low"},"messages":[{"role":"user","content":"hello gemini with a longer prompt"}]}`, nil).expect(t, 200)
		u := r.JSON.Get("usage")
		if u.Get("prompt_tokens_details.cached_tokens").Int() != u.Get("prompt_tokens").Int()/2 || u.Get("completion_tokens_details.reasoning_tokens").Int() != 5 ||
			r.JSON.Get("choices.0.message.reasoning").Str != "Considering the question." {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, u, 0)
		up := tap.take()
		if len(up) != 1 || up[0].body.Get("generationConfig.thinkingConfig.thinkingBudget").Int() != 1024 {
			t.Errorf("upstream %+v", up)
		}
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"google/gemini-thinking","stream":true,"messages":[{"role":"user","content":"hello gemini with a longer prompt"}]}`)
		s := parseStream(t, evs)
		if s.usage.Get("completion_tokens_details.reasoning_tokens").Int() != 5 || s.usage.Get("prompt_tokens_details.cached_tokens").Int() == 0 {
			t.Errorf("stream usage %s", s.usage.Raw)
		}
		expectClaudeCost(t, s.usage, 0)
	})

	t.Run("fallback to another dialect", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"google/gemini-fallback","messages":[{"role":"user","content":"hello azure"}]}`, nil).expect(t, 200)
		calls := tap.take()
		if len(calls) != 2 || calls[0].path != "/v1beta/models/gemini-error-429:generateContent" || !strings.HasPrefix(calls[1].path, "/openai/deployments/") ||
			calls[1].header.Get("X-Goog-Api-Key") != "" || calls[1].header.Get("Api-Key") != "az-operator-key" {
			t.Fatalf("upstream calls %+v", calls)
		}
		if r.JSON.Get("provider").Str != "azure" || r.JSON.Get("choices.0.message.content").Str != "Mock answer from gpt-mock: hello azure" {
			t.Errorf("answer %s", r.Body)
		}
	})

	t.Run("mid-stream error", func(t *testing.T) {
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"google/gemini-break","stream":true,"messages":[{"role":"user","content":"one two three four five six"}]}`)
		last := ""
		for _, ev := range evs {
			if gjson.Get(ev.Data, "error").Exists() {
				last = gjson.Get(ev.Data, "choices.0.finish_reason").Str
			}
		}
		if last != "error" || evs[len(evs)-1].Data != "[DONE]" {
			t.Errorf("stream %+v", evs)
		}
	})

	t.Run("vertex", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"google/vertex","messages":[{"role":"user","content":"hello gemini"}]}`, nil).expect(t, 200)
		calls := tap.take()
		if len(calls) != 1 || calls[0].path != "/v1/projects/acme-prod/locations/us-central1/publishers/google/models/gemini-mock:generateContent" ||
			!strings.HasPrefix(calls[0].header.Get("Authorization"), "Bearer ya29.mock-") || calls[0].header.Get("X-Goog-Api-Key") != "" {
			t.Fatalf("upstream calls %+v", calls)
		}
		if r.JSON.Get("choices.0.message.content").Str != text || r.JSON.Get("provider").Str != "vertex" {
			t.Errorf("answer %s", r.Body)
		}
	})
}

// Caps and clamping in each dialect's output-limit field, and an answer
// that does not parse: a 502 naming the provider, its hold released.
func TestDialectClampAndInvalidAnswer(t *testing.T) {
	tap := newCallTap(t)
	startInProcessWith(t, func(cfg string) string {
		return withAzureModels(t, tap)(withGeminiModels(t, tap, serviceAccountFile(t))(cfg))
	})
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	const prompt = `"messages":[{"role":"user","content":"hello there"}]`

	for _, tc := range []struct{ model, field string }{
		{"google/gemini-mock", "generationConfig.maxOutputTokens"},
		{"azure/gpt-mock", "max_tokens"},
	} {
		t.Run("clamped "+tc.model, func(t *testing.T) {
			// 1,000 output tokens cost 0.015: a 0.005 cap affords a third.
			key, _ := c.newKey(org.MgmtKey, `{"name":"small","limit":0.005}`)
			tap.take()
			r := c.mustPost("/chat/completions", key, `{"model":"`+tc.model+`",`+prompt+`}`, nil).expect(t, 200)
			calls := tap.take()
			if len(calls) != 1 {
				t.Fatalf("%d upstream calls", len(calls))
			}
			limit := calls[0].body.Get(tc.field).Int()
			if limit < 250 || limit > 333 {
				t.Fatalf("upstream %s = %d, want the cap's share (%s)", tc.field, limit, calls[0].body.Raw)
			}
			after := c.snapshot(key, org.MgmtKey)
			if cost := creditAmount(t, r.JSON.Get("usage.cost")); after.usage != cost || cost == 0 || *after.remaining != 5_000_000-cost {
				t.Errorf("charged %s, usage %s, remaining %s", cost, after.usage, *after.remaining)
			}
		})
	}

	for _, tc := range []struct{ model, provider string }{
		{"google/gemini-garbage", "google"},
	} {
		t.Run("invalid answer "+tc.model, func(t *testing.T) {
			// The cap fits one full hold (1,000 output tokens): a hold the
			// 502 kept would clamp the next request.
			key, _ := c.newKey(org.MgmtKey, `{"name":"one","limit":0.02}`)
			r := c.mustPost("/chat/completions", key, `{"model":"`+tc.model+`",`+prompt+`}`, nil).expect(t, 502)
			if got := r.JSON.Get("error.metadata.provider_name").Str; got != tc.provider || r.JSON.Get("error.code").Int() != 502 {
				t.Errorf("error %s", r.Body)
			}
			if s := c.snapshot(key, org.MgmtKey); s.usage != 0 || *s.remaining != 20_000_000 {
				t.Errorf("after the 502: usage %s remaining %s", s.usage, *s.remaining)
			}
			tap.take()
			c.mustPost("/chat/completions", key, `{"model":"google/gemini-mock",`+prompt+`}`, nil).expect(t, 200)
			if calls := tap.take(); len(calls) != 1 || calls[0].body.Get("generationConfig.maxOutputTokens").Int() != 1000 {
				t.Errorf("the next request was clamped: %+v", calls)
			}
		})
	}
}
