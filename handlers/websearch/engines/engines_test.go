package engines_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
	"github.com/tollgate-dev/caddy-tollgate/standin/enginestest"
)

const testKey = "test-key-s3cret"

type engineCase struct {
	name string
	new  func(engines.Config) engines.Engine
}

var allEngines = []engineCase{
	{engines.NameExa, func(c engines.Config) engines.Engine { return engines.NewExa(c) }},
	{engines.NameFirecrawl, func(c engines.Config) engines.Engine { return engines.NewFirecrawl(c) }},
	{engines.NameParallel, func(c engines.Config) engines.Engine { return engines.NewParallel(c) }},
	{engines.NameSearXNG, func(c engines.Config) engines.Engine { return engines.NewSearXNG(c) }},
}

func startDouble(t *testing.T) *enginestest.TestServer {
	t.Helper()
	s := enginestest.StartTestServer()
	t.Cleanup(s.Close)
	return s
}

func lastRequest(t *testing.T, s *enginestest.TestServer) enginestest.RecordedRequest {
	t.Helper()
	rec, ok := s.LastRequest()
	if !ok {
		t.Fatal("test server received no request")
	}
	return rec
}

func jsonStrings(body []byte, path string) []string {
	var out []string
	gjson.GetBytes(body, path).ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.String())
		return true
	})
	return out
}

func matchAny(patterns []string, rawURL string) bool {
	for _, p := range patterns {
		if engines.MatchDomain(p, rawURL) {
			return true
		}
	}
	return false
}

