package integration

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/standin/mockprovider"
)

// Amazon Bedrock providers (style bedrock) through a real Caddy: the
// mock's Converse API (every request's Signature V4 verified, unknown
// members refused, streams as AWS event-stream frames) behind a proxy
// that records what reaches it.

// withBedrockModels adds amazon/claude (Bedrock), its cached variant, the
// same with room for extended thinking (amazon/thinker), Titan's and
// Cohere's embedding models, a broken stream, an answer that does not parse, a forged key, and a
// throttled model that falls back to a Gemini provider.
func withBedrockModels(t *testing.T, tap *callTap) func(string) string {
	pricing := "\t\t\tpricing {\n\t\t\t\tprompt 0.000003\n\t\t\t\tcompletion 0.000015\n\t\t\t\tinput_cache_read 0.0000003\n\t\t\t}\n"
	key := mockprovider.BedrockAccessKeyID + ":" + mockprovider.BedrockSecretKey
	bedrock := func(model, key string) string {
		return fmt.Sprintf("\t\t\tprovider bedrock %s {\n\t\t\t\tstyle bedrock\n\t\t\t\taws_region us-east-1\n\t\t\t\tmodel %s\n\t\t\t\tapi_key %s\n\t\t\t}\n", tap.srv.URL, model, key)
	}
	model := func(id, providers string) string {
		return "\t\tmodel " + id + " {\n\t\t\tcontext_length 8192\n\t\t\tmax_completion_tokens 1000\n" + pricing + providers + "\t\t}\n"
	}
	block := model("amazon/claude", bedrock("claude-mock", key)) +
		model("amazon/cached", bedrock("claude-cached", key)) +
		model("amazon/break", bedrock("claude-stream-break", key)) +
		model("amazon/garbage", bedrock("claude-error-garbage", key)) +
		strings.Replace(model("amazon/thinker", bedrock("claude-mock", key)), "max_completion_tokens 1000", "max_completion_tokens 4000", 1) +
		model("amazon/titan-embed", bedrock("amazon.titan-embed-text-v2", key)) +
		model("amazon/titan-image", bedrock("amazon.titan-embed-image-v1", key)) +
		model("cohere/embed", bedrock("cohere.embed-english-v3", key)) +
		strings.Replace(model("amazon/hour-cache", bedrock("claude-mock", key)), "input_cache_read 0.0000003\n",
			"input_cache_read 0.0000003\n\t\t\t\tinput_cache_write 0.00000375\n\t\t\t\tinput_cache_write_1h 0.000006\n", 1) +
		model("amazon/forged", bedrock("claude-mock", mockprovider.BedrockAccessKeyID+":not-the-secret")) +
		model("amazon/fallback", bedrock("claude-error-429", key)+
			fmt.Sprintf("\t\t\tprovider google %s/v1beta {\n\t\t\t\tstyle gemini\n\t\t\t\tmodel gemini-mock\n\t\t\t\tapi_key goog-operator-key\n\t\t\t}\n", tap.srv.URL))
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tmodel tollgate-mock:free {\n", block+"\t\tmodel tollgate-mock:free {\n")
	}
}

// expectBedrockCall checks that one signed request reached the model's
// Converse route and returns it.
func expectBedrockCall(t *testing.T, calls []azureCall, route string) azureCall {
	t.Helper()
	if len(calls) != 1 {
		t.Fatalf("%d upstream calls, want 1", len(calls))
	}
	c := calls[0]
	if c.path != "/model/claude-mock/"+route || !strings.HasPrefix(c.header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+mockprovider.BedrockAccessKeyID+"/") ||
		!strings.Contains(c.header.Get("Authorization"), "/us-east-1/bedrock/aws4_request") || c.header.Get("X-Amz-Date") == "" {
		t.Errorf("upstream call %s authorization %q", c.path, c.header.Get("Authorization"))
	}
	return c
}

func TestBedrockProvider(t *testing.T) {
	tap := newCallTap(t)
	startInProcessWith(t, withBedrockModels(t, tap))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"bedrock"}`)
	const text = "Mock answer from claude-mock: hello bedrock"

	t.Run("chat", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"amazon/claude","messages":[{"role":"system","content":"Be brief"},{"role":"user","content":"hello bedrock"}],"max_tokens":40,"top_k":5,"seed":1}`, nil).expect(t, 200)
		b := expectBedrockCall(t, tap.take(), "converse").body
		if b.Get("system.0.text").Str != "Be brief" || b.Get("inferenceConfig.maxTokens").Int() != 40 ||
			b.Get("additionalModelRequestFields.top_k").Int() != 5 || b.Get("seed").Exists() || b.Get("model").Exists() {
			t.Errorf("upstream body %s", b.Raw)
		}
		a := r.JSON
		if a.Get("choices.0.message.content").Str != text || a.Get("choices.0.finish_reason").Str != "stop" || a.Get("provider").Str != "bedrock" {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, a.Get("usage"), 0)

		evs := c.streamOf(t, "/chat/completions", key, `{"model":"amazon/claude","stream":true,"messages":[{"role":"user","content":"hello bedrock"}]}`)
		expectBedrockCall(t, tap.take(), "converse-stream")
		s := parseStream(t, evs)
		if !s.done || s.text != text {
			t.Errorf("stream text %q done %v", s.text, s.done)
		}
		expectClaudeCost(t, s.usage, 0)
	})

	t.Run("responses and messages", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/responses", key, `{"model":"amazon/claude","input":"hello bedrock","max_output_tokens":50}`, nil).expect(t, 200)
		if b := expectBedrockCall(t, tap.take(), "converse").body; b.Get("inferenceConfig.maxTokens").Int() != 50 {
			t.Errorf("upstream body %s", b.Raw)
		}
		if r.JSON.Get("output.0.content.0.text").Str != text {
			t.Errorf("answer %s", r.Body)
		}
		expectClaudeCost(t, r.JSON.Get("usage"), 0)
		evs := c.streamOf(t, "/responses", key, `{"model":"amazon/claude","input":"hello bedrock","stream":true}`)
		expectBedrockCall(t, tap.take(), "converse-stream")
		if s := parseStream(t, evs); s.finalEvent != "response.completed" || s.text != text {
			t.Errorf("stream %q ended by %s", s.text, s.finalEvent)
		}

		r = c.mustPost("/messages", key, `{"model":"amazon/claude","max_tokens":60,"messages":[{"role":"user","content":"hello bedrock"}]}`, nil).expect(t, 200)
		expectBedrockCall(t, tap.take(), "converse")
		if r.JSON.Get("content.0.text").Str != text || r.JSON.Get("usage.output_tokens").Int() == 0 {
			t.Errorf("answer %s", r.Body)
		}
		res, err := c.send("/messages", key, `{"model":"amazon/claude","max_tokens":60,"stream":true,"messages":[{"role":"user","content":"hello bedrock"}]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(stream), "event: message_stop") || !strings.Contains(string(stream), `"text":" bedrock"`) {
			t.Errorf("messages stream %d %s", res.StatusCode, stream)
		}
		expectBedrockCall(t, tap.take(), "converse-stream")
	})

	t.Run("tool calls", func(t *testing.T) {
		tap.take()
		tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		r := c.mustPost("/chat/completions", key, `{"model":"amazon/claude",`+tools+`,"tool_choice":"required","messages":[{"role":"user","content":"mock-tool-call: get_weather {\"city\":\"Oslo\"}"}]}`, nil).expect(t, 200)
		call := r.JSON.Get("choices.0.message.tool_calls.0")
		if r.JSON.Get("choices.0.finish_reason").Str != "tool_calls" || gjson.Get(call.Get("function.arguments").Str, "city").Str != "Oslo" {
			t.Fatalf("answer %s", r.Body)
		}
		if b := expectBedrockCall(t, tap.take(), "converse").body; b.Get("toolConfig.toolChoice.any").Raw != "{}" ||
			b.Get("toolConfig.tools.0.toolSpec.inputSchema.json.type").Str != "object" {
			t.Errorf("upstream tools %s", b.Get("toolConfig").Raw)
		}
		next := `{"model":"amazon/claude",` + tools + `,"messages":[{"role":"user","content":"weather?"},` +
			`{"role":"assistant","content":null,"tool_calls":[` + call.Raw + `]},{"role":"tool","tool_call_id":"` + call.Get("id").Str + `","content":"rain, 9C"}]}`
		r = c.mustPost("/chat/completions", key, next, nil).expect(t, 200)
		if b := expectBedrockCall(t, tap.take(), "converse").body; b.Get("messages.2.content.0.toolResult.content.0.text").Str != "rain, 9C" {
			t.Errorf("upstream messages %s", b.Get("messages").Raw)
		}
		if got := r.JSON.Get("choices.0.message.content").Str; got != "Mock answer from claude-mock: tool result rain, 9C" {
			t.Errorf("answer %q", got)
		}
		// Streamed, the call arrives as tool_calls deltas.
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"amazon/claude","stream":true,`+tools+`,"messages":[{"role":"user","content":"mock-tool-call: get_weather {\"city\":\"Oslo\"}"}]}`)
		var args, finish string
		for _, ev := range evs {
			d := gjson.Parse(ev.Data)
			args += d.Get("choices.0.delta.tool_calls.0.function.arguments").Str
			if f := d.Get("choices.0.finish_reason").Str; f != "" {
				finish = f
			}
		}
		if gjson.Get(args, "city").Str != "Oslo" || finish != "tool_calls" {
			t.Errorf("stream args %q finish %q", args, finish)
		}
		tap.take()
	})

	t.Run("thinking tool loop", func(t *testing.T) {
		tap.take()
		tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
		ask := `{"role":"user","content":"mock-tool-call: get_weather {\"city\":\"Oslo\"}"}`
		first := c.mustPost("/chat/completions", key, `{"model":"amazon/thinker","max_tokens":2000,"reasoning":{"effort":"medium"},`+tools+`,"messages":[`+ask+`]}`, nil).expect(t, 200)
		if b := expectBedrockCall(t, tap.take(), "converse").body; b.Get("additionalModelRequestFields.thinking.budget_tokens").Int() != 1024 {
			t.Errorf("upstream body %s", b.Raw)
		}
		msg := first.JSON.Get("choices.0.message")
		call := msg.Get("tool_calls.0")
		if d := msg.Get("reasoning_details.0"); d.Get("type").Str != "reasoning.text" || d.Get("signature").Str != "mock-signature" || !call.Exists() {
			t.Fatalf("answer %s", first.Body)
		}
		result := `{"role":"tool","tool_call_id":"` + call.Get("id").Str + `","content":"rain, 9C"}`
		// The message as the answer gave it: its reasoning_details go back
		// as the signed reasoningContent block, first.
		r := c.mustPost("/chat/completions", key, `{"model":"amazon/thinker","max_tokens":2000,"reasoning":{"effort":"medium"},`+tools+`,"messages":[`+ask+`,`+msg.Raw+`,`+result+`]}`, nil).expect(t, 200)
		b := expectBedrockCall(t, tap.take(), "converse").body
		if b.Get("messages.1.content.0.reasoningContent.reasoningText.signature").Str != "mock-signature" || !b.Get("messages.1.content.1.toolUse").Exists() {
			t.Errorf("upstream messages %s", b.Get("messages").Raw)
		}
		if got := r.JSON.Get("choices.0.message.content").Str; got != "Mock answer from claude-mock: tool result rain, 9C" {
			t.Errorf("answer %s", r.Body)
		}
		// Streamed, reasoning_details pieces merged by index give it too.
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"amazon/thinker","max_tokens":2000,"stream":true,"reasoning":{"effort":"medium"},`+tools+`,"messages":[`+ask+`]}`)
		tap.take()
		var text, sig strings.Builder
		for _, ev := range evs {
			for _, d := range gjson.Get(ev.Data, "choices.0.delta.reasoning_details").Array() {
				text.WriteString(d.Get("text").Str)
				sig.WriteString(d.Get("signature").Str)
			}
		}
		if text.String() == "" || sig.String() != "mock-signature" {
			t.Errorf("streamed reasoning_details: text %q signature %q", text.String(), sig.String())
		}
		// Without them, Bedrock refuses the loop.
		bare, _ := sjson.Delete(msg.Raw, "reasoning_details")
		res := c.mustPost("/chat/completions", key, `{"model":"amazon/thinker","max_tokens":2000,"reasoning":{"effort":"medium"},`+tools+`,"messages":[`+ask+`,`+bare+`,`+result+`]}`, nil)
		tap.take()
		if res.Status != 400 || !strings.Contains(string(res.Body), "Expected `thinking` or `redacted_thinking`") {
			t.Errorf("without reasoning_details: %d %s", res.Status, res.Body)
		}
	})

	t.Run("messages thinking tool loop", func(t *testing.T) {
		// A Messages request's thinking is the Claude model's extended
		// thinking on Bedrock; the answer's thinking block carries its
		// signature, and sent back in the tool loop's next turn it is the
		// reasoningContent block Bedrock requires first.
		tap.take()
		tools := `"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`
		ask := `{"role":"user","content":"mock-tool-call: get_weather {\"city\":\"Oslo\"}"}`
		thinking := `"max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},`
		first := c.mustPost("/messages", key, `{"model":"amazon/thinker",`+thinking+tools+`,"messages":[`+ask+`]}`, nil).expect(t, 200)
		if b := expectBedrockCall(t, tap.take(), "converse").body; b.Get("additionalModelRequestFields.thinking.budget_tokens").Int() != 1024 {
			t.Errorf("upstream body %s", b.Raw)
		}
		content := first.JSON.Get("content")
		use := content.Get(`#(type=="tool_use")`)
		if th := content.Get("0"); th.Get("type").Str != "thinking" || th.Get("signature").Str != "mock-signature" || th.Get("thinking").Str == "" || !use.Exists() {
			t.Fatalf("answer %s", first.Body)
		}
		result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + use.Get("id").Str + `","content":"rain, 9C"}]}`
		r := c.mustPost("/messages", key, `{"model":"amazon/thinker",`+thinking+tools+`,"messages":[`+ask+`,{"role":"assistant","content":`+content.Raw+`},`+result+`]}`, nil).expect(t, 200)
		b := expectBedrockCall(t, tap.take(), "converse").body
		if b.Get("messages.1.content.0.reasoningContent.reasoningText.signature").Str != "mock-signature" || !b.Get("messages.1.content.1.toolUse").Exists() {
			t.Errorf("upstream messages %s", b.Get("messages").Raw)
		}
		if got := r.JSON.Get(`content.#(type=="text").text`).Str; got != "Mock answer from claude-mock: tool result rain, 9C" {
			t.Errorf("answer %s", r.Body)
		}
		// Streamed, the thinking block ends with its signature.
		res, err := c.send("/messages", key, `{"model":"amazon/thinker","stream":true,`+thinking+tools+`,"messages":[`+ask+`]}`, nil)
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := io.ReadAll(res.Body)
		res.Body.Close()
		tap.take()
		if res.StatusCode != 200 || !strings.Contains(string(stream), `"type":"signature_delta","signature":"mock-signature"`) &&
			!strings.Contains(string(stream), `"signature":"mock-signature","type":"signature_delta"`) {
			t.Errorf("messages stream %d %s", res.StatusCode, stream)
		}
	})

	t.Run("embeddings", func(t *testing.T) {
		tap.take()
		ekey, _ := c.newKey(org.MgmtKey, `{"name":"embeddings"}`)
		prompt := mustParsePrice("0.000003")
		before := c.snapshot(ekey, org.MgmtKey)
		var total money.Amount
		for _, tc := range []struct {
			model, body, path, upstream string
			vectors, dims               int
			tokens                      int64
		}{
			{"amazon/titan-embed", `"input":"hello bedrock embeddings","dimensions":256`, "/model/amazon.titan-embed-text-v2/invoke", `{"inputText":"hello bedrock embeddings","dimensions":256}`, 1, 256, 3},
			{"amazon/titan-image", `"input":[{"content":[{"type":"text","text":"a cat"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]`,
				"/model/amazon.titan-embed-image-v1/invoke", `{"inputText":"a cat","inputImage":"iVBORw0KGgo="}`, 1, 1024, 2},
			{"cohere/embed", `"input":["one two","three"],"input_type":"search_query"`, "/model/cohere.embed-english-v3/invoke",
				`{"texts":["one two","three"],"input_type":"search_query","embedding_types":["float"]}`, 2, 8, 3},
		} {
			r := c.mustPost("/embeddings", ekey, `{"model":"`+tc.model+`",`+tc.body+`}`, nil).expect(t, 200)
			calls := tap.take()
			if len(calls) != 1 || calls[0].path != tc.path || calls[0].body.Raw != tc.upstream ||
				!strings.HasPrefix(calls[0].header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+mockprovider.BedrockAccessKeyID+"/") {
				t.Fatalf("%s: upstream calls %+v", tc.model, calls)
			}
			a := r.JSON
			if len(a.Get("data").Array()) != tc.vectors || len(a.Get("data.0.embedding").Array()) != tc.dims || a.Get("usage.prompt_tokens").Int() != tc.tokens {
				t.Errorf("%s: answer %s", tc.model, r.Body)
			}
			// The model's own token count, charged at the prompt price.
			want, _ := billing.Cost(billing.Pricing{Prompt: prompt}, billing.Usage{PromptTokens: tc.tokens})
			if got := creditAmount(t, a.Get("usage.cost")); got != want {
				t.Errorf("%s: cost %s, want %s", tc.model, got, want)
			}
			total += want
		}
		expectCharged(t, before, c.snapshot(ekey, org.MgmtKey), total, "bedrock embeddings")
		for body, msg := range map[string]string{
			`{"model":"amazon/titan-embed","input":["a","b"]}`:      "input: Titan embedding models take one input a request; 2 sent",
			`{"model":"cohere/embed","input":"a","dimensions":256}`: "dimensions: not taken by Cohere models on Bedrock",
			`{"model":"amazon/claude","input":"a"}`:                 "model: this Bedrock model is not a Titan or Cohere embedding model",
			`{"model":"amazon/titan-embed","input":[{"content":[{"type":"input_audio","input_audio":{"data":"AA","format":"wav"}}]}]}`: `input[0].content[0].type: "input_audio" is not taken by this Bedrock embedding model`,
		} {
			c.mustPost("/embeddings", ekey, body, nil).expectError(t, 400, msg)
		}
		if calls := tap.take(); len(calls) != 0 {
			t.Errorf("refused inputs reached the provider: %+v", calls)
		}
	})

	t.Run("cache reads priced", func(t *testing.T) {
		r := c.mustPost("/chat/completions", key, `{"model":"amazon/cached","messages":[{"role":"user","content":"hello bedrock with a longer prompt"}]}`, nil).expect(t, 200)
		u := r.JSON.Get("usage")
		if u.Get("prompt_tokens_details.cached_tokens").Int() == 0 || u.Get("prompt_tokens_details.cached_tokens").Int() != u.Get("prompt_tokens").Int()/2 {
			t.Errorf("usage %s", u.Raw)
		}
		expectClaudeCost(t, u, 0)
		tap.take()
	})

	t.Run("automatic caching", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"amazon/claude","cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"cache this bedrock prompt"}]}`, nil).expect(t, 200)
		b := expectBedrockCall(t, tap.take(), "converse").body
		if got := b.Get("messages.0.content").Raw; got != `[{"text":"cache this bedrock prompt"},{"cachePoint":{"type":"default"}}]` {
			t.Errorf("upstream content %s", got)
		}
		u := r.JSON.Get("usage")
		if u.Get("prompt_tokens_details.cache_write_tokens").Int() != u.Get("prompt_tokens").Int() || u.Get("prompt_tokens").Int() == 0 {
			t.Errorf("usage %s", u.Raw)
		}
		// No write price: the writes cost the prompt price.
		if want := money.Amount(u.Get("prompt_tokens").Int()*3000 + u.Get("completion_tokens").Int()*15000); creditAmount(t, u.Get("cost")) != want {
			t.Errorf("usage.cost %s, want %s", u.Get("cost").Raw, want)
		}
	})

	t.Run("automatic caching for an hour", func(t *testing.T) {
		// cache_control's ttl 1h is the cache point's; the writes Bedrock
		// reports for the hour are charged at input_cache_write_1h, and
		// 5m (Bedrock's default, no ttl sent) at input_cache_write.
		for _, tc := range []struct{ ttl, point string }{{"1h", `{"type":"default","ttl":"1h"}`}, {"5m", `{"type":"default"}`}} {
			tap.take()
			r := c.mustPost("/chat/completions", key, `{"model":"amazon/hour-cache","cache_control":{"type":"ephemeral","ttl":"`+tc.ttl+`"},"messages":[{"role":"user","content":"cache this bedrock prompt"}]}`, nil).expect(t, 200)
			b := expectBedrockCall(t, tap.take(), "converse").body
			if got := b.Get("messages.0.content.1.cachePoint").Raw; got != tc.point {
				t.Errorf("ttl %s: upstream cache point %s", tc.ttl, got)
			}
			u := r.JSON.Get("usage")
			write := u.Get("prompt_tokens_details.cache_write_tokens").Int()
			if write == 0 || write != u.Get("prompt_tokens").Int() {
				t.Errorf("ttl %s: usage %s", tc.ttl, u.Raw)
			}
			price := int64(3750)
			if tc.ttl == "1h" {
				price = 6000
			}
			if want := money.Amount(write*price + u.Get("completion_tokens").Int()*15000); creditAmount(t, u.Get("cost")) != want {
				t.Errorf("ttl %s: usage.cost %s, want %s", tc.ttl, u.Get("cost").Raw, want)
			}
		}
	})

	t.Run("fallback to another dialect", func(t *testing.T) {
		tap.take()
		r := c.mustPost("/chat/completions", key, `{"model":"amazon/fallback","messages":[{"role":"user","content":"hello gemini"}]}`, nil).expect(t, 200)
		calls := tap.take()
		if len(calls) != 2 || calls[0].path != "/model/claude-error-429/converse" || calls[1].path != "/v1beta/models/gemini-mock:generateContent" ||
			calls[1].header.Get("Authorization") != "" || calls[1].header.Get("X-Goog-Api-Key") != "goog-operator-key" {
			t.Fatalf("upstream calls %+v", calls)
		}
		if r.JSON.Get("provider").Str != "google" || r.JSON.Get("choices.0.message.content").Str != "Mock answer from gemini-mock: hello gemini" {
			t.Errorf("answer %s", r.Body)
		}
	})

	t.Run("mid-stream exception", func(t *testing.T) {
		evs := c.streamOf(t, "/chat/completions", key, `{"model":"amazon/break","stream":true,"messages":[{"role":"user","content":"one two three four five six"}]}`)
		last := ""
		for _, ev := range evs {
			if gjson.Get(ev.Data, "error").Exists() {
				last = gjson.Get(ev.Data, "choices.0.finish_reason").Str
			}
		}
		if last != "error" || evs[len(evs)-1].Data != "[DONE]" {
			t.Errorf("stream %+v", evs)
		}
		tap.take()
	})

	t.Run("a forged signature is refused", func(t *testing.T) {
		r := c.mustPost("/chat/completions", key, `{"model":"amazon/forged","messages":[{"role":"user","content":"hello"}]}`, nil).expect(t, 403)
		if !strings.Contains(r.JSON.Get("error.message").Str, "signature we calculated does not match") || r.JSON.Get("error.metadata.provider_name").Str != "bedrock" {
			t.Errorf("error %s", r.Body)
		}
		tap.take()
	})

	t.Run("clamped and invalid answers", func(t *testing.T) {
		small, _ := c.newKey(org.MgmtKey, `{"name":"small","limit":0.005}`)
		tap.take()
		c.mustPost("/chat/completions", small, `{"model":"amazon/claude","messages":[{"role":"user","content":"hello there"}]}`, nil).expect(t, 200)
		if b := expectBedrockCall(t, tap.take(), "converse").body; b.Get("inferenceConfig.maxTokens").Int() < 250 || b.Get("inferenceConfig.maxTokens").Int() > 333 {
			t.Errorf("upstream inferenceConfig %s", b.Get("inferenceConfig").Raw)
		}
		one, _ := c.newKey(org.MgmtKey, `{"name":"one","limit":0.02}`)
		r := c.mustPost("/chat/completions", one, `{"model":"amazon/garbage","messages":[{"role":"user","content":"hello there"}]}`, nil).expect(t, 502)
		if r.JSON.Get("error.metadata.provider_name").Str != "bedrock" {
			t.Errorf("error %s", r.Body)
		}
		if s := c.snapshot(one, org.MgmtKey); s.usage != 0 || *s.remaining != 20_000_000 {
			t.Errorf("after the 502: usage %s remaining %s", s.usage, *s.remaining)
		}
		tap.take()
	})
}
