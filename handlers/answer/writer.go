// Package answer is the meter's view of a provider's answer: the Writer
// that reads its usage, output and finish as it passes to the client,
// holds what must wait for the charge and rewrites it with the charged
// cost and the gateway's identity; an attempt's failure (Failure) and the
// estimate of an answer without usage (Writer.EstimateUsage). It decides
// no charge: the meter does, with what it read.
package answer

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// Writer sits between reverse_proxy and the client and reads usage
// from the upstream's answer without holding it back:
//
//   - Server-sent events pass through event by event as the upstream
//     flushes them, except the events that report usage and what follows
//     them ([DONE]); those few bytes wait until the charge is durable, so
//     that a client never sees an answer whose charge a crash could lose,
//     and they carry the charged cost (usage.cost).
//   - A JSON answer is small and useless until complete: it is buffered,
//     its usage read, the charge made durable, usage.cost added, and only
//     then sent.
//   - An upstream error status is buffered too, so that the gateway can
//     answer with its own error shape and charge nothing.
type Writer struct {
	sse.Writer
	kind  dialect.Kind
	GenID string // sent as X-Generation-Id with answers that are charged
	// Route is the request's, on this writer's attempt: its secrets are
	// removed from the provider's error events (redact).
	Route *upstream.Route

	tail [][]byte // stream mode: held events, in order

	// What the client has been sent or will be sent.
	Usage       UsageSeen
	Delivered   int       // bytes of model output forwarded to the client (outputlen)
	Produced    int       // bytes of model output the provider sent, when a translation is between (outputlen)
	empty       bool      // a complete answer without usage and without output
	Corrected   bool      // defendUsage corrected the provider's usage: the answer reports the charged one
	FirstText   time.Time // when the first output was forwarded (time to first token)
	SawDone     bool      // [DONE] or a terminal response event arrived
	lastSeq     int64     // Responses events: the last sequence_number seen
	seqSeen     bool      // a Responses event carried a sequence_number
	Finish      string
	jsonChecked bool // usableJSON ran
	jsonOK      bool
	usageJSON   gjson.Result // the JSON answer's usage object
	UsageRaw    string       // the upstream's usage object, as sent
	// CacheTTL is the split of the cache writes by TTL that a provider
	// answering in its own API reported beside the chat usage read here
	// (dialect.CacheTTLReporter); it stands for Usage's.
	CacheTTL   CacheTTL
	startUsage UsageSeen // Messages streams: the prompt figures message_start reported
	// Items is what a route's service (rerank, images) read of the
	// answer it wrote (ItemsOK), the charge's basis.
	Items   billing.Usage
	ItemsOK bool
	// Passes: a success answer passes to the client as it comes (a
	// service's, upstream.Passer), charged once it has ended.
	Passes bool

	// Identity, for chat completions, rewrites the answer's id, model and
	// provider (Identity); UpstreamID is the provider's id of it.
	Identity    *Identity
	ownIdentity Identity     // what identity points to, in the same allocation
	identityBuf [96]byte     // ownIdentity's values, when they fit
	layout      answerLayout // a held answer's, read with its usage when identity is set
	UpstreamID  string
	evBuf       []byte // the last event rewritten by ownEvent
	// Renamed names the model in a Responses or Messages answer whose
	// provider names its own (RenameModel); "" leaves it.
	Renamed string
	// Bill is what settle charged, added to the usage sent: ownBill,
	// in the writer's allocation.
	Bill    *UsageBill
	OwnBill UsageBill
	// headerVals back the answer's X-Generation-Id and Content-Length
	// (sendJSON), in the writer's allocation.
	headerVals [2]string
}

// MaxBufferedBody bounds a buffered answer; larger ones are refused.
const MaxBufferedBody = 32 << 20

// UsageSeen is the usage the upstream reported.
type UsageSeen struct {
	OK         bool
	Prompt     int64
	Completion int64
	// Of prompt, the tokens read from and written to the provider's
	// prompt cache (prompt_tokens_details, or input_tokens_details).
	CacheRead, CacheWrite int64
	// CacheWrite1h is, of CacheWrite, the tokens written for an hour
	// (Anthropic's cache_creation split, Bedrock's cacheDetails).
	CacheWrite1h int64
	// CacheUnknown: the usage holds a cache count the meter does not
	// read (a new TTL, a new field), counted as an anomaly.
	CacheUnknown bool
	// A count that is missing, negative or not a number (usageCount):
	// defendUsage replaces it.
	PromptBad, CompletionBad bool
}

// CacheTTL is a provider's split of its cache writes by TTL.
type CacheTTL struct {
	Reported bool
	Hour     int64 // written for an hour
	Unknown  bool  // a count of a form not read
}

