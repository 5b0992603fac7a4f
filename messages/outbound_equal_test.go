package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
)

// chatBodies are chat requests that reach every branch of ChatToAnthropic:
// texts needing escapes (HTML characters, U+2028, invalid UTF-8), raw
// members with spaces to compact, parts, images, files, tool calls and
// results, tools of both kinds, cache_control, duplicate keys and errors.
var chatBodies = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","max_tokens":512,"temperature":1.5,"top_p":0.9,"stream":true,"user":"u<1>","stop":"x","messages":[{"role":"system","content":"be <terse> & kind\u2028"},{"role":"developer","content":[{"type":"text","text":"dev","cache_control":{ "type" : "ephemeral" }}]},{"role":"user","content":"a\"b\\c\n\t\u0001 é ` + "\xff" + `"},{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"more"}],"cache_control":{"type":"ephemeral"}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"q","cache_control":{"type":"ephemeral","ttl":"1h"}},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":" { \"a\" : \"<b>\" , \"n\": [1, 2] } "}},{"id":"c2","type":"function","function":{"name":"g","arguments":""}}]},{"role":"tool","tool_call_id":"c1","content":"r1"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"r2"}]},{"role":"tool","tool_call_id":"c3","content":""}],"tools":[{"type":"function","function":{"name":"f","description":"does <f> & more","parameters":{ "type": "object", "properties": {"a":{"type":"string"}} }},"cache_control":{"type":"ephemeral"}},{"type":"function","function":{"name":"g"}},{"type":"web_search_20250305","name":"web_search", "max_uses" : 3}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"image_url","image_url":"https://x/y.png","cache_control":{"type":"ephemeral"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBE"}}]}],"max_completion_tokens":3000,"reasoning_effort":"high","top_k":5,"top_p":0.5,"temperature":0.2,"tool_choice":"auto","tools":[]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"reasoning_effort":"medium","thinking":{"type":"enabled","budget_tokens":2000},"stop":["a","b"],"seed":1,"n":1,"metadata":{"a":1},"vendor_x":{"k" : "v"}}`,
	`{"role":"x","messages":[{"role":"user","role":"assistant","content":"first","content":"second"}]}`,
	`{"model":"m","messages":[{"role":"assistant","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]}],"tool_choice":"required","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f"}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"none","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f"}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.text","text":"t<","signature":"s","index":0},{"type":"reasoning.encrypted","data":"d"}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`,
	// Errors, each naming its field.
	`[]`,
	`{"messages":{}}`,
	`{"messages":[]}`,
	`{"messages":[{"role":"system","content":"s"}]}`,
	`{"messages":[{"role":"robot","content":"x"}]}`,
	`{"messages":[{"role":"user","content":5}]}`,
	`{"messages":[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`,
	`{"messages":[{"role":"system","content":[{"type":"file","file":{"file_data":"x"}}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"input_audio"}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,AA"}}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:text/plain;base64,AA"}}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":{}}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"id":"","function":{"name":"f"}}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"[1]"}}]}]}`,
	`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{bad"}}]}]}`,
	`{"messages":[{"role":"tool","content":"x"}]}`,
	`{"messages":[{"role":"user","content":"x"}],"tools":{}}`,
	`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]}`,
	`{"messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}`,
	`{"messages":[{"role":"user","content":"x"}],"system":"s"}`,
	`{"messages":[{"role":"user","content":"x"}],"n":2}`,
	`{"messages":[{"role":"user","content":"x"}],"functions":[]}`,
}

// TestChatToAnthropicEqualsTheReference checks the hand-written
// translation against the encoding/json one it replaced, byte for byte.
func TestChatToAnthropicEqualsTheReference(t *testing.T) {
	bodies := append([]string{}, chatBodies...)
	if cc, err := os.ReadFile("testdata/claude-code-2.1.331.json"); err == nil {
		if chat, err := MessagesToChat(cc); err == nil {
			bodies = append(bodies, string(chat))
		}
	}
	for i, body := range bodies {
		for _, max := range []int64{0, 100, 5000} {
			checkChatToAnthropic(t, fmt.Sprintf("body %d, max %d", i, max), []byte(body), max)
		}
	}
}

// FuzzChatToAnthropicEqualsTheReference: the same on any valid JSON (the
// router refuses a body that is not).
func FuzzChatToAnthropicEqualsTheReference(f *testing.F) {
	for _, b := range chatBodies {
		f.Add([]byte(b), int64(1000))
	}
	f.Fuzz(func(t *testing.T, body []byte, max int64) {
		if !json.Valid(body) {
			return
		}
		checkChatToAnthropic(t, "fuzz", body, max)
	})
}

func checkChatToAnthropic(t *testing.T, name string, body []byte, max int64) {
	t.Helper()
	want, wantErr := refChatToAnthropic(body, max)
	got, gotErr := ChatToAnthropic(body, max)
	if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) || !bytes.Equal(want, got) {
		t.Fatalf("%s: %s\n got %s (%v)\nwant %s (%v)", name, body, got, gotErr, want, wantErr)
	}
}

