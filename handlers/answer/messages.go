package answer

import (
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/messages"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// messagesEvent reads one event of a Messages stream for the meter;
// hold reports whether it and every event after it wait for the charge:
// message_delta (the stop reason and the usage), message_stop, error.
func (mw *Writer) messagesEvent(data []byte) (hold bool) {
	typ := jsonpeek.Get(data, "type").Str
	switch typ {
	case "message_start":
		m := gjson.GetBytes(data, "message")
		mw.UpstreamID = m.Get("id").Str
		mw.startUsage = messagesUsage(m.Get("usage"), UsageSeen{})
	case "content_block_delta", "content_block_start":
		mw.Delivered += outputlen.MessagesEvent(typ, data)
	case "message_delta":
		if f := gjson.GetBytes(data, "delta.stop_reason").Str; f != "" {
			mw.Finish = f
		}
		if u := gjson.GetBytes(data, "usage"); u.IsObject() {
			mw.Usage = messagesUsage(u, mw.startUsage)
			mw.UsageRaw = u.Raw
		}
		return true
	case "message_stop":
		mw.SawDone = true
		return true
	case "error":
		mw.SawDone, mw.Finish = true, "error"
		return true
	}
	return false
}

// messagesUsage reads a Messages usage object: the prompt is
// input_tokens plus the cache's reads and writes (Anthropic's input_tokens
// leaves them out), which are charged at their own prices. A usage without
// input_tokens (a stream's message_delta may carry only output_tokens)
// keeps the prompt figures of start, message_start's.
func messagesUsage(u gjson.Result, start UsageSeen) UsageSeen {
	c := gjson.GetMany(u.Raw, "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
	seen := start
	var completionOK bool
	seen.OK = true
	seen.Completion, completionOK = usageCount(c[3].Raw)
	seen.CompletionBad = !completionOK
	if c[0].Exists() && c[0].Type != gjson.Null {
		input, ok := usageCount(c[0].Raw)
		// The cache's counts are optional; one that is there is checked.
		read, readOK := usageCount(c[1].Raw)
		write, writeOK := usageCount(c[2].Raw)
		seen.PromptBad = !ok || (c[1].Exists() && c[1].Type != gjson.Null && !readOK) || (c[2].Exists() && c[2].Type != gjson.Null && !writeOK)
		seen.Prompt = max(input, 0) + max(read, 0) + max(write, 0)
		seen.CacheRead, seen.CacheWrite = max(read, 0), max(write, 0)
		if cc := u.Get("cache_creation"); cc.Exists() {
			seen.CacheWrite1h, seen.CacheUnknown = messages.CacheCreation(cc)
		}
		seen.CacheUnknown = seen.CacheUnknown ||
			unknownCacheMember(u.Raw, [3]string{"cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation"})
	} else if !start.OK {
		seen.PromptBad = true // neither message_start nor this usage says
	}
	return seen
}

// readMessagesUsage is readJSONUsage for a Messages answer.
func (mw *Writer) readMessagesUsage(body []byte) bool {
	r := gjson.GetManyBytes(body, "id", "stop_reason", "usage")
	mw.UpstreamID, mw.Finish = r[0].Str, r[1].Str
	if u := r[2]; u.IsObject() {
		mw.usageJSON, mw.UsageRaw = u, u.Raw
		mw.Usage = messagesUsage(u, UsageSeen{})
		return true
	}
	if !jsoncheck.Valid(body) || body[firstNonSpace(body)] != '{' {
		return false
	}
	mw.Delivered = mw.HeldOutput()
	return mw.nonEmpty()
}

// messagesBillUsage is the Messages usage object of what settle charged,
// for an answer whose provider reported none.
func (mw *Writer) messagesBillUsage() []byte {
	t := mw.Bill.tokens
	return []byte(`{"input_tokens":` + strconv.FormatInt(t.PromptTokens, 10) +
		`,"output_tokens":` + strconv.FormatInt(t.CompletionTokens, 10) +
		`,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,` + mw.Bill.Members() + `}`)
}

// withBilledUsage puts the usage charged into the message_delta event ev
// (whose data is data) of a stream whose provider reported none.
func (mw *Writer) withBilledUsage(ev, data []byte) []byte {
	if gjson.GetBytes(data, "type").Str != "message_delta" {
		return ev
	}
	out, err := sjson.SetRawBytes(data, "usage", mw.messagesBillUsage())
	if err != nil {
		return ev
	}
	return sse.ReplaceData(ev, data, out)
}

// sendMessagesError ends a Messages stream whose upstream failed after the
// status was sent with an error event.
func (mw *Writer) sendMessagesError(code int, msg string) error {
	if _, err := mw.ResponseWriter.Write(messages.ErrorEvent(code, msg)); err != nil {
		return err
	}
	return mw.Flush()
}