// usageOf reads a usage object: chat's prompt and completion tokens, or
// Responses' input and output tokens, with their cache details.
func usageOf(u gjson.Result, responses bool) UsageSeen {
	in, out, details := "prompt_tokens", "completion_tokens", "prompt_tokens_details"
	if responses {
		in, out, details = "input_tokens", "output_tokens", "input_tokens_details"
	}
	seen := UsageSeen{OK: true}
	var found, promptOK, completionOK bool
	if seen.Prompt, seen.Completion, promptOK, completionOK, found = usageTokens(u.Raw, in, out); !found {
		seen.Prompt, promptOK = usageCount(u.Get(in).Raw)
		seen.Completion, completionOK = usageCount(u.Get(out).Raw)
	}
	seen.PromptBad, seen.CompletionBad = !promptOK, !completionOK
	if strings.Contains(u.Raw, "cache") {
		d := u.Get(details)
		seen.CacheRead, seen.CacheWrite = d.Get("cached_tokens").Int(), d.Get("cache_write_tokens").Int()
		// A provider's own cache counts (prompt_cache_hit_tokens, a new
		// detail) are not read: the prompt's tokens are charged as
		// reported, and the report is an anomaly.
		seen.CacheUnknown = unknownCacheMember(u.Raw, [3]string{}) ||
			d.IsObject() && unknownCacheMember(d.Raw, [3]string{"cached_tokens", "cache_write_tokens"})
	}
	return seen
}

// unknownCacheMember reports whether the JSON object raw has a member
// whose name holds "cache" and is none of known.
func unknownCacheMember(raw string, known [3]string) bool {
	unknown := false
	jsonpeek.EachTopMember(jsonpeek.ViewBytes(raw), func(keyStart, keyEnd int, _ bool, _, _ int) bool {
		k := raw[keyStart:keyEnd]
		unknown = strings.Contains(k, "cache") && k != known[0] && k != known[1] && k != known[2]
		return !unknown
	})
	return unknown
}

// usageTokens is gjson's Get(in).Int() and Get(out).Int() on the usage
// object raw, read in one walk of its members; found is false when the
// walk cannot stand for the lookups (see answerLayout's plain); promptOK
// and completionOK are usageCount's verdicts.
func usageTokens(raw, in, out string) (prompt, completion int64, promptOK, completionOK, found bool) {
	var vals [2]string
	plain := true
	doc := jsonpeek.ViewBytes(raw)
	ok := jsonpeek.EachTopMember(doc, func(keyStart, keyEnd int, escaped bool, start, end int) bool {
		plain = plain && !escaped && jsonpeek.PlainValue(doc[start:end])
		k := raw[keyStart:keyEnd]
		switch {
		case k == in && vals[0] == "":
			vals[0] = raw[start:end]
		case k == out && vals[1] == "":
			vals[1] = raw[start:end]
		}
		return plain
	})
	if !ok || !plain {
		return 0, 0, false, false, false
	}
	prompt, promptOK = usageCount(vals[0])
	completion, completionOK = usageCount(vals[1])
	return prompt, completion, promptOK, completionOK, true
}

func NewWriter(w http.ResponseWriter, kind dialect.Kind) *Writer {
	return InitWriter(new(Writer), w, kind)
}

// InitWriter makes mw, a zero Writer, NewWriter's.
func InitWriter(mw *Writer, w http.ResponseWriter, kind dialect.Kind) *Writer {
	mw.kind = kind
	mw.Init(w, mw)
	mw.Limit = MaxBufferedBody
	return mw
}

// Decide implements sse.Hooks: only streams are sent as they come; answers
// and upstream errors (status >= 400) are held.
func (mw *Writer) Decide(status int) sse.Mode {
	// The provider's own rate-limit headers are not the platform's: only
	// the gateway's 429 carries X-RateLimit-*.
	for k := range mw.Header() {
		if strings.HasPrefix(k, "X-Ratelimit-") {
			mw.Header().Del(k)
		}
	}
	if mw.Passes && status < 400 {
		if mw.GenID != "" {
			mw.Header().Set("X-Generation-Id", mw.GenID)
		}
		return sse.Pass
	}
	if ct := mw.Header()["Content-Type"]; status < 400 && len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream") {
		if mw.GenID != "" {
			mw.Header().Set("X-Generation-Id", mw.GenID)
		}
		return sse.Stream
	}
	return sse.Hold
}

// UpstreamFailed reports whether the provider answered with an error status.
func (mw *Writer) UpstreamFailed() bool { return mw.Mode == sse.Hold && mw.Status >= 400 }

// AnswerHeld reports whether a (2xx or 3xx) answer is held whole.
func (mw *Writer) AnswerHeld() bool { return mw.Mode == sse.Hold && mw.Status < 400 }

// ClientGone reports whether a write to the client failed.
func (mw *Writer) ClientGone() bool { return mw.SendErr != nil }

var (
	finishKey    = []byte(`"finish_reason"`)
	finishNull   = []byte(`"finish_reason":null`)
	finishNullSp = []byte(`"finish_reason": null`)
	usageKey     = []byte(`"usage"`)
)

