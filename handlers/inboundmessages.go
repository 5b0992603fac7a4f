package handlers

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/messages"
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
func proxyMessages(next caddyhttp.Handler, mw *answer.Writer, r *http.Request, route *upstream.Route, genID string) error {
	cw := messages.NewChatToMessages(mw, genID, route.Model.ID, route.Provider.Name)
	cw.Limit = answer.MaxBufferedBody
	var w http.ResponseWriter = cw
	var aw dialect.AnswerReader
	if route.ViaChat { // a provider that answers chat in its own API
		aw = route.Dialect.ToChat(cw, route.Provider.Model, answer.MaxBufferedBody)
		w = aw
	}
	err := proxy(next, w, r, route)
	if aw != nil {
		aw.Finish()
	}
	cw.Finish(err)
	mw.Produced = cw.Produced
	mw.TakeProviderUsage(cw.ProviderUsage())
	if aw != nil {
		mw.Produced = max(mw.Produced, aw.OutputProduced())
	}
	return err
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
