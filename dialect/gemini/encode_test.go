package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
)

// chatBodies reach every member of the request encoder: texts needing
// escapes, images, tool calls and results, tools, tool choices, every
// generation setting, and raw members with spaces to compact.
var chatBodies = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"system","content":"be <terse> & kind` + "\u2028" + `"},{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":[{"type":"text","text":"a\"b\\c\n\t\u0001 é ` + "\xff" + `"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBE"}}]}],"max_tokens":100,"max_completion_tokens":200,"temperature":0.7,"top_p":1e-7,"top_k":40,"seed":-3,"presence_penalty":1e21,"frequency_penalty":-0.5,"stop":["a","<b>"],"n":1,"reasoning_effort":"high","user":"dropped"}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":" { \"a\" : \"<b>\" , \"n\": [1, 2] } "}},{"id":"c2","type":"function","function":{"name":"g","arguments":""}}]},{"role":"tool","tool_call_id":"c1","content":"plain <result>"},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"{\"ok\" : true}"}]}],"tools":[{"type":"function","function":{"name":"f","description":"does <f>","parameters":{ "type": "object" }}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"response_format":{"type":"json_schema","json_schema":{"schema":{ "type" : "object" }}}}`,
	`{"messages":[{"role":"system","content":[]},{"role":"user","content":[]},{"role":"assistant","content":"a"},{"role":"assistant","content":[{"type":"text","text":""}]}],"tool_choice":"required","stop":"x","reasoning_effort":"none","response_format":{"type":"json_object"}}`,
	`{"messages":[{"role":"user","content":"x"}],"tool_choice":"none","tools":[],"reasoning_effort":"bogus","temperature":0}`,
	`{"messages":[{"role":"user","content":"x"}],"tool_choice":"auto","max_tokens":0}`,
	`{"messages":[{"role":"user","content":"x"}],"temperature":1e999}`,
	`{"messages":{"role":"user","content":"one message, not in an array"}}`,
	`{"messages":[{"role":"user","role":"model","content":"a","content":"b","\u0072ole":"x"},"odd",{"role":"tool","tool_call_id":"nope"}]}`,
	`{"messages":[{"role":"user","content":"esc \u0041 \n"},{"role":"assistant","tool_calls":{"id":"c","function":{"name":"f"}}},{"role":"tool","tool_call_id":"c","content":5}]}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a <b>","reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"r","format":"google-gemini-v1","index":0},{"type":"reasoning.encrypted","data":"c2ln\u0041","id":"c1","format":"google-gemini-v1","index":1},{"type":"reasoning.encrypted","data":"bG9vc2U=","format":"google-gemini-v1","index":2},{"type":"reasoning.encrypted","data":"YW50","format":"anthropic-claude-v1","index":3}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"tool","tool_call_id":"c2","content":"y"}],"reasoning_effort":"medium"}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"reasoning_details":[{"type":"reasoning.encrypted","data":"bG9vc2U=","format":"google-gemini-v1"}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}],"reasoning_effort":"max"}`,
	`{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a","reasoning_details":[{"type":"reasoning.encrypted","data":5}]}],"reasoning_effort":"minimal"}`,
}

// TestRequestEncoderIsEncodingJSONs checks the hand-written request
// encoder against encoding/json, byte for byte.
func TestRequestEncoderIsEncodingJSONs(t *testing.T) {
	for _, body := range chatBodies {
		for _, max := range []int64{0, 512} {
			checkRequestEncoder(t, []byte(body), max)
		}
	}
	// Shapes no chat body makes.
	nan, s := math.NaN(), ""
	for _, r := range []*request{
		{},
		{Contents: []content{{Parts: nil}, {Role: "user", Parts: []part{{}, {Text: &s}}}}},
		{Contents: []content{}, Tools: []tool{{}}, GenerationConfig: &generationConfig{ThinkingConfig: &thinkingConfig{}}},
		{GenerationConfig: &generationConfig{Temperature: &nan}},
		{Contents: []content{{Parts: []part{{FunctionCall: &functionCall{Name: "f"}}}}}},
	} {
		checkEncoded(t, r)
	}
}

func FuzzRequestEncoderIsEncodingJSONs(f *testing.F) {
	for _, b := range chatBodies {
		f.Add([]byte(b), int64(100))
	}
	f.Fuzz(func(t *testing.T, body []byte, max int64) {
		if json.Valid(body) {
			checkRequestEncoder(t, body, max)
		}
	})
}

