package chatform

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestCompletionEncoderIsEncodingJSONs covers every member, set and
// unset, of answers and chunks.
func TestCompletionEncoderIsEncodingJSONs(t *testing.T) {
	s, empty, stop, i := "a<b> & \u2028 \"q\" \xff", "", "stop", 2
	cites := []Annotation{
		{Type: "url_citation", URLCitation: URLCitation{URL: "https://x/?a=<b>", Title: "t", Content: "c", StartIndex: 1, EndIndex: 9}},
		{Type: "url_citation", URLCitation: URLCitation{URL: "u", StartIndex: 0, EndIndex: 0}},
	}
	for _, c := range []Completion{
		{},
		{ID: "x<", Object: "chat.completion.chunk", Created: 1, Model: "m", Choices: []Choice{}},
		{Choices: []Choice{{Delta: &Message{Role: "assistant", Content: &empty}}}},
		{Choices: []Choice{{Index: 1, Delta: &Message{}, FinishReason: &stop}, {Message: &Message{Content: &s}}}},
		{Choices: []Choice{{Delta: &Message{ToolCalls: []ToolCall{{Index: &i, ID: "t", Type: "function", Function: Function{Name: "f"}}}}}}},
		{Choices: []Choice{{Delta: &Message{Reasoning: "r", ToolCalls: []ToolCall{{Index: &i, Function: Function{Arguments: `{"a":"<"}`}}, {}}}}}},
		{Choices: []Choice{{Message: &Message{Role: "assistant", Content: &s, Reasoning: "r", Annotations: cites,
			ToolCalls: []ToolCall{{ID: "c", Type: "function", Function: Function{Name: "f", Arguments: "{}"}}}}}}},
		{Choices: []Choice{{Delta: &Message{Content: &empty, Annotations: cites}}}},
		{Choices: []Choice{{Message: &Message{Role: "assistant", Content: &s, Reasoning: "r", ReasoningDetails: []ReasoningDetail{
			{Type: ReasoningText, Text: "r<", Signature: "sig", Format: FormatAnthropic}, {Type: ReasoningEncrypted, Data: "d", Index: 1}},
			ToolCalls: []ToolCall{{ID: "c", Type: "function", Function: Function{Name: "f", Arguments: "{}"}}}}}}},
		{Choices: []Choice{{Delta: &Message{ReasoningDetails: []ReasoningDetail{{Type: ReasoningText, Signature: "s", Index: 2}}}}}},
		{Usage: &Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, PromptTokensDetails: PromptDetails{CachedTokens: 4}}},
		{Usage: WithCacheWrites(Usage{PromptTokens: 1, PromptTokensDetails: PromptDetails{CachedTokens: 4}}, 0)},
		{Usage: WithCacheWrites(Usage{PromptTokens: 1, ServerToolUse: json.RawMessage(` { "web_search_requests" : 2 } `)}, 5)},
		{Choices: []Choice{{Message: &Message{Content: &s}}}, Usage: &Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3,
			PromptTokensDetails: PromptDetails{CachedTokens: 4}, CompletionTokensDetails: &CompletionDetails{ReasoningTokens: 5}}},
	} {
		want, err := json.Marshal(c)
		got, ok := c.AppendJSON(nil)
		if !ok || err != nil || !bytes.Equal(got, want) {
			t.Errorf("got %s (%v)\nwant %s (%v)", got, ok, want, err)
		}
	}
}
