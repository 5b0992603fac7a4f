// Package searchapis serves stand-ins of the Exa, Firecrawl, Parallel and
// SearXNG search APIs: deterministic, offline answers shaped like the
// vendors', for the mock provider's web search and, through enginestest,
// for the engines' tests. It is not a search engine.
package searchapis

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// APIs is an http.Handler serving all four search APIs:
//
//	POST /search     Exa       (x-api-key)
//	POST /v2/search  Firecrawl (Authorization: Bearer)
//	POST /v1/search  Parallel  (x-api-key)
//	GET  /search     SearXNG   (format=json; Bearer or Basic when a key is required)
//
// It answers deterministic results: result i (from 1) of query text T has
// title "T - result i", a URL https://<host>/<slug of T>/i and a snippet
// naming both. Hosts are taken from the include filters the request carried
// (d → d, www.d, docs.d; *.d → a.d, b.d, c.d), or else from DefaultHosts;
// excluded hosts are skipped. Exa, Firecrawl and Parallel answer as many
// results as asked (plus SetExtraResults); SearXNG, which has no count
// parameter, answers a page of 20. Requests with a path it does not know get
// 404.
//
// Knobs: RequireAPIKey (401 on a missing or wrong key), ForceStatus (fixed
// error status), SetDelay (slow answers), SetIgnoreFilters (answer as if the
// vendor ignored domain filters), SetExtraResults (answer more than asked).
type APIs struct {
	mu            sync.Mutex
	requests      []RecordedRequest
	apiKey        string
	forced        map[string]int
	delay         time.Duration
	ignoreFilters bool
	extra         int
	hosts         []string
	record        bool
}

// RecordedRequest is one request the stand-ins received.
type RecordedRequest struct {
	// Engine is engines.NameExa, NameFirecrawl, NameParallel, NameSearXNG,
	// or "" for a request no engine route matched.
	Engine   string
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
	// Query is the decoded query text, with site: operators removed
	// (Parallel: the objective, or else the first search query).
	Query string
	// MaxResults is the result count the request asked for (0 if none).
	MaxResults int
	// IncludeDomains and ExcludeDomains are the domain filters the request
	// carried, from body fields or site: / -site: operators.
	IncludeDomains []string
	ExcludeDomains []string
}

// DefaultHosts are the hosts results cycle through when the request has no
// include filter.
var DefaultHosts = []string{
	"example.com",
	"www.example.com",
	"docs.example.com",
	"example.org",
	"blog.example.org",
	"news.example.net",
}

const searXNGPageSize = 20

// New returns stand-ins that keep no request history, for a long-running
// offline stand-in such as the mock provider's.
func New() *APIs { return &APIs{forced: map[string]int{}} }

// NewRecording returns stand-ins that record every request (see Requests).
func NewRecording() *APIs { return &APIs{forced: map[string]int{}, record: true} }

// Requests returns a copy of the requests received so far, oldest first.
func (s *APIs) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RecordedRequest(nil), s.requests...)
}

// LastRequest returns the latest request received.
func (s *APIs) LastRequest() (RecordedRequest, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return RecordedRequest{}, false
	}
	return s.requests[len(s.requests)-1], true
}

// Reset forgets the recorded requests and restores every knob.
func (s *APIs) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	s.apiKey = ""
	s.forced = map[string]int{}
	s.delay = 0
	s.ignoreFilters = false
	s.extra = 0
	s.hosts = nil
}

// RequireAPIKey makes every engine route answer 401 unless the request
// carries key the way the vendor expects it (SearXNG: as bearer token or
// Basic auth password). "" disables the check.
func (s *APIs) RequireAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// ForceStatus makes the routes of engine ("" for all engines) answer status
// with a vendor-shaped error body. Status 0 removes the override.
func (s *APIs) ForceStatus(engine string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == 0 {
		delete(s.forced, engine)
		return
	}
	s.forced[engine] = status
}