// anthropicAnswers reach every member of the answer encoder.
var anthropicAnswers = []string{
	`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Hello <b> & \u2028 \"q\" ` + "\xff" + ` é"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":3,"cache_creation_input_tokens":1,"server_tool_use":{ "web_search_requests" : 1 }}}`,
	`{"id":"m","type":"message","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"see","citations":[{"type":"web_search_result_location","url":"https://x","title":"X <t>","cited_text":"c"},{"url":"u","title":""}]},{"type":"tool_use","id":"t1","name":"f","input":{ "a" : 1 }},{"type":"tool_use","id":"t2","name":"g"},{"type":"server_tool_use","id":"s"},5,"odd"],"stop_reason":"tool_use"}`,
	`{"type":"message","content":[],"stop_reason":"max_tokens","usage":{}}`,
	`{"type":"message","type":"error","content":[{"type":"text","text":"a","text":"b"}],"content":"x","model":"","model":"second","stop_reason":"refusal"}`,
	`{"type":"message","content":{}}`, `{"type":"error","content":[]}`, `[]`, `{"type":"message","content":[{"type":"text","text":"esc \u0041\n"}],"usage":"x"}`,
}

// TestAnthropicConvertJSONEqualsTheReference checks the plain answer's
// translation against the encoding/json one it replaced.
func TestAnthropicConvertJSONEqualsTheReference(t *testing.T) {
	for _, a := range anthropicAnswers {
		checkAnthropicConvertJSON(t, []byte(a))
	}
}

func FuzzAnthropicConvertJSONEqualsTheReference(f *testing.F) {
	for _, a := range anthropicAnswers {
		f.Add([]byte(a))
	}
	f.Fuzz(func(t *testing.T, a []byte) {
		if json.Valid(a) {
			checkAnthropicConvertJSON(t, a)
		}
	})
}

func checkAnthropicConvertJSON(t *testing.T, a []byte) {
	t.Helper()
	defer func(n func() time.Time) { now = n }(now)
	now = func() time.Time { return time.Unix(1700000000, 5) }
	old, neu := NewAnthropicToChat(httptest.NewRecorder(), "m"), NewAnthropicToChat(httptest.NewRecorder(), "m")
	want, wantOK := old.refConvertJSON(a)
	got, gotOK := neu.convertJSON(a)
	if gotOK != wantOK || !bytes.Equal(got, want) || old.Produced != neu.Produced {
		t.Fatalf("%s:\n got %s (%v, %d)\nwant %s (%v, %d)", a, got, gotOK, neu.Produced, want, wantOK, old.Produced)
	}
}

// refConvertJSON is convertJSON as it was, with encoding/json: it turns a Messages answer into a chat completion.
func (aw *AnthropicToChat) refConvertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	aw.Produced = outputlen.MessagesAnswer(body)
	m := gjson.ParseBytes(body)
	if !m.IsObject() || m.Get("type").Str != "message" || !m.Get("content").IsArray() {
		return nil, false
	}
	model := m.Get("model").Str
	if model == "" {
		model = aw.model
	}
	var text, reasoning strings.Builder
	var runes int64
	msg := &chatform.Message{Role: "assistant"}
	for _, b := range m.Get("content").Array() {
		switch b.Get("type").Str {
		case "thinking":
			reasoning.WriteString(b.Get("thinking").Str)
			msg.ReasoningDetails = append(msg.ReasoningDetails, chatform.ReasoningDetail{Type: "reasoning.text", Text: b.Get("thinking").Str,
				Signature: b.Get("signature").Str, Format: "anthropic-claude-v1", Index: len(msg.ReasoningDetails)})
		case "redacted_thinking":
			msg.ReasoningDetails = append(msg.ReasoningDetails, chatform.ReasoningDetail{Type: "reasoning.encrypted", Data: b.Get("data").Str,
				Format: "anthropic-claude-v1", Index: len(msg.ReasoningDetails)})
		case "text":
			t := b.Get("text").Str
			start := runes
			text.WriteString(t)
			runes += int64(utf8.RuneCountInString(t))
			msg.Annotations = append(msg.Annotations, citationsOf(b.Get("citations").Array(), start, runes)...)
		case "tool_use":
			input := b.Get("input").Raw
			if input == "" {
				input = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, chatform.ToolCall{ID: b.Get("id").Str, Type: "function",
				Function: chatform.Function{Name: b.Get("name").Str, Arguments: input}})
		}
	}
	if text.Len() > 0 || len(msg.ToolCalls) == 0 {
		s := text.String()
		msg.Content = &s
	}
	msg.Reasoning = reasoning.String()
	finish := FinishReason(m.Get("stop_reason").Str)
	var u anthropicUsage
	u.merge(m.Get("usage"))
	c := chatform.Completion{ID: m.Get("id").Str, Object: "chat.completion", Created: now().Unix(), Model: model,
		Choices: []chatform.Choice{{Message: msg, FinishReason: &finish}}}
	if u.seen {
		c.Usage = u.chat()
	}
	out, err := json.Marshal(c)
	return out, err == nil
}