// Event implements sse.Hooks: read what the event says, then pass or hold it.
func (mw *Writer) Event(ev []byte) ([]byte, error) {
	if mw.Route != nil && upstream.MayCarryProviderError(ev) {
		ev = mw.Route.RedactBytes(ev)
	}
	hold := len(mw.tail) > 0 // keep order once holding started
	data := sse.Data(ev)
	if mw.Renamed != "" && data != nil {
		ev, data = mw.renamedEvent(ev, data)
	}
	switch {
	case data == nil:
	case sse.IsDone(data):
		mw.SawDone, hold = true, true
	case mw.kind == dialect.Messages:
		hold = mw.messagesEvent(data) || hold
	case mw.kind == dialect.Responses:
		// Compared and measured only: not copied.
		typ, seq := jsonpeek.Get(data, "type").Str, jsonpeek.Get(data, "sequence_number")
		if seq.Exists() {
			mw.lastSeq, mw.seqSeen = max(mw.lastSeq, seq.Int()), true
		}
		if typ == "response.created" {
			mw.UpstreamID = gjson.GetBytes(data, "response.id").Str
		}
		switch typ {
		case "response.completed", "response.incomplete", "response.failed":
			u := gjson.GetBytes(data, "response.usage")
			if u.IsObject() {
				mw.Usage = usageOf(u, true)
				mw.UsageRaw = u.Raw
			}
			mw.Finish = strings.Clone(strings.TrimPrefix(typ, "response."))
			mw.SawDone, hold = true, true
		default:
			mw.Delivered += outputlen.ResponsesEvent(typ, data)
		}
	default:
		if mw.Identity != nil {
			if mw.UpstreamID == "" {
				mw.UpstreamID = gjson.GetBytes(data, "id").Str
			}
			ev, data = mw.ownEvent(ev, data)
		}
		// One scan for the output, of any kind (measured only: not
		// copied); the rarer fields only when their bytes say they are
		// there (most chunks carry "finish_reason":null and no usage).
		mw.Delivered += outputlen.Chat(data)
		if bytes.Contains(data, finishKey) && !bytes.Contains(data, finishNull) && !bytes.Contains(data, finishNullSp) {
			if f := gjson.GetBytes(data, "choices.0.finish_reason").Str; f != "" {
				mw.Finish = f
			}
		}
		if bytes.Contains(data, usageKey) {
			if u := gjson.GetBytes(data, "usage"); u.IsObject() {
				mw.Usage = usageOf(u, false)
				mw.UsageRaw = u.Raw
				hold = true
			}
		}
	}
	if mw.FirstText.IsZero() && mw.Delivered > 0 {
		mw.FirstText = time.Now()
	}
	if hold {
		mw.tail = append(mw.tail, bytes.Clone(ev))
		return nil, nil
	}
	return ev, nil
}

// TakeProviderUsage makes u, the chat usage a translation between the
// provider and the client read, the attempt's reported usage when the
// answer the client got carried none: the translated answer carries it
// only at its end, which a stream cut short never reaches.
func (mw *Writer) TakeProviderUsage(u gjson.Result) {
	if mw.Usage.OK || !u.IsObject() {
		return
	}
	mw.Usage = usageOf(u, false)
	mw.UsageRaw = u.Raw
}

// RewriteIdentity makes the writer rewrite a chat answer's identity to
// the generation's.
func (mw *Writer) RewriteIdentity(genID string, route *upstream.Route) {
	mw.ownIdentity.SetIn(mw.identityBuf[:], genID, route)
	mw.Identity = &mw.ownIdentity
}

// ownEvent returns the event ev with the answer's identity rewritten in
// its payload data, and the new payload. The result is built in mw.evBuf,
// reused for every event: the sse core sends what Event returns before the
// next event, and a held event is copied.
func (mw *Writer) ownEvent(ev, data []byte) (newEv, newData []byte) {
	at := bytes.Index(ev, data)
	if at < 0 {
		return ev, data
	}
	buf, ok := mw.Identity.appendRewrite(append(mw.evBuf[:0], ev[:at]...), data)
	if !ok {
		return ev, data
	}
	end := len(buf)
	mw.evBuf = append(buf, ev[at+len(data):]...)
	return mw.evBuf, mw.evBuf[at:end]
}

// UsableJSON reads the buffered JSON answer once and reports whether it is
// a JSON object.
func (mw *Writer) UsableJSON() bool {
	if !mw.jsonChecked {
		mw.jsonChecked, mw.jsonOK = true, mw.readJSONUsage()
	}
	return mw.jsonOK
}

// readJSONUsage reads usage and the finish from a buffered JSON answer; ok
// is false when the body is not a JSON object. An answer that reports usage
// is taken as well-formed; only one without usage is validated in full and
// searched for its text, which is then the basis of the charge.
func (mw *Writer) readJSONUsage() (ok bool) {
	body := mw.Body.Bytes()
	if mw.kind == dialect.Messages {
		return mw.readMessagesUsage(body)
	}
	finishPath := "choices.0.finish_reason"
	if mw.kind == dialect.Responses {
		finishPath = "status"
	}
	var layout *answerLayout
	if mw.Identity != nil {
		layout = &mw.layout
	}
	top := readAnswerMembers(body, mw.kind == dialect.Responses, layout)
	// The generation record keeps these: copies, not views of the body.
	mw.UpstreamID = strings.Clone(top.id.Str)
	u := top.usage
	if !u.Exists() {
		u = gjson.GetBytes(body, "usage") // as the lookup always did, for a body the single pass could not walk
	}
	if u.IsObject() {
		mw.usageJSON = u
		mw.UsageRaw = u.Raw
		mw.Usage = usageOf(u, mw.kind == dialect.Responses)
		mw.Finish = internFinish(top.finish.Str)
		return true
	}
	if !jsoncheck.Valid(body) || body[firstNonSpace(body)] != '{' {
		return false
	}
	mw.Finish = gjson.GetBytes(body, finishPath).Str
	mw.Delivered = mw.HeldOutput()
	return mw.nonEmpty()
}

