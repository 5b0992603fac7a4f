package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/jsonpeek"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/messages"
	"github.com/tollgate-dev/caddy-tollgate/outputlen"
	"github.com/tollgate-dev/caddy-tollgate/sse"
)

// The Messages route (POST /messages, Anthropic's Messages API) is served
// natively by Anthropic-style providers and, by the others, as the
// Responses route is served by chat-only providers: the attempt gets the
// request translated into Chat Completions (messages.MessagesToChat), and
// its answer is translated back below the meter's writer
// (messages.ChatToMessages), so that the meter reads, charges and reports
// a Messages answer either way.

// proxyMessages calls reverse_proxy for a Messages request's attempt,
// its chat answer translated into a Messages answer for the meter's
// writer.
func proxyMessages(next caddyhttp.Handler, mw *meterWriter, r *http.Request, route *upstream.Route, genID string) error {
	cw := messages.NewChatToMessages(mw, genID, route.Model.ID, route.Provider.Name)
	cw.Limit = maxBufferedBody
	var w http.ResponseWriter = cw
	var aw dialect.AnswerReader
	if route.ViaChat { // a provider that answers chat in its own API
		aw = route.Dialect.ToChat(cw, route.Provider.Model, maxBufferedBody)
		w = aw
	}
	err := proxy(next, w, r, route)
	if aw != nil {
		aw.Finish()
	}
	cw.Finish(err)
	mw.produced = cw.Produced
	mw.takeProviderUsage(cw.ProviderUsage())
	if aw != nil {
		mw.produced = max(mw.produced, aw.OutputProduced())
	}
	return err
}

// messagesEvent reads one event of a Messages stream for the meter;
// hold reports whether it and every event after it wait for the charge:
// message_delta (the stop reason and the usage), message_stop, error.
func (mw *meterWriter) messagesEvent(data []byte) (hold bool) {
	typ := jsonpeek.Get(data, "type").Str
	switch typ {
	case "message_start":
		m := gjson.GetBytes(data, "message")
		mw.upstreamID = m.Get("id").Str
		mw.startUsage = messagesUsage(m.Get("usage"), usageSeen{})
	case "content_block_delta", "content_block_start":
		mw.delivered += outputlen.MessagesEvent(typ, data)
	case "message_delta":
		if f := gjson.GetBytes(data, "delta.stop_reason").Str; f != "" {
			mw.finish = f
		}
		if u := gjson.GetBytes(data, "usage"); u.IsObject() {
			mw.usage = messagesUsage(u, mw.startUsage)
			mw.usageRaw = u.Raw
		}
		return true
	case "message_stop":
		mw.sawDone = true
		return true
	case "error":
		mw.sawDone, mw.finish = true, "error"
		return true
	}
	return false
}

