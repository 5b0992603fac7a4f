package engines

import (
	"context"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

// ExaDefaultBaseURL is Exa's public API root.
const ExaDefaultBaseURL = "https://api.exa.ai"

// exaTextMaxChars caps the page text Exa returns per result.
const exaTextMaxChars = 1000

// Exa searches with Exa's search endpoint, following the Exa Public API
// reference (https://exa.ai/docs/reference/search, OpenAPI "Exa Public API"
// 2.0.0):
//
//	POST {base}/search
//	x-api-key: <key>
//	{"query": ..., "numResults": n, "includeDomains": [...], "excludeDomains": [...],
//	 "contents": {"text": {"maxCharacters": 1000}, "highlights": true}}
//
// answered by {"results": [{"title", "url", "publishedDate", "text",
// "highlights": [...]}, ...]}. Domain patterns are sent as given: Exa
// accepts "*.example.com" subdomain wildcards and "example.com/path"
// prefixes (Exa changelog "Domain Path Filter Support", 2025-08-04). The
// snippet is the highlights, or the text when there are none.
type Exa struct{ c client }

// NewExa returns the Exa engine.
func NewExa(cfg Config) *Exa {
	return &Exa{c: newClient(NameExa, ExaDefaultBaseURL, cfg)}
}

// Name returns NameExa.
func (e *Exa) Name() string { return NameExa }

type exaRequest struct {
	Query          string      `json:"query"`
	NumResults     int         `json:"numResults"`
	IncludeDomains []string    `json:"includeDomains,omitempty"`
	ExcludeDomains []string    `json:"excludeDomains,omitempty"`
	Contents       exaContents `json:"contents"`
}

type exaContents struct {
	Text       exaText `json:"text"`
	Highlights bool    `json:"highlights"`
}

type exaText struct {
	MaxCharacters int `json:"maxCharacters"`
}

// Search runs q on Exa.
func (e *Exa) Search(ctx context.Context, q Query) ([]Result, error) {
	q, err := e.c.normalizeQuery(q)
	if err != nil {
		return nil, err
	}
	body := exaRequest{
		Query:          q.Text,
		NumResults:     q.MaxResults,
		IncludeDomains: q.IncludeDomains,
		ExcludeDomains: q.ExcludeDomains,
		Contents: exaContents{
			Text:       exaText{MaxCharacters: exaTextMaxChars},
			Highlights: true,
		},
	}
	data, err := e.c.do(ctx, http.MethodPost, "/search", nil, body, e.c.setHeaderKey("x-api-key"))
	if err != nil {
		return nil, err
	}
	var results []Result
	gjson.GetBytes(data, "results").ForEach(func(_, r gjson.Result) bool {
		snippet := joinStrings(r.Get("highlights"), " … ")
		if snippet == "" {
			snippet = strings.TrimSpace(r.Get("text").String())
		}
		results = append(results, Result{
			Title:         r.Get("title").String(),
			URL:           r.Get("url").String(),
			Snippet:       snippet,
			PublishedDate: r.Get("publishedDate").String(),
		})
		return true
	})
	return finish(results, q), nil
}

// joinStrings joins the non-empty strings of a JSON array.
func joinStrings(arr gjson.Result, sep string) string {
	var parts []string
	arr.ForEach(func(_, v gjson.Result) bool {
		if s := strings.TrimSpace(v.String()); s != "" {
			parts = append(parts, s)
		}
		return true
	})
	return strings.Join(parts, sep)
}

// ExaModule is the exa engine, Exa (https://exa.ai), as the guest module
// tollgate.search_engines.exa.
type ExaModule struct{ Settings }

// CaddyModule returns the Caddy module information.
func (ExaModule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + "." + NameExa, New: func() caddy.Module { return new(ExaModule) }}
}

// UnmarshalCaddyfile reads `exa { base_url ...; api_key ...; ... }`.
func (m *ExaModule) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return m.UnmarshalEngine(d) }

// Validate checks the settings.
func (m *ExaModule) Validate() error { return m.Settings.Validate() }

// New implements Module.
func (m *ExaModule) New(cfg Config) (Engine, error) { return NewExa(cfg), nil }

var (
	_ Module                = (*ExaModule)(nil)
	_ caddy.Validator       = (*ExaModule)(nil)
	_ caddyfile.Unmarshaler = (*ExaModule)(nil)
)
