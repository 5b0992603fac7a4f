package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/handlers/sse"
	"github.com/tollgate-dev/caddy-tollgate/handlers/translate"
)

// meterWriter sits between reverse_proxy and the client and reads usage
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
type meterWriter struct {
	sse.Writer
	kind  string // "chat", "responses", "messages", "other"
	genID string // sent as X-Generation-Id with answers that are charged

	tail [][]byte // stream mode: held events, in order

	// What the client has been sent or will be sent.
	usage        usageSeen
	deliveredTxt int   // bytes of generated text forwarded to the client
	sawDone      bool  // [DONE] or a terminal response event arrived
	lastSeq      int64 // Responses events: the last sequence_number seen
	seqSeen      bool  // a Responses event carried a sequence_number
	finish       string
	jsonChecked  bool // usableJSON ran
	jsonOK       bool
	usageJSON    gjson.Result // the JSON answer's usage object
	usageRaw     string       // the upstream's usage object, as sent
	startPrompt  int64        // Messages streams: the prompt tokens message_start reported

	// identity, for chat completions, rewrites the answer's id, model and
	// provider (identity.go); upstreamID is the provider's id of it.
	identity   *answerIdentity
	upstreamID string
	// bill is what settle charged, added to the usage sent.
	bill *usageBill
}

// maxBufferedBody bounds a buffered answer; larger ones are refused.
const maxBufferedBody = 32 << 20

// usageSeen is the usage the upstream reported.
type usageSeen struct {
	ok         bool
	prompt     int64
	completion int64
}

func newMeterWriter(w http.ResponseWriter, kind string) *meterWriter {
	mw := &meterWriter{kind: kind}
	mw.Init(w, mw)
	mw.Limit = maxBufferedBody
	return mw
}

// Decide implements sse.Hooks: only streams are sent as they come; answers
// and upstream errors (status >= 400) are held.
func (mw *meterWriter) Decide(status int) sse.Mode {
	// The provider's own rate-limit headers are not the platform's: only
	// the gateway's 429 carries X-RateLimit-* (SPEC.md 7.2).
	for k := range mw.Header() {
		if strings.HasPrefix(k, "X-Ratelimit-") {
			mw.Header().Del(k)
		}
	}
	if status < 400 && strings.HasPrefix(mw.Header().Get("Content-Type"), "text/event-stream") {
		if mw.genID != "" {
			mw.Header().Set("X-Generation-Id", mw.genID)
		}
		return sse.Stream
	}
	return sse.Hold
}

// upstreamError reports whether the provider answered with an error status.
func (mw *meterWriter) upstreamError() bool { return mw.Mode == sse.Hold && mw.Status >= 400 }

// answerHeld reports whether a (2xx or 3xx) answer is held whole.
func (mw *meterWriter) answerHeld() bool { return mw.Mode == sse.Hold && mw.Status < 400 }

// clientGone reports whether a write to the client failed.
func (mw *meterWriter) clientGone() bool { return mw.SendErr != nil }

var (
	finishKey    = []byte(`"finish_reason"`)
	finishNull   = []byte(`"finish_reason":null`)
	finishNullSp = []byte(`"finish_reason": null`)
	usageKey     = []byte(`"usage"`)
)

