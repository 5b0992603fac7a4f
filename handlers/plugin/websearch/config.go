package websearch

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/billing"
	search "github.com/tollgate-dev/caddy-tollgate/handlers/websearch"
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

// Config is the operator's web search setup, the web_search block
// of the tollgate app.
type Config struct {
	// DefaultEngine serves requests that name no engine, for models whose
	// provider family has no native search. Empty: such requests get 400.
	DefaultEngine string `json:"default_engine,omitempty"`
	// NativePrice is the price per result of native searches when the
	// model sets no web_search price. Default 0.004.
	NativePrice string `json:"native_price,omitempty"`
	// EnginesRaw are the gateway-side engines, by name: modules of
	// namespace tollgate.search_engines (exa, firecrawl, parallel,
	// searxng, or another registered one), each configured by its
	// engines.Settings.
	EnginesRaw caddy.ModuleMap `json:"engines,omitempty" caddy:"namespace=tollgate.search_engines"`

	// engines are EnginesRaw as Load loaded them.
	engines map[string]engines.Module
}

// EngineConfig configures one gateway-side engine: the settings
// every engine module takes.
type EngineConfig = engines.Settings

// Load loads the engine modules with ctx; a name no module registers is
// refused with the registered ones, settings their module refuses with
// the engine's name.
func (c *Config) Load(ctx caddy.Context) error {
	if c == nil || len(c.EnginesRaw) == 0 {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(c.EnginesRaw)) {
		// Its errors name the engine and option, not the module.
		if _, err := engines.Load(name, c.EnginesRaw[name]); err != nil {
			return fmt.Errorf("web_search: %v", err)
		}
	}
	mods, err := ctx.LoadModule(c, "EnginesRaw")
	if err != nil {
		return fmt.Errorf("web_search: %v", err)
	}
	c.engines = map[string]engines.Module{}
	for name, mod := range mods.(map[string]any) {
		m, ok := mod.(engines.Module)
		if !ok {
			return fmt.Errorf("web_search: engine %s: module %T is not an engine", name, mod)
		}
		c.engines[name] = m
	}
	return nil
}

// modules are the engine modules: those Load loaded, else EnginesRaw's,
// loaded without a context (engines.Load).
func (c *Config) modules() (map[string]engines.Module, error) {
	if c.engines != nil {
		return c.engines, nil
	}
	mods := make(map[string]engines.Module, len(c.EnginesRaw))
	for _, name := range slices.Sorted(maps.Keys(c.EnginesRaw)) {
		m, err := engines.Load(name, c.EnginesRaw[name])
		if err != nil {
			return nil, fmt.Errorf("web_search: %v", err)
		}
		mods[name] = m
	}
	return mods, nil
}

// Settings is the provisioned Config.
type Settings struct {
	defaultEngine string
	nativePrice   billing.Price
	engines       map[string]searchEngine
	limits        search.Limits
}

type searchEngine struct {
	engine engines.Engine
	price  billing.Price
}

// Provider is implemented by a Gateway that offers web search.
type Provider interface {
	WebSearchSettings() *Settings
}

// Build checks the config and builds the engines; repl expands
// placeholders in keys and URLs. A nil config gives settings with no
// gateway-side engine.
func (c *Config) Build(repl *caddy.Replacer, client *http.Client) (*Settings, error) {
	s := &Settings{engines: map[string]searchEngine{}}
	var err error
	if s.nativePrice, err = priceOr(nil, "", DefaultSearchPrice); err != nil {
		return nil, err
	}
	limits := map[string]int{}
	maps.Copy(limits, search.DefaultLimits().MaxResultsByEngine)
	if c == nil {
		s.limits = search.Limits{MaxResultsByEngine: limits}
		return s, nil
	}
	if s.nativePrice, err = priceOr(repl, c.NativePrice, DefaultSearchPrice); err != nil {
		return nil, fmt.Errorf("web_search: native_price: %v", err)
	}
	mods, err := c.modules()
	if err != nil {
		return nil, err
	}
	for name, mod := range mods {
		ec := mod.Options()
		base := strings.TrimSpace(repl.ReplaceAll(ec.BaseURL, ""))
		if name == engines.NameSearXNG && base == "" {
			return nil, fmt.Errorf("web_search: engine searxng: base_url is required")
		}
		if ec.MaxResults < 0 || ec.MaxResults > search.MaxMaxResults {
			return nil, fmt.Errorf("web_search: engine %s: max_results: expected 1 to %d", name, search.MaxMaxResults)
		}
		if ec.MaxResults > 0 {
			limits[name] = ec.MaxResults
		}
		price, err := priceOr(repl, ec.PricePerResult, DefaultSearchPrice)
		if err != nil {
			return nil, fmt.Errorf("web_search: engine %s: price_per_result: %v", name, err)
		}
		eng, err := mod.New(engines.Config{
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
	s.limits = search.Limits{MaxResultsByEngine: limits}
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
