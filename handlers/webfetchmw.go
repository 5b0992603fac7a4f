package handlers

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/admin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/routing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/upstream"
	"github.com/tollgate-dev/caddy-tollgate/handlers/webfetch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// The web-fetch plugin: on /chat/completions and /responses, the gateway
// fetches the http(s) URLs of the last user message (at most max_uses,
// concurrently), through a client whose every connection, at every
// redirect, the customer egress policy checks (pinEgress), and hands the
// pages to the model as a system message (package webfetch: HTML as
// markdown, PDFs by their text layer, cut to max_content_tokens). The
// pages are fetched before routing, so admission bounds the prompt with
// their text and holds their price; a fetch that fails or is refused is
// told to the model as its error, never answered as the request's. The
// answer's links to the pages become url_citation annotations (the
// citation writer, package citations). Each fetch the site answered is
// charged the operator's web_fetch_price, once, with the request.
// A request that does not name the plugin pays one byte search.

// DefaultWebFetchPrice is the price of one fetch when the operator sets
// none, in credits.
const DefaultWebFetchPrice = "0.001"

// webFetchWord is in every body that asks for web fetch (the plugin's
// id; the server tool's type).
var webFetchWord = []byte("fetch")

// fetchStage is the pipeline's web-fetch step.
type fetchStage struct {
	gw      gateway.Gateway
	client  *http.Client
	price   money.Amount
	fetcher webfetch.Fetcher
}

func newFetchStage(gw gateway.Gateway, price money.Amount) fetchStage {
	client := &http.Client{Transport: egress.Transport(func() *egress.Policy {
		if gw == nil {
			return nil // public addresses only
		}
		return gw.EgressPolicy()
	})}
	return fetchStage{gw: gw, client: client, price: price, fetcher: webfetch.Fetcher{Client: client}}
}

// fetchRun is one request's fetches, shared by the meter (hold and
// charge) and the citation writer through the request state.
type fetchRun struct {
	pages   []webfetch.Page
	sources []websearch.Source
	fetched int64        // fetches the sites answered: the ones charged
	price   money.Amount // of one fetch
	cost    money.Amount // fetched × the price
	charged bool         // set by the meter's settle

	// The server tool (fetchTool); nil without. prior is the usage
	// of the rounds before the answer the client gets, rounds their
	// number.
	tool    *fetchTool
	fetcher *webfetch.Fetcher
	filter  *fetchedFilter // the caller's content filters, which the pages pass
	prior   billing.Usage
	rounds  int
}

// holdExtra is what the fetches add to the request's hold: the plugin's
// fetches made, the server tool's worst case; credits is the part a BYOK
// request pays in credits (the fetches).
func (f *fetchRun) holdExtra(route *upstream.Route) (hold, credits money.Amount, err error) {
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

// addPrior adds the earlier rounds' tokens to the answer's usage.
func (f *fetchRun) addPrior(u *billing.Usage) {
	u.PromptTokens += f.prior.PromptTokens
	u.CompletionTokens += f.prior.CompletionTokens
	u.CacheReadTokens += f.prior.CacheReadTokens
}

// plan fetches the pages of a request with the web-fetch plugin and puts
// them into its body; st.fetch gets the run. Other bodies come back as
// they are.
func (fs *fetchStage) plan(r *http.Request, st *requestState, body []byte) ([]byte, *apierror.Error) {
	if !bytes.Contains(body, webFetchWord) {
		return body, nil
	}
	kind := st.API.Dialect()
	if st.API.Op != admin.OpInfer || kind == dialect.Other {
		return body, nil
	}
	brand := fs.brand()
	body, tool, apiErr := planFetchTool(body, kind, brand)
	if apiErr != nil {
		return nil, apiErr
	}
	opts, at, apiErr := webFetchPlugin(gjson.GetBytes(body, "plugins"))
	if apiErr != nil {
		return nil, apiErr
	}
	if at >= 0 && kind == dialect.Messages {
		return nil, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "].id: the web-fetch plugin applies to /chat/completions and /responses")
	}
	var filter *fetchedFilter
	if at >= 0 || tool != nil {
		if filter, apiErr = newFetchedFilter(st); apiErr != nil {
			return nil, apiErr
		}
	}
	var run *fetchRun
	if at >= 0 {
		if body, run, apiErr = fs.fetchNamed(r, body, kind, at, opts, filter); apiErr != nil {
			return nil, apiErr
		}
	}
	if tool != nil {
		if run == nil {
			run = &fetchRun{}
		}
		run.tool = tool
	}
	if run != nil {
		run.price, run.fetcher, run.filter = fs.price, &fs.fetcher, filter
	}
	st.fetch = run
	return body, nil
}

