package kernel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// migrateChunk is how many records one pipelined round trip writes.
const migrateChunk = 500

// CopyToRedis copies every record of from (an embedded Badger database)
// into to, unchanged: accounts, keys with their hashes, their counters and
// every other record. The counters need no conversion: the shared ledger
// starts from the records' figures while it has none of its own. A target
// that already holds data under its prefix is refused unless force, which
// first deletes everything under the prefix (records, counters, holds and
// the change feed). Running replicas are told to reload. Records of the
// kinds with Expires (generations and their index, the sealed analytics
// hours) get the expiry the gateway would give them, and those already
// past it are left out, so that migrated generations expire like new ones.
func CopyToRedis(from Backend, to *RedisBackend, force bool, kinds ...Kind) (int, error) {
	for _, k := range kinds {
		to.KeepKind(k)
	}
	empty, err := to.Empty()
	if err != nil {
		return 0, err
	}
	if !empty && !force {
		return 0, fmt.Errorf("redis already holds data under key prefix %q (use --force to replace it)", to.prefix)
	}
	ctx := context.Background()
	if !empty {
		if err := to.deleteAll(ctx); err != nil {
			return 0, err
		}
	}
	n := 0
	var batch []Write
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := to.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, w := range batch {
				bk, _ := to.bucketOf(w.Key, w.Value.([]byte))
				k := to.layout.key(bk, w.Key)
				p.Set(ctx, k, w.Value, 0)
				if w.ExpiresAt > 0 {
					p.PExpireAt(ctx, k, time.UnixMilli(w.ExpiresAt))
				}
			}
			return nil
		})
		n += len(batch)
		batch = batch[:0]
		return to.Observe(err)
	}
	nowMs := time.Now().UnixMilli()
	err = from.Scan("", func(key, value []byte) (bool, error) {
		at := to.exp.at(string(key), value)
		if at > 0 && at <= nowMs {
			return true, nil // past its retention: the gateway would have removed it
		}
		batch = append(batch, Write{Key: string(key), Value: slices.Clone(value), ExpiresAt: at})
		if len(batch) == migrateChunk {
			return true, flush()
		}
		return true, nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return n, err
	}
	// Any replica already following the feed reloads everything.
	err = to.c.XAdd(ctx, &redis.XAddArgs{Stream: to.layout.feedKey(0), Values: []string{"r", "migrate", "k", "*"}}).Err()
	return n, to.Observe(err)
}

// deleteAll deletes every key under the prefix.
func (b *RedisBackend) deleteAll(ctx context.Context) error {
	keys, err := b.ScanKeys(ctx, GlobEscape(b.prefix)+"*")
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(keys, migrateChunk) {
		// One key per command: a cluster refuses one across slots.
		_, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range chunk {
				p.Unlink(ctx, k)
			}
			return nil
		})
		if err := b.Observe(err); err != nil {
			return err
		}
	}
	return nil
}

// oldLayoutKey reports a key name (after the prefix) the previous layout
// wrote: the backend's own ("~...", but the one-use claims of connect
// codes, "~cc/", sticky routing's table, "~st/", and the response
// cache's, "~rc/") and the records ("<kind>/...", a kind being one to three
// lowercase letters). A longer prefix of another gateway sharing the
// server ("tollgate:eu:" beside "tollgate:") never matches.
func oldLayoutKey(rest string) bool {
	if strings.HasPrefix(rest, "~") {
		return !strings.HasPrefix(rest, "~cc/") && !strings.HasPrefix(rest, "~st/") && !strings.HasPrefix(rest, "~rc/")
	}
	i := strings.IndexByte(rest, '/')
	if i < 1 || i > 3 {
		return false
	}
	for _, c := range rest[:i] {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// upgradeLayout moves a store written before the hash-tagged key layout
// (Layout), "<prefix><name>", to "<prefix>{tg}<name>", once, when
// a replica of this version first opens it: every record, money hash,
// lease set and abuse-ceiling bucket is renamed; the old change feed is
// dropped and the new one tells any replica already following it to
// reload. The one-use claims (connect codes, dashboard links) are single
// keys that need no tag and stay where they are. Every replica must run
// this version before any writes again (an older one would keep writing
// the old names).
func (b *RedisBackend) upgradeLayout(ctx context.Context) error {
	keys, err := b.ScanKeys(ctx, GlobEscape(b.prefix)+"*")
	if err != nil {
		return err
	}
	var old []string
	for _, k := range keys {
		if rest := k[len(b.prefix):]; oldLayoutKey(rest) {
			old = append(old, k)
		}
	}
	if len(old) == 0 {
		return nil
	}
	for chunk := range slices.Chunk(old, migrateChunk) {
		cmds, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range chunk {
				if k == b.prefix+"~feed" {
					p.Del(ctx, k)
					continue
				}
				p.Rename(ctx, k, b.layout.key(0, k[len(b.prefix):]))
			}
			return nil
		})
		for _, c := range cmds {
			// A replica starting beside this one may have renamed it.
			if e := c.Err(); e != nil && !strings.Contains(e.Error(), "no such key") {
				return fmt.Errorf("redis: moving the keys to the hash-tagged layout: %w", b.Observe(e))
			}
		}
		if err != nil && !strings.Contains(err.Error(), "no such key") {
			return b.Observe(err)
		}
	}
	err = b.c.XAdd(ctx, &redis.XAddArgs{Stream: b.layout.feedKey(0), Values: []string{"r", "migrate", "k", "*"}}).Err()
	if err := b.Observe(err); err != nil {
		return err
	}
	b.log.Info("moved the redis keys to the hash-tagged layout", zap.Int("keys", len(old)), zap.String("key_prefix", b.prefix))
	return nil
}

// OpenBadger opens the embedded database at dir for a tool (the
// migration): the same options as the gateway, without value-log GC. kinds
// are the record kinds with a Slot (storage.ChunkedKinds), whose chunks the
// tool's Scan must expand.
func OpenBadger(dir string, kinds ...Kind) (Backend, error) {
	b, err := openBadger(Options{Dir: dir}, zap.NewNop())
	if err != nil {
		return nil, err
	}
	if j, ok := b.(*journal); ok {
		for _, k := range kinds {
			j.KeepKind(k)
		}
	}
	return b, nil
}
