// Package engines implements the gateway-side web search engines: the
// gateway calls an engine's HTTP search API itself and gets back a list of
// results to inject into the model request.
//
// Every engine follows its vendor's public HTTP API (see the doc comment of
// each engine type for the page its request shape follows). The base URL of
// every engine is configurable so that a self-hosted instance, a proxy, or the
// offline stand-ins of package searchapis can take the vendor's place.
//
// All engines behave alike around the vendor call:
//   - Query.MaxResults <= 0 means DefaultMaxResults; results are truncated to
//     it, whatever the engine returned.
//   - Domain filters are sent upstream where the API supports them, and the
//     results are filtered client-side too (see MatchDomain for the pattern
//     syntax), so a vendor that ignores or broadens a filter cannot leak
//     results.
//   - A non-2xx answer, a transport failure or an undecodable body is an
//     *Error naming the engine (and the HTTP status when there was one); its
//     text never contains the API key.
//   - Config.Timeout (DefaultTimeout when zero) bounds every call, on top of
//     the caller's context.
package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/jsoncheck"
)

// The built-in engines' names, as used by New and returned by
// Engine.Name; each is a guest module (Module) of namespace
// tollgate.search_engines.
const (
	NameExa       = "exa"
	NameFirecrawl = "firecrawl"
	NameParallel  = "parallel"
	NameSearXNG   = "searxng"
)

const (
	// DefaultMaxResults is used when Query.MaxResults is zero or negative.
	DefaultMaxResults = 5
	// DefaultTimeout bounds one search call when Config.Timeout is zero.
	DefaultTimeout = 20 * time.Second

	maxResponseBytes = 8 << 20
	maxErrorMessage  = 200
	userAgent        = "caddy-tollgate-websearch/1"
)

// Query is one web search.
type Query struct {
	// Text is the search text. Required.
	Text string
	// MaxResults caps the number of results; <= 0 means DefaultMaxResults.
	MaxResults int
	// IncludeDomains restricts results to these domains (see MatchDomain).
	IncludeDomains []string
	// ExcludeDomains drops results from these domains (see MatchDomain).
	ExcludeDomains []string
}

// Result is one search hit.
type Result struct {
	Title string
	URL   string
	// Snippet is the engine's excerpt of the page (highlights, description,
	// excerpts or content, depending on the engine).
	Snippet string
	// PublishedDate is the date as the engine reported it, if any.
	PublishedDate string
}

// Engine is a web search backend.
type Engine interface {
	// Name is the engine name (NameExa, ...), used in errors and logs.
	Name() string
	// Search runs q and returns at most q.MaxResults results that satisfy
	// q's domain filters.
	Search(ctx context.Context, q Query) ([]Result, error)
}

// Config configures an engine.
type Config struct {
	// BaseURL is the API root, without the endpoint path (e.g.
	// "https://api.exa.ai"); it may carry a path prefix. Empty means the
	// vendor's public endpoint; SearXNG has none and requires it.
	BaseURL string
	// APIKey is sent the way the vendor expects (see each engine).
	APIKey string
	// Username, for SearXNG only: when set, requests carry HTTP Basic auth
	// with Username and APIKey as password instead of a bearer token.
	Username string
	// Timeout bounds one search call; zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient is the client to use; nil means a private default client.
	HTTPClient *http.Client
}

// New returns the engine called name (NameExa, NameFirecrawl, NameParallel,
// NameSearXNG, or another registered module's) for cfg.
func New(name string, cfg Config) (Engine, error) {
	info, err := Registered(strings.ToLower(name))
	if err != nil {
		return nil, fmt.Errorf("websearch: %v", err)
	}
	m, ok := info.New().(Module)
	if !ok {
		return nil, fmt.Errorf("websearch: module %s is not an engine", info.ID)
	}
	return m.New(cfg)
}

