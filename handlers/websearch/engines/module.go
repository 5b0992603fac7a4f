package engines

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
)

// Namespace is the Caddy module namespace of the engines: engine X, as
// the web_search block's `engine X { ... }` and its JSON config's
// "engines": {"X": {...}} name it, is the guest module
// tollgate.search_engines.X.
const Namespace = "tollgate.search_engines"

// MaxResultsCap is the most results an engine's max_results may ask for.
const MaxResultsCap = 25

// Module is an engine as a Caddy guest module: its Settings (shared by
// every engine, with placeholders in BaseURL and APIKey left for the
// gateway to expand) and New, which builds the engine from them.
type Module interface {
	caddy.Module
	// Options are the module's settings.
	Options() *Settings
	// New builds the engine for cfg: the settings, expanded.
	New(cfg Config) (Engine, error)
}

// Settings are the options of an engine's block, the same for every
// engine.
type Settings struct {
	// BaseURL is the engine's API root; empty: the vendor's public one.
	BaseURL string `json:"base_url,omitempty"`
	// APIKey authenticates the gateway; placeholders are expanded at load.
	APIKey string `json:"api_key,omitempty"`
	// Username makes SearXNG requests use Basic auth with APIKey; other
	// engines take it and ignore it, as they always did.
	Username string `json:"username,omitempty"`
	// PricePerResult is charged per result when the model sets no
	// web_search price. Default 0.004.
	PricePerResult string `json:"price_per_result,omitempty"`
	// MaxResults lowers the 25 results upper bound for this engine.
	MaxResults int `json:"max_results,omitempty"`
	// Timeout bounds one search; default 20s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// Options implements Module.
func (s *Settings) Options() *Settings { return s }

// Validate checks what needs no placeholder expanded.
func (s *Settings) Validate() error {
	if s.MaxResults < 0 || s.MaxResults > MaxResultsCap {
		return fmt.Errorf("max_results: expected 1 to %d", MaxResultsCap)
	}
	if s.Timeout < 0 {
		return fmt.Errorf("timeout: must not be negative, got %v", time.Duration(s.Timeout))
	}
	return nil
}

// settingNames are the options of every engine's block.
var settingNames = []string{"base_url", "api_key", "username", "price_per_result", "max_results", "timeout"}

// UnmarshalEngine reads an engine module's Caddyfile, `<name> { option
// value ... }`, into s: an engine's UnmarshalCaddyfile.
func (s *Settings) UnmarshalEngine(d *caddyfile.Dispenser) error {
	d.Next() // the engine's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		var dst *string
		switch d.Val() {
		case "base_url":
			dst = &s.BaseURL
		case "api_key":
			dst = &s.APIKey
		case "username":
			dst = &s.Username
		case "price_per_result":
			dst = &s.PricePerResult
		case "max_results":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxResultsCap {
				return d.Errf("max_results: expected an integer from 1 to %d, got %q", MaxResultsCap, v)
			}
			s.MaxResults = n
			continue
		case "timeout":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("timeout: invalid duration %q", v)
			}
			s.Timeout = caddy.Duration(dur)
			continue
		default:
			return suggest.UnknownOption(d, "web_search engine", settingNames)
		}
		if !d.AllArgs(dst) {
			return d.ArgErr()
		}
	}
	return nil
}

// Names are the registered engines, sorted.
func Names() []string {
	var names []string
	for _, info := range caddy.GetModules(Namespace) {
		names = append(names, info.ID.Name())
	}
	sort.Strings(names)
	return names
}

// Registered is the module of engine name, or an error that lists the
// registered ones.
func Registered(name string) (caddy.ModuleInfo, error) {
	info, err := caddy.GetModule(Namespace + "." + name)
	if err != nil {
		return info, fmt.Errorf("engine %q: expected %s", name, Choices())
	}
	return info, nil
}

// Choices are the registered engines, as "a, b or c".
func Choices() string {
	names := Names()
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Load is engine name's module configured by raw (its settings), checked
// by its Validate: the form the gateway's config carries, loaded without
// a caddy.Context. The app loads it with ctx.LoadModule instead.
func Load(name string, raw json.RawMessage) (Module, error) {
	info, err := Registered(name)
	if err != nil {
		return nil, err
	}
	mod := info.New()
	m, ok := mod.(Module)
	if !ok {
		return nil, fmt.Errorf("engine %q: module %s is not an engine (%T)", name, info.ID, mod)
	}
	if len(raw) > 0 {
		if err := caddy.StrictUnmarshalJSON(raw, mod); err != nil {
			return nil, fmt.Errorf("engine %s: %v", name, err)
		}
	}
	if v, ok := mod.(caddy.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("engine %s: %v", name, err)
		}
	}
	return m, nil
}

// The built-in engines' modules.
func init() {
	caddy.RegisterModule(ExaModule{})
	caddy.RegisterModule(FirecrawlModule{})
	caddy.RegisterModule(ParallelModule{})
	caddy.RegisterModule(SearXNGModule{})
}
