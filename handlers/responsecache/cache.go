package responsecache

import (
	"context"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/respcache"
)

// Cache is the response cache of one tollgate handler: the operator's
// settings and this node's table.
type Cache struct {
	cfg    Config
	price  money.Amount
	all    bool
	models []string
	// memory is this node's table: the cache's on one node, and on
	// Redis when no sealing key lets entries be shared at rest.
	memory *respcache.Memory
	// sealer seals the entries (the operator's byok_encryption_key); nil:
	// none, and entries stay in this node's memory.
	sealer *storage.Sealer
	logger *zap.Logger
}

// New is the cache cfg configures (nil: off, and so is the result),
// sealing its entries with sealer (nil: none is configured).
func New(cfg *Config, sealer *storage.Sealer, logger *zap.Logger) (*Cache, error) {
	if cfg == nil || len(cfg.Models) == 0 {
		return nil, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Cache{cfg: cfg.withDefaults(), sealer: sealer, logger: logger}
	c.price, _ = c.cfg.price()
	c.all = slices.Contains(c.cfg.Models, "*")
	c.models = c.cfg.Models
	c.memory = respcache.NewMemory(c.cfg.MaxBytes, observer{})
	if logger != nil && sealer == nil {
		logger.Info("response cache entries are kept in each node's memory: a byok_encryption_key seals them for a shared store")
	}
	return c, nil
}

// caches reports whether model's answers are cached.
func (c *Cache) caches(model string) bool {
	return c.all || slices.Contains(c.models, model)
}

// table is where entries are kept for store: the replicas' shared table
// when the store has one and entries can be sealed, else this node's
// memory.
func (c *Cache) table(store *storage.Store) respcache.Table {
	if store != nil && c.sealer != nil {
		if t, ok := store.SharedResponseCache(); ok {
			return t
		}
	}
	return c.memory
}

// PurgeResponses removes the account's entries of model ("" every model,
// and every workspace's) from store's table and this node's memory, and
// counts them.
func (c *Cache) PurgeResponses(ctx context.Context, store *storage.Store, account, model string) (int, error) {
	n, _ := c.memory.Purge(ctx, account, model)
	if t := c.table(store); t != respcache.Table(c.memory) {
		m, err := t.Purge(ctx, account, model)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// HeaderXCache is the answer's header that says whether the cache
// answered: HIT, or MISS when it could have and did not.
const HeaderXCache = "X-Cache"

// header values of X-Cache, shared so that setting them allocates nothing.
var (
	hitValue  = []string{"HIT"}
	missValue = []string{"MISS"}
)

func setXCache(h http.Header, hit bool) {
	if hit {
		h[HeaderXCache] = hitValue
	} else {
		h[HeaderXCache] = missValue
	}
}

// now is the cache's clock.
var now = time.Now
