package prompt

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func boundOf(t *testing.T, body string) Bound {
	t.Helper()
	f, apiErr := reqbody.ParseObject([]byte(body))
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return NewBound(f, len(body), 1000)
}

// TestPromptBoundCoversDenseText: for text a byte-level tokenizer cuts a
// token per byte, the bound is still above the worst count (the UTF-8
// bytes of the text, 4 tokens a message, 3 to prime the reply).
func TestPromptBoundCoversDenseText(t *testing.T) {
	for _, text := range []string{
		"", "a", strings.Repeat("a ", 1500), strings.Repeat("7", 999), strings.Repeat("漢字", 300),
		strings.Repeat("🎉", 250), "line\nbreak\t\"quoted\"",
	} {
		for _, n := range []int{1, 2, 50} {
			msgs := make([]string, n)
			for i := range msgs {
				msgs[i] = `{"role":"user","name":"x","content":` + jsonString(text) + `}`
			}
			body := `{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`
			worst := int64(n)*(int64(len(text))+1+4) + 3
			if b := boundOf(t, body); b.Tokens < worst || b.Unbounded {
				t.Errorf("%d messages of %d runes: bound %+v, worst %d", n, utf8.RuneCountInString(text), b, worst)
			}
		}
	}
}

func TestPromptBoundParts(t *testing.T) {
	for _, tc := range []struct {
		body      string
		media     int64
		tools     bool
		unbounded bool
	}{
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, 0, false, false},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}},{"type":"text","text":"hi"},{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`, 2, false, false},
		{`{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, 0, true, false},
		{`{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, 0, true, false},
		{`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}]}`, 0, false, true},
		{`{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://x/v"}}]}]}`, 0, false, true},
		{`{"messages":[{"role":"assistant","audio":{"id":"audio_1"}}]}`, 0, false, true},
		{`{"input":"hi"}`, 0, false, false},
		{`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,AA=="},{"type":"input_text","text":"x"}]},` +
			`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","file_id":"f"}]}]}`, 2, false, false},
		{`{"input":[{"type":"item_reference","id":"msg_1"}]}`, 0, false, true},
		{`{"input":[{"type":"input_file","file_url":"https://x/a.pdf"}]}`, 0, false, true},
		{`{"input":"hi","previous_response_id":"resp_1"}`, 0, false, true},
		{`{"input":"hi","previous_response_id":null}`, 0, false, false},
		{`{"input":"hi","prompt":{"id":"pmpt_1"}}`, 0, false, true},
		{`{"prompt":"Once upon a time"}`, 0, false, false},
		{`{"prompt":[1, 2, 3]}`, 0, false, false},
	} {
		b := boundOf(t, tc.body)
		want := int64(len(tc.body)) + PromptOverheadTokens + tc.media*1000
		if tc.tools {
			want += toolsOverheadTokens
		}
		if b.Tokens != want || b.Unbounded != tc.unbounded {
			t.Errorf("%s: bound %+v, want %d unbounded %t", tc.body, b, want, tc.unbounded)
		}
	}
}

func TestPromptBoundContextWindow(t *testing.T) {
	m := &catalog.Model{ContextLength: 8192}
	for _, tc := range []struct {
		b    Bound
		want int64
	}{
		{Bound{Tokens: 100}, 100},
		{Bound{Tokens: 100_000}, 8192},
		{Bound{Tokens: 100, Unbounded: true}, 8192},
	} {
		if got := tc.b.TokensFor(m); got != tc.want {
			t.Errorf("%+v: %d, want %d", tc.b, got, tc.want)
		}
	}
	// an unknown context window bounds nothing
	if got := (Bound{Tokens: 100_000, Unbounded: true}).TokensFor(&catalog.Model{}); got != 100_000 {
		t.Errorf("unknown context: %d", got)
	}
}

// BenchmarkPromptBound bounds a 200-message, ~400 KB chat body with text
// and image parts: the walk of the messages the router adds to parsing.
func BenchmarkPromptBound(b *testing.B) {
	msg := `{"role":"user","content":[{"type":"text","text":` + jsonString(strings.Repeat("dense text ", 180)) +
		`},{"type":"image_url","image_url":{"url":"https://example.com/i.png"}}]}`
	body := []byte(`{"model":"m","messages":[` + strings.TrimSuffix(strings.Repeat(msg+",", 200), ",") + `]}`)
	f, apiErr := reqbody.ParseObject(body)
	if apiErr != nil {
		b.Fatal(apiErr)
	}
	f.Get("messages")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if p := NewBound(f, len(body), DefaultMediaPartTokens); p.Tokens < int64(len(body)) {
			b.Fatal(p)
		}
	}
}

// gjsonPartCount is partCount.items as gjson's iteration reads it: the
// reference the byte walk must agree with.
func gjsonPartCount(list gjson.Result) (c partCount) {
	var parts func(content gjson.Result)
	parts = func(content gjson.Result) {
		if !content.IsArray() {
			return
		}
		content.ForEach(func(_, part gjson.Result) bool {
			typ := part.Get("type").Str
			c.part(typ)
			if typ == "tool_result" {
				parts(part.Get("content"))
			}
			return true
		})
	}
	if !list.IsArray() {
		return c
	}
	list.ForEach(func(_, item gjson.Result) bool {
		var typ string
		item.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "type":
				typ = v.Str
			case "content", "output":
				parts(v)
			case "audio":
				c.unbounded = c.unbounded || v.Type != gjson.Null
			}
			return true
		})
		c.item(typ)
		return true
	})
	return c
}

// On any body jsoncheck accepts, the walk counts what gjson's iteration
// counts.
func FuzzPartCountMatchesGJSON(f *testing.F) {
	f.Add(`[{"role":"user","content":[{"type":"text","text":"a \"b\" \\"},{"type":"image_url","image_url":{"url":"x"}}]}]`)
	f.Add(`[{"type":"computer_call_output"},{"type":"item_reference","id":"x"},{"role":"assistant","audio":{"id":"a"}}]`)
	f.Add(`[{"role":"user","content":[{"type":"tool_result","content":[{"type":"image","source":{}}]}]},1,"s",null,[]]`)
	f.Add(`[{"c\u006fntent":[{"t\u0079pe":"input_file"}]},{"content":"text"},{"content":[7,{"type":1}]}]`)
	f.Fuzz(func(t *testing.T, list string) {
		if jsoncheck.Check([]byte(list), nil) != nil {
			return
		}
		var got partCount
		got.items(gjson.Parse(list))
		if want := gjsonPartCount(gjson.Parse(list)); got != want {
			t.Fatalf("%s: walk %+v, gjson %+v", list, got, want)
		}
	})
}