func checkRequestEncoder(t *testing.T, body []byte, max int64) {
	t.Helper()
	msgs := gjson.GetBytes(body, "messages")
	sys, contents, err := contentsOf(msgs)
	refSys, refContents, refErr := refContentsOf(msgs)
	if fmt.Sprint(err) != fmt.Sprint(refErr) || !reflect.DeepEqual(sys, refSys) || !reflect.DeepEqual(contents, refContents) {
		t.Fatalf("%s: contentsOf differs from the reference: %v / %v", body, err, refErr)
	}
	for _, level := range []bool{false, true} {
		want, wantErr := refFromChat(body, max, level)
		got, gotErr := fromChat(body, max, level)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
			t.Fatalf("%s (level %v):\n got %s (%v)\nwant %s (%v)", body, level, got, gotErr, want, wantErr)
		}
		r, err := buildRequest(body, max, level)
		if err != nil {
			return
		}
		checkEncoded(t, r)
	}
}

func checkEncoded(t *testing.T, r *request) {
	t.Helper()
	want, wantErr := json.Marshal(r)
	got, ok := appendRequest([]byte("x"), r)
	if ok != (wantErr == nil) || ok && !bytes.Equal(got, append([]byte("x"), want...)) {
		t.Fatalf("%+v:\n got %s (%v)\nwant %s (%v)", r, got, ok, want, wantErr)
	}
}

// refConvertJSON is convertJSON as it was written with encoding/json: it turns a GenerateContentResponse into a chat completion.
func (t *toChat) refConvertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	r := gjson.ParseBytes(body)
	if !r.IsObject() || !(r.Get("candidates").IsArray() || r.Get("promptFeedback").Exists()) {
		return nil, false
	}
	cand := r.Get("candidates.0")
	t.produced = refOutputOf(cand.Get("content.parts"))
	text, reasoning, calls, details := t.refPartsOf(cand.Get("content.parts"))
	for i := range calls {
		calls[i].Index = nil
	}
	for i := range details {
		details[i].Index = i
	}
	finish := finishReason(cand.Get("finishReason").Str, len(calls) > 0)
	if r.Get("promptFeedback.blockReason").Str != "" {
		finish = "content_filter" // the prompt was blocked: no candidate
	} else if finish == "" {
		finish = "stop"
	}
	msg := &chatform.Message{Role: "assistant", Reasoning: reasoning, ReasoningDetails: details, ToolCalls: calls}
	if text != "" || len(calls) == 0 {
		msg.Content = &text
	}
	c := chatform.Completion{ID: t.idOf(r.Get("responseId")), Object: "chat.completion", Created: now().Unix(), Model: t.modelOf(r.Get("modelVersion")),
		Choices: []chatform.Choice{{Message: msg, FinishReason: &finish}}, Usage: usageOf(r.Get("usageMetadata"))}
	out, err := json.Marshal(c)
	return out, err == nil
}

// answers reach every member of the answer encoder.
var answers = []string{
	`{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello <b> & \u2028 \"q\" ` + "\xff" + `"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"totalTokenCount":15,"cachedContentTokenCount":3,"thoughtsTokenCount":2},"modelVersion":"gemini-2.5-flash","responseId":"r1"}`,
	`{"candidates":[{"content":{"parts":[{"text":"think","thought":true},{"functionCall":{"name":"f","args":{ "a" : 1 }}},{"functionCall":{"name":"g"}},{"text":"t"}]},"finishReason":"STOP"}]}`,
	`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"MAX_TOKENS"}],"usageMetadata":{}}`,
	`{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":4}}`,
	`{"candidates":[],"modelVersion":"","responseId":""}`,
	`{"candidates":[{"content":{"parts":[]},"finishReason":"SAFETY"}],"candidates":[{"finishReason":"STOP"}],"responseId":"first","responseId":"second"}`,
	`{"candidates":[{"finishReason":"OTHER"}],"usageMetadata":"x"}`,
	`{"candidates":[{"content":{"parts":{"text":"one part, not in an array"}}}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a"},"odd",5,null,{"text":"b","thought":"true"},{"text":"c","thought":false}]}}]}`,
	`{"candidates":[{"content":[{"parts":[{"text":"x"}]}]}]}`,
	`{"candidates":[["nested"]],"promptFeedback":{}}`,
	`{"candidates":{"0":{"content":{"parts":[{"text":"keyed"}]},"finishReason":"STOP"}},"promptFeedback":{"blockReason":""}}`,
	`{"candidates":[{"content":{"parts":[{"text":"esc \u0041\n","text":"dup"}],"parts":[]},"finishReason":"STOP","finishReason":"SAFETY"}]}`,
	`{"candidates":{}}`, `{"other":1}`, `[]`, `{"candidates":[1]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b","thought":true,"thoughtSignature":"c2ln"},{"functionCall":{"name":"f","args":{}},"thoughtSignature":"Zg=="},{"functionCall":{"name":"g","args":{}}}]},"finishReason":"STOP"}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"only","thoughtSignature":"bG9vc2U\u003d"}]},"finishReason":"STOP"}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"x","thoughtSignature":5},{"text":"","thought":true}]}}]}`,
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
		{Choices: []chatform.Choice{{Delta: &chatform.Message{Reasoning: "r", ToolCalls: []chatform.ToolCall{{Index: &i, ID: "call_2", Type: "function", Function: chatform.Function{Name: "f", Arguments: `{"a":"<"}`}}}}}}},
		{Choices: []chatform.Choice{{Message: &chatform.Message{Content: &s}}}, Usage: chatform.WithReasoningTokens(chatform.Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3,
			PromptTokensDetails: chatform.PromptDetails{CachedTokens: 4}}, 5)},
	} {
		want, _ := json.Marshal(c)
		if got, _ := c.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("got %s\nwant %s", got, want)
		}
	}
}

