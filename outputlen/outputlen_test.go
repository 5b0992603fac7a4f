package outputlen

import (
	"strings"
	"testing"
)

func TestStringLen(t *testing.T) {
	for raw, want := range map[string]int{
		`""`:                 0,
		`"abc"`:              3,
		`"a\"b"`:             3,
		`"\n\t\\"`:           3,
		`"é"`:                2,
		`"\u00e9"`:           2,
		`"\u20ac"`:           3,
		`"\ud83d\ude00"`:     4, // one emoji from a surrogate pair
		`"\ud83d"`:           3, // a lone surrogate: the replacement character
		`"{\"q\":\"Mock\"}"`: 12,
	} {
		if got := StringLen(raw); got != want {
			t.Errorf("StringLen(%s) = %d, want %d", raw, got, want)
		}
	}
}

func TestChatCountsEveryKindOfOutput(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want int
	}{
		"text":              {`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`, 5},
		"tool call":         {`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\":1}"}}]}}]}`, 3 + 7},
		"reasoning":         {`{"choices":[{"delta":{"reasoning":"think"}}]}`, 5},
		"reasoning_content": {`{"choices":[{"delta":{"reasoning_content":"think"}}]}`, 5},
		"refusal":           {`{"choices":[{"delta":{"refusal":"no way"}}]}`, 6},
		"audio":             {`{"choices":[{"delta":{"audio":{"id":"a1","data":"AAAA","transcript":"hi","expires_at":1}}}]}`, 4 + 2},
		"images":            {`{"choices":[{"delta":{"images":[{"type":"image_url","image_url":{"url":"data:x"}}]}}]}`, 6},
		"function_call":     {`{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{}"}}}]}`, 1 + 2},
		"several choices":   {`{"choices":[{"delta":{"content":"ab"}},{"delta":{"content":"cde"}}]}`, 5},
		"annotations":       {`{"choices":[{"delta":{"annotations":[{"type":"url_citation","url_citation":{"url":"https://x"}}]}}]}`, 0},
		"answer":            {`{"choices":[{"message":{"role":"assistant","content":"Hi","refusal":null}}]}`, 2},
		"usage only":        {`{"choices":[],"usage":{"prompt_tokens":3}}`, 0},
		"empty":             {`{}`, 0},
	} {
		if got := Chat([]byte(tc.doc)); got != tc.want {
			t.Errorf("%s: Chat = %d, want %d", name, got, tc.want)
		}
	}
}

func TestResponsesAndMessages(t *testing.T) {
	events := []struct {
		typ, doc string
		want     int
	}{
		{"response.output_text.delta", `{"type":"response.output_text.delta","item_id":"m","delta":"abc"}`, 3},
		{"response.function_call_arguments.delta", `{"delta":"{\"q\""}`, 4},
		{"response.reasoning_text.delta", `{"delta":"hmm"}`, 3},
		{"response.reasoning_summary_text.delta", `{"delta":"sum"}`, 3},
		{"response.refusal.delta", `{"delta":"no"}`, 2},
		{"response.audio.delta", `{"delta":"QUJD"}`, 4},
		{"response.image_generation_call.partial_image", `{"partial_image_b64":"QUJD","partial_image_index":0}`, 4},
		{"response.output_item.added", `{"item":{"type":"function_call","id":"fc","call_id":"c","name":"tool","arguments":""}}`, 4},
		{"response.output_item.done", `{"item":{"type":"function_call","name":"tool","arguments":"{}"}}`, 0},
		{"response.completed", `{"response":{"output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}}`, 0},
	}
	for _, e := range events {
		if got := ResponsesEvent(e.typ, []byte(e.doc)); got != e.want {
			t.Errorf("ResponsesEvent(%s) = %d, want %d", e.typ, got, e.want)
		}
	}
	if got := ResponsesAnswer([]byte(`{"output":[{"type":"message","id":"m","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]},{"type":"function_call","name":"f","arguments":"{}"}],"usage":null}`)); got != 2+1+2 {
		t.Errorf("ResponsesAnswer = %d", got)
	}
	for _, e := range []struct {
		typ, doc string
		want     int
	}{
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, 2},
		{"content_block_delta", `{"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`, 4},
		{"content_block_delta", `{"delta":{"type":"thinking_delta","thinking":"hmm"}}`, 3},
		{"content_block_delta", `{"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`, 0},
		{"content_block_start", `{"content_block":{"type":"tool_use","id":"t","name":"get","input":{}}}`, 3},
		{"message_delta", `{"delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`, 0},
	} {
		if got := MessagesEvent(e.typ, []byte(e.doc)); got != e.want {
			t.Errorf("MessagesEvent(%s) = %d, want %d", e.doc, got, e.want)
		}
	}
	if got := MessagesAnswer([]byte(`{"content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"t","name":"f","input":{"q":"x","n":12}}]}`)); got != 2+1+1+2 {
		t.Errorf("MessagesAnswer = %d", got)
	}
}

// The meter measures every streamed event: measuring allocates nothing.
func TestMeasuringAllocatesNothing(t *testing.T) {
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello \"there\""},"finish_reason":null}]}`)
	tool := []byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}}]}`)
	ev := []byte(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"m","output_index":0,"content_index":0,"delta":"Hello"}`)
	msg := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`)
	if n := testing.AllocsPerRun(100, func() {
		_ = Chat(chunk) + Chat(tool) + ResponsesEvent("response.output_text.delta", ev) + MessagesEvent("content_block_delta", msg)
	}); n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

func BenchmarkChatChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hello there"},"finish_reason":null}]}`)
	b.ReportAllocs()
	for b.Loop() {
		Chat(chunk)
	}
}

func TestSkipString(t *testing.T) {
	for _, s := range []string{`"a"`, `"a\"b"`, `"\\"`, `"\\\""`, `"` + strings.Repeat("x", 30) + `\\"`, `"` + strings.Repeat("x", 22) + `\"` + strings.Repeat("y", 30) + `"`,
		`"` + strings.Repeat("x", 23) + `\\` + `"`, `"` + strings.Repeat("\\\\", 20) + `"`} {
		if got := skipString(s+`,"next"`, 0); got != len(s) {
			t.Errorf("skipString(%s) = %d, want %d", s, got, len(s))
		}
	}
	if skipString(`"open`, 0) != -1 || skipString(`"`+strings.Repeat("x", 40)+`\"`, 0) != -1 {
		t.Error("an open string closed")
	}
}
