package kernel

import (
	"context"
	"fmt"
	"slices"

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
// the change feed). Running replicas are told to reload.
func CopyToRedis(from Backend, to *RedisBackend, force bool) (int, error) {
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
			}
			return nil
		})
		n += len(batch)
		batch = batch[:0]
		return to.Observe(err)
	}
	err = from.Scan("", func(key, value []byte) (bool, error) {
		batch = append(batch, Write{Key: string(key), Value: slices.Clone(value)})
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