// HeldOutput is the model output of the held answer (outputlen).
func (mw *Writer) HeldOutput() int {
	body := mw.Body.Bytes()
	switch mw.kind {
	case dialect.Responses:
		return outputlen.ResponsesAnswer(body)
	case dialect.Messages:
		return outputlen.MessagesAnswer(body)
	}
	return outputlen.Chat(body)
}

// nonEmpty reports whether an answer without usage has output; one that
// has neither is no answer (an empty object, no choices, no output
// items): the attempt failed.
func (mw *Writer) nonEmpty() bool {
	mw.empty = mw.Delivered == 0
	return !mw.empty
}

// internFinish is a finish reason (or a Responses status) as a string of
// its own: the usual ones without an allocation, others copied.
func internFinish(s string) string {
	switch s {
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "tool_calls":
		return "tool_calls"
	case "content_filter":
		return "content_filter"
	case "completed":
		return "completed"
	case "incomplete":
		return "incomplete"
	}
	return strings.Clone(s)
}

// answerMembers are the members of an answer the meter reads: its id, its
// usage object and its finish (choices.0.finish_reason, or a Responses
// object's status), each as gjson's lookup of its path finds it.
type answerMembers struct{ id, usage, finish gjson.Result }

// answerLayout is where a chat answer's top-level members are, so that
// sendJSON builds what the client gets in one pass over the answer: the
// values of the first id, model, provider and usage members (a zero span:
// none). plain reports that gjson's lookups of those members find these
// very values: the whole top level was walked, and no key has an escape
// and every value is plain (jsonpeek.PlainValue), so that gjson skips each member as
// the walk did.
type answerLayout struct {
	id, model, provider, usage span
	plain                      bool
}

// span is a value's offsets in the answer.
type span struct{ start, end int }

func (s span) found() bool { return s.end > 0 }

// memberPicker keeps the first id, usage and finish member of an
// answer's top level, as lookups of those paths find them.
type memberPicker struct {
	m                     answerMembers
	seen                  [3]bool
	finishKey, finishRest string // the finish member, and its path inside
}

func newMemberPicker(responses bool) memberPicker {
	if responses {
		return memberPicker{finishKey: "status"}
	}
	return memberPicker{finishKey: "choices", finishRest: "0.finish_reason"}
}

// take notes the member k with value v when it is the first of its name.
func (p *memberPicker) take(k string, v gjson.Result) {
	switch {
	case k == "id" && !p.seen[0]:
		p.m.id, p.seen[0] = v, true
	case k == "usage" && !p.seen[1]:
		p.m.usage, p.seen[1] = v, true
	case k == p.finishKey && !p.seen[2]:
		if p.finishRest != "" {
			if v = v.Get(p.finishRest); !v.Exists() {
				return // a lookup goes on to a later member of that name
			}
		}
		p.m.finish, p.seen[2] = v, true
	}
}

func (p *memberPicker) done() bool { return p.seen == [3]bool{true, true, true} }

// readAnswerMembers finds them in one pass over the answer's top level:
// a lookup per path would walk the whole answer (its text) for each.
// Indexes are offsets in body, and the results' strings alias it. With a
// layout, the walk goes on to the end of the top level and records it.
func readAnswerMembers(body []byte, responses bool, layout *answerLayout) answerMembers {
	p := newMemberPicker(responses)
	l := answerLayout{plain: true}
	doc := jsonpeek.ViewString(body)
	ok := jsonpeek.EachTopValue(body, func(keyStart, keyEnd int, escaped bool, start int) (end int, more bool) {
		k := jsonpeek.MemberKey(doc, keyStart, keyEnd, escaped)
		parensKnown, parens := false, false // of the value, when its walk saw
		switch {
		case k == p.finishKey && p.finishRest != "" && !p.seen[2] && start < len(body) && body[start] == '[':
			// choices: its first element's finish_reason, found without
			// gjson reading the message text byte by byte.
			var v gjson.Result
			var found bool
			if end, v, found, parens, parensKnown = readChoices(body, start); found {
				p.m.finish, p.seen[2] = v, true
			}
		case k == "id" || k == "usage" || k == p.finishKey:
			if end = jsonpeek.SkipValue(body, start); end >= 0 {
				v := jsonpeek.ParseSkipped(doc, start, end)
				v.Index = start
				p.take(k, v)
			}
		default:
			end = jsonpeek.SkipValue(body, start)
		}
		if end < 0 {
			return end, false
		}
		if layout != nil {
			l.record(k, span{start, end})
			if parensKnown {
				// jsonpeek.PlainValue of the array, as the walk found it.
				l.plain = l.plain && !escaped && !parens
			} else {
				l.plain = l.plain && !escaped && jsonpeek.PlainValue(body[start:end])
			}
			return end, true
		}
		return end, !p.done()
	})
	l.plain = l.plain && ok
	if ok || p.done() {
		// Found in the walk, also when what follows the last of them is
		// malformed: a lookup stops there too.
		if layout != nil {
			*layout = l
		}
		return p.m
	}
	// Not an object jsonpeek.EachTopValue can walk: gjson's own iteration, as
	// lenient as the lookups it stands for.
	return pickByGJSON(doc, responses)
}

