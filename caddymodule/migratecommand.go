package caddymodule

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// migrateCommand is `caddy tollgate migrate`: it copies the embedded
// Badger database into Redis for `storage redis`. The gateway must be
// stopped (Badger locks its directory).
func migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate --to redis://[user:password@]host:port[/db] [--cluster] [--from <data_dir>] [--key-prefix <prefix>] [--force]",
		Short: "Copies the embedded database into Redis for several replicas (storage redis)",
		Long: `
Copies every record of the embedded Badger database (accounts, keys with
their hashes, counters, organizations, secrets, generations...) into Redis
under the key prefix, for the storage redis option. Stop the gateway first.
A rediss:// URL connects over TLS. With --cluster, the URL names nodes of
a Redis Cluster (redis://host:port?addr=host2:port2&addr=...), for
storage redis { cluster ... }. A Redis that already holds data under the
prefix is refused unless --force, which replaces it.
`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			fl := caddycmd.Flags{FlagSet: c.Flags()}
			from := fl.String("from")
			if from == "" {
				from = filepath.Join(caddy.AppDataDir(), "tollgate")
			}
			to, err := redisURLOptions(fl.String("to"), fl.String("key-prefix"), fl.Bool("cluster"))
			if err != nil {
				return err
			}
			retention, err := caddy.ParseDuration(fl.String("generation-retention"))
			if err != nil {
				return fmt.Errorf("--generation-retention: %w", err)
			}
			src, err := kernel.OpenBadger(from, storage.ChunkedKinds()...)
			if err != nil {
				return err
			}
			defer src.Close()
			dst, err := kernel.OpenRedis(*to, zap.NewNop())
			if err != nil {
				return err
			}
			defer dst.Close()
			expiring, err := storage.ExpiringKinds(retention)
			if err != nil {
				return err
			}
			where := to.Address
			if len(to.Cluster) > 0 {
				where = "cluster " + strings.Join(to.Cluster, ",")
			}
			n, err := kernel.CopyToRedis(src, dst, fl.Bool("force"), expiring...)
			if err != nil {
				return fmt.Errorf("migrate: %w (%d records copied)", err, n)
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "copied %d records from %s to redis at %s under key prefix %q\n", n, from, where, to.KeyPrefix)
			return err
		},
	}
	cmd.Flags().String("to", "", "The Redis URL: redis://[user:password@]host:port[/db], or rediss:// for TLS (required)")
	cmd.Flags().String("from", "", "The Badger directory (default: the data_dir default)")
	cmd.Flags().String("key-prefix", "tollgate:", "The key prefix of storage redis")
	cmd.Flags().String("generation-retention", "30d", "The gateway's generation_retention: copied generations expire after it, older ones are left out")
	cmd.Flags().Bool("cluster", false, "The --to URL names nodes of a Redis Cluster (storage redis { cluster ... })")
	cmd.Flags().Bool("force", false, "Replace what Redis holds under the key prefix")
	mustMarkRequired(cmd, "to")
	return cmd
}

// redisURLOptions reads a redis:// or rediss:// URL.
func redisURLOptions(u, prefix string, cluster bool) (*kernel.RedisOptions, error) {
	if cluster {
		o, err := redis.ParseClusterURL(u)
		if err != nil {
			return nil, fmt.Errorf("--to: %v", err)
		}
		return &kernel.RedisOptions{Cluster: o.Addrs, Username: o.Username, Password: o.Password, TLS: o.TLSConfig != nil, KeyPrefix: prefix}, nil
	}
	o, err := redis.ParseURL(u)
	if err != nil {
		return nil, fmt.Errorf("--to: %v", err)
	}
	return &kernel.RedisOptions{Address: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB, TLS: o.TLSConfig != nil, KeyPrefix: prefix}, nil
}