// Error is the error of a failed search.
type Error struct {
	// Engine is the engine name.
	Engine string
	// StatusCode is the HTTP status the engine answered, or 0 when the
	// failure is not an HTTP status (transport error, timeout, bad body).
	StatusCode int
	// Message is a short description, free of the API key.
	Message string
	// Err is the underlying cause, if any.
	Err error
}

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("websearch %s: upstream status %d: %s", e.Engine, e.StatusCode, e.Message)
	}
	return fmt.Sprintf("websearch %s: %s", e.Engine, e.Message)
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports whether the search failed because a deadline passed.
func (e *Error) Timeout() bool {
	if errors.Is(e.Err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}

var defaultHTTPClient = &http.Client{}

// client holds what every engine needs to call its API.
type client struct {
	name    string
	baseURL string
	apiKey  string
	timeout time.Duration
	hc      *http.Client
}

func newClient(name, defaultBaseURL string, cfg Config) client {
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = defaultBaseURL
	}
	c := client{
		name:    name,
		baseURL: strings.TrimRight(base, "/"),
		apiKey:  cfg.APIKey,
		timeout: cfg.Timeout,
		hc:      cfg.HTTPClient,
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.hc == nil {
		c.hc = defaultHTTPClient
	}
	return c
}

func (c *client) errorf(status int, cause error, format string, args ...any) *Error {
	return &Error{Engine: c.name, StatusCode: status, Message: c.redact(fmt.Sprintf(format, args...)), Err: cause}
}

// redact removes the API key from s.
func (c *client) redact(s string) string {
	if c.apiKey != "" {
		s = strings.ReplaceAll(s, c.apiKey, "[redacted]")
	}
	return s
}

// do sends one request and returns the body of a 2xx answer. body, when not
// nil, is sent as JSON. auth sets the credentials on the request.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body any, auth func(*http.Request)) ([]byte, error) {
	if c.baseURL == "" {
		return nil, c.errorf(0, nil, "no base URL configured")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	target := c.baseURL + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, c.errorf(0, err, "encode request: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, c.errorf(0, err, "invalid base URL")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != nil {
		auth(req)
	}

	resp, err := c.hc.Do(req)
	if err != nil {
		cause := err
		var ue *url.Error
		if errors.As(err, &ue) {
			cause = ue.Err
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, c.errorf(0, err, "request timed out: %v", cause)
		}
		return nil, c.errorf(0, err, "request failed: %v", cause)
	}
	defer resp.Body.Close()

	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if resp.StatusCode/100 != 2 {
			return nil, c.errorf(resp.StatusCode, err, "%s", http.StatusText(resp.StatusCode))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, c.errorf(0, err, "reading response timed out")
		}
		return nil, c.errorf(0, err, "read response: %v", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.errorf(resp.StatusCode, nil, "%s", errorMessage(resp.StatusCode, data))
	}
	if len(data) > maxResponseBytes {
		return nil, c.errorf(0, nil, "response larger than %d bytes", maxResponseBytes)
	}
	if !jsoncheck.Valid(data) {
		return nil, c.errorf(0, nil, "response is not valid JSON")
	}
	return data, nil
}

// errorMessage extracts a short message from an error body, whatever the
// vendor's error shape ({"error":"..."}, {"error":{"message":"..."}},
// {"message":"..."}, {"detail":"..."}, plain text).
func errorMessage(status int, body []byte) string {
	msg := ""
	if jsoncheck.Valid(body) {
		for _, path := range []string{"error.message", "error", "message", "detail", "error.detail"} {
			if r := gjson.GetBytes(body, path); r.Type == gjson.String && strings.TrimSpace(r.Str) != "" {
				msg = r.Str
				break
			}
		}
	} else if utf8.Valid(body) && !bytes.Contains(bytes.ToLower(body[:min(len(body), 512)]), []byte("<html")) {
		msg = string(body)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if msg == "" {
		msg = http.StatusText(status)
	}
	return truncateRunes(msg, maxErrorMessage)
}

// normalizeQuery validates q and applies defaults.
func (c *client) normalizeQuery(q Query) (Query, error) {
	q.Text = strings.TrimSpace(q.Text)
	if q.Text == "" {
		return q, c.errorf(0, nil, "empty query")
	}
	if q.MaxResults <= 0 {
		q.MaxResults = DefaultMaxResults
	}
	q.IncludeDomains = normalizePatterns(q.IncludeDomains)
	q.ExcludeDomains = normalizePatterns(q.ExcludeDomains)
	return q, nil
}

// finish applies the client-side domain filter and the result cap.
func finish(results []Result, q Query) []Result {
	results = FilterResults(results, q.IncludeDomains, q.ExcludeDomains)
	if len(results) > q.MaxResults {
		results = results[:q.MaxResults]
	}
	if results == nil {
		results = []Result{}
	}
	return results
}

// truncateRunes cuts s to at most n runes.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// setHeaderKey returns an auth func setting header to the API key, if any.
func (c *client) setHeaderKey(header string) func(*http.Request) {
	return func(r *http.Request) {
		if c.apiKey != "" {
			r.Header.Set(header, c.apiKey)
		}
	}
}

// bearer returns an auth func sending the API key as a bearer token, if any.
func (c *client) bearer() func(*http.Request) {
	return func(r *http.Request) {
		if c.apiKey != "" {
			r.Header.Set("Authorization", "Bearer "+c.apiKey)
		}
	}
}
