package routing

import (
	"context"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// fitPrompt has the plugins that fit prompts to the context windows
// (context-compression) fit the routed request's body, before its prompt
// is counted; their runs are the first of the request's plugins.
func (rt *Router) fitPrompt(st *pipeline.State, route *upstream.Route) *apierror.Error {
	st.OwnModels = route.Attempts
	req := &st.OwnPluginReq
	*req = plugin.Request{Kind: route.Kind, Body: route.Body, Models: &st.OwnModels,
		MaxTokens: route.MaxTokens, Tokens: (*chatCounter)(&rt.MediaPartTokens)}
	// The body no longer has them.
	req.Plugins, _ = st.OwnFields.Get("plugins")
	req.Transforms, _ = st.OwnFields.Get("transforms")
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
			if st.Plugins == nil {
				st.Plugins = st.OwnPlugins[:0]
			}
			st.Plugins = append(st.Plugins, run)
		}
	}
	route.Body = req.Body
	return nil
}

// chatCounter counts chat prompts for the plugins as admission counts
// them, an image or audio part as its value in tokens (the router's
// MediaPartTokens, pointed to: no allocation).
type chatCounter int64

// ChatPrompt implements plugin.PromptCounter.
func (c *chatCounter) ChatPrompt(enc *tokenizer.Encoding, body []byte) (int64, bool) {
	return prompt.CountChat(enc, body, int64(*c))
}

// ChatMessage implements plugin.PromptCounter.
func (c *chatCounter) ChatMessage(enc *tokenizer.Encoding, msg gjson.Result) int64 {
	pc := prompt.Counter{Enc: enc, MediaPart: int64(*c), Ctx: context.Background()}
	pc.Message(msg)
	return pc.Tokens
}
