package prompt

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/standin/mockprovider"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// corpusTexts are the tokenizer's reference texts: prose in several
// scripts, code, JSON, emoji, numbers, whitespace.
func corpusTexts(t testing.TB) []string {
	data, err := os.ReadFile("../../tokenizer/testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Text
	}
	return out
}

func jsonText(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city",
"parameters":{"type":"object","properties":{"location":{"type":"string","description":"City and country, e.g. Paris, France"},
"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}}}`

// corpusRequests are chat and Responses bodies made of the corpus.
func corpusRequests(t testing.TB) (chat, responses []string) {
	texts := corpusTexts(t)
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	for i, s := range texts {
		chat = append(chat, jsonText(t, map[string]any{"model": "m", "messages": []any{msg("user", s)}}))
		// A conversation: system, named user, assistant, user parts.
		next := texts[(i+1)%len(texts)]
		chat = append(chat, jsonText(t, map[string]any{"model": "m", "messages": []any{
			msg("system", "You are a helpful assistant. Answer briefly."),
			map[string]any{"role": "user", "name": "alice_01", "content": s},
			msg("assistant", next),
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": s}, map[string]any{"type": "text", "text": next}}},
		}}))
		// Tools, a tool call and its result.
		chat = append(chat, fmt.Sprintf(`{"model":"m","tools":[%s],"messages":[{"role":"user","content":%s},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":%s}}]},
{"role":"tool","tool_call_id":"call_1","content":%s}]}`, weatherTool, jsonText(t, s), jsonText(t, jsonText(t, map[string]string{"location": next})), jsonText(t, next)))
		// Structured output.
		chat = append(chat, fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%s}],"response_format":{"type":"json_schema",
"json_schema":{"name":"answer","strict":true,"schema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}}}`, jsonText(t, s)))
		responses = append(responses, jsonText(t, map[string]any{"model": "m", "instructions": "Be brief.", "input": s}))
		responses = append(responses, fmt.Sprintf(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":%s}]},
{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"location\":\"Paris\"}"},
{"type":"function_call_output","call_id":"c1","output":%s}],
"tools":[{"type":"function","name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"location":{"type":"string"}}}}]}`,
			jsonText(t, s), jsonText(t, next)))
	}
	var all []any
	for _, s := range texts {
		all = append(all, msg("user", s), msg("assistant", strings.ToUpper(s)))
	}
	chat = append(chat, jsonText(t, map[string]any{"model": "m", "messages": all}))
	return chat, responses
}

// The count is never below what an OpenAI model bills (the mock's count
// by OpenAI's documented rules over tiktoken's tokens) and at most 5%
// plus 8 tokens above it.
func TestPromptCountBoundsCorpus(t *testing.T) {
	chat, responses := corpusRequests(t)
	for _, name := range tokenizer.Names() {
		enc, err := tokenizer.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		check := func(api, body string, got int64) {
			t.Helper()
			want := int64(mockprovider.OpenAIPromptTokens(enc, api, []byte(body)))
			if got < want || got > want+want/20+8 {
				t.Errorf("%s %s: counted %d, the provider bills %d (allowed %d..%d)\n%s", name, api, got, want, want, want+want/20+8, body)
			}
		}
		for _, body := range chat {
			got, unbounded := CountChat(enc, []byte(body), DefaultMediaPartTokens)
			if unbounded {
				t.Fatalf("unbounded: %s", body)
			}
			check("chat", body, got)
		}
		for _, body := range responses {
			got, _ := CountResponses(enc, []byte(body), DefaultMediaPartTokens)
			check("responses", body, got)
		}
	}
}

// The count is far below the byte bound it replaces for dense text too.
func TestPromptCountBelowByteBound(t *testing.T) {
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	chat, _ := corpusRequests(t)
	for _, body := range chat {
		if got, _ := CountChat(enc, []byte(body), DefaultMediaPartTokens); got > int64(len(body))+PromptOverheadTokens {
			t.Errorf("counted %d, more than the byte bound %d: %s", got, len(body)+PromptOverheadTokens, body)
		}
	}
}

func TestImageTokens(t *testing.T) {
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	// A 1×1 PNG.
	png := "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
	body := func(url, detail string) []byte {
		return []byte(fmt.Sprintf(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q,"detail":%q}}]}]}`, url, detail))
	}
	base, _ := CountChat(enc, []byte(`{"messages":[{"role":"user","content":[]}]}`), 1000)
	for _, tc := range []struct {
		url, detail string
		want        int64
	}{
		{"https://example.com/cat.png", "low", 85},
		{"https://example.com/cat.png", "high", 1000}, // size unknown: media_part_tokens
		{png, "auto", 85 + 170},                       // one tile
	} {
		if got, _ := CountChat(enc, body(tc.url, tc.detail), 1000); got-base != tc.want {
			t.Errorf("%s %s: %d tokens, want %d", tc.url[:20], tc.detail, got-base, tc.want)
		}
	}
	for _, tc := range []struct {
		w, h int
		want int64
	}{{1024, 1024, 765}, {2048, 4096, 1105}, {512, 512, 255}, {4096, 8192, 1105}} {
		if got := imageTiles(tc.w, tc.h); got != tc.want {
			t.Errorf("%dx%d: %d, want %d", tc.w, tc.h, got, tc.want)
		}
	}
	// A file part is content the body does not hold.
	if _, unbounded := CountChat(enc, []byte(`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}]}`), 1000); !unbounded {
		t.Error("a file part is bounded")
	}
}

// A short chat prompt is counted in well under 5 µs.
func BenchmarkCountChatShort(b *testing.B) {
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	body := []byte(`{"model":"openai/gpt-4o","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is the capital of France? Answer in one word."}]}`)
	b.ReportAllocs()
	for b.Loop() {
		CountChat(enc, body, DefaultMediaPartTokens)
	}
}

// Text the model reads back that is not content (an assistant message's
// refusal, reasoning and reasoning details, a predicted output) is
// counted, as the content filters list it.
func TestPromptCountReadsReasoningAndPrediction(t *testing.T) {
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	words := strings.Repeat("several distinct words of reasoning ", 20)
	q, _ := json.Marshal(words)
	base := `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"%s}]%s}`
	plain, _ := CountChat(enc, []byte(fmt.Sprintf(base, "", "")), 0)
	least := int64(enc.Count(words))
	for _, extra := range [][2]string{
		{`,"reasoning":` + string(q), ""},
		{`,"refusal":` + string(q), ""},
		{`,"reasoning_details":[{"type":"reasoning.text","text":` + string(q) + `}]`, ""},
		{"", `,"prediction":{"type":"content","content":` + string(q) + `}`},
	} {
		got, _ := CountChat(enc, []byte(fmt.Sprintf(base, extra[0], extra[1])), 0)
		if got-plain < least {
			t.Errorf("%s%s: counted %d more tokens, the text has %d", extra[0], extra[1], got-plain, least)
		}
	}
}
