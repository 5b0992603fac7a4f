package webfetch

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/citations"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/webfetch/fetch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Run is one request's fetches: the plugin's, made before routing, and
// the server tool's, made in its loop. The meter holds and charges them
// (HoldFor, Settle), the citation writer cites them (Sources).
type Run struct {
	pages   []fetch.Page
	sources []websearch.Source
	fetched int64        // fetches the sites answered: the ones charged
	price   money.Amount // of one fetch
	cost    money.Amount // fetched × the price
	charged bool         // set by Settle

	// The server tool; nil without. prior is the usage of the rounds
	// before the answer the client gets, rounds their number.
	tool    *serverTool
	brand   string
	fetcher *fetch.Fetcher
	filter  plugin.TextFilter // the caller's content filters, which the pages pass; nil: none
	prior   billing.Usage
	rounds  int
}

// FilterAttempts implements plugin.AttemptFilter: the server tool's loop
// reads chat completions, so only attempts that speak it are kept.
func (f *Run) FilterAttempts(route *upstream.Route) *apierror.Error {
	if f.tool == nil {
		return nil
	}
	return f.tool.restrictAttempts(route, f.brand)
}

// HoldFor implements plugin.RouteCoster: the plugin's fetches made, the
// server tool's worst case; credits is the part a BYOK request pays in
// credits (the fetches: the gateway fetched).
func (f *Run) HoldFor(route *upstream.Route) (hold, credits money.Amount, err error) {
	hold, credits = f.cost, f.cost
	if f.tool == nil {
		return hold, credits, nil
	}
	h, c, err := f.tool.holdExtra(route, f.price)
	if err == nil {
		hold, err = addCost(hold, h)
	}
	if err == nil {
		credits, err = addCost(credits, c)
	}
	return hold, credits, err
}

// WrapAttempt implements plugin.AttemptWrapper: with the server tool,
// next runs in rounds, by the tool's loop.
func (f *Run) WrapAttempt(next caddyhttp.Handler, route *upstream.Route) caddyhttp.Handler {
	if f.tool == nil {
		return next
	}
	return &loop{next: next, tool: f.tool, run: f, route: route}
}

// Settle implements plugin.Settler: the server tool's earlier rounds'
// tokens join the answer's, and the fetches are charged, in credits
// even under BYOK.
func (f *Run) Settle(s *plugin.Settlement) error {
	s.Usage.PromptTokens += f.prior.PromptTokens
	s.Usage.CompletionTokens += f.prior.CompletionTokens
	s.Usage.CacheReadTokens += f.prior.CacheReadTokens
	s.Corrected = s.Corrected || f.rounds > 0
	var err error
	if s.Usage.Extra, err = addCost(s.Usage.Extra, f.cost); err == nil {
		s.Credits, err = addCost(s.Credits, f.cost)
	}
	f.charged = err == nil
	return err
}

// Sources implements citations.Citer: the pages the answer may cite, as
// the model got them.
func (f *Run) Sources() []websearch.Source { return f.sources }

// ToolUse implements citations.Citer: the fetches' part of
// usage.server_tool_use_details once charged; "" before. A Messages
// answer gets none: the plugin and the tool serve chat and Responses
// only.
func (f *Run) ToolUse() (details, anthropic string) {
	if !f.charged {
		return "", ""
	}
	return `"web_fetch_requests":` + strconv.FormatInt(f.fetched, 10), ""
}

// AdjustResponsesUsage implements citations.ResponsesUsageAdjuster: it
// adds the server tool's earlier rounds to a Responses usage object (at
// path) once charged: chat answers get the charged usage from the meter,
// which leaves a Responses usage's counts as the provider's.
func (f *Run) AdjustResponsesUsage(doc []byte, path string) []byte {
	if !f.charged || f.rounds == 0 {
		return doc
	}
	u := gjson.GetManyBytes(doc, path+".input_tokens", path+".output_tokens", path+".total_tokens")
	if u[0].Type != gjson.Number || u[1].Type != gjson.Number {
		return doc
	}
	in, out := u[0].Int()+f.prior.PromptTokens, u[1].Int()+f.prior.CompletionTokens
	// sjson fails only on a malformed path, and these are well-formed.
	doc, _ = sjson.SetBytes(doc, path+".input_tokens", in)
	doc, _ = sjson.SetBytes(doc, path+".output_tokens", out)
	if u[2].Exists() {
		doc, _ = sjson.SetBytes(doc, path+".total_tokens", in+out)
	}
	return doc
}

// filterPage filters a fetched page's title and text; f nil: no filter
// in force.
func filterPage(f plugin.TextFilter, p *fetch.Page) *contentfilter.Hit {
	if f == nil || p.Err != "" {
		return nil
	}
	return f.Filter(&p.Title, &p.Text)
}

// withhold makes a blocked page an error the model is told, without its
// content.
func withhold(p *fetch.Page, h *contentfilter.Hit) {
	p.Title, p.Text, p.Truncated = "", "", false
	p.Err = "blocked_by_content_filter: the page matched content filter " + strconv.Quote(h.Label) +
		" of guardrail " + strconv.Quote(h.GuardrailName) + "; its content was withheld"
}

// addCost adds two costs, refusing a sum beyond any Amount.
func addCost(a, b money.Amount) (money.Amount, error) {
	s, ok := money.AddAmounts(a, b)
	if !ok {
		return 0, billing.ErrCostRange
	}
	return s, nil
}

// Interface guards
var (
	_ plugin.AttemptFilter  = (*Run)(nil)
	_ plugin.RouteCoster    = (*Run)(nil)
	_ plugin.AttemptWrapper = (*Run)(nil)
	_ plugin.Settler        = (*Run)(nil)

	_ citations.Citer                  = (*Run)(nil)
	_ citations.ResponsesUsageAdjuster = (*Run)(nil)
)
