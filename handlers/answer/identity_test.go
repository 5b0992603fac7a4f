package answer

import (
	"testing"
)

func TestAnswerIdentityRewrite(t *testing.T) {
	id := &Identity{id: []byte(`"gen-1"`), model: []byte(`"openai/gpt-4o-mini"`), provider: []byte(`"openai"`)}
	for in, want := range map[string]string{
		`{"id":"chatcmpl-9","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[]}`: `{"provider":"openai","id":"gen-1","object":"chat.completion","model":"openai/gpt-4o-mini","choices":[]}`,
		// Order and spacing kept; the provider's own provider replaced.
		` { "model" : "x", "provider":"p" ,"id": "c" }`: ` { "model" : "openai/gpt-4o-mini", "provider":"openai" ,"id": "gen-1" }`,
		`{"choices":[{"id":"nested"}]}`:                 `{"id":"gen-1","model":"openai/gpt-4o-mini","provider":"openai","choices":[{"id":"nested"}]}`,
		`{}`:                                            `{"id":"gen-1","model":"openai/gpt-4o-mini","provider":"openai"}`,
		`[1]`:                                           `[1]`,
		// A provider spelled with an escape is still the provider; one
		// nested is not.
		`{"id":"c","model":"x","provid\u0065r":"p"}`:     `{"id":"gen-1","model":"openai/gpt-4o-mini","provid\u0065r":"openai"}`,
		`{"id":"c","model":"x","meta":{"provider":"p"}}`: `{"provider":"openai","id":"gen-1","model":"openai/gpt-4o-mini","meta":{"provider":"p"}}`,
	} {
		if got := string(id.Rewrite([]byte(in))); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
}

func TestUsageBillMembers(t *testing.T) {
	b := UsageBill{cost: 1_500_000_000, prompt: 1_000_000_000, completion: 500_000_000}
	if got, want := b.Members(), `"cost":1.5,"is_byok":false,"cost_details":{"upstream_inference_cost":null,`+
		`"upstream_inference_prompt_cost":1,"upstream_inference_completions_cost":0.5}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	b.byok, b.Responses = true, true
	if got, want := b.Members(), `"cost":1.5,"is_byok":true,"cost_details":{"upstream_inference_cost":1.5,`+
		`"upstream_inference_input_cost":1,"upstream_inference_output_cost":0.5}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