// refOutputOf is the old outputOf: the model output of a candidate's parts (outputlen's rule).
func refOutputOf(parts gjson.Result) int {
	n := 0
	for _, p := range parts.Array() {
		if s := p.Get("text"); s.Exists() {
			n += outputlen.StringLen(s.Raw)
		}
		if c := p.Get("functionCall"); c.Exists() {
			n += len(c.Get("name").Str) + outputlen.Value(c.Get("args").Raw)
		}
	}
	return n
}

// refPartsOf is the old partsOf: it splits a candidate's parts into text, reasoning and calls.
func (t *toChat) refPartsOf(parts gjson.Result) (text, reasoning string, calls []chatform.ToolCall, details []chatform.ReasoningDetail) {
	var tb, rb strings.Builder
	for _, p := range parts.Array() {
		id := ""
		switch {
		case p.Get("thought").Bool():
			rb.WriteString(p.Get("text").Str)
			if s := p.Get("text").Str; s != "" {
				if n := len(details); n > 0 && details[n-1].Type == "reasoning.text" {
					details[n-1].Text += s
				} else {
					details = append(details, chatform.ReasoningDetail{Type: "reasoning.text", Text: s, Format: "google-gemini-v1"})
				}
			}
		case p.Get("functionCall").Exists():
			c := p.Get("functionCall")
			args := c.Get("args").Raw
			if args == "" {
				args = "{}"
			}
			i := t.calls
			t.calls++
			id = "call_" + strconv.Itoa(i)
			calls = append(calls, chatform.ToolCall{Index: &i, ID: id, Type: "function",
				Function: chatform.Function{Name: c.Get("name").Str, Arguments: args}})
		default:
			tb.WriteString(p.Get("text").Str)
		}
		if sig := p.Get("thoughtSignature").Str; sig != "" {
			details = append(details, chatform.ReasoningDetail{Type: "reasoning.encrypted", Data: sig, ID: id, Format: "google-gemini-v1"})
		}
	}
	return tb.String(), rb.String(), calls, details
}

