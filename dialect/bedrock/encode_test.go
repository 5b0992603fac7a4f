package bedrock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/messages"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
)

// chatBodies reach every member of the request encoder: texts needing
// escapes, images, tool calls and results, tools, tool choices, every
// inference setting, and raw members with spaces to compact.
var chatBodies = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"system","content":"be <terse> & kind` + "\u2028" + `"},{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":[{"type":"text","text":"a\"b\\c\n\t\u0001 é ` + "\xff" + `"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"max_tokens":100,"max_completion_tokens":200,"temperature":0.7,"top_p":1e-7,"top_k":40,"stop":["a","<b>"],"n":1,"user":"dropped"}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":" { \"a\" : \"<b>\" , \"n\": [1, 2] } "}},{"id":"c2","type":"function","function":{"name":"g","arguments":""}}]},{"role":"tool","tool_call_id":"c1","content":"plain <result>"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"{\"ok\" : true}"}]}],"tools":[{"type":"function","function":{"name":"f","description":"does <f>","parameters":{ "type": "object" }}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"f<"}}}`,
	`{"messages":[{"role":"system","content":[]},{"role":"user","content":[]},{"role":"assistant","content":"a"},{"role":"assistant","content":[{"type":"text","text":""}]}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}],"stop":"x","top_k":{ "a" : 1 }}`,
	`{"messages":[{"role":"user","content":"x"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}],"temperature":0}`,
	`{"messages":[{"role":"user","content":"x"}],"tool_choice":"auto","tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":0,"stop":[]}`,
	`{"messages":[{"role":"user","content":"x"}],"temperature":1e999}`,
	`{"messages":{"role":"user","content":"one message, not in an array"}}`,
	`{"messages":[{"role":"user","role":"model","content":"a","content":"b","\u0072ole":"x"},"odd"]}`,
	`{"messages":[{"role":"user","content":"esc \u0041 \n"},{"role":"assistant","tool_calls":{"id":"c","function":{"name":"f"}}},{"role":"tool","tool_call_id":"c","content":5}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`,
	`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web"}]}`,
	`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"}`,
	`{"messages":[],"n":2}`, `[]`, `{"functions":[]}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"","reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"r <1>","signature":"s\u0041","format":"anthropic-claude-v1","index":0},{"type":"reasoning.encrypted","data":"ZGF0YQ==","index":1},{"type":"reasoning.text","text":"no signature"},{"type":"reasoning.text","text":"other","signature":"x","format":"google-gemini-v1"},{"type":"reasoning.summary","summary":"s"}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],"max_tokens":4000,"reasoning_effort":"high","temperature":0.5,"top_p":0.9,"top_k":3}`,
	`{"messages":[{"role":"user","content":"q"}],"max_tokens":500,"reasoning_effort":"low","top_k":3}`,
	`{"messages":[{"role":"user","content":"q"}],"max_tokens":5000,"reasoning_effort":"max","tool_choice":"required","tools":[{"type":"function","function":{"name":"f"}}]}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.text","signature":7}]}]}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_details":"x"}]}`,
}

// TestFromChatEqualsTheReference checks the request translation against
// the encoding/json one it replaced, byte for byte.
func TestFromChatEqualsTheReference(t *testing.T) {
	for _, body := range chatBodies {
		checkFromChat(t, []byte(body))
	}
}

func FuzzFromChatEqualsTheReference(f *testing.F) {
	for _, b := range chatBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if json.Valid(body) {
			checkFromChat(t, body)
		}
	})
}

func checkFromChat(t *testing.T, body []byte) {
	t.Helper()
	for _, thinks := range []bool{false, true} {
		want, wantErr := refFromChat(body, thinks)
		got, gotErr := fromChat(body, thinks)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
			t.Fatalf("%s (thinks %v):\n got %s (%v)\nwant %s (%v)", body, thinks, got, gotErr, want, wantErr)
		}
	}
}

