// Package webfetch is the web-fetch plugin, the Caddy module
// tollgate.plugins.web_fetch: on /chat/completions and /responses, the
// gateway fetches the http(s) URLs of the last user message (at most
// max_uses, concurrently), through a client whose every connection, at
// every redirect, the customer egress policy checks, and hands the pages
// to the model as a system message (package fetch: HTML as markdown,
// PDFs by their text layer, cut to max_content_tokens). The pages are
// fetched before routing (Preroute), so admission bounds the prompt with
// their text and holds their price; a fetch that fails or is refused is
// told to the model as its error, never answered as the request's. The
// answer's links to the pages become url_citation annotations (the
// citation writer). Each fetch the site answered is charged the price of
// one fetch (the tollgate handler's web_fetch_price), once, with the
// request. A request that does not name the plugin pays one byte search.
//
// The same module serves the web_fetch server tool, a loop
// around each attempt's provider call.
package webfetch

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/apierror"
	"github.com/tollgate-dev/caddy-tollgate/dialect"
	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin"
	"github.com/tollgate-dev/caddy-tollgate/handlers/plugin/webfetch/fetch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/reqbody"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

func init() {
	caddy.RegisterModule(new(WebFetch))
}

// name is the plugin's id in a request's plugins array.
const name = "web-fetch"

// DefaultPrice is the price of one fetch when the operator sets none, in
// credits.
const DefaultPrice = "0.001"

// word is in every body that asks for web fetch (the plugin's id; the
// server tool's type).
var word = []byte("fetch")

// WebFetch is the web-fetch plugin and the web_fetch server tool.
type WebFetch struct {
	// Price is the price of one fetch, in credits; the tollgate handler
	// sets it from its web_fetch_price. Default DefaultPrice.
	Price string `json:"price,omitempty"`

	price   money.Amount
	brand   string         // the server tools' type prefix
	fetcher *fetch.Fetcher // nil: not provisioned (publicFetcher)
}

// CaddyModule returns the Caddy module information.
func (*WebFetch) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tollgate.plugins.web_fetch",
		New: func() caddy.Module { return new(WebFetch) },
	}
}

// Provision reads the price and makes the client of the fetches, which
// the gateway's customer egress policy checks.
func (p *WebFetch) Provision(ctx caddy.Context) error {
	gw, err := gateway.Load(ctx)
	if err != nil {
		return err
	}
	if p.price, err = ParsePrice(p.Price); err != nil {
		return fmt.Errorf("price: %v", err)
	}
	p.brand = gw.Brand()
	client := &http.Client{Transport: egress.Transport(gw.EgressPolicy)}
	p.fetcher = &fetch.Fetcher{Client: client}
	return nil
}

// ParsePrice is the price of one fetch written as s ("" the default),
// refusing a value that is not a non-negative amount.
func ParsePrice(s string) (money.Amount, error) {
	if s == "" {
		s = DefaultPrice
	}
	a, err := money.ParseAmount(s)
	if err != nil || a < 0 {
		return 0, fmt.Errorf("expected a non-negative amount of credits, got %q", s)
	}
	return a, nil
}

// UnmarshalCaddyfile reads the plugin's directive, which takes nothing
// (the price is the handler's web_fetch_price):
//
//	web_fetch
func (*WebFetch) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return plugin.NoOptions(d, "web_fetch", " (its price is the handler's web_fetch_price)")
}

// publicFetcher fetches for a plugin that Caddy did not provision (unit
// tests of the handler): public addresses only, the price the default.
var publicFetcher = sync.OnceValue(func() *fetch.Fetcher {
	return &fetch.Fetcher{Client: &http.Client{Transport: egress.Transport(func() *egress.Policy { return nil })}}
})

// setting is the plugin's provisioned settings, or a plugin's that Caddy
// did not provision.
func (p *WebFetch) setting() (brand string, price money.Amount, f *fetch.Fetcher) {
	if p.fetcher == nil {
		price, _ = ParsePrice(p.Price)
		return "service", price, publicFetcher()
	}
	return p.brand, p.price, p.fetcher
}

// Name implements plugin.Plugin.
func (*WebFetch) Name() string { return name }

// CheckEntry implements plugin.Plugin: a boolean enabled and the options
// (max_uses, max_content_tokens, allowed_domains or blocked_domains).
func (*WebFetch) CheckEntry(path string, entry gjson.Result) *apierror.Error {
	if ferr := fetch.CheckEntry(path, entry); ferr != nil {
		return apierror.BadRequest(ferr.Error())
	}
	return nil
}