// refContentsOf is the old contentsOf: it translates the messages: system and developer messages
// become the system instruction; the others contents of role user or
// model (tool results are user parts, consecutive parts of one role
// merged).
func refContentsOf(msgs gjson.Result) (*content, []content, error) {
	var system *content
	var contents []content
	names := map[string]string{} // tool call id -> function name
	add := func(role string, parts ...part) {
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, content{Role: role, Parts: parts})
	}
	for i, m := range msgs.Array() {
		path := fmt.Sprintf("messages[%d]", i)
		switch role := m.Get("role").Str; role {
		case "system", "developer":
			parts, err := textParts(m.Get("content"), path)
			if err != nil {
				return nil, nil, err
			}
			if system == nil {
				system = &content{}
			}
			system.Parts = append(system.Parts, parts...)
		case "user":
			parts, err := userParts(m.Get("content"), path)
			if err != nil {
				return nil, nil, err
			}
			add("user", parts...)
		case "assistant":
			sigs, err := signaturesOf(m.Get("reasoning_details"), path)
			if err != nil {
				return nil, nil, err
			}
			var parts []part
			if c := m.Get("content"); c.Exists() && c.Type != gjson.Null {
				p, err := textParts(c, path)
				if err != nil {
					return nil, nil, err
				}
				parts = p
			}
			for j, call := range m.Get("tool_calls").Array() {
				args := call.Get("function.arguments").Str
				if args == "" {
					args = "{}"
				}
				if !gjson.Valid(args) || !gjson.Parse(args).IsObject() {
					return nil, nil, fieldError(fmt.Sprintf("%s.tool_calls[%d].function.arguments", path, j), "expected a JSON object")
				}
				name := call.Get("function.name").Str
				names[call.Get("id").Str] = name
				parts = append(parts, part{FunctionCall: &functionCall{Name: name, Args: json.RawMessage(args)}, ThoughtSignature: sigs.byCall[call.Get("id").Str]})
			}
			sigs.sign(parts)
			if len(parts) > 0 {
				add("model", parts...)
			}
		case "tool":
			id := m.Get("tool_call_id").Str
			name, ok := names[id]
			if !ok {
				return nil, nil, fieldError(path+".tool_call_id", fmt.Sprintf("no assistant tool call %q before it", id))
			}
			result := m.Get("content")
			text := result.Str
			if result.IsArray() {
				var b strings.Builder
				for _, p := range result.Array() {
					b.WriteString(p.Get("text").Str)
				}
				text = b.String()
			}
			// The response is an object: the tool's JSON object as it is,
			// any other result under "content".
			resp := `{"content":` + string(jsonstr.Quote(text)) + `}`
			if gjson.Valid(text) && gjson.Parse(text).IsObject() {
				resp = text
			}
			add("user", part{FunctionResponse: &functionResponse{Name: name, Response: json.RawMessage(resp)}})
		default:
			return nil, nil, fieldError(path+".role", fmt.Sprintf("unsupported role %q", role))
		}
	}
	return system, contents, nil
}

// refFromChat is fromChat as it was, with encoding/json: it translates a chat completions body into a GenerateContentRequest.
func refFromChat(chat []byte, maxTokens int64, level bool) ([]byte, error) {
	req := gjson.ParseBytes(chat)
	if !req.IsObject() {
		return nil, fieldError("body", "expected a JSON object")
	}
	var out request
	gc := &generationConfig{}
	var err error
	req.ForEach(func(k, v gjson.Result) bool {
		switch name := k.Str; name {
		case "messages":
			out.SystemInstruction, out.Contents, err = refContentsOf(v)
		case "tools":
			out.Tools, err = toolsOf(v)
		case "tool_choice":
			out.ToolConfig, err = toolChoiceOf(v)
		case "max_tokens", "max_completion_tokens":
			gc.MaxOutputTokens = max(gc.MaxOutputTokens, v.Int())
		case "temperature":
			f := v.Float()
			gc.Temperature = &f
		case "top_p":
			f := v.Float()
			gc.TopP = &f
		case "top_k":
			n := v.Int()
			gc.TopK = &n
		case "seed":
			n := v.Int()
			gc.Seed = &n
		case "presence_penalty":
			f := v.Float()
			gc.PresencePenalty = &f
		case "frequency_penalty":
			f := v.Float()
			gc.FrequencyPenalty = &f
		case "stop":
			if v.Type == gjson.String {
				gc.StopSequences = []string{v.Str}
			} else {
				for _, s := range v.Array() {
					gc.StopSequences = append(gc.StopSequences, s.Str)
				}
			}
		case "n":
			if v.Int() > 1 {
				err = fieldError("n", "Gemini providers answer one choice")
			}
		case "response_format":
			switch v.Get("type").Str {
			case "json_object":
				gc.ResponseMimeType = "application/json"
			case "json_schema":
				gc.ResponseMimeType = "application/json"
				if s := v.Get("json_schema.schema"); s.Exists() {
					gc.ResponseJSONSchema = json.RawMessage(s.Raw)
				}
			}
		case "reasoning_effort":
			if level {
				if l, ok := levels[v.Str]; ok {
					gc.ThinkingConfig = &thinkingConfig{ThinkingLevel: l, IncludeThoughts: true}
				}
			} else if b, ok := budgets[v.Str]; ok {
				gc.ThinkingConfig = &thinkingConfig{ThinkingBudget: &b, IncludeThoughts: b > 0}
			}
		case "functions", "function_call":
			err = fieldError(name, "not served by Gemini providers; send tools")
		default:
			// Fields Gemini has no equivalent of (user, logprobs,
			// logit_bias, stream_options, ...) are dropped, as providers
			// that lack a parameter ignore it.
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if gc.MaxOutputTokens == 0 && maxTokens > 0 {
		gc.MaxOutputTokens = maxTokens
	}
	if b, _ := json.Marshal(gc); string(b) != "{}" {
		out.GenerationConfig = gc
	}
	if len(out.Contents) == 0 {
		return nil, fieldError("messages", "needs a user or assistant message")
	}
	return json.Marshal(out)
}