// SetDelay delays every answer by d (cut short if the client goes away).
func (s *APIs) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// SetIgnoreFilters makes the stand-ins answer as if the vendor ignored the
// domain filters: results cycle through the hosts of SetHosts (default
// DefaultHosts) whatever the request asked.
func (s *APIs) SetIgnoreFilters(ignore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ignoreFilters = ignore
}

// SetExtraResults makes the stand-ins answer n more results than asked.
func (s *APIs) SetExtraResults(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extra = n
}

// SetHosts replaces DefaultHosts for requests without include filters (nil
// restores the default).
func (s *APIs) SetHosts(hosts []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hosts = append([]string(nil), hosts...)
}

type testKnobs struct {
	apiKey        string
	status        int
	delay         time.Duration
	ignoreFilters bool
	extra         int
	hosts         []string
}

func (s *APIs) recordRequest(rec RecordedRequest) testKnobs {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.record {
		s.requests = append(s.requests, rec)
	}
	k := testKnobs{
		apiKey:        s.apiKey,
		delay:         s.delay,
		ignoreFilters: s.ignoreFilters,
		extra:         s.extra,
		hosts:         s.hosts,
	}
	if st, ok := s.forced[rec.Engine]; ok {
		k.status = st
	} else if st, ok := s.forced[""]; ok {
		k.status = st
	}
	if len(k.hosts) == 0 {
		k.hosts = DefaultHosts
	}
	return k
}

// ServeHTTP answers one request as the vendor's API would.
func (s *APIs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := RecordedRequest{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Body:     body,
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/search":
		rec.Engine = engines.NameExa
		rec.Query = gjson.GetBytes(body, "query").String()
		rec.MaxResults = int(gjson.GetBytes(body, "numResults").Int())
		rec.IncludeDomains = stringList(gjson.GetBytes(body, "includeDomains"))
		rec.ExcludeDomains = stringList(gjson.GetBytes(body, "excludeDomains"))
	case r.Method == http.MethodPost && r.URL.Path == "/v2/search":
		rec.Engine = engines.NameFirecrawl
		rec.Query, rec.IncludeDomains, rec.ExcludeDomains = parseSiteOperators(gjson.GetBytes(body, "query").String())
		rec.MaxResults = int(gjson.GetBytes(body, "limit").Int())
	case r.Method == http.MethodPost && r.URL.Path == "/v1/search":
		rec.Engine = engines.NameParallel
		rec.Query = gjson.GetBytes(body, "objective").String()
		if rec.Query == "" {
			rec.Query = gjson.GetBytes(body, "search_queries.0").String()
		}
		rec.MaxResults = int(gjson.GetBytes(body, "advanced_settings.max_results").Int())
		rec.IncludeDomains = stringList(gjson.GetBytes(body, "advanced_settings.source_policy.include_domains"))
		rec.ExcludeDomains = stringList(gjson.GetBytes(body, "advanced_settings.source_policy.exclude_domains"))
	case r.Method == http.MethodGet && r.URL.Path == "/search":
		rec.Engine = engines.NameSearXNG
		rec.Query, rec.IncludeDomains, rec.ExcludeDomains = parseSiteOperators(r.URL.Query().Get("q"))
	}
	k := s.recordRequest(rec)

	if rec.Engine == "" {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such route"})
		return
	}
	if k.delay > 0 {
		t := time.NewTimer(k.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if k.apiKey != "" && !testKeyOK(rec.Engine, r, k.apiKey) {
		testError(w, rec.Engine, http.StatusUnauthorized, "invalid or missing API key")
		return
	}
	if k.status != 0 {
		testError(w, rec.Engine, k.status, "forced error")
		return
	}
	if msg := testValidate(rec, r, body); msg != "" {
		status := http.StatusBadRequest
		if rec.Engine == engines.NameParallel {
			status = http.StatusUnprocessableEntity
		}
		testError(w, rec.Engine, status, msg)
		return
	}

	count := rec.MaxResults
	switch rec.Engine {
	case engines.NameSearXNG:
		count = searXNGPageSize
	case engines.NameParallel:
		if count <= 0 {
			count = 10
		}
	}
	count += k.extra
	include, exclude := rec.IncludeDomains, rec.ExcludeDomains
	hosts := k.hosts
	if k.ignoreFilters {
		include, exclude = nil, nil
	} else if len(include) > 0 {
		hosts = testHostsFor(include)
	}
	results := testResults(rec.Query, hosts, exclude, count)

	switch rec.Engine {
	case engines.NameExa:
		items := make([]map[string]any, 0, len(results))
		for _, res := range results {
			items = append(items, map[string]any{
				"id":            res.URL,
				"title":         res.Title,
				"url":           res.URL,
				"publishedDate": res.PublishedDate + "T00:00:00.000Z",
				"author":        "Test Author",
				"text":          "Full text. " + res.Snippet,
				"highlights":    []string{res.Snippet},
			})
		}
		writeJSON(w, http.StatusOK, map[string]any{"requestId": "test-request", "results": items})
	case engines.NameFirecrawl:
		items := make([]map[string]any, 0, len(results))
		for i, res := range results {
			items = append(items, map[string]any{
				"url":         res.URL,
				"title":       res.Title,
				"description": res.Snippet,
				"position":    i + 1,
			})
		}
		writeJSON(w, http.StatusOK, map[string]any{"success": true, "data": map[string]any{"web": items}})
	case engines.NameParallel:
		items := make([]map[string]any, 0, len(results))
		for _, res := range results {
			items = append(items, map[string]any{
				"url":          res.URL,
				"title":        res.Title,
				"publish_date": res.PublishedDate,
				"excerpts":     []string{res.Snippet, "Second excerpt."},
			})
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"search_id":  "search_test",
			"results":    items,
			"warnings":   nil,
			"usage":      []map[string]any{{"name": "sku_search", "count": 1}},
			"session_id": "session_test",
		})
	case engines.NameSearXNG:
		items := make([]map[string]any, 0, len(results))
		for _, res := range results {
			items = append(items, map[string]any{
				"url":           res.URL,
				"title":         res.Title,
				"content":       res.Snippet,
				"publishedDate": res.PublishedDate + "T00:00:00",
				"engine":        "testdouble",
				"engines":       []string{"testdouble"},
				"category":      "general",
				"score":         1.0,
			})
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"query":                r.URL.Query().Get("q"),
			"number_of_results":    len(items),
			"results":              items,
			"answers":              []any{},
			"corrections":          []any{},
			"infoboxes":            []any{},
			"suggestions":          []any{},
			"unresponsive_engines": []any{},
		})
	}
}

