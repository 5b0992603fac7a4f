package handlers

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/egress"
	"github.com/tollgate-dev/caddy-tollgate/handlers/apierror"
	"github.com/tollgate-dev/caddy-tollgate/handlers/gateway"
	"github.com/tollgate-dev/caddy-tollgate/handlers/webfetch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// The web-fetch plugin: on /chat/completions and /responses, the gateway
// fetches the http(s) URLs of the last user message (at most max_uses,
// concurrently), through a client whose every connection, at every
// redirect, the customer egress policy checks (egress.go), and hands the
// pages to the model as a system message (package webfetch: HTML as
// markdown, PDFs by their text layer, cut to max_content_tokens). The
// pages are fetched before routing, so admission bounds the prompt with
// their text and holds their price; a fetch that fails or is refused is
// told to the model as its error, never answered as the request's. The
// answer's links to the pages become url_citation annotations (the
// citation writer, websearchwriter.go). Each fetch the site answered is
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
	cost    money.Amount // fetched × the price
	charged bool         // set by the meter's settle
}

// plan fetches the pages of a request with the web-fetch plugin and puts
// them into its body; st.fetch gets the run. Other bodies come back as
// they are.
func (fs *fetchStage) plan(r *http.Request, st *requestState, body []byte) ([]byte, *apierror.Error) {
	if !bytes.Contains(body, webFetchWord) {
		return body, nil
	}
	kind := ""
	switch st.sub {
	case "/chat/completions":
		kind = "chat"
	case "/responses":
		kind = "responses"
	case "/messages":
		kind = "messages"
	default:
		return body, nil
	}
	brand := "service"
	if fs.gw != nil {
		brand = fs.gw.Brand()
	}
	if apiErr := refuseFetchTool(body, brand); apiErr != nil {
		return nil, apiErr
	}
	opts, at, apiErr := webFetchPlugin(gjson.GetBytes(body, "plugins"))
	if apiErr != nil || at < 0 {
		return body, apiErr
	}
	if kind == "messages" {
		return nil, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "].id: the web-fetch plugin applies to /chat/completions and /responses")
	}
	urls := webfetch.URLs(lastUserText(body, kind))
	if len(urls) == 0 {
		return body, nil // nothing named: nothing fetched or charged
	}
	run := &fetchRun{pages: make([]webfetch.Page, len(urls))}
	var wg sync.WaitGroup
	for i, u := range urls {
		if i >= opts.MaxUses {
			run.pages[i] = webfetch.Page{URL: u, Err: fmt.Sprintf("not fetched: the request's max_uses (%d) was reached", opts.MaxUses)}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.pages[i] = fs.fetcher.Fetch(r.Context(), u, &opts)
		}()
	}
	wg.Wait()
	if r.Context().Err() != nil {
		return nil, apierror.New(499, "Client closed the request")
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
		return nil, apierror.BadRequest("plugins[" + strconv.Itoa(at) + "]: the fetches' price is beyond any cost")
	}
	out, ferr := websearch.Insert(body, webfetch.Message(run.pages))
	if ferr != nil {
		return nil, apierror.BadRequest(ferr.Error())
	}
	st.fetch = run
	return out, nil
}

// webFetchPlugin is the options of the request's web-fetch plugin entry
// and its index (-1: none, or disabled). A malformed entry is a 400
// naming the field; plugins that are not an array are checkPlugins'.
func webFetchPlugin(plugins gjson.Result) (webfetch.Options, int, *apierror.Error) {
	if !plugins.IsArray() {
		return webfetch.Options{}, -1, nil
	}
	for i, p := range plugins.Array() {
		if !p.IsObject() || p.Get("id").Str != "web-fetch" {
			continue
		}
		path := "plugins[" + strconv.Itoa(i) + "]"
		if apiErr := checkWebFetchPlugin(path, p); apiErr != nil {
			return webfetch.Options{}, -1, apiErr
		}
		if p.Get("enabled").Type == gjson.False {
			return webfetch.Options{}, -1, nil
		}
		o, _ := webfetch.Parse(path, p, true)
		return o, i, nil
	}
	return webfetch.Options{}, -1, nil
}

// checkWebFetchPlugin checks a web-fetch plugin entry (at path).
func checkWebFetchPlugin(path string, p gjson.Result) *apierror.Error {
	if e := p.Get("enabled"); e.Exists() && e.Type != gjson.True && e.Type != gjson.False {
		return apierror.BadRequest(path + ".enabled: expected a boolean")
	}
	if _, ferr := webfetch.Parse(path, p, true); ferr != nil {
		return apierror.BadRequest(ferr.Error())
	}
	return nil
}

// refuseFetchTool refuses the web_fetch server tool, which this gateway
// does not run: the model would ask for fetches no one performs.
func refuseFetchTool(body []byte, brand string) *apierror.Error {
	var apiErr *apierror.Error
	gjson.GetBytes(body, "tools").ForEach(func(i, tool gjson.Result) bool {
		switch tool.Get("type").Str {
		case brand + ":web_fetch":
			apiErr = apierror.BadRequest(fmt.Sprintf("tools[%d].type: this gateway does not run the %s:web_fetch server tool; use the web-fetch plugin (plugins: [{\"id\":\"web-fetch\"}]) to fetch the URLs of the user's message", i.Int(), brand))
		}
		return apiErr == nil
	})
	return apiErr
}

// serverToolUse is the fetch's part of usage.server_tool_use_details.
func (f *fetchRun) serverToolUse() string {
	return `"web_fetch_requests":` + strconv.FormatInt(f.fetched, 10)
}
