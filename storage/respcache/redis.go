package respcache

import (
	"context"
	"encoding/hex"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisWriteTimeout bounds a background write.
const redisWriteTimeout = 2 * time.Second

// Scanner lists the keys matching a pattern, on every master of a
// cluster.
type Scanner func(ctx context.Context, match string) ([]string, error)

// Redis is a Table shared by every replica on one Redis (or a cluster):
// one string key per entry, "<prefix><scope>/<model>/<hash>" (the scope
// and the model as fixed-width hashes), expiring with Redis's own TTL;
// Redis's eviction policy bounds their bytes. A read is one GET, a write
// one SET sent in the background.
type Redis struct {
	c      redis.Cmdable
	scan   Scanner
	prefix string
}

// NewRedis is the table kept in c under prefix; scan lists its keys for
// a purge.
func NewRedis(c redis.Cmdable, scan Scanner, prefix string) *Redis {
	return &Redis{c: c, scan: scan, prefix: prefix}
}

func (t *Redis) key(k Key) string {
	return t.prefix + nameHash(k.Scope) + "/" + nameHash(k.Model) + "/" + hex.EncodeToString(k.Hash[:])
}

// Get implements Table.
func (t *Redis) Get(ctx context.Context, k Key) ([]byte, bool) {
	v, err := t.c.Get(ctx, t.key(k)).Bytes()
	return v, err == nil && len(v) > 0
}

// Set implements Table.
func (t *Redis) Set(k Key, entry []byte, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	key := t.key(k)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), redisWriteTimeout)
		defer cancel()
		_ = t.c.Set(ctx, key, entry, ttl).Err() // a lost write only loses the entry
	}()
}

// Purge implements Table: the keys are found with SCAN and deleted one
// by one (on a cluster they lie in different slots).
func (t *Redis) Purge(ctx context.Context, scope, model string) (int, error) {
	m := "*"
	if model != "" {
		m = nameHash(model)
	}
	keys, err := t.scan(ctx, globEscape(t.prefix)+nameHash(scope)+"/"+m+"/*")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		d, err := t.c.Del(ctx, k).Result()
		if err != nil {
			return n, err
		}
		n += int(d)
	}
	return n, nil
}

// globEscape escapes the pattern characters of SCAN's MATCH in s.
func globEscape(s string) string {
	var sb strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\^`, c) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// Interface guard
var _ Table = (*Redis)(nil)