// testValidate checks what the real API would reject.
func testValidate(rec RecordedRequest, r *http.Request, body []byte) string {
	if rec.Engine != engines.NameSearXNG {
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			return "Content-Type must be application/json"
		}
		if !jsoncheck.Valid(body) {
			return "body is not valid JSON"
		}
	}
	switch rec.Engine {
	case engines.NameSearXNG:
		if r.URL.Query().Get("format") != "json" {
			return "format must be json"
		}
		if strings.TrimSpace(r.URL.Query().Get("q")) == "" {
			return "q is required"
		}
	case engines.NameParallel:
		if len(stringList(gjson.GetBytes(body, "search_queries"))) == 0 {
			return "search_queries is required"
		}
	default:
		if strings.TrimSpace(gjson.GetBytes(body, "query").String()) == "" {
			return "query is required"
		}
	}
	return ""
}

func testKeyOK(engine string, r *http.Request, key string) bool {
	switch engine {
	case engines.NameExa, engines.NameParallel:
		return r.Header.Get("x-api-key") == key
	case engines.NameFirecrawl:
		return r.Header.Get("Authorization") == "Bearer "+key
	case engines.NameSearXNG:
		if _, pass, ok := r.BasicAuth(); ok {
			return pass == key
		}
		return r.Header.Get("Authorization") == "Bearer "+key
	}
	return false
}

