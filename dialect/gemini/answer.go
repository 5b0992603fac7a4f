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
//     calls tool_calls (ids call_<n>); thought parts are reasoning.text
//     entries of reasoning_details too, and a part's thoughtSignature a
//     reasoning.encrypted entry (with the id of the call whose part
//     carried it), for the client to send back (Gemini's format);
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
	details   int // reasoning details sent
	lastText  int // index of the reasoning.text detail the stream is in, -1 for none
	finished  bool
	produced  int
	lastUsage gjson.Result
}

func newToChat(w http.ResponseWriter, model string, limit int) *toChat {
	t := &toChat{model: model, lastText: -1}
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
type partView struct{ text, thought, call, sig gjson.Result }

var partMembers = []string{"text", "thought", "functionCall", "thoughtSignature"}

// partsView reads a candidate's parts, each in one walk.
func partsView(parts gjson.Result) []partView {
	ps := rawjson.Array(parts)
	out := make([]partView, len(ps))
	for i, p := range ps {
		var m [4]gjson.Result
		if p.IsObject() {
			rawjson.Lookup(p.Raw, partMembers, m[:])
		}
		out[i] = partView{text: m[0], thought: m[1], call: m[2], sig: m[3]}
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

// partsOf splits a candidate's parts into text, reasoning, calls and
// reasoning details (their Index unset).
func (t *toChat) partsOf(parts []partView) (text, reasoning string, calls []chatform.ToolCall, details []chatform.ReasoningDetail) {
	if len(parts) == 1 && !parts[0].thought.Bool() && !parts[0].call.Exists() && parts[0].sig.Str == "" {
		return parts[0].text.Str, "", nil, nil // the common answer: one text
	}
	var tb, rb strings.Builder
	for _, p := range parts {
		id := ""
		switch {
		case p.thought.Bool():
			rb.WriteString(p.text.Str)
			if p.text.Str != "" {
				if n := len(details); n > 0 && details[n-1].Type == chatform.ReasoningText {
					details[n-1].Text += p.text.Str
				} else {
					details = append(details, chatform.ReasoningDetail{Type: chatform.ReasoningText, Text: p.text.Str, Format: chatform.FormatGemini})
				}
			}
		case p.call.Exists():
			c := p.call
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
			tb.WriteString(p.text.Str)
		}
		if p.sig.Str != "" {
			details = append(details, chatform.ReasoningDetail{Type: chatform.ReasoningEncrypted, Data: p.sig.Str, ID: id, Format: chatform.FormatGemini})
		}
	}
	return tb.String(), rb.String(), calls, details
}

// indexDetails numbers a stream event's details after those sent, a
// reasoning text continued from the last event keeping its index.
func (t *toChat) indexDetails(details []chatform.ReasoningDetail) {
	for i := range details {
		d := &details[i]
		if d.Type == chatform.ReasoningText && t.lastText >= 0 {
			d.Index = t.lastText
			continue
		}
		d.Index = t.details
		t.details++
		t.lastText = -1
		if d.Type == chatform.ReasoningText {
			t.lastText = d.Index
		}
	}
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
	text, reasoning, calls, details := t.partsOf(parts)
	for i := range calls {
		calls[i].Index = nil
	}
	for i := range details {
		details[i].Index = i
	}
	finish := finishReason(reason, len(calls) > 0)
	if feedback.Get("blockReason").Str != "" {
		finish = "content_filter" // the prompt was blocked: no candidate
	} else if finish == "" {
		finish = "stop"
	}
	msg := &chatform.Message{Role: "assistant", Reasoning: reasoning, ReasoningDetails: details, ToolCalls: calls}
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
	text, reasoning, calls, details := t.partsOf(parts)
	if len(details) > 0 {
		t.indexDetails(details)
	}
	if text != "" || reasoning != "" || len(calls) > 0 || len(details) > 0 {
		d := &chatform.Message{Reasoning: reasoning, ReasoningDetails: details, ToolCalls: calls}
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
