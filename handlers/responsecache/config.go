// Package responsecache is the gateway's response cache: an answer a
// provider gave is kept, sealed, under a key that names its tenant, its
// model and endpoint and a hash of the request, and an identical request
// of the same tenant is answered from it without a provider call,
// admitted, counted and charged (the operator's cache price) like any
// other. The operator turns it on per model in the tollgate block's
// response_cache; a client opts out per request with Cache-Control.
package responsecache

import (
	"fmt"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Defaults of a response_cache block that leaves them out.
const (
	DefaultTTL           = time.Hour
	DefaultMaxEntryBytes = 1 << 20
	DefaultMaxBytes      = 256 << 20
)

// Scopes an entry may belong to.
const (
	ScopeAccount   = "account"
	ScopeWorkspace = "workspace"
)

// Config is the operator's response cache, the tollgate block's
// response_cache.
type Config struct {
	// Models are the catalog's model ids whose answers are cached; "*"
	// is every model.
	Models []string `json:"models,omitempty"`
	// TTL is how long an entry is kept. Default DefaultTTL.
	TTL caddy.Duration `json:"ttl,omitempty"`
	// MaxEntryBytes bounds one answer that is kept: a larger one is not.
	// Default DefaultMaxEntryBytes.
	MaxEntryBytes int64 `json:"max_entry_bytes,omitempty"`
	// MaxBytes bounds the entries one node keeps in memory, the least
	// recently used evicted first. Default DefaultMaxBytes. On Redis,
	// Redis's own maxmemory policy bounds them.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Unseeded caches requests that ask for sampling (a temperature
	// above 0) without a seed, whose answers are not meant to repeat.
	Unseeded bool `json:"unseeded,omitempty"`
	// Price is what a hit is charged, in credits. Default 0.
	Price string `json:"price,omitempty"`
	// Scope is whose requests share entries: every key of an account
	// ("account", the default) or of a workspace ("workspace").
	Scope string `json:"scope,omitempty"`
}

// UnmarshalCaddyfile reads the block, d at its name:
//
//	response_cache {
//		models          <model id>... | *
//		ttl             <duration>
//		max_entry_bytes <size>
//		max_bytes       <size>
//		unseeded
//		price           <credits>
//		scope           account|workspace
//	}
func (c *Config) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		args := d.RemainingArgs()
		var err error
		switch name {
		case "models":
			if len(args) == 0 {
				return d.Errf("response_cache: models: expected one or more model ids, or *")
			}
			c.Models = append(c.Models, args...)
		case "ttl":
			var v time.Duration
			if len(args) == 1 {
				v, err = caddy.ParseDuration(args[0])
			}
			if len(args) != 1 || err != nil || v <= 0 {
				return d.Errf("response_cache: ttl: expected a positive duration")
			}
			c.TTL = caddy.Duration(v)
		case "max_entry_bytes", "max_bytes":
			var v uint64
			if len(args) == 1 {
				v, err = humanize.ParseBytes(args[0])
			}
			if len(args) != 1 || err != nil || v == 0 || v > 1<<62 {
				return d.Errf("response_cache: %s: expected a positive size (1MiB, 500000)", name)
			}
			if name == "max_bytes" {
				c.MaxBytes = int64(v)
			} else {
				c.MaxEntryBytes = int64(v)
			}
		case "unseeded":
			if len(args) != 0 {
				return d.ArgErr()
			}
			c.Unseeded = true
		case "price":
			if len(args) != 1 {
				return d.Errf("response_cache: price: expected an amount of credits")
			}
			c.Price = args[0]
		case "scope":
			if len(args) != 1 {
				return d.Errf("response_cache: scope: expected %s or %s", ScopeAccount, ScopeWorkspace)
			}
			c.Scope = args[0]
		default:
			return d.Errf("response_cache: unknown option %q (models, ttl, max_entry_bytes, max_bytes, unseeded, price, scope)", name)
		}
		if err := c.Validate(); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// Validate checks the options; a bad value fails the config load with
// the option named.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if _, err := c.price(); err != nil {
		return err
	}
	switch c.Scope {
	case "", ScopeAccount, ScopeWorkspace:
	default:
		return fmt.Errorf("response_cache: scope: expected %s or %s, got %q", ScopeAccount, ScopeWorkspace, c.Scope)
	}
	if c.TTL < 0 || c.MaxEntryBytes < 0 || c.MaxBytes < 0 {
		return fmt.Errorf("response_cache: ttl, max_entry_bytes and max_bytes must be positive")
	}
	if slices.Contains(c.Models, "") {
		return fmt.Errorf("response_cache: models: an empty model id")
	}
	return nil
}

// price is the price of a hit.
func (c *Config) price() (money.Amount, error) {
	if c.Price == "" {
		return 0, nil
	}
	a, err := money.ParseAmount(c.Price)
	if err != nil || a < 0 {
		return 0, fmt.Errorf("response_cache: price: expected a non-negative amount of credits, got %q", c.Price)
	}
	return a, nil
}

// withDefaults is c with its defaults filled in.
func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = caddy.Duration(DefaultTTL)
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Scope == "" {
		c.Scope = ScopeAccount
	}
	return c
}
