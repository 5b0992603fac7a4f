package handlers

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"

	// The built-in plugins: each registers its module.
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/contextcompression"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/fileparser"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/moderation"
	_ "github.com/tollgate-dev/caddy-tollgate/handlers/plugin/responsehealing"
)

// fitPrompt has the plugins that fit prompts to the context windows
// (context-compression) fit the routed request's body, before its prompt
// is counted; their runs are the first of the request's plugins.
func (rt *Router) fitPrompt(st *requestState, route *upstream.Route) *apierror.Error {
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

// admitRun has an admitted request's run a act (run is a, as the
// request's plugins hold it). A refusal releases the hold, except that a
// run that did its work (a moderation verdict) is charged its Charge,
// recorded as an error generation of the refusal's model and provider.
func (m *Meter) admitRun(r *http.Request, st *requestState, run plugin.Run, a plugin.Admitter) *apierror.Error {
	began := now()
	ref := a.Admit(r.Context())
	if ref == nil {
		return nil
	}
	var price money.Amount
	if c, ok := run.(plugin.Coster); ok {
		price = c.Charge()
	}
	if price == 0 {
		m.release(st, st.res)
		return ref.Err
	}
	route, id := st.Route, st.ID
	var credits money.Amount // a BYOK request pays the gateway's work in credits
	if route.BYOK {
		credits = price
	}
	gen := &storage.Generation{
		ID: storage.NewGenerationID(began), AccountID: id.AccountID, KeyHash: id.Hash, WorkspaceID: id.Key.WorkspaceID,
		Model: ref.Model, Provider: ref.Provider, Cost: price, BYOK: route.BYOK, Credits: credits,
		Status: "error", FinishReason: "content_filter", LatencyMS: now().Sub(began).Milliseconds(), User: route.User,
		CreatedAt: began.UTC(), ContentFlags: st.ContentFlags,
	}
	window := m.gw.InFlightPolicy().SettlementWindow
	if err := st.Store.Settle(st.res, storage.Charge{Cost: price, BYOK: route.BYOK, Credits: credits, SettlementWindow: window, Generation: gen}); err != nil {
		// The refusal stands; a shared store lands the charge later.
		m.logger.Error("refused request's charge not durable", zap.String("generation", gen.ID), zap.Error(err))
		return ref.Err
	}
	observeCharge(st, gen)
	return ref.Err
}
