package mockprovider

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Scripted tool calls (Chat Completions, and Anthropic's Messages API
// with tool_use blocks), so that tests can drive an
// agent's tool loop (Claude Code's, for one) through the mock
// deterministically:
//
//   - a user message of the current turn (the messages after the last
//     assistant message) holding a line "mock-tool-call: <name> <json
//     arguments>" is answered with a call of that function tool, when the
//     request offers it; several lines are parallel calls, in order
//     (finish_reason tool_calls; streamed as tool_calls deltas, the
//     arguments in two pieces);
//   - a request whose current turn holds tool messages (the results of
//     the calls) and no text after them (the images a result holds may
//     follow) is answered with "Mock answer from <model>: tool result
//     <their text>", so that a test sees the results reached the model; a
//     user text after them is answered as usual.
//
// The completion counts one token per word of each call's name and
// arguments.

// mockToolCallMarker starts a line asking for a tool call.
const mockToolCallMarker = "mock-tool-call:"

// mockToolCall is a function call of the answer.
type mockToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// tokens is what the call counts in the completion.
func (c mockToolCall) tokens() int { return countWords(c.Name + " " + c.Arguments) }

// scriptTurn reads the current turn of a chat request: the tool results
// it ends with (the echo of the answer) or the tool calls its user
// messages ask for.
func (q *mockRequest) scriptTurn(body []byte) {
	msgs := gjson.GetBytes(body, "messages").Array()
	start := len(msgs)
	for start > 0 && msgs[start-1].Get("role").Str != "assistant" {
		start--
	}
	var results []string
	for _, m := range msgs[start:] {
		switch {
		case m.Get("role").Str == "tool":
			results = append(results, contentText(m.Get("content")))
		case strings.TrimSpace(contentText(m.Get("content"))) != "":
			results = nil // text after the results: answered as usual
		}
	}
	if len(results) > 0 {
		q.lastUser = "tool result " + strings.Join(results, " ")
		return
	}
	offered := map[string]bool{}
	gjson.GetBytes(body, "tools.#.function.name").ForEach(func(_, n gjson.Result) bool {
		offered[n.Str] = true
		return true
	})
	for _, m := range msgs[start:] {
		if m.Get("role").Str != "user" {
			continue
		}
		names := make([]string, 0, len(offered))
		for n := range offered {
			names = append(names, n)
		}
		q.calls = append(q.calls, scriptedCalls(contentText(m.Get("content")), names)...)
	}
}

// scriptedCalls are the calls the marker lines of text ask for, of the
// tools offered.
func scriptedCalls(text string, offered []string) []mockToolCall {
	var calls []mockToolCall
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), mockToolCallMarker)
		if !ok {
			continue
		}
		name, args, _ := strings.Cut(strings.TrimSpace(rest), " ")
		args = strings.TrimSpace(args)
		if args == "" {
			args = "{}"
		}
		if !slices.Contains(offered, name) || !json.Valid([]byte(args)) {
			continue
		}
		calls = append(calls, mockToolCall{ID: newID("call_"), Name: name, Arguments: args})
	}
	return calls
}

// chatToolCall is a tool call of a chat message or delta.
type chatToolCall struct {
	Index    *int             `json:"index,omitempty"`
	ID       string           `json:"id,omitempty"`
	Type     string           `json:"type,omitempty"`
	Function chatToolFunction `json:"function"`
}

type chatToolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chatToolCalls is the calls as a message's tool_calls.
func chatToolCalls(calls []mockToolCall) []chatToolCall {
	out := make([]chatToolCall, len(calls))
	for i, c := range calls {
		out[i] = chatToolCall{ID: c.ID, Type: "function", Function: chatToolFunction{Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// chatToolCallDeltas is the calls as stream deltas: per call one that
// opens it (id, name, empty arguments) and two with halves of its
// arguments.
func chatToolCallDeltas(calls []mockToolCall) [][]chatToolCall {
	var out [][]chatToolCall
	for i, c := range calls {
		half := len(c.Arguments) / 2
		out = append(out,
			[]chatToolCall{{Index: &i, ID: c.ID, Type: "function", Function: chatToolFunction{Name: c.Name}}},
			[]chatToolCall{{Index: &i, Function: chatToolFunction{Arguments: c.Arguments[:half]}}},
			[]chatToolCall{{Index: &i, Function: chatToolFunction{Arguments: c.Arguments[half:]}}})
	}
	return out
}