func TestRequestShape(t *testing.T) {
	q := engines.Query{
		Text:           "golang generics",
		MaxResults:     3,
		IncludeDomains: []string{"go.dev", "*.github.io", "https://Example.com/Blog/"},
		ExcludeDomains: []string{"spam.go.dev", "*.bad.github.io"},
	}
	tests := []struct {
		engine string
		check  func(t *testing.T, rec enginestest.RecordedRequest)
	}{
		{engines.NameExa, func(t *testing.T, rec enginestest.RecordedRequest) {
			if rec.Method != http.MethodPost || rec.Path != "/search" || rec.RawQuery != "" {
				t.Errorf("got %s %s?%s, want POST /search", rec.Method, rec.Path, rec.RawQuery)
			}
			if got := rec.Header.Get("x-api-key"); got != testKey {
				t.Errorf("x-api-key = %q", got)
			}
			if got := rec.Header.Get("Authorization"); got != "" {
				t.Errorf("unexpected Authorization %q", got)
			}
			b := rec.Body
			if got := gjson.GetBytes(b, "query").String(); got != "golang generics" {
				t.Errorf("query = %q", got)
			}
			if got := gjson.GetBytes(b, "numResults").Int(); got != 3 {
				t.Errorf("numResults = %d", got)
			}
			if got, want := jsonStrings(b, "includeDomains"), []string{"go.dev", "*.github.io", "example.com/blog"}; !reflect.DeepEqual(got, want) {
				t.Errorf("includeDomains = %q, want %q", got, want)
			}
			if got, want := jsonStrings(b, "excludeDomains"), []string{"spam.go.dev", "*.bad.github.io"}; !reflect.DeepEqual(got, want) {
				t.Errorf("excludeDomains = %q, want %q", got, want)
			}
			if got := gjson.GetBytes(b, "contents.text.maxCharacters").Int(); got != 1000 {
				t.Errorf("contents.text.maxCharacters = %d", got)
			}
			if !gjson.GetBytes(b, "contents.highlights").Bool() {
				t.Errorf("contents.highlights not true: %s", b)
			}
		}},
		{engines.NameFirecrawl, func(t *testing.T, rec enginestest.RecordedRequest) {
			if rec.Method != http.MethodPost || rec.Path != "/v2/search" {
				t.Errorf("got %s %s, want POST /v2/search", rec.Method, rec.Path)
			}
			if got := rec.Header.Get("Authorization"); got != "Bearer "+testKey {
				t.Errorf("Authorization = %q", got)
			}
			b := rec.Body
			want := "golang generics (site:go.dev OR site:github.io OR site:example.com) -site:spam.go.dev"
			if got := gjson.GetBytes(b, "query").String(); got != want {
				t.Errorf("query = %q, want %q", got, want)
			}
			if got := gjson.GetBytes(b, "limit").Int(); got != 3 {
				t.Errorf("limit = %d", got)
			}
			if gjson.GetBytes(b, "scrapeOptions").Exists() {
				t.Errorf("unexpected scrapeOptions: %s", b)
			}
			if rec.Query != "golang generics" {
				t.Errorf("double decoded query %q", rec.Query)
			}
		}},
		{engines.NameParallel, func(t *testing.T, rec enginestest.RecordedRequest) {
			if rec.Method != http.MethodPost || rec.Path != "/v1/search" {
				t.Errorf("got %s %s, want POST /v1/search", rec.Method, rec.Path)
			}
			if got := rec.Header.Get("x-api-key"); got != testKey {
				t.Errorf("x-api-key = %q", got)
			}
			b := rec.Body
			if got := gjson.GetBytes(b, "objective").String(); got != "golang generics" {
				t.Errorf("objective = %q", got)
			}
			if got := jsonStrings(b, "search_queries"); !reflect.DeepEqual(got, []string{"golang generics"}) {
				t.Errorf("search_queries = %q", got)
			}
			if got := gjson.GetBytes(b, "advanced_settings.max_results").Int(); got != 3 {
				t.Errorf("advanced_settings.max_results = %d", got)
			}
			if got, want := jsonStrings(b, "advanced_settings.source_policy.include_domains"), []string{"go.dev", "github.io", "example.com"}; !reflect.DeepEqual(got, want) {
				t.Errorf("include_domains = %q, want %q", got, want)
			}
			if gjson.GetBytes(b, "advanced_settings.source_policy.exclude_domains").Exists() {
				t.Errorf("exclude_domains sent alongside include_domains: %s", b)
			}
		}},
		{engines.NameSearXNG, func(t *testing.T, rec enginestest.RecordedRequest) {
			if rec.Method != http.MethodGet || rec.Path != "/search" || len(rec.Body) != 0 {
				t.Errorf("got %s %s with %d body bytes, want GET /search", rec.Method, rec.Path, len(rec.Body))
			}
			if got := rec.Header.Get("Authorization"); got != "Bearer "+testKey {
				t.Errorf("Authorization = %q", got)
			}
			v, err := url.ParseQuery(rec.RawQuery)
			if err != nil {
				t.Fatal(err)
			}
			want := url.Values{
				"q":      {"golang generics (site:go.dev OR site:github.io OR site:example.com) -site:spam.go.dev"},
				"format": {"json"},
			}
			if !reflect.DeepEqual(v, want) {
				t.Errorf("query params = %v, want %v", v, want)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.engine, func(t *testing.T) {
			s := startDouble(t)
			s.RequireAPIKey(testKey)
			eng, err := engines.New(tc.engine, engines.Config{BaseURL: s.URL, APIKey: testKey})
			if err != nil {
				t.Fatal(err)
			}
			if eng.Name() != tc.engine {
				t.Errorf("Name() = %q", eng.Name())
			}
			res, err := eng.Search(context.Background(), q)
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if len(s.Requests()) != 1 {
				t.Fatalf("%d requests, want 1", len(s.Requests()))
			}
			rec := lastRequest(t, s)
			if rec.Engine != tc.engine {
				t.Errorf("double routed to %q", rec.Engine)
			}
			if rec.Method == http.MethodPost && !strings.HasPrefix(rec.Header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type = %q", rec.Header.Get("Content-Type"))
			}
			tc.check(t, rec)
			if len(res) == 0 || len(res) > 3 {
				t.Fatalf("got %d results, want 1..3", len(res))
			}
			for _, r := range res {
				// Firecrawl web results carry no date.
				if r.Title == "" || r.URL == "" || r.Snippet == "" || (r.PublishedDate == "") != (tc.engine == engines.NameFirecrawl) {
					t.Errorf("incomplete result %+v", r)
				}
				if !matchAny(q.IncludeDomains, r.URL) || matchAny(q.ExcludeDomains, r.URL) {
					t.Errorf("result %s violates the domain filters", r.URL)
				}
			}
		})
	}
}

func TestResultMapping(t *testing.T) {
	want := engines.Result{
		Title:   "rust traits - result 1",
		URL:     "https://example.com/rust-traits/1",
		Snippet: `Result 1 for "rust traits" from example.com.`,
	}
	dates := map[string]string{
		engines.NameExa:       "2026-01-01T00:00:00.000Z",
		engines.NameFirecrawl: "",
		engines.NameParallel:  "2026-01-01",
		engines.NameSearXNG:   "2026-01-01T00:00:00",
	}
	for _, ec := range allEngines {
		t.Run(ec.name, func(t *testing.T) {
			s := startDouble(t)
			res, err := ec.new(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "rust traits", MaxResults: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 {
				t.Fatalf("got %d results", len(res))
			}
			w := want
			w.PublishedDate = dates[ec.name]
			if ec.name == engines.NameParallel {
				w.Snippet += "\n\nSecond excerpt."
			}
			if res[0] != w {
				t.Errorf("got %+v\nwant %+v", res[0], w)
			}
		})
	}
}

func TestMaxResults(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		extra     int
		wantSent  int // 0: not sent (SearXNG)
		wantCount int
	}{
		{"exact", 4, 0, 4, 4},
		{"upstream returns too many", 3, 7, 3, 3},
		{"default", 0, 0, engines.DefaultMaxResults, engines.DefaultMaxResults},
		{"negative means default", -2, 3, engines.DefaultMaxResults, engines.DefaultMaxResults},
		{"one", 1, 2, 1, 1},
	}
	for _, ec := range allEngines {
		for _, tc := range tests {
			t.Run(ec.name+"/"+tc.name, func(t *testing.T) {
				s := startDouble(t)
				s.SetExtraResults(tc.extra)
				res, err := ec.new(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "q", MaxResults: tc.max})
				if err != nil {
					t.Fatal(err)
				}
				if len(res) != tc.wantCount {
					t.Errorf("got %d results, want %d", len(res), tc.wantCount)
				}
				rec := lastRequest(t, s)
				want := tc.wantSent
				if ec.name == engines.NameSearXNG {
					want = 0
				}
				if rec.MaxResults != want {
					t.Errorf("sent max results %d, want %d", rec.MaxResults, want)
				}
			})
		}
	}
}

func TestDomainFiltering(t *testing.T) {
	tests := []struct {
		name    string
		include []string
		exclude []string
		// allowed reports whether a host may appear.
		allowed func(host string) bool
	}{
		{
			name:    "wildcard include keeps subdomains only",
			include: []string{"*.example.com"},
			allowed: func(h string) bool { return strings.HasSuffix(h, ".example.com") },
		},
		{
			name:    "plain include keeps apex and subdomains",
			include: []string{"example.org"},
			allowed: func(h string) bool { return h == "example.org" || strings.HasSuffix(h, ".example.org") },
		},
		{
			name:    "exclude exact domain and its subdomains",
			exclude: []string{"example.com"},
			allowed: func(h string) bool { return h != "example.com" && !strings.HasSuffix(h, ".example.com") },
		},
		{
			name:    "wildcard exclude keeps apex",
			exclude: []string{"*.example.com", "*.example.org"},
			allowed: func(h string) bool {
				return !strings.HasSuffix(h, ".example.com") && !strings.HasSuffix(h, ".example.org")
			},
		},
		{
			name:    "include and exclude",
			include: []string{"example.com", "example.net"},
			exclude: []string{"www.example.com"},
			allowed: func(h string) bool {
				return h == "example.com" || h == "docs.example.com" || strings.HasSuffix(h, "example.net")
			},
		},
	}
	for _, ec := range allEngines {
		for _, tc := range tests {
			for _, ignore := range []bool{false, true} {
				name := ec.name + "/" + tc.name
				if ignore {
					name += "/upstream ignores filters"
				}
				t.Run(name, func(t *testing.T) {
					s := startDouble(t)
					s.SetIgnoreFilters(ignore)
					res, err := ec.new(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{
						Text:           "filters",
						MaxResults:     12,
						IncludeDomains: tc.include,
						ExcludeDomains: tc.exclude,
					})
					if err != nil {
						t.Fatal(err)
					}
					if len(res) == 0 {
						t.Fatal("no results")
					}
					for _, r := range res {
						u, err := url.Parse(r.URL)
						if err != nil {
							t.Fatal(err)
						}
						if !tc.allowed(u.Hostname()) {
							t.Errorf("result host %s not allowed", u.Hostname())
						}
					}
					// Exa takes the patterns as they are, so a filter-honouring
					// upstream fills the page; the others get broader filters
					// (or none) and the client-side narrowing may thin it.
					if len(res) > 12 || (!ignore && ec.name == engines.NameExa && len(res) != 12) {
						t.Errorf("got %d results, want 12", len(res))
					}
				})
			}
		}
	}
}

func TestMatchDomain(t *testing.T) {
	tests := []struct {
		pattern, url string
		want         bool
	}{
		{"example.com", "https://example.com/x", true},
		{"example.com", "https://www.example.com/x", true},
		{"example.com", "https://a.b.example.com", true},
		{"example.com", "https://notexample.com", false},
		{"example.com", "https://example.com.evil.net", false},
		{"Example.COM", "https://EXAMPLE.com:8443/x", true},
		{"https://example.com/", "http://example.com", true},
		{"example.com.", "https://example.com./", true},
		{"*.example.com", "https://www.example.com", true},
		{"*.example.com", "https://a.b.example.com", true},
		{"*.example.com", "https://example.com", false},
		{"*.example.com", "https://badexample.com", false},
		{".example.com", "https://docs.example.com", true},
		{".example.com", "https://example.com", false},
		{"*.gov", "https://www.nasa.gov/", true},
		{"*.gov", "https://gov.uk/", false},
		{"example.com/blog", "https://example.com/blog", true},
		{"example.com/blog", "https://www.example.com/blog/post", true},
		{"example.com/blog", "https://example.com/blogger", false},
		{"example.com/blog", "https://example.com/", false},
		{"", "https://example.com", false},
		{"*", "https://example.com", false},
		{"ex*ample.com", "https://example.com", false},
		{"example.com", "not a url", false},
		{"example.com", "", false},
	}
	for _, tc := range tests {
		if got := engines.MatchDomain(tc.pattern, tc.url); got != tc.want {
			t.Errorf("MatchDomain(%q, %q) = %v, want %v", tc.pattern, tc.url, got, tc.want)
		}
	}
}

func TestFilterResults(t *testing.T) {
	rs := []engines.Result{{URL: "https://a.com/1"}, {URL: "https://x.a.com/2"}, {URL: "https://b.com/3"}, {URL: "::bad"}}
	got := engines.FilterResults(rs, []string{"a.com"}, []string{"*.a.com"})
	if len(got) != 1 || got[0].URL != "https://a.com/1" {
		t.Errorf("got %+v", got)
	}
	if got := engines.FilterResults(rs, nil, []string{"b.com"}); len(got) != 3 {
		t.Errorf("exclude only: got %+v", got)
	}
	if got := engines.FilterResults(rs, nil, nil); len(got) != 4 {
		t.Errorf("no filter: got %+v", got)
	}
	if rs[0].URL != "https://a.com/1" || rs[1].URL != "https://x.a.com/2" {
		t.Error("FilterResults modified its input")
	}
}

func TestExcludeOnlyRequests(t *testing.T) {
	q := engines.Query{Text: "news", ExcludeDomains: []string{"bad.com", "*.worse.com", "ok.com/private"}}
	tests := []struct {
		engine string
		check  func(t *testing.T, rec enginestest.RecordedRequest)
	}{
		{engines.NameExa, func(t *testing.T, rec enginestest.RecordedRequest) {
			if got := jsonStrings(rec.Body, "excludeDomains"); !reflect.DeepEqual(got, []string{"bad.com", "*.worse.com", "ok.com/private"}) {
				t.Errorf("excludeDomains = %q", got)
			}
			if gjson.GetBytes(rec.Body, "includeDomains").Exists() {
				t.Error("includeDomains sent")
			}
		}},
		{engines.NameFirecrawl, func(t *testing.T, rec enginestest.RecordedRequest) {
			if got := gjson.GetBytes(rec.Body, "query").String(); got != "news -site:bad.com" {
				t.Errorf("query = %q", got)
			}
		}},
		{engines.NameParallel, func(t *testing.T, rec enginestest.RecordedRequest) {
			if got := jsonStrings(rec.Body, "advanced_settings.source_policy.exclude_domains"); !reflect.DeepEqual(got, []string{"bad.com"}) {
				t.Errorf("exclude_domains = %q", got)
			}
		}},
		{engines.NameSearXNG, func(t *testing.T, rec enginestest.RecordedRequest) {
			v, _ := url.ParseQuery(rec.RawQuery)
			if got := v.Get("q"); got != "news -site:bad.com" {
				t.Errorf("q = %q", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.engine, func(t *testing.T) {
			s := startDouble(t)
			eng, _ := engines.New(tc.engine, engines.Config{BaseURL: s.URL})
			if _, err := eng.Search(context.Background(), q); err != nil {
				t.Fatal(err)
			}
			tc.check(t, lastRequest(t, s))
		})
	}
}

func TestNoFiltersNoKey(t *testing.T) {
	for _, ec := range allEngines {
		t.Run(ec.name, func(t *testing.T) {
			s := startDouble(t)
			if _, err := ec.new(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "plain"}); err != nil {
				t.Fatal(err)
			}
			rec := lastRequest(t, s)
			for _, h := range []string{"Authorization", "x-api-key"} {
				if v := rec.Header.Get(h); v != "" {
					t.Errorf("%s sent without a key: %q", h, v)
				}
			}
			for _, f := range []string{"includeDomains", "excludeDomains", "advanced_settings.source_policy"} {
				if gjson.GetBytes(rec.Body, f).Exists() {
					t.Errorf("%s sent without filters", f)
				}
			}
			if rec.Query != "plain" || len(rec.IncludeDomains)+len(rec.ExcludeDomains) != 0 {
				t.Errorf("double decoded %q %q %q", rec.Query, rec.IncludeDomains, rec.ExcludeDomains)
			}
		})
	}
}

func TestErrorStatus(t *testing.T) {
	statuses := []int{http.StatusBadRequest, http.StatusPaymentRequired, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable}
	for _, ec := range allEngines {
		for _, status := range statuses {
			t.Run(ec.name+"/"+http.StatusText(status), func(t *testing.T) {
				s := startDouble(t)
				s.ForceStatus(ec.name, status)
				res, err := ec.new(engines.Config{BaseURL: s.URL, APIKey: testKey}).Search(context.Background(), engines.Query{Text: "q"})
				if err == nil {
					t.Fatalf("no error, results %+v", res)
				}
				var e *engines.Error
				if !errors.As(err, &e) {
					t.Fatalf("error %T %v is not *engines.Error", err, err)
				}
				if e.Engine != ec.name || e.StatusCode != status {
					t.Errorf("got engine %q status %d", e.Engine, e.StatusCode)
				}
				msg := err.Error()
				if !strings.Contains(msg, ec.name) || !strings.Contains(msg, strconv.Itoa(status)) || !strings.Contains(msg, "forced error") {
					t.Errorf("message %q lacks engine, status or upstream text", msg)
				}
				if strings.Contains(msg, testKey) {
					t.Errorf("message leaks the key: %q", msg)
				}
				if e.Timeout() {
					t.Error("Timeout() true for a status error")
				}
			})
		}
	}
	t.Run("forced status for another engine does not apply", func(t *testing.T) {
		s := startDouble(t)
		s.ForceStatus(engines.NameExa, 500)
		if _, err := engines.NewParallel(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "q"}); err != nil {
			t.Fatal(err)
		}
		s.ForceStatus(engines.NameExa, 0)
		if _, err := engines.NewExa(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "q"}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWrongKey(t *testing.T) {
	for _, ec := range allEngines {
		t.Run(ec.name, func(t *testing.T) {
			s := startDouble(t)
			s.RequireAPIKey("right-key")
			_, err := ec.new(engines.Config{BaseURL: s.URL, APIKey: "wrong-key-value"}).Search(context.Background(), engines.Query{Text: "q"})
			var e *engines.Error
			if !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized {
				t.Fatalf("got %v, want a 401 *engines.Error", err)
			}
			if strings.Contains(err.Error(), "wrong-key-value") {
				t.Errorf("message leaks the key: %q", err)
			}
		})
	}
}

func TestKeyEchoRedacted(t *testing.T) {
	// An upstream that echoes the key in its error body.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-api-key")
		if key == "" {
			key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid key ` + key + `"}`))
	}))
	defer echo.Close()
	for _, ec := range allEngines {
		t.Run(ec.name, func(t *testing.T) {
			_, err := ec.new(engines.Config{BaseURL: echo.URL, APIKey: testKey}).Search(context.Background(), engines.Query{Text: "q"})
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("message leaks the key: %q", err)
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("message %q lost the upstream text", err)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	for _, ec := range allEngines {
		t.Run(ec.name+"/config timeout", func(t *testing.T) {
			s := startDouble(t)
			s.SetDelay(5 * time.Second)
			start := time.Now()
			_, err := ec.new(engines.Config{BaseURL: s.URL, Timeout: 50 * time.Millisecond}).Search(context.Background(), engines.Query{Text: "q"})
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			var e *engines.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *engines.Error", err)
			}
			if !e.Timeout() || !errors.Is(err, context.DeadlineExceeded) || e.StatusCode != 0 || e.Engine != ec.name {
				t.Errorf("got %#v (%v), want a timeout", e, err)
			}
		})
		t.Run(ec.name+"/context deadline", func(t *testing.T) {
			s := startDouble(t)
			s.SetDelay(5 * time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, err := ec.new(engines.Config{BaseURL: s.URL}).Search(ctx, engines.Query{Text: "q"})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want deadline exceeded", err)
			}
		})
		t.Run(ec.name+"/context canceled", func(t *testing.T) {
			s := startDouble(t)
			s.SetDelay(5 * time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(30*time.Millisecond, cancel)
			_, err := ec.new(engines.Config{BaseURL: s.URL}).Search(ctx, engines.Query{Text: "q"})
			var e *engines.Error
			if !errors.Is(err, context.Canceled) || !errors.As(err, &e) || e.Timeout() {
				t.Errorf("got %v, want canceled", err)
			}
		})
	}
}

func TestBadResponses(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"not json", 200, "<html>oops</html>"},
		{"html error page", 502, "<html><body>Bad Gateway</body></html>"},
	}
	for _, tc := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		for _, ec := range allEngines {
			t.Run(tc.name+"/"+ec.name, func(t *testing.T) {
				_, err := ec.new(engines.Config{BaseURL: srv.URL}).Search(context.Background(), engines.Query{Text: "q"})
				var e *engines.Error
				if !errors.As(err, &e) {
					t.Fatalf("got %v, want *engines.Error", err)
				}
				if tc.status != 200 && e.StatusCode != tc.status {
					t.Errorf("status %d, want %d", e.StatusCode, tc.status)
				}
				if strings.Contains(err.Error(), "<html") {
					t.Errorf("message carries the HTML page: %q", err)
				}
			})
		}
		srv.Close()
	}
	t.Run("firecrawl success false", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"success":false,"error":"quota"}`))
		}))
		defer srv.Close()
		_, err := engines.NewFirecrawl(engines.Config{BaseURL: srv.URL}).Search(context.Background(), engines.Query{Text: "q"})
		if err == nil || !strings.Contains(err.Error(), "quota") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("firecrawl v1 shape", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"success":true,"data":[{"url":"https://a.com","markdown":"# A\nbody","metadata":{"title":"A"}}]}`))
		}))
		defer srv.Close()
		res, err := engines.NewFirecrawl(engines.Config{BaseURL: srv.URL}).Search(context.Background(), engines.Query{Text: "q"})
		if err != nil || len(res) != 1 || res[0].Title != "A" || res[0].Snippet != "# A\nbody" {
			t.Errorf("got %+v, %v", res, err)
		}
	})
}