// messagesUsage reads a Messages usage object: the prompt is
// input_tokens plus the cache's reads and writes (Anthropic's input_tokens
// leaves them out), which are charged at their own prices. A usage without
// input_tokens (a stream's message_delta may carry only output_tokens)
// keeps the prompt figures of start, message_start's.
func messagesUsage(u gjson.Result, start usageSeen) usageSeen {
	c := gjson.GetMany(u.Raw, "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
	seen := start
	var completionOK bool
	seen.ok = true
	seen.completion, completionOK = usageCount(c[3].Raw)
	seen.completionBad = !completionOK
	if c[0].Exists() && c[0].Type != gjson.Null {
		input, ok := usageCount(c[0].Raw)
		// The cache's counts are optional; one that is there is checked.
		read, readOK := usageCount(c[1].Raw)
		write, writeOK := usageCount(c[2].Raw)
		seen.promptBad = !ok || (c[1].Exists() && c[1].Type != gjson.Null && !readOK) || (c[2].Exists() && c[2].Type != gjson.Null && !writeOK)
		seen.prompt = max(input, 0) + max(read, 0) + max(write, 0)
		seen.cacheRead, seen.cacheWrite = max(read, 0), max(write, 0)
	} else if !start.ok {
		seen.promptBad = true // neither message_start nor this usage says
	}
	return seen
}

// readMessagesUsage is readJSONUsage for a Messages answer.
func (mw *meterWriter) readMessagesUsage(body []byte) bool {
	r := gjson.GetManyBytes(body, "id", "stop_reason", "usage")
	mw.upstreamID, mw.finish = r[0].Str, r[1].Str
	if u := r[2]; u.IsObject() {
		mw.usageJSON, mw.usageRaw = u, u.Raw
		mw.usage = messagesUsage(u, usageSeen{})
		return true
	}
	if !jsoncheck.Valid(body) || body[firstNonSpace(body)] != '{' {
		return false
	}
	mw.delivered = mw.heldOutput()
	return mw.nonEmpty()
}

// messagesBillUsage is the Messages usage object of what settle charged,
// for an answer whose provider reported none.
func (mw *meterWriter) messagesBillUsage() []byte {
	t := mw.bill.tokens
	return []byte(`{"input_tokens":` + strconv.FormatInt(t.PromptTokens, 10) +
		`,"output_tokens":` + strconv.FormatInt(t.CompletionTokens, 10) +
		`,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,` + mw.bill.members() + `}`)
}

// withBilledUsage puts the usage charged into the message_delta event ev
// (whose data is data) of a stream whose provider reported none.
func (mw *meterWriter) withBilledUsage(ev, data []byte) []byte {
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
func (mw *meterWriter) sendMessagesError(code int, msg string) error {
	if _, err := mw.ResponseWriter.Write(messages.ErrorEvent(code, msg)); err != nil {
		return err
	}
	return mw.Flush()
}

// anthropicAPIKey is the key of a Messages request sent as Anthropic's
// SDKs and Claude Code send an API key: "X-Api-Key: <key>" (with an auth
// token they send "Authorization: Bearer", which bearer reads).
func anthropicAPIKey(r *http.Request) (string, bool) {
	key := strings.TrimSpace(r.Header.Get("X-Api-Key"))
	return key, key != ""
}

// anthropicSearchTools turns Anthropic's web search tool in a Messages
// request ({"type":"web_search_20250305","name":"web_search",
// allowed_domains, blocked_domains, ...}, as Claude Code sends it) into the
// gateway's web search server tool, which the gateway's engines serve
// whatever the provider: allowed_domains stay, blocked_domains become
// excluded_domains; max_uses and user_location have no use there (the
// gateway searches once, before the model answers).
func anthropicSearchTools(body []byte, brand string) ([]byte, *apierror.Error) {
	tools := gjson.GetBytes(body, "tools")
	if !tools.IsArray() || !strings.Contains(tools.Raw, "web_search_") {
		return body, nil
	}
	out := body
	var err error
	tools.ForEach(func(i, t gjson.Result) bool {
		if !strings.HasPrefix(t.Get("type").Str, "web_search_") {
			return true
		}
		params := []byte(`{}`)
		for _, f := range [][2]string{{"allowed_domains", "allowed_domains"}, {"blocked_domains", "excluded_domains"}} {
			if v := t.Get(f[0]); v.Exists() && v.Type != gjson.Null {
				if params, err = sjson.SetRawBytes(params, f[1], []byte(v.Raw)); err != nil {
					return false
				}
			}
		}
		tool := `{"type":` + string(jsonstr.Quote(brand+":web_search")) + `,"parameters":` + string(params) + `}`
		out, err = sjson.SetRawBytes(out, "tools."+i.String(), []byte(tool))
		return err == nil
	})
	if err != nil {
		return nil, apierror.BadRequest("tools: " + err.Error())
	}
	return out, nil
}

// lastMessagesUserText is the text of the last user message of a Messages
// request that has any: an agent's last user turn often holds only tool
// results.
func lastMessagesUserText(body []byte) string {
	msgs := gjson.GetBytes(body, "messages").Array()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Get("role").Str != "user" {
			continue
		}
		if text := strings.TrimSpace(contentText(msgs[i].Get("content"))); text != "" {
			return text
		}
	}
	return ""
}