// pickByGJSON reads the members with gjson's own iteration of doc.
func pickByGJSON(doc string, responses bool) answerMembers {
	p := newMemberPicker(responses)
	gjson.Parse(doc).ForEach(func(k, v gjson.Result) bool {
		p.take(k.Str, v)
		return true
	})
	return p.m
}

// record notes the member k with value v when it is the first of a name
// the layout keeps.
func (l *answerLayout) record(k string, v span) {
	var s *span
	switch k {
	case "id":
		s = &l.id
	case "model":
		s = &l.model
	case "provider":
		s = &l.provider
	case "usage":
		s = &l.usage
	default:
		return
	}
	if !s.found() {
		*s = v
	}
}

// readChoices skips the choices array at body[start] and reads the
// finish_reason of its first element (as firstChoiceFinish does; none when
// there is no array): one walk of the array, where skipping it and then
// reading its first element would read that element, the answer's text,
// twice. The element is walked as an object; where that walk may not
// follow the brackets as skipping does (a value other than a string or a
// container holds a quote or a bracket), or does not close, the array is
// skipped and the element read apart.
//
// When the walk went through, parensKnown is set and parens is whether the
// array has a parenthesis outside its strings (jsonpeek.PlainValue's test), seen on
// the way: a long text is then read once, not again by jsonpeek.PlainValue.
func readChoices(body []byte, start int) (end int, finish gjson.Result, found, parens, parensKnown bool) {
	doc := jsonpeek.ViewString(body)
	brackets := true // the walk of the element saw the brackets that skipping would
	elem, _ := jsonpeek.WalkValues(body, jsoncheck.SkipSpace(body, start+1), func(keyStart, keyEnd int, escaped bool, vs int) (int, bool) {
		// jsonpeek.SkipValue, with the parentheses outside strings noted.
		ve := -1
		switch {
		case vs >= len(body):
		case body[vs] == '"':
			ve, _ = jsonpeek.SkipString(body, vs)
		case body[vs] == '{' || body[vs] == '[':
			var p bool
			ve, p = jsonpeek.CloseContainerParens(body, vs, 0)
			parens = parens || p
		default:
			if ve = jsonpeek.SkipValue(body, vs); ve < 0 {
				break
			}
			for _, c := range body[vs:ve] { // a short token
				switch c {
				case '"', '{', '[':
					brackets = false
				case '(', ')':
					parens = true
				}
			}
		}
		if ve < 0 {
			return ve, false
		}
		if !found && jsonpeek.MemberKey(doc, keyStart, keyEnd, escaped) == "finish_reason" {
			finish, found = gjson.Parse(doc[vs:ve]), true
			finish.Index = vs
		}
		return ve, true
	})
	if elem < 0 || !brackets {
		if end = jsonpeek.SkipValue(body, start); end < 0 {
			return -1, gjson.Result{}, false, false, false
		}
		finish, found = firstChoiceFinish(body, start, end)
		return end, finish, found, false, false
	}
	// The first element closed where skipping it would have: the rest of
	// the array is skipped from there, one bracket deep.
	end, rest := jsonpeek.CloseContainerParens(body, elem, 1)
	if end < 0 {
		return -1, gjson.Result{}, false, false, false
	}
	return end, finish, found, parens || rest, true
}

// firstChoiceFinish is the finish_reason member of the first element of
// the array body[start:end], as gjson's lookup of 0.finish_reason finds it.
func firstChoiceFinish(body []byte, start, end int) (v gjson.Result, found bool) {
	arr := body[:end]
	doc := jsonpeek.ViewString(body)
	jsonpeek.WalkObject(arr, jsoncheck.SkipSpace(arr, start+1), func(keyStart, keyEnd int, escaped bool, vs, ve int) bool {
		if jsonpeek.MemberKey(doc, keyStart, keyEnd, escaped) != "finish_reason" {
			return true
		}
		v = gjson.Parse(doc[vs:ve])
		v.Index, found = vs, true
		return false
	})
	return v, found
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return 0
}

// withCost returns doc with the gateway's usage members (UsageBill.Members,
// or "cost" alone) added to its usage object u (a result of a gjson lookup
// on doc at path), splicing bytes rather than rewriting the document. The
// provider's own members of those names are replaced.
func withCost(doc []byte, u gjson.Result, path, members string) []byte {
	if out, ok := appendWithCost(nil, doc, u, path, members); ok {
		return out
	}
	return doc
}

