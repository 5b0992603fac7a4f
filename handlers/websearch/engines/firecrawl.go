package engines

import (
	"context"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

// FirecrawlDefaultBaseURL is Firecrawl's public API root.
const FirecrawlDefaultBaseURL = "https://api.firecrawl.dev"

// firecrawlSnippetMaxChars caps a snippet taken from scraped markdown.
const firecrawlSnippetMaxChars = 1000

// Firecrawl searches with Firecrawl's v2 search endpoint, following the
// Firecrawl API reference (https://docs.firecrawl.dev/api-reference/endpoint/search):
//
//	POST {base}/v2/search
//	Authorization: Bearer <key>
//	{"query": "<text> site:a -site:b", "limit": n}
//
// answered by {"success": true, "data": {"web": [{"url", "title",
// "description", "position", "markdown"?}, ...]}}. The v2 body has no domain
// fields, so domain filters go into the query as the documented site: and
// -site: operators, and are enforced client-side. No scrapeOptions are sent
// (SERP results only, no scrape credits); when a result does carry markdown
// (or metadata) it is used as fallback for the description and title. A v1
// shaped answer ({"data": [...]}) is accepted too, for older self-hosted
// instances.
type Firecrawl struct{ c client }

// NewFirecrawl returns the Firecrawl engine.
func NewFirecrawl(cfg Config) *Firecrawl {
	return &Firecrawl{c: newClient(NameFirecrawl, FirecrawlDefaultBaseURL, cfg)}
}

// Name returns NameFirecrawl.
func (f *Firecrawl) Name() string { return NameFirecrawl }

type firecrawlRequest struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

// Search runs q on Firecrawl.
func (f *Firecrawl) Search(ctx context.Context, q Query) ([]Result, error) {
	q, err := f.c.normalizeQuery(q)
	if err != nil {
		return nil, err
	}
	body := firecrawlRequest{
		Query: withSiteOperators(q.Text, q.IncludeDomains, q.ExcludeDomains),
		Limit: q.MaxResults,
	}
	data, err := f.c.do(ctx, http.MethodPost, "/v2/search", nil, body, f.c.bearer())
	if err != nil {
		return nil, err
	}
	if s := gjson.GetBytes(data, "success"); s.Exists() && !s.Bool() {
		return nil, f.c.errorf(0, nil, "search failed: %s", errorMessage(http.StatusOK, data))
	}
	items := gjson.GetBytes(data, "data.web")
	if !items.Exists() {
		items = gjson.GetBytes(data, "data") // v1: a flat list
	}
	var results []Result
	items.ForEach(func(_, r gjson.Result) bool {
		url := r.Get("url").String()
		if url == "" {
			url = r.Get("metadata.sourceURL").String()
		}
		title := r.Get("title").String()
		if title == "" {
			title = r.Get("metadata.title").String()
		}
		snippet := strings.TrimSpace(r.Get("description").String())
		if snippet == "" {
			snippet = strings.TrimSpace(r.Get("metadata.description").String())
		}
		if snippet == "" {
			snippet = truncateRunes(strings.TrimSpace(r.Get("markdown").String()), firecrawlSnippetMaxChars)
		}
		results = append(results, Result{
			Title:         title,
			URL:           url,
			Snippet:       snippet,
			PublishedDate: r.Get("date").String(),
		})
		return true
	})
	return finish(results, q), nil
}

// FirecrawlModule is the firecrawl engine, Firecrawl (https://firecrawl.dev), as the guest module
// tollgate.search_engines.firecrawl.
type FirecrawlModule struct{ Settings }

// CaddyModule returns the Caddy module information.
func (FirecrawlModule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + "." + NameFirecrawl, New: func() caddy.Module { return new(FirecrawlModule) }}
}

// UnmarshalCaddyfile reads `firecrawl { base_url ...; api_key ...; ... }`.
func (m *FirecrawlModule) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.UnmarshalEngine(d)
}

// Validate checks the settings.
func (m *FirecrawlModule) Validate() error { return m.Settings.Validate() }

// New implements Module.
func (m *FirecrawlModule) New(cfg Config) (Engine, error) { return NewFirecrawl(cfg), nil }

var (
	_ Module                = (*FirecrawlModule)(nil)
	_ caddy.Validator       = (*FirecrawlModule)(nil)
	_ caddyfile.Unmarshaler = (*FirecrawlModule)(nil)
)
