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
		{OpenAIChat, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tool_choice":"auto"}`, "tools"},
		{OpenAIResponses, `{"model":"m","input":"hi","temperature":3}`, "/temperature"},
		{OpenAIEmbeddings, `{"model":"m","input":[]}`, "/input"},
		{OpenAIEmbeddings, `{"model":"m","input":["a"],"encoding_format":"int8"}`, "/encoding_format"},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["1","2","3","4","5","6"]}`, ""},
		{AnthropicMessage, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{AnthropicMessage, `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"temperature":1.5}`, "/temperature"},
		{AnthropicMessage, `{"model":"m","max_tokens":2000,"messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":100}}`, "/thinking/budget_tokens"},
		{GeminiGenerate, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"stopSequences":["1","2","3","4","5","6"]}}`, "/generationConfig/stopSequences"},
		{GeminiGenerate, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"1abc"}]}]}`, "/tools/0/functionDeclarations/0/name"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"temperature":1.5}}`, "/inferenceConfig/temperature"},
		{BedrockConverse, `{"messages":[{"role":"assistant","content":[{"text":"hi"}]}]}`, "/messages/0/role"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":" "}]}]}`, "/messages/0/content/0/text"},
		{BedrockConverse, `{"messages":[{"role":"user","content":[{"text":"hi"}]}],"inferenceConfig":{"stopSequences":[""]}}`, "/inferenceConfig/stopSequences/0"},
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
