package routing

import (
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/catalog"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/handlers/pipeline"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/prompt"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/policy"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/tokenizer"
)

// chooserFor is the plugin that serves the model id (the auto router's
// "<brand>/auto"); nil for a catalog id. Only an id ending in /auto
// looks at the plugins.
func (rt *Router) chooserFor(id string) plugin.ModelChooser {
	if !strings.HasSuffix(id, "/auto") {
		return nil
	}
	for _, p := range rt.pluginSet() {
		if c, ok := p.(plugin.ModelChooser); ok && c.Chooses(id) {
			return c
		}
	}
	return nil
}

// chooseModel is the catalog id the chooser picks for the request.
func (rt *Router) chooseModel(c plugin.ModelChooser, st *pipeline.State, kind dialect.Kind, body []byte, f *reqbody.Fields, rules *storage.Rules) (string, *apierror.Error) {
	req := &plugin.Request{Kind: kind, Body: body}
	req.Plugins, _ = f.Get("plugins")
	return c.ChooseModel(req, &modelCandidates{rt: rt, st: st, kind: kind, body: body, f: f, rules: rules})
}

// modelCandidates is what the router tells a chooser of the catalog's
// models for one request.
type modelCandidates struct {
	rt    *Router
	st    *pipeline.State
	kind  dialect.Kind
	body  []byte
	f     *reqbody.Fields
	rules *storage.Rules
	// counted are the prompt's counts by tokenizer; bound the byte
	// bound, once bounded.
	counted map[*tokenizer.Encoding]int64
	bound   int64
	bounded bool
}

// Usable implements plugin.Candidates: a catalog model the guardrails
// allow with an endpoint left that the key may call (the operator's key,
// or its workspace's BYOK credential).
func (c *modelCandidates) Usable(id string) *catalog.Model {
	m, ok := c.rt.catalog().Lookup(id)
	if !ok || policy.CheckModel(c.rules, m.ID) != nil {
		return nil
	}
	var eps []upstream.Attempt
	for _, p := range m.Providers {
		if operatorUsable(p) {
			eps = append(eps, upstream.Attempt{Model: m.For(p), Provider: p})
		}
	}
	c.rt.byokCredentials(m, c.st, func(p *catalog.Provider, cred storage.Credential, _ *storage.Sealer) bool {
		eps = append(eps, upstream.Attempt{Model: m.For(p), Provider: p, BYOK: true, DeclaredZDR: cred.DeclaredZDR})
		return true
	})
	if kept, denied := policy.AllowedEndpoints(c.rules, eps, attemptEndpoint); denied != nil || len(kept) == 0 {
		return nil
	}
	return m
}

// PromptTokens implements plugin.Candidates: with m's tokenizer, the
// count admission makes of a chat or Responses body; otherwise the byte
// bound admission holds on.
func (c *modelCandidates) PromptTokens(m *catalog.Model) int64 {
	if enc := m.Tokenizer; enc != nil && (c.kind == dialect.Chat || c.kind == dialect.Responses) {
		if n, ok := c.counted[enc]; ok {
			return n
		}
		var n int64
		if c.kind == dialect.Chat {
			n, _ = prompt.CountChat(enc, c.body, c.rt.MediaPartTokens)
		} else {
			n, _ = prompt.CountResponses(enc, c.body, c.rt.MediaPartTokens)
		}
		if c.counted == nil {
			c.counted = map[*tokenizer.Encoding]int64{}
		}
		c.counted[enc] = n
		return n
	}
	if !c.bounded {
		c.bound, c.bounded = prompt.NewBound(c.f, len(c.body), c.rt.MediaPartTokens).Tokens, true
	}
	return c.bound
}
