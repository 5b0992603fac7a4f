package engines

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

// SearXNG searches a SearXNG instance through its search API, following the
// SearXNG documentation "Search API" (https://docs.searxng.org/dev/search_api.html):
//
//	GET {base}/search?q=<text site:a -site:b>&format=json
//
// answered by {"query", "number_of_results", "results": [{"url", "title",
// "content", "publishedDate", "engine", ...}, ...], ...}. The instance must
// have "json" among its search.formats (otherwise it answers 403). SearXNG
// has no result-count or domain parameters: domain filters go into the query
// as site: / -site: operators, which SearXNG passes to its engines, and both
// filters and the result cap are enforced client-side. SearXNG itself has no
// API keys; for an instance behind an authenticating proxy, Config.APIKey is
// sent as a bearer token, or as the Basic auth password when Config.Username
// is set. Config.BaseURL is required.
type SearXNG struct {
	c        client
	username string
}

// NewSearXNG returns the SearXNG engine.
func NewSearXNG(cfg Config) *SearXNG {
	return &SearXNG{c: newClient(NameSearXNG, "", cfg), username: cfg.Username}
}

// Name returns NameSearXNG.
func (s *SearXNG) Name() string { return NameSearXNG }

// Search runs q on SearXNG.
func (s *SearXNG) Search(ctx context.Context, q Query) ([]Result, error) {
	q, err := s.c.normalizeQuery(q)
	if err != nil {
		return nil, err
	}
	params := url.Values{}
	params.Set("q", withSiteOperators(q.Text, q.IncludeDomains, q.ExcludeDomains))
	params.Set("format", "json")
	auth := s.c.bearer()
	if s.username != "" {
		auth = func(r *http.Request) { r.SetBasicAuth(s.username, s.c.apiKey) }
	}
	data, err := s.c.do(ctx, http.MethodGet, "/search", params, nil, auth)
	if err != nil {
		return nil, err
	}
	var results []Result
	gjson.GetBytes(data, "results").ForEach(func(_, r gjson.Result) bool {
		results = append(results, Result{
			Title:         r.Get("title").String(),
			URL:           r.Get("url").String(),
			Snippet:       strings.TrimSpace(r.Get("content").String()),
			PublishedDate: r.Get("publishedDate").String(),
		})
		return true
	})
	return finish(results, q), nil
}

// SearXNGModule is the searxng engine, a SearXNG instance, as the guest module
// tollgate.search_engines.searxng.
type SearXNGModule struct{ Settings }

// CaddyModule returns the Caddy module information.
func (SearXNGModule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + "." + NameSearXNG, New: func() caddy.Module { return new(SearXNGModule) }}
}

// UnmarshalCaddyfile reads `searxng { base_url ...; api_key ...; ... }`.
func (m *SearXNGModule) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return m.UnmarshalEngine(d) }

// Validate checks the settings; SearXNG has no public instance, so its
// base_url is required.
func (m *SearXNGModule) Validate() error {
	if m.BaseURL == "" {
		return errors.New("base_url is required")
	}
	return m.Settings.Validate()
}

// New implements Module.
func (m *SearXNGModule) New(cfg Config) (Engine, error) { return NewSearXNG(cfg), nil }

var (
	_ Module                = (*SearXNGModule)(nil)
	_ caddy.Validator       = (*SearXNGModule)(nil)
	_ caddyfile.Unmarshaler = (*SearXNGModule)(nil)
)
