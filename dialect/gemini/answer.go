package gemini

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

var now = time.Now

// toChat translates a GenerateContentResponse (plain, or the events of
// streamGenerateContent?alt=sse) into a chat completion or its chunks:
//
//   - text parts are the content, thought parts the reasoning, function
//     calls tool_calls (ids call_<n>);
//   - finishReason STOP is stop (tool_calls when the answer calls a
//     function), MAX_TOKENS length, and a safety block (SAFETY,
//     RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY, or a
//     blocked prompt's promptFeedback.blockReason) content_filter;
//   - usageMetadata is the usage: prompt_tokens promptTokenCount (of
//     which cachedContentTokenCount cached), completion_tokens
//     candidatesTokenCount + thoughtsTokenCount (thinking is billed as
//     output), with completion_tokens_details.reasoning_tokens.
//
// A stream ends with the finish chunk, a usage chunk and [DONE] when the
// provider's last event (the one with finishReason) arrives; a stream cut
// before it ends without [DONE], which the meter reports as broken.
type toChat struct {
	sse.Writer
	model string

	id        string
	created   int64
	out       []byte
	calls     int // tool calls sent
	finished  bool
	produced  int
	lastUsage gjson.Result
}

func newToChat(w http.ResponseWriter, model string, limit int) *toChat {
	t := &toChat{model: model}
	t.Init(w, t)
	t.Limit = limit
	return t
}

// Decide implements sse.Hooks.
func (t *toChat) Decide(status int) sse.Mode { return t.TranslateMode(status) }

// Finish converts a held JSON answer; a body that is not an answer passes
// unchanged (the meter reports it as invalid).
func (t *toChat) Finish() { t.FinishHeld(t.convertJSON) }

// OutputProduced implements dialect.AnswerReader.
func (t *toChat) OutputProduced() int { return t.produced }

// outputOf is the model output of a candidate's parts (outputlen's rule).
func outputOf(parts []partView) int {
	n := 0
	for _, p := range parts {
		if p.text.Exists() {
			n += outputlen.StringLen(p.text.Raw)
		}
		if c := p.call; c.Exists() {
			n += len(c.Get("name").Str) + outputlen.Value(c.Get("args").Raw)
		}
	}
	return n
}

// partView is a part's members the translation reads.
type partView struct{ text, thought, call gjson.Result }

var partMembers = []string{"text", "thought", "functionCall"}

// partsView reads a candidate's parts, each in one walk.
func partsView(parts gjson.Result) []partView {
	ps := rawjson.Array(parts)
	out := make([]partView, len(ps))
	for i, p := range ps {
		var m [3]gjson.Result
		if p.IsObject() {
			rawjson.Lookup(p.Raw, partMembers, m[:])
		}
		out[i] = partView{text: m[0], thought: m[1], call: m[2]}
	}
	return out
}

// candidateParts are the parts and finish reason of a candidate.
func candidateParts(cand gjson.Result) (parts []partView, finish string) {
	if !cand.IsObject() {
		return partsView(cand.Get("content.parts")), cand.Get("finishReason").Str
	}
	var m [2]gjson.Result
	rawjson.Lookup(cand.Raw, []string{"content", "finishReason"}, m[:])
	content := m[0]
	if content.IsObject() {
		var p [1]gjson.Result
		rawjson.Lookup(content.Raw, []string{"parts"}, p[:])
		return partsView(p[0]), m[1].Str
	}
	return partsView(content.Get("parts")), m[1].Str
}

// firstCandidate is candidates.0.
func firstCandidate(candidates gjson.Result) gjson.Result {
	if !candidates.IsArray() {
		return candidates.Get("0")
	}
	var first gjson.Result
	rawjson.EachElem(candidates.Raw, func(v string) bool {
		first = rawjson.Member(v, true)
		return false
	})
	return first
}