// answers reach every member of the answer encoder.
var answers = []string{
	`{"output":{"message":{"role":"assistant","content":[{"text":"Hello <b> & \u2028 \"q\" ` + "\xff" + `"}]}},"stopReason":"end_turn","usage":{"inputTokens":9,"outputTokens":5,"totalTokens":14,"cacheReadInputTokens":3,"cacheWriteInputTokens":1}}`,
	`{"output":{"message":{"content":[{"reasoningContent":{"reasoningText":{"text":"think"}}},{"toolUse":{"toolUseId":"t1","name":"f","input":{ "a" : 1 }}},{"toolUse":{"toolUseId":"t2","name":"g"}},{"text":"t"},{"other":1},5]}},"stopReason":"tool_use"}`,
	`{"output":{"message":{"content":[]}},"stopReason":"max_tokens","usage":{}}`,
	`{"output":{"message":{"content":[{"text":"a","text":"b"}]},"message":{"content":"x"}},"stopReason":"guardrail_intervened","stopReason":"end_turn","usage":"x"}`,
	`{"output":{"message":{"content":{}}}}`, `{"output":[{"message":{"content":[]}}]}`, `{"output":{"message":[1]}}`,
	`{"other":1}`, `[]`, `{"output":{"message":{"content":[{"text":"esc \u0041"}]}},"stopReason":"content_filtered"}`,
}

// TestConvertJSONEqualsTheReference checks the plain answer's
// translation against the encoding/json one it replaced.
func TestConvertJSONEqualsTheReference(t *testing.T) {
	for _, a := range answers {
		checkConvertJSON(t, []byte(a))
	}
}

func FuzzConvertJSONEqualsTheReference(f *testing.F) {
	for _, a := range answers {
		f.Add([]byte(a))
	}
	f.Fuzz(func(t *testing.T, a []byte) {
		if json.Valid(a) {
			checkConvertJSON(t, a)
		}
	})
}

func checkConvertJSON(t *testing.T, a []byte) {
	t.Helper()
	defer func(n func() time.Time) { now = n }(now)
	now = func() time.Time { return time.Unix(1700000000, 5) }
	old, neu := &toChat{model: "m"}, &toChat{model: "m"}
	want, wantOK := old.refConvertJSON(a)
	got, gotOK := neu.convertJSON(a)
	if gotOK != wantOK || !bytes.Equal(got, want) || old.produced != neu.produced {
		t.Fatalf("%s:\n got %s (%v, %d)\nwant %s (%v, %d)", a, got, gotOK, neu.produced, want, wantOK, old.produced)
	}
}

// TestCompletionEncoderIsEncodingJSONs covers the stream's chunk shapes.
func TestCompletionEncoderIsEncodingJSONs(t *testing.T) {
	s, empty, stop, i := "a<b>", "", "stop", 2
	for _, c := range []chatform.Completion{
		{},
		{ID: "x", Object: "chat.completion.chunk", Created: 1, Model: "m", Choices: []chatform.Choice{}},
		{Choices: []chatform.Choice{{Delta: &chatform.Message{Role: "assistant", Content: &empty}}}},
		{Choices: []chatform.Choice{{Index: 1, Delta: &chatform.Message{}, FinishReason: &stop}}},
		{Choices: []chatform.Choice{{Delta: &chatform.Message{ToolCalls: []chatform.ToolCall{{Index: &i, ID: "t", Type: "function", Function: chatform.Function{Name: "f"}}}}}}},
		{Choices: []chatform.Choice{{Delta: &chatform.Message{Reasoning: "r", ToolCalls: []chatform.ToolCall{{Index: &i, Function: chatform.Function{Arguments: `{"a":"<"}`}}}}}}},
		{Choices: []chatform.Choice{{Message: &chatform.Message{Content: &s}}}, Usage: chatform.WithCacheWrites(chatform.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3,
			PromptTokensDetails: chatform.PromptDetails{CachedTokens: 4}}, 5)},
	} {
		want, _ := json.Marshal(c)
		if got, _ := c.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("got %s\nwant %s", got, want)
		}
	}
}

