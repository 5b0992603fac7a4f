package engines

import (
	"context"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/tidwall/gjson"
)

// ParallelDefaultBaseURL is Parallel Web Systems' public API root.
const ParallelDefaultBaseURL = "https://api.parallel.ai"

// Limits of the Parallel search request (docs.parallel.ai, V1 Search API).
const (
	parallelObjectiveMaxChars = 5000
	parallelQueryMaxChars     = 200
)

// Parallel searches with Parallel Web Systems' V1 Search API, following
// https://docs.parallel.ai/api-reference/search/search, "Advanced Search
// Settings" (https://docs.parallel.ai/search/advanced-search-settings) and
// "Source Policy" (https://docs.parallel.ai/resources/source-policy):
//
//	POST {base}/v1/search
//	x-api-key: <key>
//	{"objective": "<text>", "search_queries": ["<text>"],
//	 "advanced_settings": {"max_results": n,
//	   "source_policy": {"include_domains": [...]} | {"exclude_domains": [...]}}}
//
// answered by {"search_id", "results": [{"url", "title", "publish_date",
// "excerpts": [...]}, ...], "warnings", "usage", "session_id"}. The source
// policy takes plain (apex) domains, which cover their subdomains, and no
// wildcards or paths, so "*.example.com" and "example.com/blog" are sent as
// "example.com" and narrowed client-side. Parallel ignores exclude_domains
// when include_domains is set, so only one list is sent: include when there
// is one (excludes are then enforced client-side), exclude otherwise. The
// snippet is the excerpts joined by blank lines.
type Parallel struct{ c client }

// NewParallel returns the Parallel engine.
func NewParallel(cfg Config) *Parallel {
	return &Parallel{c: newClient(NameParallel, ParallelDefaultBaseURL, cfg)}
}

// Name returns NameParallel.
func (p *Parallel) Name() string { return NameParallel }

type parallelRequest struct {
	Objective        string           `json:"objective"`
	SearchQueries    []string         `json:"search_queries"`
	AdvancedSettings parallelSettings `json:"advanced_settings"`
}

type parallelSettings struct {
	MaxResults   int                   `json:"max_results"`
	SourcePolicy *parallelSourcePolicy `json:"source_policy,omitempty"`
}

type parallelSourcePolicy struct {
	IncludeDomains []string `json:"include_domains,omitempty"`
	ExcludeDomains []string `json:"exclude_domains,omitempty"`
}

// Search runs q on Parallel.
func (p *Parallel) Search(ctx context.Context, q Query) ([]Result, error) {
	q, err := p.c.normalizeQuery(q)
	if err != nil {
		return nil, err
	}
	body := parallelRequest{
		Objective:        truncateRunes(q.Text, parallelObjectiveMaxChars),
		SearchQueries:    []string{truncateRunes(q.Text, parallelQueryMaxChars)},
		AdvancedSettings: parallelSettings{MaxResults: q.MaxResults},
	}
	if inc := hostScopes(q.IncludeDomains, true, true); len(inc) > 0 {
		body.AdvancedSettings.SourcePolicy = &parallelSourcePolicy{IncludeDomains: inc}
	} else if len(q.IncludeDomains) == 0 {
		// Only exact domains: excluding the apex of "*.example.com" or of
		// "example.com/blog" would also drop the rest of example.com.
		var plain []string
		for _, d := range q.ExcludeDomains {
			if d[0] != '*' && !strings.Contains(d, "/") {
				plain = append(plain, d)
			}
		}
		if exc := hostScopes(plain, false, false); len(exc) > 0 {
			body.AdvancedSettings.SourcePolicy = &parallelSourcePolicy{ExcludeDomains: exc}
		}
	}
	data, err := p.c.do(ctx, http.MethodPost, "/v1/search", nil, body, p.c.setHeaderKey("x-api-key"))
	if err != nil {
		return nil, err
	}
	var results []Result
	gjson.GetBytes(data, "results").ForEach(func(_, r gjson.Result) bool {
		results = append(results, Result{
			Title:         r.Get("title").String(),
			URL:           r.Get("url").String(),
			Snippet:       joinStrings(r.Get("excerpts"), "\n\n"),
			PublishedDate: r.Get("publish_date").String(),
		})
		return true
	})
	return finish(results, q), nil
}

// ParallelModule is the parallel engine, Parallel's Search API (https://parallel.ai), as the guest module
// tollgate.search_engines.parallel.
type ParallelModule struct{ Settings }

// CaddyModule returns the Caddy module information.
func (ParallelModule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: Namespace + "." + NameParallel, New: func() caddy.Module { return new(ParallelModule) }}
}

// UnmarshalCaddyfile reads `parallel { base_url ...; api_key ...; ... }`.
func (m *ParallelModule) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return m.UnmarshalEngine(d)
}

// Validate checks the settings.
func (m *ParallelModule) Validate() error { return m.Settings.Validate() }

// New implements Module.
func (m *ParallelModule) New(cfg Config) (Engine, error) { return NewParallel(cfg), nil }

var (
	_ Module                = (*ParallelModule)(nil)
	_ caddy.Validator       = (*ParallelModule)(nil)
	_ caddyfile.Unmarshaler = (*ParallelModule)(nil)
)
