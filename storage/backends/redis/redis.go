// Package redis is the shared storage backend (module
// tollgate.storage.redis): every record in one Redis or Valkey server, or
// a Redis Cluster, shared by several gateway replicas, with the money
// ledger of package sharedledger.
package redis

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/internal/caddyfileopt"
	"github.com/tollgate-dev/caddy-tollgate/internal/suggest"
	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/backends"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

func init() {
	caddy.RegisterModule(new(Redis))
}

// Redis is `storage redis { ... }`. Every string accepts
// placeholders such as {env.REDIS_PASSWORD}, expanded when the config
// loads.
type Redis struct {
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

	opts *kernel.RedisOptions // the fields expanded (Provision)
}

// CaddyModule returns the Caddy module information.
func (*Redis) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  backends.Namespace + ".redis",
		New: func() caddy.Module { return new(Redis) },
	}
}

// Provision expands the placeholders; what they expand to is checked as
// Validate checks the fields.
func (r *Redis) Provision(caddy.Context) error {
	o, err := r.options(caddy.NewReplacer())
	if err != nil {
		return err
	}
	r.opts = o
	return nil
}

// UnmarshalCaddyfile reads `storage redis { ... }`.
func (r *Redis) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the backend's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		switch opt {
		case "address", "username", "password", "key_prefix":
			var v string
			if !d.AllArgs(&v) {
				return d.Errf("storage redis: %s: expected one value", opt)
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
				return d.Err("storage redis: cluster: expected one or more host:port")
			}
			r.Cluster = append(r.Cluster, addrs...)
		case "db":
			var v string
			if !d.AllArgs(&v) {
				return d.Err("storage redis: db: expected one number")
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return d.Errf("storage redis: db: expected a non-negative integer, got %q", v)
			}
			r.DB = n
		case "tls":
			if d.NextArg() {
				return d.ArgErr()
			}
			r.TLS = true
		case "hold_lease":
			dur, err := caddyfileopt.Duration(d)
			if err != nil {
				return err
			}
			r.HoldLease = dur
		default:
			return suggest.UnknownOption(d, "storage redis", redisOptions)
		}
	}
	if r.Address != "" && len(r.Cluster) > 0 {
		return d.Err("storage redis: address and cluster: set one (address for one server, cluster for a Redis Cluster)")
	}
	return nil
}

// redisOptions are the options of `storage redis { ... }`.
var redisOptions = []string{"address", "cluster", "username", "password", "key_prefix", "db", "tls", "hold_lease"}

// Validate refuses what the connection could not use; each error names
// its field. Placeholders are checked once expanded (options).
func (r *Redis) Validate() error {
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
func (r *Redis) validateCluster(addrs []string) error {
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
func (c *Redis) options(repl *caddy.Replacer) (*kernel.RedisOptions, error) {
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

// Key names the shared store: one per server, database and prefix, as
// one Badger store per directory.
func (c *Redis) Key() string {
	o := c.opts
	if len(o.Cluster) > 0 {
		return "redis-cluster://" + strings.Join(o.Cluster, ",") + "/" + o.KeyPrefix
	}
	return "redis://" + o.Address + "/" + strconv.Itoa(o.DB) + "/" + o.KeyPrefix
}

// Options select the shared backend.
func (r *Redis) Options() storage.Options { return storage.Options{Redis: r.opts} }

// Describe names the server or cluster and the key prefix.
func (r *Redis) Describe() []zap.Field {
	return []zap.Field{zap.String("redis", r.opts.Address), zap.Strings("cluster", r.opts.Cluster), zap.String("key_prefix", r.opts.KeyPrefix)}
}

// Interface guards.
var (
	_ backends.Module       = (*Redis)(nil)
	_ caddy.Provisioner     = (*Redis)(nil)
	_ caddy.Validator       = (*Redis)(nil)
	_ caddyfile.Unmarshaler = (*Redis)(nil)
)
