package metering

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/answer"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
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
		takeCacheTTLs(mw, aw)
	}
	return err
}
