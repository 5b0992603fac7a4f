package bedrock

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/chatform"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/rawjson"
)

var now = time.Now

// toChat translates a Converse answer, or a ConverseStream's event stream
// (application/vnd.amazon.eventstream, decoded frame by frame by the AWS
// SDK's eventstream decoder), into a chat completion or its SSE chunks:
// text blocks are the content, reasoningContent the reasoning, toolUse
// tool_calls; stopReason end_turn and stop_sequence are stop, max_tokens
// length, tool_use tool_calls, guardrail_intervened and content_filtered
// content_filter; usage inputTokens (+ cacheReadInputTokens +
// cacheWriteInputTokens) and outputTokens, with the cache reads and
// writes in prompt_tokens_details. A stream ends with the usage chunk and
// [DONE] at its metadata event; an exception frame ends it without, as a
// broken stream. Error statuses pass unchanged.
type toChat struct {
	w       http.ResponseWriter
	model   string
	limit   int
	status  int
	mode    int // 0 undecided, 1 pass, 2 hold, 3 stream
	held    bytes.Buffer
	pending []byte // stream bytes not yet a whole frame
	dec     *eventstream.Decoder

	id       string
	created  int64
	calls    map[int64]int // content block index -> tool call index
	ncalls   int
	details  map[int64]int // content block index -> reasoning detail index
	finish   string
	produced int
	broken   bool
	// The cache writes' split by TTL (cacheDetails), for the meter
	// (dialect.CacheTTLReporter).
	cacheWrite1h int64
	cacheUnknown bool
}

const (
	modeUndecided = iota
	modePass
	modeHold
	modeStream
)

func newToChat(w http.ResponseWriter, model string, limit int) *toChat {
	return &toChat{w: w, model: model, limit: limit, dec: eventstream.NewDecoder(), calls: map[int64]int{}}
}

func (t *toChat) Header() http.Header { return t.w.Header() }

// Unwrap lets http.ResponseController flush the client's writer.
func (t *toChat) Unwrap() http.ResponseWriter { return t.w }

// Flush passes a flush on while streaming.
func (t *toChat) Flush() {
	if t.mode == modeStream || t.mode == modePass {
		_ = http.NewResponseController(t.w).Flush() // a failed flush is a client gone; the next write says so
	}
}

func (t *toChat) WriteHeader(status int) {
	if t.mode != modeUndecided || (status >= 100 && status < 200) {
		return
	}
	t.status = status
	h := t.w.Header()
	switch {
	case status >= 400:
		t.mode = modePass
		t.w.WriteHeader(status)
	case strings.HasPrefix(h.Get("Content-Type"), "application/vnd.amazon.eventstream"):
		t.mode = modeStream
		h.Del("Content-Length")
		h.Set("Content-Type", "text/event-stream")
		t.w.WriteHeader(status)
	default:
		t.mode = modeHold
		h.Del("Content-Length")
	}
}

