package answer

// benchJSONAnswer is the fake upstream's chat completion, with usage.
var benchJSONAnswer = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1735689600,"model":"bench-upstream",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"The sea keeps every secret the shore forgets, and gives back only salt and light."},` +
	`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":27,"completion_tokens":18,"total_tokens":45}}`)
