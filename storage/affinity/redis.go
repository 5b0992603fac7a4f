package affinity

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisWriteTimeout bounds a background write.
const redisWriteTimeout = 2 * time.Second

// Redis is a Table shared by every replica on one Redis (or a cluster):
// one string key per conversation, expiring with Redis's own TTL. A read
// is one GETEX, which renews the expiry in the same command; a write one
// SET, sent in the background.
type Redis struct {
	c      redis.Cmdable
	prefix string
}

// NewRedis is the table kept in c under prefix (every key is the prefix
// and the conversation's key in hex).
func NewRedis(c redis.Cmdable, prefix string) *Redis {
	return &Redis{c: c, prefix: prefix}
}

func (t *Redis) key(k Key) string { return t.prefix + k.String() }

// Get implements Table.
func (t *Redis) Get(ctx context.Context, k Key, idle time.Duration) (string, bool) {
	v, err := t.c.GetEx(ctx, t.key(k), idle).Result()
	return v, err == nil && v != ""
}

// Set implements Table.
func (t *Redis) Set(k Key, endpoint string, idle time.Duration) {
	key := t.key(k)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), redisWriteTimeout)
		defer cancel()
		_ = t.c.Set(ctx, key, endpoint, idle).Err() // a lost write only loses the stickiness
	}()
}
