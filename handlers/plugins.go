package handlers

import (
	"context"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"

	// The built-in plugins: each registers its module.
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/contextcompression"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/fileparser"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/responsehealing"
)

// fitPrompt has the plugins that fit prompts to the context windows
// (context-compression) fit the routed request's body, before its prompt
// is counted; their runs are the first of the request's plugins.
func (rt *Router) fitPrompt(st *requestState, route *Route) *apierror.Error {
	st.ownModels = route.Attempts
	req := &st.ownPluginReq
	*req = plugin.Request{Kind: route.Kind, Body: route.body, Models: &st.ownModels,
		MaxTokens: route.MaxTokens, Tokens: (*chatCounter)(&rt.MediaPartTokens)}
	// The body no longer has them.
	req.Plugins, _ = st.ownFields.Get("plugins")
	req.Transforms, _ = st.ownFields.Get("transforms")
	for _, p := range rt.pluginSet() {
		pf, ok := p.(plugin.PromptFitter)
		if !ok {
			continue
		}
		body, run, apiErr := pf.FitPrompt(req)
		if apiErr != nil {
			return apiErr
		}
		req.Body = body
		if run != nil {
			if st.plugins == nil {
				st.plugins = st.ownPlugins[:0]
			}
			st.plugins = append(st.plugins, run)
		}
	}
	route.body = req.Body
	return nil
}

// chatCounter counts chat prompts for the plugins as admission counts
// them, an image or audio part as its value in tokens (the router's
// MediaPartTokens, pointed to: no allocation).
type chatCounter int64

// ChatPrompt implements plugin.PromptCounter.
func (c *chatCounter) ChatPrompt(enc *tokenizer.Encoding, body []byte) (int64, bool) {
	return countChatBody(enc, body, int64(*c))
}

// ChatMessage implements plugin.PromptCounter.
func (c *chatCounter) ChatMessage(enc *tokenizer.Encoding, msg gjson.Result) int64 {
	pc := promptCounter{enc: enc, mediaPart: int64(*c), ctx: context.Background()}
	pc.message(msg)
	return pc.tokens
}