// fetchNamed fetches the URLs of the last user message for the plugin
// (at index at) and puts the pages into the body; run is nil when the
// message names none.
func (fs *fetchStage) fetchNamed(r *http.Request, body []byte, kind dialect.Kind, at int, opts webfetch.Options, filter *fetchedFilter) ([]byte, *fetchRun, *apierror.Error) {
	urls := webfetch.URLs(lastUserText(body, kind))
	if len(urls) == 0 {
		return body, nil, nil // nothing named: nothing fetched or charged
	}
	n := min(len(urls), opts.MaxUses)
	run := &fetchRun{pages: fs.fetcher.FetchAll(r.Context(), urls[:n], &opts)}
	for _, u := range urls[n:] {
		run.pages = append(run.pages, webfetch.Page{URL: u, Err: fmt.Sprintf("not fetched: the request's max_uses (%d) was reached", opts.MaxUses)})
	}
	if r.Context().Err() != nil {
		return nil, nil, apierror.New(499, "Client closed the request")
	}
	for i := range run.pages {
		// The pages pass the filters as the prompt did: a block refuses
		// the request, before anything is held or charged.
		if h := filter.page(&run.pages[i]); h != nil {
			return nil, nil, routing.BlockedError(h)
		}
	}
	for _, p := range run.pages {
		if p.Fetched {
			run.fetched++
		}
		src := websearch.Source{Title: p.CitationTitle(), URL: p.URL}
		if p.Err == "" {
			src.Snippet = p.Snippet()
		}
		run.sources = append(run.sources, src)
	}
	var ok bool
	if run.cost, ok = money.MulAmount(fs.price, run.fetched); !ok {
		return nil, nil, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "]: the fetches' price is beyond any cost")
	}
	out, ferr := websearch.Insert(body, webfetch.Message(run.pages))
	if ferr != nil {
		return nil, nil, apierror.BadRequest(ferr.Error())
	}
	return out, run, nil
}

// webFetchPlugin is the options of the request's web-fetch plugin entry
// and its index (-1: none, or disabled). A malformed entry is a 400
// naming the field; plugins that are not an array are the normalizer's.
func webFetchPlugin(plugins gjson.Result) (webfetch.Options, int, *apierror.Error) {
	if !plugins.IsArray() {
		return webfetch.Options{}, -1, nil
	}
	for i, p := range plugins.Array() {
		if !p.IsObject() || p.Get("id").Str != "web-fetch" {
			continue
		}
		path := "plugins[" + strconv.Itoa(i) + "]"
		if ferr := webfetch.CheckEntry(path, p); ferr != nil {
			return webfetch.Options{}, -1, apierror.BadRequest(ferr.Error())
		}
		if p.Get("enabled").Type == gjson.False {
			return webfetch.Options{}, -1, nil
		}
		o, _ := webfetch.Parse(path, p, true)
		return o, i, nil
	}
	return webfetch.Options{}, -1, nil
}

// serverToolUse is the fetch's part of usage.server_tool_use_details.
func (f *fetchRun) serverToolUse() string {
	return `"web_fetch_requests":` + strconv.FormatInt(f.fetched, 10)
}

// Sources are the pages fetched (citations.Citer).
func (f *fetchRun) Sources() []websearch.Source { return f.sources }

// ToolUse is the fetches' usage once charged (citations.Citer).
func (f *fetchRun) ToolUse() (details, anthropic string) {
	if !f.charged {
		return "", ""
	}
	return f.serverToolUse(), ""
}

// AdjustResponsesUsage adds the server tool's earlier rounds
// (citations.ResponsesUsageAdjuster).
func (f *fetchRun) AdjustResponsesUsage(doc []byte, path string) []byte {
	return f.withPriorTokens(doc, path)
}

// handler is the attempt's provider handler: next, run in rounds by the
// server tool's loop when the request has the tool.
func (f *fetchRun) handler(next caddyhttp.Handler, route *upstream.Route) caddyhttp.Handler {
	if f == nil || f.tool == nil {
		return next
	}
	return &fetchLoop{next: next, tool: f.tool, run: f, route: route}
}

// brand is the server tools' type prefix.
func (fs *fetchStage) brand() string {
	if fs.gw == nil {
		return "service"
	}
	return fs.gw.Brand()
}

// withPriorTokens adds the server tool's earlier rounds to a Responses
// usage object (at path) once charged: chat answers get the charged
// usage from the meter, which leaves a Responses usage's counts as the
// provider's.
func (f *fetchRun) withPriorTokens(doc []byte, path string) []byte {
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