func TestInvalidInput(t *testing.T) {
	s := startDouble(t)
	for _, ec := range allEngines {
		t.Run(ec.name+"/empty query", func(t *testing.T) {
			_, err := ec.new(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "  "})
			var e *engines.Error
			if !errors.As(err, &e) || e.Engine != ec.name {
				t.Errorf("got %v", err)
			}
		})
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d requests sent for invalid queries", n)
	}
	t.Run("searxng without base URL", func(t *testing.T) {
		_, err := engines.NewSearXNG(engines.Config{}).Search(context.Background(), engines.Query{Text: "q"})
		if err == nil || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("unknown engine", func(t *testing.T) {
		if _, err := engines.New("bing", engines.Config{}); err == nil {
			t.Error("no error")
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		_, err := engines.NewExa(engines.Config{BaseURL: dead.URL, APIKey: testKey}).Search(context.Background(), engines.Query{Text: "q"})
		var e *engines.Error
		if !errors.As(err, &e) || e.StatusCode != 0 || strings.Contains(err.Error(), testKey) {
			t.Errorf("got %v", err)
		}
	})
}

func TestBaseURLPrefixAndDefaults(t *testing.T) {
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		_, _ = w.Write([]byte(`{"results":[]}`))
	}))
	defer srv.Close()
	res, err := engines.NewSearXNG(engines.Config{BaseURL: srv.URL + "/searx/"}).Search(context.Background(), engines.Query{Text: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/searx/search" {
		t.Errorf("path %q", gotPath)
	}
	if res == nil || len(res) != 0 {
		t.Errorf("want empty non-nil results, got %#v", res)
	}

}

