package routing

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/contextcompression"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// conversation is a chat body: a system prompt, a first question, turns
// of filler with a tool call and its results in the middle, a last
// question.
func conversation(turns int) string {
	filler := strings.Repeat("This turn says something long about the weather and the sea. ", 4)
	msgs := []string{`{"role":"system","content":"You are terse."}`, `{"role":"user","content":"FIRST question"}`}
	for i := range turns {
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"%d %s"}`, i, filler), fmt.Sprintf(`{"role":"user","content":"%d %s"}`, i, filler))
		if i == turns/2 {
			msgs = append(msgs, `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]}`,
				`{"role":"tool","tool_call_id":"c1","content":"`+filler+`"}`, `{"role":"tool","tool_call_id":"c2","content":"ok"}`)
		}
	}
	msgs = append(msgs, `{"role":"user","content":"LAST question"}`)
	return `{"model":"openai/m","messages":[` + strings.Join(msgs, ",") + `]}`
}

// The context-compression plugin, with the gateway's own count: what
// remains fits with room for the answer, and the report counts what went.
func TestMiddleOutFitsAndKeepsPairs(t *testing.T) {
	enc, _ := tokenizer.Get(tokenizer.O200kBase)
	body := conversation(12)
	full, _ := prompt.CountChat(enc, []byte(body), prompt.DefaultMediaPartTokens)
	rt := &Router{MediaPartTokens: prompt.DefaultMediaPartTokens}
	for _, ctx := range []int64{full + 100, full / 2, full / 4, 200} {
		m := &catalog.Model{ID: "openai/m", ContextLength: ctx, Tokenizer: enc}
		st := &pipeline.State{}
		route := &upstream.Route{Kind: "chat", MaxTokens: 50, Body: []byte(body), Attempts: []upstream.Attempt{{Model: m, Provider: &catalog.Provider{}}}}
		if _, apiErr := reqbody.ParseObjectIn(&st.OwnFields, []byte(`{"transforms":["middle-out"]}`)); apiErr != nil {
			t.Fatal(apiErr)
		}
		if apiErr := rt.fitPrompt(st, route); apiErr != nil {
			t.Fatal(apiErr)
		}
		h := http.Header{}
		for _, run := range st.Plugins {
			run.(plugin.AnswerHeader).SetAnswerHeader(h)
		}
		got, _ := prompt.CountChat(enc, route.Body, prompt.DefaultMediaPartTokens)
		if ctx > full+50 {
			if string(route.Body) != body || len(st.Plugins) != 0 {
				t.Fatalf("context %d: a fitting prompt changed", ctx)
			}
			continue
		}
		if got > ctx-50 {
			t.Fatalf("context %d: %d tokens left, room for 50 wanted", ctx, got)
		}
		msgs := gjson.GetBytes(route.Body, "messages").Array()
		if msgs[0].Get("role").Str != "system" || msgs[1].Get("content").Str != "FIRST question" || msgs[len(msgs)-1].Get("content").Str != "LAST question" {
			t.Fatalf("context %d: head or tail removed: %s", ctx, route.Body)
		}
		// Every tool message follows its call; a call keeps its results.
		for i, m := range msgs {
			if m.Get("role").Str == "tool" {
				j := i
				for j > 0 && msgs[j-1].Get("role").Str == "tool" {
					j--
				}
				if j == 0 || !msgs[j-1].Get("tool_calls").Exists() {
					t.Fatalf("context %d: an orphan tool message: %s", ctx, route.Body)
				}
			}
			if m.Get("tool_calls").Exists() && (i+2 >= len(msgs) || msgs[i+2].Get("role").Str != "tool") {
				t.Fatalf("context %d: a tool call lost its results: %s", ctx, route.Body)
			}
		}
		removed := 2 + 12*2 + 3 + 1 - len(msgs)
		want := fmt.Sprintf("middle-out; removed_messages=%d; removed_tokens=%d", removed, full-got)
		if got := h.Get(contextcompression.Header); got != want {
			t.Fatalf("context %d: header %q, want %q", ctx, got, want)
		}
	}
}
