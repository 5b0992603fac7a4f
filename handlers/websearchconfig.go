package handlers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
	"github.com/tollgate-dev/caddy-tollgate/handlers/websearch/engines"
)

// DefaultSearchPrice is the price of one search result when neither the
// model nor the engine sets one: 4 credits per 1,000 results.
const DefaultSearchPrice = "0.004"

// X search item prices, in credits: 5 per 1,000 posts, 10 per 1,000
// user profiles fetched.
const (
	XSearchPostPrice    = "0.005"
	XSearchProfilePrice = "0.01"
)

// WebSearchConfig is the operator's web search setup, the web_search block
// of the tollgate app.
type WebSearchConfig struct {
	// DefaultEngine serves requests that name no engine, for models whose
	// provider family has no native search. Empty: such requests get 400.
	DefaultEngine string `json:"default_engine,omitempty"`
	// NativePrice is the price per result of native searches when the
	// model sets no web_search price. Default 0.004.
	NativePrice string `json:"native_price,omitempty"`
	// Engines are the gateway-side engines, by name (exa, firecrawl,
	// parallel, searxng).
	Engines map[string]*SearchEngineConfig `json:"engines,omitempty"`
}

// SearchEngineConfig configures one gateway-side engine.
type SearchEngineConfig struct {
	// BaseURL is the engine's API root; empty: the vendor's public one
	// (required for searxng).
	BaseURL string `json:"base_url,omitempty"`
	// APIKey authenticates the gateway; placeholders are expanded at load.
	APIKey string `json:"api_key,omitempty"`
	// Username makes SearXNG requests use Basic auth with APIKey.
	Username string `json:"username,omitempty"`
	// PricePerResult is charged per result when the model sets no
	// web_search price. Default 0.004.
	PricePerResult string `json:"price_per_result,omitempty"`
	// MaxResults lowers the 25 results upper bound for this engine.
	MaxResults int `json:"max_results,omitempty"`
	// Timeout bounds one search; default 20s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// WebSearchSettings is the provisioned WebSearchConfig.
type WebSearchSettings struct {
	defaultEngine string
	nativePrice   billing.Price
	engines       map[string]searchEngine
	limits        websearch.Limits
}

type searchEngine struct {
	engine engines.Engine
	price  billing.Price
}

// WebSearchProvider is implemented by a Gateway that offers web search.
type WebSearchProvider interface {
	WebSearchSettings() *WebSearchSettings
}

// Build checks the config and builds the engines; repl expands
// placeholders in keys and URLs. A nil config gives settings with no
// gateway-side engine.
func (c *WebSearchConfig) Build(repl *caddy.Replacer, client *http.Client) (*WebSearchSettings, error) {
	s := &WebSearchSettings{engines: map[string]searchEngine{}}
	var err error
	if s.nativePrice, err = priceOr(nil, "", DefaultSearchPrice); err != nil {
		return nil, err
	}
	limits := map[string]int{}
	maps := websearch.DefaultLimits().MaxResultsByEngine
	for k, v := range maps {
		limits[k] = v
	}
	if c == nil {
		s.limits = websearch.Limits{MaxResultsByEngine: limits}
		return s, nil
	}
	if s.nativePrice, err = priceOr(repl, c.NativePrice, DefaultSearchPrice); err != nil {
		return nil, fmt.Errorf("web_search: native_price: %v", err)
	}
	for name, ec := range c.Engines {
		if !slices.Contains([]string{engines.NameExa, engines.NameFirecrawl, engines.NameParallel, engines.NameSearXNG}, name) {
			return nil, fmt.Errorf("web_search: engine %q: expected exa, firecrawl, parallel or searxng", name)
		}
		if ec == nil {
			ec = new(SearchEngineConfig)
		}
		base := strings.TrimSpace(repl.ReplaceAll(ec.BaseURL, ""))
		if name == engines.NameSearXNG && base == "" {
			return nil, fmt.Errorf("web_search: engine searxng: base_url is required")
		}
		if ec.MaxResults < 0 || ec.MaxResults > websearch.MaxMaxResults {
			return nil, fmt.Errorf("web_search: engine %s: max_results: expected 1 to %d", name, websearch.MaxMaxResults)
		}
		if ec.MaxResults > 0 {
			limits[name] = ec.MaxResults
		}
		price, err := priceOr(repl, ec.PricePerResult, DefaultSearchPrice)
		if err != nil {
			return nil, fmt.Errorf("web_search: engine %s: price_per_result: %v", name, err)
		}
		eng, err := engines.New(name, engines.Config{
			BaseURL:    base,
			APIKey:     strings.TrimSpace(repl.ReplaceAll(ec.APIKey, "")),
			Username:   ec.Username,
			Timeout:    time.Duration(ec.Timeout),
			HTTPClient: client,
		})
		if err != nil {
			return nil, fmt.Errorf("web_search: engine %s: %v", name, err)
		}
		s.engines[name] = searchEngine{engine: eng, price: price}
	}
	s.limits = websearch.Limits{MaxResultsByEngine: limits}
	if c.DefaultEngine != "" {
		if _, ok := s.engines[c.DefaultEngine]; !ok {
			return nil, fmt.Errorf("web_search: default_engine %q is not a configured engine", c.DefaultEngine)
		}
		s.defaultEngine = c.DefaultEngine
	}
	return s, nil
}

func priceOr(repl *caddy.Replacer, s, def string) (billing.Price, error) {
	if repl != nil {
		s = strings.TrimSpace(repl.ReplaceAll(s, ""))
	}
	if s == "" {
		s = def
	}
	p, err := billing.ParsePrice(s)
	if err != nil || p < 0 {
		return 0, fmt.Errorf("expected a non-negative decimal, got %q", s)
	}
	return p, nil
}

// searchFamily is the provider family of a model, from its id's vendor
// prefix: "openai", "anthropic" or "x" have a native web search; "" has
// none.
func searchFamily(model string) string {
	vendor, _, ok := strings.Cut(model, "/")
	if !ok {
		return ""
	}
	switch vendor {
	case "openai":
		return "openai"
	case "anthropic":
		return "anthropic"
	case "x-ai":
		return "x"
	}
	return ""
}
