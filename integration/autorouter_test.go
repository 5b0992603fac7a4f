package integration

import (
	"strings"
	"testing"
)

// withAutoRouter adds two candidates to the catalog, a small cheap one
// without tools and a wide one with, and declares them to the auto
// router in that order.
func withAutoRouter(t *testing.T) func(string) string {
	via := "http://" + mockAddr + "/v1"
	return chain(
		withModels(t,
			"\t\tmodel auto/tiny {\n\t\t\tcontext_length 400\n\t\t\tpricing {\n\t\t\t\tprompt 0.0000001\n\t\t\t\tcompletion 0.0000002\n\t\t\t}\n"+
				"\t\t\tprovider mock "+via+" {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t\tsupported_parameters max_tokens temperature\n\t\t\t}\n\t\t}\n",
			"\t\tmodel auto/wide {\n\t\t\tcontext_length 100000\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
				"\t\t\tprovider mock "+via+" {\n\t\t\t\tmodel tollgate-mock\n\t\t\t\tapi_key mock\n\t\t\t}\n\t\t}\n",
		),
		withTollgateOptions(t, "plugins {\n\t\t\tauto_router {\n\t\t\t\tmodels auto/tiny auto/wide\n\t\t\t}\n\t\t}"),
	)
}

// TestAutoRouter sends requests to the brand's auto model through a real
// Caddy: each is served, held and charged as the candidate its needs
// choose, which the answer (chat, streamed, Responses, Messages) and the
// generation name, the auto model being the generation's router.
func TestAutoRouter(t *testing.T) {
	startInProcessWith(t, withAutoRouter(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"auto"}`)
	const hi = `"messages":[{"role":"user","content":"hi"}]`
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{}}}}]`

	generation := func(id string) (model, router string, cost float64) {
		g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON.Get("data")
		return g.Get("model").Str, g.Get("router").Str, g.Get("total_cost").Float()
	}
	for _, tc := range []struct{ name, body, want string }{
		{"small prompt: the first candidate", `{"model":"service/auto",` + hi + `}`, "auto/tiny"},
		{"the reference's id", `{"model":"openrouter/auto",` + hi + `}`, "auto/tiny"},
		{"tools", `{"model":"service/auto",` + hi + `,` + tools + `}`, "auto/wide"},
		{"prompt and output past the small window", `{"model":"service/auto",` + hi + `,"max_tokens":350}`, "auto/wide"},
		{"excluded by the request", `{"model":"service/auto",` + hi + `,"plugins":[{"id":"auto-router","excluded_models":["*/tiny"]}]}`, "auto/wide"},
	} {
		r := c.mustPost("/chat/completions", key, tc.body, nil).expect(t, 200)
		if got := r.JSON.Get("model").Str; got != tc.want {
			t.Errorf("%s: answer's model %q, want %q", tc.name, got, tc.want)
		}
		model, router, cost := generation(r.JSON.Get("id").Str)
		wantRouter := "service/auto"
		if strings.Contains(tc.body, "openrouter/auto") {
			wantRouter = "openrouter/auto"
		}
		if model != tc.want || router != wantRouter {
			t.Errorf("%s: generation model %q router %q", tc.name, model, router)
		}
		// Charged at the chosen model's prices.
		u := r.JSON.Get("usage")
		price := map[string][2]float64{"auto/tiny": {1e-7, 2e-7}, "auto/wide": {1e-6, 2e-6}}[tc.want]
		want := u.Get("prompt_tokens").Float()*price[0] + u.Get("completion_tokens").Float()*price[1]
		if d := cost - want; d > 1e-12 || d < -1e-12 || u.Get("cost").Float() != cost {
			t.Errorf("%s: charged %v (answer %v), want %v", tc.name, cost, u.Get("cost").Float(), want)
		}
	}

	// A stream names the chosen model in every chunk.
	r := c.mustPost("/chat/completions", key, `{"model":"service/auto","stream":true,`+hi+`}`, nil).expect(t, 200)
	chunks := 0
	for _, line := range strings.Split(string(r.Body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		chunks++
		if !strings.Contains(data, `"model":"auto/tiny"`) {
			t.Errorf("stream chunk without the chosen model: %s", data)
		}
	}
	if chunks == 0 {
		t.Errorf("no stream chunks: %s", r.Body)
	}

	// Responses and Messages.
	r = c.mustPost("/responses", key, `{"model":"service/auto","input":"hi"}`, nil).expect(t, 200)
	if got := r.JSON.Get("model").Str; got != "auto/tiny" {
		t.Errorf("responses: model %q", got)
	}
	r = c.mustPost("/responses", key, `{"model":"service/auto","input":"hi","stream":true}`, nil).expect(t, 200)
	if named := strings.Count(string(r.Body), `"model":"auto/tiny"`); named == 0 || strings.Contains(string(r.Body), `"model":"tollgate-mock`) {
		t.Errorf("responses stream: the chosen model named %d times: %s", named, r.Body)
	}
	r = c.mustPost("/messages", key, `{"model":"service/auto","max_tokens":16,`+hi+`}`, nil).expect(t, 200)
	if got := r.JSON.Get("model").Str; got != "auto/tiny" {
		t.Errorf("messages: model %q", got)
	}
	r = c.mustPost("/messages", key, `{"model":"service/auto","max_tokens":16,`+hi+`,"tools":[{"name":"f","input_schema":{"type":"object"}}]}`, nil).expect(t, 200)
	if got := r.JSON.Get("model").Str; got != "auto/wide" {
		t.Errorf("messages with tools: model %q", got)
	}

	// Only the candidates the key may use: a guardrail that allows the
	// wide model alone has it serve a prompt the tiny one fits; one that
	// allows neither leaves none.
	narrow, narrowHash := c.newKey(org.MgmtKey, `{"name":"auto-narrow"}`)
	g := c.api("POST", "/guardrails", org.MgmtKey, `{"name":"Wide only","allowed_models":["auto/wide"]}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/keys", org.MgmtKey, `{"key_hashes":["`+narrowHash+`"]}`).expect(t, 200)
	r = c.mustPost("/chat/completions", narrow, `{"model":"service/auto",`+hi+`}`, nil).expect(t, 200)
	if got := r.JSON.Get("model").Str; got != "auto/wide" {
		t.Errorf("guardrail allowing auto/wide: model %q", got)
	}
	c.api("PATCH", "/guardrails/"+g, org.MgmtKey, `{"allowed_models":["tollgate-mock"]}`).expect(t, 200)
	c.mustPost("/chat/completions", narrow, `{"model":"service/auto",`+hi+`}`, nil).
		expectError(t, 400, "model: the auto router has no candidate this key may use")

	// Nothing fits; a plugin option refused: 400s naming why, nothing charged.
	usage := func() string {
		return c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.total_usage").Raw
	}
	before := usage()
	c.mustPost("/chat/completions", key, `{"model":"service/auto",`+hi+`,"max_tokens":200000}`, nil).
		expectError(t, 400, "model: no candidate of the auto router fits the request (auto/tiny: the prompt's")
	c.mustPost("/chat/completions", key, `{"model":"service/auto",`+hi+`,"plugins":[{"id":"auto-router","allowed_models":["other/*"]}]}`, nil).
		expectError(t, 400, "plugins[0].allowed_models: no candidate of the auto router is left")
	c.mustPost("/chat/completions", key, `{"model":"service/auto",`+hi+`,"plugins":[{"id":"auto-router","pin_model":true}]}`, nil).
		expectError(t, 400, "plugins[0].pin_model: not offered by this gateway")
	if after := usage(); after != before {
		t.Errorf("the refusals were charged: usage %s, then %s", before, after)
	}
}

// TestAutoRouterSDK asks the openai SDK for the auto model
// (sdk/autorouter.mjs).
func TestAutoRouterSDK(t *testing.T) {
	node := requireNode(t)
	startInProcessWith(t, withAutoRouter(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-auto"}`)
	runSDKScript(t, node, "autorouter.mjs", "TOLLGATE_API_KEY="+key)
}
