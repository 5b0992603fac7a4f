package kernel

import (
	"context"
	"strconv"
	"time"
)

// Board is a small map the replicas of a shared backend keep beside the
// records, for state that is no record (no change feed, no snapshot):
// each replica writes its fields, and all read the whole map. The
// endpoints' circuit breakers meet there.
type Board interface {
	// PublishBoard sets fields of the map name, which lasts ttl after
	// its last write.
	PublishBoard(ctx context.Context, name string, fields map[string]int64, ttl time.Duration) error
	// ReadBoard reads the whole map name.
	ReadBoard(ctx context.Context, name string) (map[string]int64, error)
}

// Board is the backend's, when it is shared.
func (k *Kernel) Board() (Board, bool) {
	b, ok := k.backend.(Board)
	return b, ok
}

// PublishBoard sets fields of the hash name (under the prefix) in one
// round trip, and its expiry.
func (b *RedisBackend) PublishBoard(ctx context.Context, name string, fields map[string]int64, ttl time.Duration) error {
	key := b.prefix + name
	args := make([]any, 0, 2*len(fields))
	for f, v := range fields {
		args = append(args, f, v)
	}
	p := b.c.TxPipeline()
	p.HSet(ctx, key, args...)
	p.Expire(ctx, key, ttl)
	_, err := p.Exec(ctx)
	return err
}

// ReadBoard reads the hash name; a field that is not a number is left
// out.
func (b *RedisBackend) ReadBoard(ctx context.Context, name string) (map[string]int64, error) {
	m, err := b.c.HGetAll(ctx, b.prefix+name).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(m))
	for f, v := range m {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[f] = n
		}
	}
	return out, nil
}