// appendWithCost appends withCost(doc, ...) to dst; ok is false (and dst
// unchanged) when doc has no usable usage object.
func appendWithCost(dst, doc []byte, u gjson.Result, path, members string) (out []byte, ok bool) {
	for i, name := range gatewayUsageMembers {
		// Providers rarely send these names: a byte search for the quoted
		// name (or a \u escape that could spell it) skips a lookup per
		// name over the usage object on almost every answer.
		if !strings.Contains(u.Raw, gatewayUsageQuoted[i]) && !strings.Contains(u.Raw, `\u`) {
			continue
		}
		if u.Get(name).Exists() {
			if out, err := sjson.DeleteBytes(doc, path+"."+name); err == nil {
				doc, u = out, gjson.GetBytes(out, path)
			}
		}
	}
	end := u.Index + len(u.Raw) - 1
	if u.Index <= 0 || end >= len(doc) || doc[end] != '}' {
		return dst, false
	}
	sep := ","
	if len(bytes.TrimSpace(doc[u.Index+1:end])) == 0 {
		sep = ""
	}
	out = slices.Grow(dst, len(doc)+len(sep)+len(members))
	out = append(out, doc[:end]...)
	out = append(out, sep...)
	out = append(out, members...)
	return append(out, doc[end:]...), true
}

// answerBufs are the buffers in which sendJSON builds the answer it sends:
// their life is one call (the client's writer copies what it is given),
// and they are reused across requests.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAnswer bounds the buffers kept in answerBufs, so that one huge
// answer does not pin its memory.
const maxPooledAnswer = 64 << 10

func putAnswerBuf(b *[]byte) {
	if cap(*b) <= maxPooledAnswer {
		*b = (*b)[:0]
		answerBufs.Put(b)
	}
}

// gatewayUsageMembers are the usage members the gateway writes.
var gatewayUsageMembers = []string{"cost", "is_byok", "cost_details"}

// gatewayUsageQuoted are gatewayUsageMembers as they appear quoted.
var gatewayUsageQuoted = func() []string {
	q := make([]string, len(gatewayUsageMembers))
	for i, name := range gatewayUsageMembers {
		q[i] = `"` + name + `"`
	}
	return q
}()

// usageMembers are the members settle's bill adds to usage; "cost" alone
// without one.
func (mw *Writer) usageMembers(cost money.Amount) string {
	return string(mw.appendUsageMembers(nil, cost))
}

// appendUsageMembers appends usageMembers(cost) to dst.
func (mw *Writer) appendUsageMembers(dst []byte, cost money.Amount) []byte {
	if mw.Bill != nil {
		return mw.Bill.appendMembers(dst)
	}
	return cost.Append(append(dst, `"cost":`...))
}

// SendJSON writes the buffered answer with usage.cost added.
func (mw *Writer) SendJSON(cost money.Amount, genID string) error {
	body := mw.Body.Bytes()
	buf := answerBufs.Get().(*[]byte)
	defer putAnswerBuf(buf)
	if out, ok := mw.appendChatAnswer((*buf)[:0], body, cost); ok {
		body, *buf = out, out
	} else {
		idBuf := answerBufs.Get().(*[]byte)
		defer putAnswerBuf(idBuf)
		body = mw.rewriteAnswer(body, cost, buf, idBuf)
	}
	// Canonical names, set directly (see Route.Apply); the two values in
	// the writer's allocation, each slice full so that an append copies it.
	h, vals := mw.Header(), mw.headerVals[:]
	vals[0], vals[1] = genID, strconv.Itoa(len(body))
	h["X-Generation-Id"], h["Content-Length"] = vals[0:1:1], vals[1:2:2]
	mw.ResponseWriter.WriteHeader(mw.Status)
	return mw.Send(body)
}

// rewriteAnswer is the answer the client gets, in two steps: usage.cost
// added (built in buf), then the identity rewritten (in idBuf).
func (mw *Writer) rewriteAnswer(body []byte, cost money.Amount, buf, idBuf *[]byte) []byte {
	replace := mw.Corrected && (mw.kind == dialect.Chat || mw.kind == dialect.Messages) && mw.Bill != nil
	if mw.usageJSON.IsObject() && !replace {
		if out, ok := appendWithCost((*buf)[:0], body, mw.usageJSON, "usage", mw.usageMembers(cost)); ok {
			body, *buf = out, out
		}
	} else if (mw.kind == dialect.Chat || mw.kind == dialect.Messages) && mw.Bill != nil {
		// The provider reported no usage, or one the gateway corrected:
		// the answer carries the one charged.
		if out, err := sjson.SetRawBytes(body, "usage", mw.billUsage()); err == nil {
			body = out
		}
	}
	if mw.Identity != nil {
		if out, ok := mw.Identity.appendRewrite((*idBuf)[:0], body); ok {
			body, *idBuf = out, out
		}
	}
	if mw.Renamed != "" {
		body = withModel(body, "model", mw.Renamed)
	}
	return body
}