// Event implements sse.Hooks: read what the event says, then pass or hold it.
func (mw *meterWriter) Event(ev []byte) ([]byte, error) {
	hold := len(mw.tail) > 0 // keep order once holding started
	data := sse.Data(ev)
	switch {
	case data == nil:
	case sse.IsDone(data):
		mw.sawDone, hold = true, true
	case mw.kind == "messages":
		hold = mw.messagesEvent(data) || hold
	case mw.kind == "responses":
		res := gjson.GetManyBytes(data, "type", "sequence_number", "delta")
		typ := res[0].Str
		if res[1].Exists() {
			mw.lastSeq, mw.seqSeen = max(mw.lastSeq, res[1].Int()), true
		}
		if typ == "response.created" {
			mw.upstreamID = gjson.GetBytes(data, "response.id").Str
		}
		switch typ {
		case "response.output_text.delta":
			mw.deliveredTxt += len(res[2].Str)
		case "response.completed", "response.incomplete", "response.failed":
			u := gjson.GetBytes(data, "response.usage")
			if u.IsObject() {
				mw.usage = usageSeen{ok: true, prompt: u.Get("input_tokens").Int(), completion: u.Get("output_tokens").Int()}
				mw.usageRaw = u.Raw
			}
			mw.finish = strings.TrimPrefix(typ, "response.")
			mw.sawDone, hold = true, true
		}
	default:
		if mw.identity != nil {
			if mw.upstreamID == "" {
				mw.upstreamID = gjson.GetBytes(data, "id").Str
			}
			own := mw.identity.rewrite(data)
			ev, data = sse.ReplaceData(ev, data, own), own
		}
		// One scan for the text; the rarer fields only when their bytes
		// say they are there (most chunks carry "finish_reason":null and
		// no usage).
		mw.deliveredTxt += len(gjson.GetBytes(data, "choices.0.delta.content").Str)
		if bytes.Contains(data, finishKey) && !bytes.Contains(data, finishNull) && !bytes.Contains(data, finishNullSp) {
			if f := gjson.GetBytes(data, "choices.0.finish_reason").Str; f != "" {
				mw.finish = f
			}
		}
		if bytes.Contains(data, usageKey) {
			if u := gjson.GetBytes(data, "usage"); u.IsObject() {
				mw.usage = usageSeen{ok: true, prompt: u.Get("prompt_tokens").Int(), completion: u.Get("completion_tokens").Int()}
				mw.usageRaw = u.Raw
				hold = true
			}
		}
	}
	if hold {
		mw.tail = append(mw.tail, bytes.Clone(ev))
		return nil, nil
	}
	return ev, nil
}

// usableJSON reads the buffered JSON answer once and reports whether it is
// a JSON object.
func (mw *meterWriter) usableJSON() bool {
	if !mw.jsonChecked {
		mw.jsonChecked, mw.jsonOK = true, mw.readJSONUsage()
	}
	return mw.jsonOK
}

// readJSONUsage reads usage and the finish from a buffered JSON answer; ok
// is false when the body is not a JSON object. An answer that reports usage
// is taken as well-formed; only one without usage is validated in full and
// searched for its text, which is then the basis of the charge.
func (mw *meterWriter) readJSONUsage() (ok bool) {
	body := mw.Body.Bytes()
	if mw.kind == "messages" {
		return mw.readMessagesUsage(body)
	}
	finishPath, in, out := "choices.0.finish_reason", "prompt_tokens", "completion_tokens"
	if mw.kind == "responses" {
		finishPath, in, out = "status", "input_tokens", "output_tokens"
	}
	mw.upstreamID = gjson.GetBytes(body, "id").Str
	u := gjson.GetBytes(body, "usage")
	if u.IsObject() {
		mw.usageJSON = u
		mw.usageRaw = u.Raw
		mw.usage = usageSeen{ok: true, prompt: u.Get(in).Int(), completion: u.Get(out).Int()}
		mw.finish = gjson.GetBytes(body, finishPath).Str
		return true
	}
	if !jsoncheck.Valid(body) || body[firstNonSpace(body)] != '{' {
		return false
	}
	mw.finish = gjson.GetBytes(body, finishPath).Str
	if mw.kind == "responses" {
		gjson.GetBytes(body, "output.#.content.#.text").ForEach(func(_, v gjson.Result) bool {
			v.ForEach(func(_, t gjson.Result) bool { mw.deliveredTxt += len(t.Str); return true })
			return true
		})
	} else {
		mw.deliveredTxt += len(gjson.GetBytes(body, "choices.0.message.content").Str)
	}
	return true
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return 0
}

// withCost returns doc with the gateway's usage members (usageBill.members,
// or "cost" alone) added to its usage object u (a result of a gjson lookup
// on doc at path), splicing bytes rather than rewriting the document. The
// provider's own members of those names are replaced.
func withCost(doc []byte, u gjson.Result, path, members string) []byte {
	for _, name := range gatewayUsageMembers {
		if u.Get(name).Exists() {
			if out, err := sjson.DeleteBytes(doc, path+"."+name); err == nil {
				doc, u = out, gjson.GetBytes(out, path)
			}
		}
	}
	end := u.Index + len(u.Raw) - 1
	if u.Index <= 0 || end >= len(doc) || doc[end] != '}' {
		return doc
	}
	sep := ","
	if len(bytes.TrimSpace(doc[u.Index+1:end])) == 0 {
		sep = ""
	}
	out := make([]byte, 0, len(doc)+len(sep)+len(members))
	out = append(out, doc[:end]...)
	out = append(out, sep...)
	out = append(out, members...)
	return append(out, doc[end:]...)
}