// testError writes an error body shaped like the vendor's.
func testError(w http.ResponseWriter, engine string, status int, msg string) {
	switch engine {
	case engines.NameFirecrawl:
		writeJSON(w, status, map[string]any{"success": false, "error": msg})
	case engines.NameParallel:
		writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"ref_id": "ref_test", "message": msg}})
	case engines.NameSearXNG:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, msg)
	default:
		writeJSON(w, status, map[string]any{"requestId": "test-request", "error": msg})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func stringList(r gjson.Result) []string {
	var out []string
	r.ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.String())
		return true
	})
	return out
}

// parseSiteOperators splits a query into its text and its site: / -site:
// operators, dropping the parentheses and ORs that group site: operators.
func parseSiteOperators(q string) (text string, include, exclude []string) {
	var words []string
	prevSite := false
	for _, tok := range strings.Fields(q) {
		t := strings.Trim(tok, "()")
		switch {
		case strings.HasPrefix(t, "site:"):
			include = append(include, strings.TrimPrefix(t, "site:"))
			prevSite = true
		case strings.HasPrefix(t, "-site:"):
			exclude = append(exclude, strings.TrimPrefix(t, "-site:"))
			prevSite = true
		case t == "OR" && prevSite:
			prevSite = false
		default:
			words = append(words, tok)
			prevSite = false
		}
	}
	return strings.Join(words, " "), include, exclude
}

// testHostsFor derives result hosts from include patterns.
func testHostsFor(include []string) []string {
	var hosts []string
	for _, p := range include {
		p = hostPattern(p)
		if p == "" {
			continue
		}
		host, path, _ := strings.Cut(p, "/")
		if path != "" {
			path = "/" + path
		}
		if base, ok := strings.CutPrefix(host, "*."); ok {
			hosts = append(hosts, "a."+base+path, "b."+base+path, "c."+base+path)
			continue
		}
		if strings.HasPrefix(host, "*") || !strings.Contains(host, ".") {
			base := strings.TrimLeft(host, "*.")
			hosts = append(hosts, "a.example."+base+path)
			continue
		}
		hosts = append(hosts, host+path, "www."+host+path, "docs."+host+path)
	}
	return hosts
}

// testResults builds count deterministic results for text, cycling through
// hosts (each may carry a path prefix) and skipping excluded ones.
func testResults(text string, hosts, exclude []string, count int) []engines.Result {
	var out []engines.Result
	slug := testSlug(text)
	for i := 0; len(out) < count && i < count*len(hosts)+len(hosts); i++ {
		hp := hosts[i%len(hosts)]
		n := len(out) + 1
		u := "https://" + hp + "/" + slug + "/" + strconv.Itoa(n)
		if matchesAny(exclude, u) {
			continue
		}
		host, _, _ := strings.Cut(hp, "/")
		out = append(out, engines.Result{
			Title:         fmt.Sprintf("%s - result %d", text, n),
			URL:           u,
			Snippet:       fmt.Sprintf("Result %d for %q from %s.", n, text, host),
			PublishedDate: fmt.Sprintf("2026-01-%02d", (n-1)%28+1),
		})
	}
	return out
}

func testSlug(text string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(text) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	s := strings.TrimSuffix(b.String(), "-")
	if s == "" {
		s = "q"
	}
	return s
}

// hostPattern reads a domain filter as the vendors do: lowercased, without
// a scheme, trailing slashes or dots, and with a leading "." meaning "*.".
// "" means the pattern names no host.
func hostPattern(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	if _, rest, ok := strings.Cut(p, "://"); ok {
		p = rest
	}
	p = strings.TrimRight(p, "/")
	host, path, hasPath := strings.Cut(p, "/")
	host = strings.TrimSuffix(host, ".")
	if strings.HasPrefix(host, ".") {
		host = "*" + host
	}
	if host == "" || host == "*." {
		return ""
	}
	if hasPath {
		return host + "/" + path
	}
	return host
}

func matchesAny(patterns []string, rawURL string) bool {
	for _, p := range patterns {
		if engines.MatchDomain(p, rawURL) {
			return true
		}
	}
	return false
}