func TestSearXNGBasicAuth(t *testing.T) {
	s := startDouble(t)
	s.RequireAPIKey(testKey)
	_, err := engines.NewSearXNG(engines.Config{BaseURL: s.URL, Username: "gateway", APIKey: testKey}).Search(context.Background(), engines.Query{Text: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lastRequest(t, s).Header.Get("Authorization"), enginestest.BasicAuthHeader("gateway", testKey); got != want {
		t.Errorf("Authorization = %q, want %q", got, want)
	}
}

func TestParallelLimits(t *testing.T) {
	s := startDouble(t)
	long := strings.Repeat("word ", 1200)
	if _, err := engines.NewParallel(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: long, IncludeDomains: []string{"www.example.com", "*.gov"}}); err != nil {
		t.Fatal(err)
	}
	b := lastRequest(t, s).Body
	if n := len([]rune(gjson.GetBytes(b, "objective").String())); n != engines.ParallelObjectiveMaxChars {
		t.Errorf("objective %d chars", n)
	}
	if n := len([]rune(gjson.GetBytes(b, "search_queries.0").String())); n != engines.ParallelQueryMaxChars {
		t.Errorf("search query %d chars", n)
	}
	if got := jsonStrings(b, "advanced_settings.source_policy.include_domains"); !reflect.DeepEqual(got, []string{"example.com", ".gov"}) {
		t.Errorf("include_domains = %q", got)
	}
}

func TestTestServerBookkeeping(t *testing.T) {
	s := startDouble(t)
	resp, err := http.Get(s.URL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d", resp.StatusCode)
	}
	if rec := lastRequest(t, s); rec.Engine != "" || rec.Path != "/nope" {
		t.Errorf("recorded %+v", rec)
	}
	resp, err = http.Get(s.URL + "/search?q=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("SearXNG without format=json: status %d", resp.StatusCode)
	}
	s.RequireAPIKey("k")
	s.ForceStatus("", 500)
	s.SetDelay(time.Hour)
	s.Reset()
	if len(s.Requests()) != 0 {
		t.Error("Reset kept requests")
	}
	if _, err := engines.NewExa(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "q"}); err != nil {
		t.Errorf("after Reset: %v", err)
	}
	s.SetHosts([]string{"only.test"})
	res, err := engines.NewSearXNG(engines.Config{BaseURL: s.URL}).Search(context.Background(), engines.Query{Text: "q", MaxResults: 2})
	if err != nil || len(res) != 2 || !strings.HasPrefix(res[1].URL, "https://only.test/") {
		t.Errorf("SetHosts: %+v, %v", res, err)
	}
}

func TestConcurrentSearches(t *testing.T) {
	s := startDouble(t)
	engs := make([]engines.Engine, 0, len(allEngines))
	for _, ec := range allEngines {
		engs = append(engs, ec.new(engines.Config{BaseURL: s.URL, APIKey: testKey}))
	}
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		go func(e engines.Engine) {
			_, err := e.Search(context.Background(), engines.Query{Text: "concurrent", MaxResults: 2, IncludeDomains: []string{"*.example.com"}})
			errs <- err
		}(engs[i%len(engs)])
	}
	for i := 0; i < 40; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := len(s.Requests()); n != 40 {
		t.Errorf("%d requests recorded", n)
	}
}