// gatewayUsageMembers are the usage members the gateway writes.
var gatewayUsageMembers = []string{"cost", "is_byok", "cost_details"}

// usageMembers are the members settle's bill adds to usage; "cost" alone
// without one.
func (mw *meterWriter) usageMembers(cost string) string {
	if mw.bill != nil {
		return mw.bill.members()
	}
	return `"cost":` + cost
}

// sendJSON writes the buffered answer with usage.cost added.
func (mw *meterWriter) sendJSON(cost string, genID string) error {
	body := mw.Body.Bytes()
	if mw.usageJSON.IsObject() {
		body = withCost(body, mw.usageJSON, "usage", mw.usageMembers(cost))
	} else if (mw.kind == "chat" || mw.kind == "messages") && mw.bill != nil {
		// The provider reported no usage: the answer carries the one charged.
		if out, err := sjson.SetRawBytes(body, "usage", mw.billUsage()); err == nil {
			body = out
		}
	}
	if mw.identity != nil {
		body = mw.identity.rewrite(body)
	}
	h := mw.Header()
	h.Set("X-Generation-Id", genID)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	mw.ResponseWriter.WriteHeader(mw.Status)
	return mw.Send(body)
}

// sendTail writes the held events, with usage.cost added to the one that
// reports usage, and flushes.
func (mw *meterWriter) sendTail(cost string) error {
	for _, ev := range mw.tail {
		if data := sse.Data(ev); data != nil && !sse.IsDone(data) {
			path := "usage"
			if mw.kind == "responses" {
				path = "response.usage"
			}
			if u := gjson.GetBytes(data, path); u.IsObject() {
				ev = sse.ReplaceData(ev, data, withCost(data, u, path, mw.usageMembers(cost)))
			} else if mw.kind == "messages" && mw.bill != nil {
				ev = mw.withBilledUsage(ev, data)
			}
		} else if data != nil && mw.kind == "chat" && !mw.usage.ok && mw.bill != nil {
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
func (mw *meterWriter) usageChunk() []byte {
	doc := []byte(`{"object":"chat.completion.chunk","created":` + strconv.FormatInt(now().Unix(), 10) +
		`,"choices":[],"usage":` + string(mw.billUsage()) + `}`)
	if mw.identity != nil {
		doc = mw.identity.rewrite(doc)
	}
	return append(append([]byte("data: "), doc...), "\n\n"...)
}

// billUsage is the usage object of what settle charged, in the route's
// dialect.
func (mw *meterWriter) billUsage() []byte {
	if mw.kind == "messages" {
		return mw.messagesBillUsage()
	}
	t := mw.bill.tokens
	return []byte(`{"prompt_tokens":` + strconv.FormatInt(t.PromptTokens, 10) +
		`,"completion_tokens":` + strconv.FormatInt(t.CompletionTokens, 10) +
		`,"total_tokens":` + strconv.FormatInt(t.PromptTokens+t.CompletionTokens, 10) +
		`,` + mw.bill.members() + `}`)
}

// failedResponse is the Responses object of the response.failed event that
// ends a broken stream of route.
func failedResponse(route *Route, id string, created int64, msg string) *translate.Response {
	echo := route.echo
	if echo == nil {
		echo = translate.NewEcho(route.body)
	}
	return translate.FailedResponse(echo, id, route.Model.ID, created, msg)
}

// sendStreamError ends a stream whose upstream failed after the status was
// sent: a chat completion chunk with error and finish_reason "error", or a
// Responses "response.failed" event, then [DONE].
func (mw *meterWriter) sendStreamError(route *Route, code int, msg string) error {
	created := now().Unix()
	var ev []byte
	if mw.kind == "messages" {
		// Anthropic's streams end with no [DONE].
		return mw.sendMessagesError(code, msg)
	}
	if mw.kind == "responses" {
		// Numbered after the events sent.
		next := int64(0)
		if mw.seqSeen {
			next = mw.lastSeq + 1
		}
		body, _ := json.Marshal(map[string]any{
			"type":            "response.failed",
			"sequence_number": next,
			"response":        failedResponse(route, mw.genID, created, msg),
		})
		ev = append(append([]byte("event: response.failed\ndata: "), body...), "\n\n"...)
	} else {
		body, _ := json.Marshal(map[string]any{
			"id": mw.genID, "object": "chat.completion.chunk", "created": created,
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
