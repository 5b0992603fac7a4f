package kernel

import (
	"context"
	"fmt"
	"slices"
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
		useExpiry(to, k)
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
				p.Set(ctx, to.prefix+w.Key, w.Value, 0)
				if w.ExpiresAt > 0 {
					p.PExpireAt(ctx, to.prefix+w.Key, time.UnixMilli(w.ExpiresAt))
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
	err = to.c.XAdd(ctx, &redis.XAddArgs{Stream: to.feed, Values: []string{"r", "migrate", "k", "*"}}).Err()
	return n, to.Observe(err)
}

// deleteAll deletes every key under the prefix.
func (b *RedisBackend) deleteAll(ctx context.Context) error {
	iter := b.c.Scan(ctx, 0, GlobEscape(b.prefix)+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := b.Observe(iter.Err()); err != nil {
		return err
	}
	for chunk := range slices.Chunk(keys, migrateChunk) {
		if err := b.Observe(b.c.Unlink(ctx, chunk...).Err()); err != nil {
			return err
		}
	}
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
	useSlots(b, kinds...)
	return b, nil
}