// Plan implements plugin.Plugin: the plugin's work is planned before
// routing (Preroute).
func (*WebFetch) Plan(*plugin.Request) (plugin.Run, *apierror.Error) { return nil, nil }

// Preroute implements plugin.Prerouter: it fetches the pages of a request
// with the web-fetch plugin and puts them into its body, and puts the
// server tool's function tool in the tool's place. Other bodies come back
// as they are.
func (p *WebFetch) Preroute(req *plugin.Request) ([]byte, plugin.Run, *apierror.Error) {
	body, kind := req.Body, req.Kind
	if !bytes.Contains(body, word) || kind == dialect.Other {
		return body, nil, nil
	}
	brand, price, fetcher := p.setting()
	body, tool, apiErr := planTool(body, kind, brand)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	opts, at, apiErr := pluginEntry(gjson.GetBytes(body, "plugins"))
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if at >= 0 && kind == dialect.Messages {
		return nil, nil, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "].id: the web-fetch plugin applies to /chat/completions and /responses")
	}
	var filter plugin.TextFilter
	if (at >= 0 || tool != nil) && req.Filters != nil {
		if filter, apiErr = req.Filters.FetchedFilter(); apiErr != nil {
			return nil, nil, apiErr
		}
	}
	var run *Run
	if at >= 0 {
		if body, run, apiErr = fetchNamed(req, body, kind, at, opts, fetcher, filter, price); apiErr != nil {
			return nil, nil, apiErr
		}
	}
	if tool != nil {
		if run == nil {
			run = &Run{}
		}
		run.tool = tool
	}
	if run == nil {
		return body, nil, nil
	}
	run.price, run.fetcher, run.filter, run.brand = price, fetcher, filter, brand
	return body, run, nil
}

// fetchNamed fetches the URLs of the last user message for the plugin
// (at index at) and puts the pages into the body; run is nil when the
// message names none.
func fetchNamed(req *plugin.Request, body []byte, kind dialect.Kind, at int, opts fetch.Options, fetcher *fetch.Fetcher, filter plugin.TextFilter, price money.Amount) ([]byte, *Run, *apierror.Error) {
	urls := fetch.URLs(reqbody.LastUserText(body, kind == dialect.Responses))
	if len(urls) == 0 {
		return body, nil, nil // nothing named: nothing fetched or charged
	}
	n := min(len(urls), opts.MaxUses)
	run := &Run{pages: fetcher.FetchAll(req.Ctx, urls[:n], &opts)}
	for _, u := range urls[n:] {
		run.pages = append(run.pages, fetch.Page{URL: u, Err: fmt.Sprintf("not fetched: the request's max_uses (%d) was reached", opts.MaxUses)})
	}
	if req.Ctx.Err() != nil {
		return nil, nil, apierror.New(499, "Client closed the request")
	}
	for i := range run.pages {
		// The pages pass the filters as the prompt did: a block refuses
		// the request, before anything is held or charged.
		if h := filterPage(filter, &run.pages[i]); h != nil {
			return nil, nil, filter.Refusal(h)
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
	if run.cost, ok = money.MulAmount(price, run.fetched); !ok {
		return nil, nil, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "]: the fetches' price is beyond any cost")
	}
	out, ferr := websearch.Insert(body, fetch.Message(run.pages))
	if ferr != nil {
		return nil, nil, apierror.BadRequest(ferr.Error())
	}
	return out, run, nil
}

// pluginEntry is the options of the request's web-fetch plugin entry and
// its index (-1: none, or disabled). A malformed entry is a 400 naming
// the field; plugins that are not an array are the normalizer's.
func pluginEntry(plugins gjson.Result) (fetch.Options, int, *apierror.Error) {
	if !plugins.IsArray() {
		return fetch.Options{}, -1, nil
	}
	for i, p := range plugins.Array() {
		if !p.IsObject() || p.Get("id").Str != name {
			continue
		}
		path := "plugins[" + strconv.Itoa(i) + "]"
		if ferr := fetch.CheckEntry(path, p); ferr != nil {
			return fetch.Options{}, -1, apierror.BadRequest(ferr.Error())
		}
		if p.Get("enabled").Type == gjson.False {
			return fetch.Options{}, -1, nil
		}
		o, _ := fetch.Parse(path, p, true)
		return o, i, nil
	}
	return fetch.Options{}, -1, nil
}

// Interface guards
var (
	_ caddy.Provisioner     = (*WebFetch)(nil)
	_ caddyfile.Unmarshaler = (*WebFetch)(nil)
	_ plugin.Plugin         = (*WebFetch)(nil)
	_ plugin.Prerouter      = (*WebFetch)(nil)
)