func (t *toChat) Write(p []byte) (int, error) {
	if t.mode == modeUndecided {
		t.WriteHeader(http.StatusOK)
	}
	switch t.mode {
	case modePass:
		return t.w.Write(p)
	case modeHold:
		if t.held.Len()+len(p) > t.limit {
			return 0, http.ErrContentLength
		}
		return t.held.Write(p)
	}
	t.pending = append(t.pending, p...)
	var out []byte
	for len(t.pending) >= 4 {
		n := int(binary.BigEndian.Uint32(t.pending))
		if n < 16 || n > 16<<20 {
			t.broken = true
			return len(p), nil
		}
		if len(t.pending) < n {
			break
		}
		msg, err := t.dec.Decode(bytes.NewReader(t.pending[:n]), nil)
		t.pending = t.pending[n:]
		if err != nil {
			t.broken = true
			break
		}
		out = t.frame(out, msg)
	}
	if len(t.pending) == 0 {
		t.pending = nil
	}
	if len(out) > 0 {
		if _, err := t.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Finish converts a held answer; a body that is not an answer passes
// unchanged (the meter reports it as invalid).
func (t *toChat) Finish() {
	if t.mode != modeHold {
		return
	}
	body := t.held.Bytes()
	if out, ok := t.convertJSON(body); ok {
		body = out
		t.w.Header().Set("Content-Type", "application/json")
	}
	t.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	t.w.WriteHeader(t.status)
	_, _ = t.w.Write(body) // the status is sent: a failed write is a client gone
}

// OutputProduced implements dialect.AnswerReader.
func (t *toChat) OutputProduced() int { return t.produced }

func finishReason(stop string, calls bool) string {
	switch stop {
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	}
	if calls {
		return "tool_calls"
	}
	return "stop"
}

func usageOf(u gjson.Result) *chatform.Usage {
	if !u.IsObject() {
		return nil
	}
	read, write := u.Get("cacheReadInputTokens").Int(), u.Get("cacheWriteInputTokens").Int()
	prompt := u.Get("inputTokens").Int() + read + write
	out := u.Get("outputTokens").Int()
	return chatform.WithCacheWrites(chatform.Usage{PromptTokens: prompt, CompletionTokens: out, TotalTokens: prompt + out,
		PromptTokensDetails: chatform.PromptDetails{CachedTokens: read}}, write)
}

// usageOf is usageOf(u), noting its cache writes' split by TTL.
func (t *toChat) usageOf(u gjson.Result) *chatform.Usage {
	if d := u.Get("cacheDetails"); d.Exists() {
		t.cacheWrite1h, t.cacheUnknown = cacheDetails(d)
	}
	return usageOf(u)
}

// cacheDetails reads a usage's cacheDetails, its cache writes by TTL:
// hour is the 1h entries' inputTokens (5m entries are the default
// writes); unknown reports an entry of a form not read (a new TTL).
func cacheDetails(d gjson.Result) (hour int64, unknown bool) {
	if !d.IsArray() {
		return 0, d.Type != gjson.Null
	}
	d.ForEach(func(_, e gjson.Result) bool {
		n := e.Get("inputTokens")
		switch ttl := e.Get("ttl").Str; {
		case n.Type != gjson.Number || n.Num < 0 || n.Num != float64(n.Int()):
			unknown = true
		case ttl == "1h":
			hour += n.Int()
		case ttl != "5m":
			unknown = true
		}
		return true
	})
	return hour, unknown
}

// CacheWrites1h implements dialect.CacheTTLReporter.
func (t *toChat) CacheWrites1h() (int64, bool) { return t.cacheWrite1h, t.cacheUnknown }

func newID() string { return "bedrock-" + strconv.FormatInt(now().UnixNano(), 36) }

// convertJSON turns a Converse answer into a chat completion.
func (t *toChat) convertJSON(body []byte) ([]byte, bool) {
	if !jsoncheck.Valid(body) {
		return nil, false
	}
	r := gjson.Parse(rawjson.View(body)) // nothing kept: out is copied
	// The members read, each found in one walk of the answer.
	var top [3]gjson.Result
	if r.IsObject() {
		rawjson.Lookup(r.Raw, answerMembers, top[:])
	}
	output, stopReason, usage := top[0], top[1], top[2]
	content := memberAt(output, "message", "content")
	if !content.IsArray() {
		return nil, false
	}
	var text, reasoning strings.Builder
	var calls []chatform.ToolCall
	var details []chatform.ReasoningDetail
	for _, b := range rawjson.Array(content) {
		var m [3]gjson.Result
		if b.IsObject() {
			rawjson.Lookup(b.Raw, blockMembers, m[:])
		}
		switch bt, br, bu := m[0], m[1], m[2]; {
		case bt.Exists():
			text.WriteString(bt.Str)
			t.produced += outputlen.StringLen(bt.Raw)
		case br.Exists():
			rt := br.Get("reasoningText.text")
			reasoning.WriteString(rt.Str)
			t.produced += outputlen.StringLen(rt.Raw)
			if d, ok := reasoningDetail(br.Get("reasoningText"), br.Get("redactedContent")); ok {
				d.Index = len(details)
				details = append(details, d)
			}
		case bu.Exists():
			input := bu.Get("input").Raw
			if input == "" {
				input = "{}"
			}
			t.produced += len(bu.Get("name").Str) + outputlen.Value(input)
			calls = append(calls, chatform.ToolCall{ID: bu.Get("toolUseId").Str, Type: "function", Function: chatform.Function{Name: bu.Get("name").Str, Arguments: input}})
		}
	}
	finish := finishReason(stopReason.Str, len(calls) > 0)
	msg := &chatform.Message{Role: "assistant", Reasoning: reasoning.String(), ReasoningDetails: details, ToolCalls: calls}
	if s := text.String(); s != "" || len(calls) == 0 {
		msg.Content = &s
	}
	c := chatform.Completion{ID: newID(), Object: "chat.completion", Created: now().Unix(), Model: t.model,
		Choices: []chatform.Choice{{Message: msg, FinishReason: &finish}}, Usage: t.usageOf(usage)}
	out, _ := c.AppendJSON(make([]byte, 0, len(body)+256)) // no raw member to fail on
	return out, true
}

// answerMembers and blockMembers are the members convertJSON reads of
// the answer and of a content block.
var (
	answerMembers = []string{"output", "stopReason", "usage"}
	blockMembers  = []string{"text", "reasoningContent", "toolUse"}
)

// memberAt is r.Get of the path of keys, each object walked once.
func memberAt(r gjson.Result, keys ...string) gjson.Result {
	for _, k := range keys {
		if !r.IsObject() {
			return gjson.Result{}
		}
		var m [1]gjson.Result
		rawjson.Lookup(r.Raw, []string{k}, m[:])
		r = m[0]
	}
	return r
}

// frame appends the chunks of one ConverseStream frame to out.
func (t *toChat) frame(out []byte, msg eventstream.Message) []byte {
	header := func(name string) string {
		if v := msg.Headers.Get(name); v != nil {
			return v.String()
		}
		return ""
	}
	if header(":message-type") != "event" {
		t.broken = true // an exception: the stream ends without [DONE]
		return out
	}
	p := gjson.ParseBytes(msg.Payload)
	if t.id == "" {
		t.id, t.created = newID(), now().Unix()
	}
	switch header(":event-type") {
	case "messageStart":
		empty := ""
		out = t.chunk(out, &chatform.Message{Role: "assistant", Content: &empty}, "", nil)
	case "contentBlockStart":
		if u := p.Get("start.toolUse"); u.Exists() {
			i := t.ncalls
			t.ncalls++
			t.calls[p.Get("contentBlockIndex").Int()] = i
			t.produced += len(u.Get("name").Str)
			out = t.chunk(out, &chatform.Message{ToolCalls: []chatform.ToolCall{{Index: &i, ID: u.Get("toolUseId").Str, Type: "function",
				Function: chatform.Function{Name: u.Get("name").Str}}}}, "", nil)
		}
	case "contentBlockDelta":
		d := p.Get("delta")
		switch {
		case d.Get("text").Exists():
			s := d.Get("text").Str
			t.produced += outputlen.StringLen(d.Get("text").Raw)
			out = t.chunk(out, &chatform.Message{Content: &s}, "", nil)
		case d.Get("reasoningContent").IsObject():
			rc := d.Get("reasoningContent")
			t.produced += outputlen.StringLen(rc.Get("text").Raw)
			// A delta carries text, a signature or redacted content.
			detail, _ := reasoningDetail(rc, rc.Get("redactedContent"))
			if t.details == nil {
				t.details = map[int64]int{}
			}
			bi := p.Get("contentBlockIndex").Int()
			idx, seen := t.details[bi]
			if !seen {
				idx = len(t.details)
				t.details[bi] = idx
			}
			detail.Index = idx
			out = t.chunk(out, &chatform.Message{Reasoning: rc.Get("text").Str, ReasoningDetails: []chatform.ReasoningDetail{detail}}, "", nil)
		case d.Get("toolUse.input").Exists():
			i := t.calls[p.Get("contentBlockIndex").Int()]
			t.produced += outputlen.StringLen(d.Get("toolUse.input").Raw)
			out = t.chunk(out, &chatform.Message{ToolCalls: []chatform.ToolCall{{Index: &i, Function: chatform.Function{Arguments: d.Get("toolUse.input").Str}}}}, "", nil)
		}
	case "messageStop":
		t.finish = finishReason(p.Get("stopReason").Str, t.ncalls > 0)
		out = t.chunk(out, &chatform.Message{}, t.finish, nil)
	case "metadata":
		out = t.chunk(out, nil, "", t.usageOf(p.Get("usage")))
		out = append(out, "data: [DONE]\n\n"...)
	}
	return out
}

// chunk appends one chat.completion.chunk event: a delta (with a finish
// reason), or (delta nil) the usage chunk without choices.
func (t *toChat) chunk(out []byte, delta *chatform.Message, finish string, usage *chatform.Usage) []byte {
	c := chatform.Completion{ID: t.id, Object: "chat.completion.chunk", Created: t.created, Model: t.model, Choices: []chatform.Choice{}, Usage: usage}
	if delta != nil {
		ch := chatform.Choice{Delta: delta}
		if finish != "" {
			ch.FinishReason = &finish
		}
		c.Choices = []chatform.Choice{ch}
	}
	out = append(out, "data: "...)
	out, _ = c.AppendJSON(out) // no raw member to fail on
	return append(out, "\n\n"...)
}

// reasoningDetail is a Converse reasoningContent block (or a piece of
// one) as a reasoning detail: its redacted content, else its text with
// the signature (rt: reasoningText, or a delta's text and signature).
func reasoningDetail(rt, redacted gjson.Result) (chatform.ReasoningDetail, bool) {
	if redacted.Type == gjson.String {
		return chatform.ReasoningDetail{Type: chatform.ReasoningEncrypted, Data: redacted.Str, Format: chatform.FormatAnthropic}, true
	}
	if !rt.IsObject() {
		return chatform.ReasoningDetail{}, false
	}
	return chatform.ReasoningDetail{Type: chatform.ReasoningText, Text: rt.Get("text").Str, Signature: rt.Get("signature").Str,
		Format: chatform.FormatAnthropic}, true
}
