package caddymodule

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"

	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
)

// StorageConfig selects the database behind the gateway. Unset: the
// embedded Badger database under data_dir.
type StorageConfig struct {
	// Redis shares one Redis (or Valkey) server between several gateway
	// replicas: the same keys, counters and caps on every replica.
	Redis *RedisConfig `json:"redis,omitempty"`
}

// RedisConfig is `storage redis { ... }`. Every string accepts
// placeholders such as {env.REDIS_PASSWORD}, expanded when the config
// loads.
type RedisConfig struct {
	// Address is host:port of one server.
	Address string `json:"address,omitempty"`
	// Cluster are host:port of nodes of a Redis Cluster (or Valkey
	// Cluster), instead of Address: one or more, the client learns the
	// others. Every slot must be served.
	Cluster []string `json:"cluster,omitempty"`
	// Username is the ACL user; empty: the default user.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	DB       int    `json:"db,omitempty"`
	// TLS connects over TLS, verifying the server's certificate.
	TLS bool `json:"tls,omitempty"`
	// KeyPrefix starts every key this gateway writes, so that several
	// gateways can share one server. Default: "tollgate:".
	KeyPrefix string `json:"key_prefix,omitempty"`
	// HoldLease is how long a running request's holds outlive a replica
	// that died. Default: 30s.
	HoldLease caddy.Duration `json:"hold_lease,omitempty"`
}

// parseStorage parses `storage redis { ... }`.
func parseStorage(d *caddyfile.Dispenser) (*StorageConfig, error) {
	if !d.NextArg() {
		return nil, d.Err("storage: expected a backend (redis)")
	}
	if d.Val() != "redis" {
		return nil, d.Errf("storage: unknown backend %q (expected redis)", d.Val())
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	r := new(RedisConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "address", "username", "password", "key_prefix":
			var v string
			if !d.AllArgs(&v) {
				return nil, d.Errf("storage redis: %s: expected one value", opt)
			}
			switch opt {
			case "address":
				r.Address = v
			case "username":
				r.Username = v
			case "password":
				r.Password = v
			case "key_prefix":
				r.KeyPrefix = v
			}
		case "cluster":
			addrs := d.RemainingArgs()
			if len(addrs) == 0 {
				return nil, d.Err("storage redis: cluster: expected one or more host:port")
			}
			r.Cluster = append(r.Cluster, addrs...)
		case "db":
			var v string
			if !d.AllArgs(&v) {
				return nil, d.Err("storage redis: db: expected one number")
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, d.Errf("storage redis: db: expected a non-negative integer, got %q", v)
			}
			r.DB = n
		case "tls":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			r.TLS = true
		case "hold_lease":
			dur, err := durationArg(d)
			if err != nil {
				return nil, err
			}
			r.HoldLease = dur
		default:
			return nil, suggest.UnknownOption(d, "storage redis", redisOptions)
		}
	}
	if r.Address != "" && len(r.Cluster) > 0 {
		return nil, d.Err("storage redis: address and cluster: set one (address for one server, cluster for a Redis Cluster)")
	}
	return &StorageConfig{Redis: r}, nil
}

// redisOptions are the options of `storage redis { ... }`.
var redisOptions = []string{"address", "cluster", "username", "password", "key_prefix", "db", "tls", "hold_lease"}

// validate refuses what the connection could not use; each error names
// its field. Placeholders are checked once expanded (options).
func (c *StorageConfig) validate() error {
	if c == nil || c.Redis == nil {
		return nil
	}
	r := c.Redis
	if r.DB < 0 {
		return fmt.Errorf("storage: redis: db: expected a non-negative integer, got %d", r.DB)
	}
	if r.HoldLease < 0 || (r.HoldLease > 0 && time.Duration(r.HoldLease) < 300*time.Millisecond) {
		return fmt.Errorf("storage: redis: hold_lease: expected at least 300ms, got %v", time.Duration(r.HoldLease))
	}
	if len(r.Cluster) > 0 {
		return r.validateCluster(r.Cluster)
	}
	if !strings.Contains(r.Address, "{") {
		if _, err := redisAddress(r.Address); err != nil {
			return err
		}
	}
	return nil
}

// validateCluster refuses a cluster beside standalone settings, and a
// node that is not host:port. Whether the nodes answer and serve every
// slot is checked when the store opens, at load.
func (r *RedisConfig) validateCluster(addrs []string) error {
	if r.Address != "" {
		return fmt.Errorf("storage: redis: address and cluster: set one (address for one server, cluster for a Redis Cluster)")
	}
	if r.DB != 0 {
		return fmt.Errorf("storage: redis: db: a Redis Cluster has only database 0, got %d", r.DB)
	}
	for _, a := range addrs {
		if strings.Contains(a, "{") {
			continue
		}
		if _, err := redisAddress(a); err != nil {
			return fmt.Errorf("storage: redis: cluster: %s", strings.TrimPrefix(err.Error(), "storage: redis: address: "))
		}
	}
	return nil
}

// redisAddress checks a host:port.
func redisAddress(addr string) (string, error) {
	if addr == "" {
		return "", fmt.Errorf("storage: redis: address: required (host:port)")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", fmt.Errorf("storage: redis: address: expected host:port, got %q", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("storage: redis: address: port must be 1-65535, got %q", port)
	}
	return addr, nil
}

// options expands the placeholders and returns the backend's options.
func (c *RedisConfig) options(repl *caddy.Replacer) (*kernel.RedisOptions, error) {
	o := &kernel.RedisOptions{
		Address:   strings.TrimSpace(repl.ReplaceAll(c.Address, "")),
		Username:  repl.ReplaceAll(c.Username, ""),
		Password:  repl.ReplaceAll(c.Password, ""),
		DB:        c.DB,
		TLS:       c.TLS,
		KeyPrefix: repl.ReplaceAll(c.KeyPrefix, ""),
		HoldLease: time.Duration(c.HoldLease),
	}
	for _, a := range c.Cluster {
		o.Cluster = append(o.Cluster, strings.TrimSpace(repl.ReplaceAll(a, "")))
	}
	if len(o.Cluster) > 0 {
		if err := c.validateCluster(o.Cluster); err != nil {
			return nil, err
		}
	} else if _, err := redisAddress(o.Address); err != nil {
		return nil, err
	}
	if c.KeyPrefix == "" {
		o.KeyPrefix = "tollgate:"
	}
	return o, nil
}

// poolKey names the shared store in the usage pool: one per server,
// database and prefix, as one Badger store per directory.
func redisPoolKey(o *kernel.RedisOptions) string {
	if len(o.Cluster) > 0 {
		return "redis-cluster://" + strings.Join(o.Cluster, ",") + "/" + o.KeyPrefix
	}
	return "redis://" + o.Address + "/" + strconv.Itoa(o.DB) + "/" + o.KeyPrefix
}

// warnBesideRedis warns, at start, of the embedded database's options set
// beside `storage redis`, which keeps every record in Redis: they do not
// apply, and an operator who set data_dir may believe the data is there.
func (a *App) warnBesideRedis() {
	if a.Storage == nil || a.Storage.Redis == nil || a.logger == nil {
		return
	}
	for _, o := range []struct {
		name string
		set  bool
	}{{"data_dir", a.DataDir != ""}, {"sync_writes", a.SyncWrites}, {"gc_interval", a.GCInterval != 0}} {
		if o.set {
			a.logger.Warn(o.name+" does not apply with storage redis: every record is in Redis, nothing is written under data_dir",
				zap.String("option", o.name))
		}
	}
}
