package contract

import (
	"strings"
	"testing"
)

// TestSchemasCompileAndRefuse: every schema compiles, and refuses what
// its provider refuses.
func TestSchemasCompileAndRefuse(t *testing.T) {
	for _, tc := range []struct {
		api, body, refused string // refused "": accepted
	}{
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d"]}`, ""},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d","e"]}`, "/stop: maxItems"},
		{OpenAIChat, `{"model":"m","messages":[]}`, "/messages"},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":true}}`, "stream"},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a.b"}}]}`, "/tools/0/function/name"},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"parallel_tool_calls":false}`, "tools"},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":[]}`, "/stop"},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"max","service_tier":"fast"}`, ""},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"logit_bias":{"50256":-101}}`, "/logit_bias/50256"},
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c"}]}`, "/messages/1"},
		{OpenAIResponses, `{"model":"m","input":"hi","max_output_tokens":15}`, "/max_output_tokens"},
		{OpenAIResponses, `{"model":"m","input":"hi","max_output_tokens":16,"max_tool_calls":0,"service_tier":"ultrafast","reasoning":{"effort":"max"}}`, ""},
		{OpenAIResponses, `{"model":"m","input":"hi","temperature":3}`, "/temperature"},
		{OpenAIEmbeddings, `{"model":"m","input":[]}`, "/input"},
		{OpenAIEmbeddings, `{"model":"m","input":["a"],"encoding_format":"int8"}`, "/encoding_format"},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["1","2","3","4","5","6"]}`, ""},
		{AnthropicMessage, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"temperature":1.5}`, "/temperature"},
		{AnthropicMessage, `{"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":100}}`, "/thinking/budget_tokens"},
		{AnthropicMessage, `{"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":2000}}`, "/thinking/budget_tokens: 2000 is not below max_tokens"},
		{AnthropicMessage, `{"model":"m","max_tokens":2001,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":2000}}`, ""},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"top_k":-1}`, "/top_k"},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"` + strings.Repeat("u", 257) + `"}}`, "/metadata/user_id"},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"a.b","input_schema":{"type":"object"}}]}`, "/tools/0/name"},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"auto"}}`, ""},
		{GeminiGenerate, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"stopSequences":["1","2","3","4","5","6"]}}`, "/generationConfig/stopSequences"},
		{GeminiGenerate, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"1a.b:c-d"}]}]}`, ""},
		{GeminiGenerate, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"a b"}]}]}`, "/tools/0/functionDeclarations/0/name"},
		{GeminiGenerate, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"` + strings.Repeat("n", 65) + `"}]}]}`, "/tools/0/functionDeclarations/0/name"},
		{GeminiGenerate, `{"contents":[]}`, "/contents"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"temperature":1.5}}`, "/inferenceConfig/temperature"},
		{BedrockConverse, `{"messages":[{"role":"assistant","content":[{"text":"hi"}]}]}`, "/messages/0/role"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":" "}]}]}`, "/messages/0/content/0/text"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"stopSequences":[""]}}`, "/inferenceConfig/stopSequences/0"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":"hi"}]},{"role":"user","content":[{"text":"again"}]}]}`, "/messages/1/role"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[]}]}`, "/messages/0/content"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"` + strings.Repeat("n", 65) + `","inputSchema":{"json":{}}}}]}}`, "/toolConfig/tools/0/toolSpec/name"},
	} {
		err := Validate(tc.api, []byte(tc.body))
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s refused %s: %v", tc.api, tc.body, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s %s: %v, want a refusal naming %s", tc.api, tc.body, err, tc.refused)
		}
	}
}

func TestAPIOf(t *testing.T) {
	for path, api := range map[string]string{
		"/v1/chat/completions": OpenAIChat, "/openai/deployments/d/chat/completions?api-version=x": OpenAIChat,
		"/v1/responses": OpenAIResponses, "/v1/embeddings": OpenAIEmbeddings, "/v1/messages": AnthropicMessage,
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent": GeminiGenerate,
		"/model/anthropic.claude/converse-stream":               BedrockConverse, "/v1/models": "",
	} {
		if got := APIOf(path); got != api {
			t.Errorf("APIOf(%q) = %q, want %q", path, got, api)
		}
	}
}