// finishReason maps Gemini's finish reasons.
func finishReason(r string, calls bool) string {
	switch r {
	case "":
		return ""
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE":
		return "content_filter"
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

// usageOf is usageMetadata as chat usage; nil without one.
func usageOf(u gjson.Result) *chatform.Usage {
	if !u.IsObject() {
		return nil
	}
	prompt, thoughts := u.Get("promptTokenCount").Int(), u.Get("thoughtsTokenCount").Int()
	completion := u.Get("candidatesTokenCount").Int() + thoughts
	return chatform.WithReasoningTokens(chatform.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: chatform.PromptDetails{CachedTokens: u.Get("cachedContentTokenCount").Int()}}, thoughts)
}

// partsOf splits a candidate's parts into text, reasoning and calls.
func (t *toChat) partsOf(parts []partView) (text, reasoning string, calls []chatform.ToolCall) {
	if len(parts) == 1 && !parts[0].thought.Bool() && !parts[0].call.Exists() {
		return parts[0].text.Str, "", nil // the common answer: one text
	}
	var tb, rb strings.Builder
	for _, p := range parts {
		switch {
		case p.thought.Bool():
			rb.WriteString(p.text.Str)
		case p.call.Exists():
			c := p.call
			args := c.Get("args").Raw
			if args == "" {
				args = "{}"
			}
			i := t.calls
			t.calls++
			calls = append(calls, chatform.ToolCall{Index: &i, ID: "call_" + strconv.Itoa(i), Type: "function",
				Function: chatform.Function{Name: c.Get("name").Str, Arguments: args}})
		default:
			tb.WriteString(p.text.Str)
		}
	}
	return tb.String(), rb.String(), calls
}

// convertJSON turns a GenerateContentResponse into a chat completion.
func (t *toChat) convertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	r := gjson.Parse(rawjson.View(body)) // nothing kept: out is copied
	if !r.IsObject() {
		return nil, false
	}
	// The top-level members in one walk of the answer.
	var top [5]gjson.Result
	rawjson.Lookup(r.Raw, topMembers, top[:])
	candidates, feedback, usage, id, modelVersion := top[0], top[1], top[2], top[3], top[4]
	if !(candidates.IsArray() || feedback.Exists()) {
		return nil, false
	}
	parts, reason := candidateParts(firstCandidate(candidates))
	t.produced = outputOf(parts)
	text, reasoning, calls := t.partsOf(parts)
	for i := range calls {
		calls[i].Index = nil
	}
	finish := finishReason(reason, len(calls) > 0)
	if feedback.Get("blockReason").Str != "" {
		finish = "content_filter" // the prompt was blocked: no candidate
	} else if finish == "" {
		finish = "stop"
	}
	msg := &chatform.Message{Role: "assistant", Reasoning: reasoning, ToolCalls: calls}
	if text != "" || len(calls) == 0 {
		msg.Content = &text
	}
	c := chatform.Completion{ID: t.idOf(id), Object: "chat.completion", Created: now().Unix(), Model: t.modelOf(modelVersion),
		Choices: []chatform.Choice{{Message: msg, FinishReason: &finish}}, Usage: usageOf(usage)}
	out, _ := c.AppendJSON(make([]byte, 0, len(body)+256)) // no raw member to fail on
	return out, true
}

// topMembers are the answer's members convertJSON reads.
var topMembers = []string{"candidates", "promptFeedback", "usageMetadata", "responseId", "modelVersion"}

// idOf is the answer's responseId, or one made up.
func (t *toChat) idOf(responseID gjson.Result) string {
	if id := responseID.Str; id != "" {
		return id
	}
	return "gemini-" + strconv.FormatInt(now().UnixNano(), 36)
}

// modelOf is the answer's modelVersion, or the provider's model.
func (t *toChat) modelOf(modelVersion gjson.Result) string {
	if m := modelVersion.Str; m != "" {
		return m
	}
	return t.model
}

// Event implements sse.Hooks: one streamed GenerateContentResponse
// becomes its chunks.
func (t *toChat) Event(ev []byte) ([]byte, error) {
	t.out = t.out[:0]
	data := sse.Data(ev)
	if data == nil || t.finished {
		return t.out, nil
	}
	r := gjson.ParseBytes(data)
	if t.id == "" {
		t.id, t.created = t.idOf(r.Get("responseId")), now().Unix()
		if m := r.Get("modelVersion").Str; m != "" {
			t.model = m
		}
		empty := ""
		t.chunk(&chatform.Message{Role: "assistant", Content: &empty}, "", nil)
	}
	if u := r.Get("usageMetadata"); u.IsObject() {
		t.lastUsage = u
	}
	parts, reason := candidateParts(r.Get("candidates.0"))
	t.produced += outputOf(parts)
	text, reasoning, calls := t.partsOf(parts)
	if text != "" || reasoning != "" || len(calls) > 0 {
		d := &chatform.Message{Reasoning: reasoning, ToolCalls: calls}
		if text != "" {
			d.Content = &text
		}
		t.chunk(d, "", nil)
	}
	finish := finishReason(reason, t.calls > 0)
	if r.Get("promptFeedback.blockReason").Str != "" {
		finish = "content_filter"
	}
	if finish != "" {
		t.finished = true
		t.chunk(&chatform.Message{}, finish, nil)
		t.chunk(nil, "", usageOf(t.lastUsage))
		t.out = append(t.out, "data: [DONE]\n\n"...)
	}
	return t.out, nil
}

// chunk appends one chat.completion.chunk event: a delta, a finish
// reason, or (delta nil) the usage chunk without choices.
func (t *toChat) chunk(delta *chatform.Message, finish string, usage *chatform.Usage) {
	c := chatform.Completion{ID: t.id, Object: "chat.completion.chunk", Created: t.created, Model: t.model, Choices: []chatform.Choice{}, Usage: usage}
	if delta != nil {
		ch := chatform.Choice{Delta: delta}
		if finish != "" {
			ch.FinishReason = &finish
		}
		c.Choices = []chatform.Choice{ch}
	}
	t.out = append(t.out, "data: "...)
	t.out, _ = c.AppendJSON(t.out) // no raw member to fail on
	t.out = append(t.out, "\n\n"...)
}