// RenameModel makes the writer name model in a Responses or Messages
// answer, passed through from a provider that names its own: the auto
// router's choice, which the client did not name.
func (mw *Writer) RenameModel(model string) { mw.Renamed = model }

// renamedEvent is ev with the model of the object its payload data
// starts or ends (response.model, message.model) renamed, and the new
// payload.
func (mw *Writer) renamedEvent(ev, data []byte) (newEv, newData []byte) {
	path := "response.model"
	if mw.kind == dialect.Messages {
		path = "message.model"
	}
	at := bytes.Index(ev, data)
	out := withModel(data, path, mw.Renamed)
	if at < 0 || len(out) == len(data) && bytes.Equal(out, data) {
		return ev, data
	}
	newEv = append(append(append(make([]byte, 0, len(ev)-len(data)+len(out)), ev[:at]...), out...), ev[at+len(data):]...)
	return newEv, newEv[at : at+len(out)]
}

// withModel is doc with the string at path set to model; doc itself
// when it has none there.
func withModel(doc []byte, path, model string) []byte {
	v := gjson.GetBytes(doc, path)
	if v.Type != gjson.String || v.Str == model || v.Index <= 0 {
		return doc
	}
	out := make([]byte, 0, len(doc)+len(model))
	out = append(out, doc[:v.Index]...)
	out = jsonstr.Append(out, model)
	return append(out, doc[v.Index+len(v.Raw):]...)
}

// appendChatAnswer appends what rewriteAnswer makes of a chat answer with
// usage, in one pass over it: the identity's values and the bill's usage
// members spliced in where readJSONUsage found their places. ok is false
// (dst unchanged) when the layout is not plain or usage may hold a member
// the gateway writes, which rewriteAnswer then replaces.
func (mw *Writer) appendChatAnswer(dst, body []byte, cost money.Amount) (out []byte, ok bool) {
	l, u, id := &mw.layout, mw.usageJSON, mw.Identity
	if id == nil || mw.Corrected || !l.plain || !u.IsObject() || !l.usage.found() || u.Index != l.usage.start || len(u.Raw) != l.usage.end-l.usage.start {
		return dst, false
	}
	closing := l.usage.end - 1
	if body[closing] != '}' || mayHaveGatewayMember(u.Raw) {
		return dst, false
	}
	// What appendWithCost would add, then what appendRewrite would do to
	// that: the splices are apart, so their order in body is all that
	// matters. The object has a member, usage: the added members (those
	// the answer lacks) are each followed by a comma.
	usage := answerBufs.Get().(*[]byte)
	defer putAnswerBuf(usage)
	added := (*usage)[:0]
	if len(bytes.TrimSpace(body[u.Index+1:closing])) > 0 {
		added = append(added, ',')
	}
	added = mw.appendUsageMembers(added, cost)
	*usage = added
	var edits [4]splice
	var have [3]bool
	for i, e := range [3]span{l.id, l.model, l.provider} {
		if have[i] = e.found(); have[i] {
			edits[i] = splice{at: e.start, n: e.end - e.start, with: id.values()[i]}
		}
	}
	edits[3] = splice{at: closing, with: added}
	open := firstNonSpace(body)
	out, _ = id.appendMissing(append(dst, body[:open+1]...), have)
	return appendSpliced(out, body, open+1, edits[:]), true
}

// mayHaveGatewayMember reports whether the usage object raw may have a
// member named as one the gateway writes (gatewayUsageMembers, "cost" a
// prefix of two), which appendWithCost replaces: their bytes, or an escape
// that could spell them.
func mayHaveGatewayMember(raw string) bool {
	return strings.Contains(raw, `"cost`) || strings.Contains(raw, `"is_byok"`) || strings.IndexByte(raw, '\\') >= 0
}

// SendTail writes the held events, with usage.cost added to the one that
// reports usage, and flushes.
func (mw *Writer) SendTail(cost money.Amount) error {
	for _, ev := range mw.tail {
		if data := sse.Data(ev); data != nil && !sse.IsDone(data) {
			path := "usage"
			if mw.kind == dialect.Responses {
				path = "response.usage"
			}
			if u := gjson.GetBytes(data, path); u.IsObject() && mw.Corrected && mw.kind != dialect.Responses && mw.Bill != nil {
				// A usage the gateway corrected: the one charged instead.
				if out, err := sjson.SetRawBytes(data, path, mw.billUsage()); err == nil {
					ev = sse.ReplaceData(ev, data, out)
				}
			} else if u.IsObject() {
				ev = sse.ReplaceData(ev, data, withCost(data, u, path, mw.usageMembers(cost)))
			} else if mw.kind == dialect.Messages && mw.Bill != nil {
				ev = mw.withBilledUsage(ev, data)
			}
		} else if data != nil && mw.kind == dialect.Chat && !mw.Usage.OK && mw.Bill != nil {
			// The provider reported no usage: the stream still ends with
			// one, the usage charged.
			if err := mw.Send(mw.usageChunk()); err != nil {
				return err
			}
		}
		if err := mw.Send(ev); err != nil {
			return err
		}
	}
	mw.tail = nil
	return mw.Flush()
}

