// Package echo is an example third-party web search engine: a vendor
// whose API answers GET <base_url>/search?q=... with {"hits": [{"title",
// "link", "summary"}]}. It is one package and one registration (init); a
// gateway built with it (xcaddy build --with .../examples/engine-echo)
// takes
//
//	web_search {
//		engine echo {
//			base_url https://echo.example
//			api_key {env.ECHO_KEY}
//		}
//	}
package echo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
)

func init() { caddy.RegisterModule(Module{}) }

// Name is the engine's name: the module tollgate.search_engines.echo.
const Name = "echo"

// Module is the echo engine's module, with the settings every engine
// takes.
type Module struct{ engines.Settings }

// CaddyModule returns the Caddy module information.
func (Module) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: engines.Namespace + "." + Name, New: func() caddy.Module { return new(Module) }}
}

// UnmarshalCaddyfile reads `echo { base_url ...; api_key ...; ... }`.
func (m *Module) UnmarshalCaddyfile(d *caddyfile.Dispenser) error { return m.UnmarshalEngine(d) }

// Validate requires the base URL: echo has no public endpoint.
func (m *Module) Validate() error {
	if m.BaseURL == "" {
		return errors.New("base_url is required")
	}
	return m.Settings.Validate()
}

// New builds the engine.
func (m *Module) New(cfg engines.Config) (engines.Engine, error) {
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = engines.DefaultTimeout
	}
	return &Engine{base: strings.TrimRight(cfg.BaseURL, "/"), key: cfg.APIKey, client: client, timeout: timeout}, nil
}

// Engine searches an echo vendor.
type Engine struct {
	base, key string
	client    *http.Client
	timeout   time.Duration
}

// Name implements engines.Engine.
func (e *Engine) Name() string { return Name }

// Search implements engines.Engine.
func (e *Engine) Search(ctx context.Context, q engines.Query) ([]engines.Result, error) {
	if strings.TrimSpace(q.Text) == "" {
		return nil, &engines.Error{Engine: Name, Message: "empty query"}
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/search?q="+url.QueryEscape(q.Text), nil)
	if err != nil {
		return nil, &engines.Error{Engine: Name, Message: "bad base_url", Err: err}
	}
	req.Header.Set("X-Echo-Key", e.key)
	res, err := e.client.Do(req)
	if err != nil {
		return nil, &engines.Error{Engine: Name, Message: "request failed", Err: err}
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, &engines.Error{Engine: Name, Message: "reading the answer failed", Err: err}
	}
	if res.StatusCode/100 != 2 {
		return nil, &engines.Error{Engine: Name, StatusCode: res.StatusCode, Message: http.StatusText(res.StatusCode)}
	}
	var a struct {
		Hits []struct{ Title, Link, Summary string }
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, &engines.Error{Engine: Name, Message: fmt.Sprintf("undecodable answer (%d bytes)", len(body)), Err: err}
	}
	var out []engines.Result
	for _, h := range a.Hits {
		out = append(out, engines.Result{Title: h.Title, URL: h.Link, Snippet: h.Summary})
	}
	out = engines.FilterResults(out, q.IncludeDomains, q.ExcludeDomains)
	max := q.MaxResults
	if max <= 0 {
		max = engines.DefaultMaxResults
	}
	return out[:min(len(out), max)], nil
}

var (
	_ engines.Module        = (*Module)(nil)
	_ caddy.Validator       = (*Module)(nil)
	_ caddyfile.Unmarshaler = (*Module)(nil)
)
