package websearch

import (
	"slices"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
)

// Web search on the Responses route for providers that speak only Chat
// Completions (dialect.APIChat). Preroute wrote a native search in the
// Responses form (the web_search / x_search tools, Anthropic's tool)
// before routing; the request translation (responsesToChat) passes tools
// it does not know through untouched, so the chat body of a translated
// attempt gets the family's chat form here instead: OpenAI's
// web_search_options, Anthropic's tool (the same in both APIs), X's
// search_parameters with a web source and, with x_search, an X source.

// chatNative replaces the Responses-form native tools at the end of the
// translated chat body's tools with the family's chat form.
func (p *searchPlan) chatNative(chat []byte) ([]byte, *apierror.Error) {
	for range p.nativeTools {
		chat = removeServerTool(chat)
	}
	return nativeTranslate(chat, "chat", p.family, p.spec)
}

// chatSearch gives the chat-only attempts of a Responses request with a
// native web search the chat form of that search. A search chat cannot
// express (OpenAI's domain filters) leaves the request to the providers
// that speak Responses, as any untranslatable field does; none left is a
// 400 naming the field.
func chatSearch(rt *upstream.Route, p *searchPlan) *apierror.Error {
	if p == nil || p.engine != "native" || p.kind != dialect.Responses || rt.ChatBody == nil {
		return nil
	}
	chat, apiErr := p.chatNative(rt.ChatBody)
	if apiErr == nil {
		rt.ChatBody = chat
		return nil
	}
	rt.Attempts = slices.DeleteFunc(rt.Attempts, func(a upstream.Attempt) bool { return a.Provider.ChatOnly() })
	rt.ChatBody = nil
	if len(rt.Attempts) == 0 {
		return apiErr
	}
	return nil
}