// refFromChat is fromChat as it was, with encoding/json: it translates a chat completions body into a Converse request.
func refFromChat(chat []byte, thinks bool) ([]byte, error) {
	req := gjson.ParseBytes(chat)
	if !req.IsObject() {
		return nil, fieldError("body", "expected a JSON object")
	}
	var out converse
	ic := &inferenceConfig{}
	var choice, effort, topK gjson.Result
	var err error
	var cache bool
	var ttl string
	req.ForEach(func(k, v gjson.Result) bool {
		switch name := k.Str; name {
		case "cache_control":
			cache = v.IsObject()
			if v.Get("ttl").Str == "1h" {
				ttl = "1h"
			}
		case "reasoning_effort":
			effort = v
		case "messages":
			out.System, out.Messages, err = refMessagesOf(v)
		case "tools":
			var tools []toolSpecOf
			for i, t := range v.Array() {
				if t.Get("type").Str != "function" {
					err = fieldError(fmt.Sprintf("tools[%d].type", i), "Bedrock providers take function tools only")
					return false
				}
				f := t.Get("function")
				schema := f.Get("parameters").Raw
				if schema == "" {
					schema = `{"type":"object"}`
				}
				tools = append(tools, toolSpecOf{toolSpec{Name: f.Get("name").Str, Description: f.Get("description").Str,
					InputSchema: json.RawMessage(`{"json":` + schema + `}`)}})
			}
			if len(tools) > 0 {
				out.ToolConfig = &toolConfig{Tools: tools}
			}
		case "tool_choice":
			choice = v
		case "max_tokens", "max_completion_tokens":
			ic.MaxTokens = max(ic.MaxTokens, v.Int())
		case "temperature":
			f := min(v.Float(), 1)
			ic.Temperature = &f
		case "top_p":
			f := v.Float()
			ic.TopP = &f
		case "stop":
			if v.Type == gjson.String {
				ic.StopSequences = []string{v.Str}
			} else {
				for _, s := range v.Array() {
					ic.StopSequences = append(ic.StopSequences, s.Str)
				}
			}
		case "top_k":
			topK = v
		case "n":
			if v.Int() > 1 {
				err = fieldError("n", "Bedrock providers answer one choice")
			}
		case "functions", "function_call":
			err = fieldError(name, "not served by Bedrock providers; send tools")
		}
		// Any other field (penalties, seed, logprobs, response_format,
		// user, stream_options, ...) has no Converse member: dropped.
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if choice.Exists() && out.ToolConfig != nil {
		switch {
		case choice.Str == "auto":
			out.ToolConfig.ToolChoice = json.RawMessage(`{"auto":{}}`)
		case choice.Str == "required":
			out.ToolConfig.ToolChoice = json.RawMessage(`{"any":{}}`)
		case choice.Str == "none" && hasToolBlocks(out.Messages):
			// Converse needs the tools of a conversation's toolUse and
			// toolResult blocks, and has no "none" to go with them.
			return nil, fieldError("tool_choice", "none is not served by Bedrock providers in a conversation with tool calls; send auto")
		case choice.Str == "none":
			out.ToolConfig = nil // Converse has no "none": no tools offered
		case choice.Get("type").Str == "function":
			name, _ := json.Marshal(choice.Get("function.name").Str)
			out.ToolConfig.ToolChoice = json.RawMessage(`{"tool":{"name":` + string(name) + `}}`)
		default:
			return nil, fieldError("tool_choice", "expected auto, none, required or a function")
		}
	}
	var thinking []byte
	if thinks && effort.Type == gjson.String {
		thinking = messages.ThinkingFor(effort.Str, ic.MaxTokens, choice)
	}
	switch {
	case thinking != nil:
		out.AdditionalModelRequestFields = json.RawMessage(`{"thinking":` + string(thinking) + `}`)
		ic.Temperature, ic.TopP = nil, nil
	case topK.Exists():
		out.AdditionalModelRequestFields = json.RawMessage(`{"top_k":` + topK.Raw + `}`)
	}
	if ic.MaxTokens > 0 || ic.Temperature != nil || ic.TopP != nil || ic.StopSequences != nil {
		out.InferenceConfig = ic
	}
	if len(out.Messages) == 0 {
		return nil, fieldError("messages", "needs a user message")
	}
	if cache {
		last := &out.Messages[len(out.Messages)-1]
		last.Content = append(last.Content, block{CachePoint: &cachePoint{Type: "default", TTL: ttl}})
	}
	return json.Marshal(out)
}

// refMessagesOf is the old messagesOf: it translates the messages: system and developer messages into
// system blocks, tool results into toolResult blocks of a user message,
// consecutive messages of one role merged (Converse alternates roles).
func refMessagesOf(msgs gjson.Result) ([]block, []message, error) {
	var system []block
	var out []message
	add := func(role string, blocks ...block) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	for i, m := range msgs.Array() {
		path := fmt.Sprintf("messages[%d]", i)
		switch role := m.Get("role").Str; role {
		case "system", "developer":
			b, err := textBlocks(m.Get("content"), path, false)
			if err != nil {
				return nil, nil, err
			}
			system = append(system, nonBlank(b)...)
		case "user":
			b, err := textBlocks(m.Get("content"), path, true)
			if err != nil {
				return nil, nil, err
			}
			add("user", b...)
		case "assistant":
			blocks, err := reasoningBlocks(m.Get("reasoning_details"), path)
			if err != nil {
				return nil, nil, err
			}
			if c := m.Get("content"); c.Exists() && c.Type != gjson.Null {
				b, err := textBlocks(c, path, false)
				if err != nil {
					return nil, nil, err
				}
				blocks = append(blocks, nonBlank(b)...)
			}
			for j, call := range m.Get("tool_calls").Array() {
				args := call.Get("function.arguments").Str
				if args == "" {
					args = "{}"
				}
				if !gjson.Valid(args) || !gjson.Parse(args).IsObject() {
					return nil, nil, fieldError(fmt.Sprintf("%s.tool_calls[%d].function.arguments", path, j), "expected a JSON object")
				}
				blocks = append(blocks, block{ToolUse: &toolUse{ToolUseID: call.Get("id").Str, Name: call.Get("function.name").Str, Input: json.RawMessage(args)}})
			}
			if len(blocks) > 0 {
				add("assistant", blocks...)
			}
		case "tool":
			c := m.Get("content")
			text := c.Str
			if c.IsArray() {
				var b strings.Builder
				for _, p := range c.Array() {
					b.WriteString(p.Get("text").Str)
				}
				text = b.String()
			}
			var content json.RawMessage
			if gjson.Valid(text) && gjson.Parse(text).IsObject() {
				content = json.RawMessage(`{"json":` + text + `}`)
			} else {
				s, _ := json.Marshal(text)
				content = json.RawMessage(`{"text":` + string(s) + `}`)
			}
			add("user", block{ToolResult: &toolResult{ToolUseID: m.Get("tool_call_id").Str, Content: []json.RawMessage{content}}})
		default:
			return nil, nil, fieldError(path+".role", fmt.Sprintf("unsupported role %q", role))
		}
	}
	return system, out, nil
}

// refConvertJSON is the old convertJSON: it turns a Converse answer into a chat completion.
func (t *toChat) refConvertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	r := gjson.ParseBytes(body)
	content := r.Get("output.message.content")
	if !content.IsArray() {
		return nil, false
	}
	var text, reasoning strings.Builder
	var calls []chatform.ToolCall
	var details []chatform.ReasoningDetail
	for _, b := range content.Array() {
		switch {
		case b.Get("text").Exists():
			text.WriteString(b.Get("text").Str)
			t.produced += outputlen.StringLen(b.Get("text").Raw)
		case b.Get("reasoningContent").Exists():
			reasoning.WriteString(b.Get("reasoningContent.reasoningText.text").Str)
			t.produced += outputlen.StringLen(b.Get("reasoningContent.reasoningText.text").Raw)
			if r := b.Get("reasoningContent.redactedContent"); r.Type == gjson.String {
				details = append(details, chatform.ReasoningDetail{Type: "reasoning.encrypted", Data: r.Str, Format: "anthropic-claude-v1", Index: len(details)})
			} else if rt := b.Get("reasoningContent.reasoningText"); rt.IsObject() {
				details = append(details, chatform.ReasoningDetail{Type: "reasoning.text", Text: rt.Get("text").Str, Signature: rt.Get("signature").Str,
					Format: "anthropic-claude-v1", Index: len(details)})
			}
		case b.Get("toolUse").Exists():
			u := b.Get("toolUse")
			input := u.Get("input").Raw
			if input == "" {
				input = "{}"
			}
			t.produced += len(u.Get("name").Str) + outputlen.Value(input)
			calls = append(calls, chatform.ToolCall{ID: u.Get("toolUseId").Str, Type: "function", Function: chatform.Function{Name: u.Get("name").Str, Arguments: input}})
		}
	}
	finish := finishReason(r.Get("stopReason").Str, len(calls) > 0)
	msg := &chatform.Message{Role: "assistant", Reasoning: reasoning.String(), ReasoningDetails: details, ToolCalls: calls}
	if s := text.String(); s != "" || len(calls) == 0 {
		msg.Content = &s
	}
	c := chatform.Completion{ID: newID(), Object: "chat.completion", Created: now().Unix(), Model: t.model,
		Choices: []chatform.Choice{{Message: msg, FinishReason: &finish}}, Usage: usageOf(r.Get("usage"))}
	out, err := json.Marshal(c)
	return out, err == nil
}