// usageChunk is the closing chat chunk with the usage charged, for a
// stream whose provider reported none.
func (mw *Writer) usageChunk() []byte {
	doc := []byte(`{"object":"chat.completion.chunk","created":` + strconv.FormatInt(time.Now().Unix(), 10) +
		`,"choices":[],"usage":` + string(mw.billUsage()) + `}`)
	if mw.Identity != nil {
		doc = mw.Identity.Rewrite(doc)
	}
	return append(append([]byte("data: "), doc...), "\n\n"...)
}

// billUsage is the usage object of what settle charged, in the route's
// dialect.
func (mw *Writer) billUsage() []byte {
	if mw.kind == dialect.Messages {
		return mw.messagesBillUsage()
	}
	t := mw.Bill.tokens
	return []byte(`{"prompt_tokens":` + strconv.FormatInt(t.PromptTokens, 10) +
		`,"completion_tokens":` + strconv.FormatInt(t.CompletionTokens, 10) +
		`,"total_tokens":` + strconv.FormatInt(t.PromptTokens+t.CompletionTokens, 10) +
		`,` + mw.Bill.Members() + `}`)
}

// failedResponse is the Responses object of the response.failed event that
// ends a broken stream of route.
func failedResponse(route *upstream.Route, id string, created int64, msg string) *translate.Response {
	echo := route.Echo
	if echo == nil {
		echo = translate.NewEcho(route.Body)
	}
	return translate.FailedResponse(echo, id, route.Model.ID, created, msg)
}

// SendStreamError ends a stream whose upstream failed after the status was
// sent: a chat completion chunk with error and finish_reason "error", or a
// Responses "response.failed" event, then [DONE].
func (mw *Writer) SendStreamError(route *upstream.Route, code int, msg string) error {
	created := time.Now().Unix()
	var ev []byte
	if mw.kind == dialect.Messages {
		// Anthropic's streams end with no [DONE].
		return mw.sendMessagesError(code, msg)
	}
	if mw.kind == dialect.Responses {
		// Numbered after the events sent.
		next := int64(0)
		if mw.seqSeen {
			next = mw.lastSeq + 1
		}
		body, _ := json.Marshal(map[string]any{
			"type":            "response.failed",
			"sequence_number": next,
			"response":        failedResponse(route, mw.GenID, created, msg),
		})
		ev = append(append([]byte("event: response.failed\ndata: "), body...), "\n\n"...)
	} else {
		body, _ := json.Marshal(map[string]any{
			"id": mw.GenID, "object": "chat.completion.chunk", "created": created,
			"model": route.Model.ID, "provider": route.Provider.Name,
			"error":   map[string]any{"code": code, "message": msg},
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": ""}, "finish_reason": "error"}},
		})
		ev = append(append([]byte("data: "), body...), "\n\n"...)
	}
	ev = append(ev, "data: [DONE]\n\n"...)
	if _, err := mw.ResponseWriter.Write(ev); err != nil {
		return err
	}
	return mw.Flush()
}

// EstimateUsage decides the charge of an attempt whose provider reported
// no usage: a stream the client aborted, one the provider cut, or an
// answer that carries none. Its output is all the model output the
// client received or the provider produced (outputlen: text, tool-call
// arguments, reasoning, refusals, audio, images, function calls), the
// larger of the two when a translation is between them.
//
//   - An attempt the provider accepted (it answered with a stream) and
//     the client left is charged at least its prompt, output or not.
//   - Otherwise an attempt without any output is no answer (a stream cut
//     before its first output, or that ended empty): not charged.
//   - The prompt counts one token per three bytes of the body the
//     provider received (at most the model's context window), the output
//     one token per four bytes (billing.EstimateTextTokens), at most the
//     output limit the provider was sent for each of the request's choices.
func (mw *Writer) EstimateUsage(route *upstream.Route, clientGone bool) (usage billing.Usage, charge bool) {
	out := max(mw.Delivered, mw.Produced)
	if out == 0 && !(clientGone && mw.Mode == sse.Stream) {
		return billing.Usage{}, false
	}
	completion := billing.EstimateTextTokens(out)
	if bound := route.OutputBound(); bound > 0 {
		completion = min(completion, bound*route.NChoices())
	}
	return billing.Usage{PromptTokens: route.PromptEstimate(), CompletionTokens: completion}, true
}

// usageCount reads a token count as written in a usage object: a
// non-negative integer (a number with a fraction counts its whole part);
// ok is false for anything else, a missing member included.
func usageCount(raw string) (n int64, ok bool) {
	if raw == "" {
		return 0, false
	}
	if len(raw) <= 15 {
		digits := true
		for i := 0; i < len(raw); i++ {
			if raw[i] < '0' || raw[i] > '9' {
				digits = false
				break
			}
			n = n*10 + int64(raw[i]-'0')
		}
		if digits {
			return n, true
		}
	}
	v := gjson.Parse(raw)
	if v.Type != gjson.Number || v.Num < 0 {
		return v.Int(), false
	}
	return v.Int(), true
}
