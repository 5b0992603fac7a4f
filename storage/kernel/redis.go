package kernel

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// RedisOptions select the shared backend: several gateway replicas on one
// Redis (or Valkey) server.
type RedisOptions struct {
	Address   string // host:port
	Username  string // ACL user; empty: the default user
	Password  string
	DB        int
	TLS       bool
	KeyPrefix string // starts every key the gateway writes
	// HoldLease is how long a running request's holds outlive a replica
	// that stopped renewing them (storage.DefaultHoldLease when zero).
	HoldLease time.Duration
}

// ErrUnavailable is returned while the shared database cannot be reached:
// the gateway then serves nothing it could not meter.
var ErrUnavailable = errors.New("shared database unavailable")

// redisTimeout bounds one command: a request never waits longer than
// this on the network before it is refused.
const redisTimeout = 2 * time.Second

// feedMaxLen bounds the change feed (approximately): a replica that falls
// further behind than this reloads everything.
const feedMaxLen = 100000

// feedBlock is how long one read of the change feed waits for an entry;
// it bounds how long Close waits for the reader.
const feedBlock = 250 * time.Millisecond

// RedisBackend keeps the records under KeyPrefix, one string key per
// record holding the same JSON Badger stores, and announces every commit
// on a change feed (a Redis stream) so that the other replicas reload what
// changed.
type RedisBackend struct {
	c       *redis.Client
	exp     expiries // expiry.go
	prefix  string
	feed    string // the change feed's stream key
	replica string // this process's id in the feed's entries
	log     *zap.Logger
	down    atomic.Bool
	upSince atomic.Int64 // unix ns of the first success after the last failure
	stale   atomic.Bool  // the feed lost continuity; cleared by a full reload (Follow)
	lease   time.Duration
}

// OpenRedis connects to the server and checks that it answers.
func OpenRedis(o RedisOptions, log *zap.Logger) (*RedisBackend, error) {
	if log == nil {
		log = zap.NewNop()
	}
	opts := &redis.Options{
		Addr: o.Address, Username: o.Username, Password: o.Password, DB: o.DB,
		DialTimeout: redisTimeout, ReadTimeout: redisTimeout, WriteTimeout: redisTimeout,
		// A failed command is answered at once (503) rather than retried
		// behind the client's back; the feed reader reconnects.
		MaxRetries: -1,
	}
	if o.TLS {
		host, _, _ := strings.Cut(o.Address, ":")
		opts.TLSConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	b := &RedisBackend{
		c: redis.NewClient(opts), prefix: o.KeyPrefix, feed: o.KeyPrefix + "~feed",
		replica: hex.EncodeToString(id[:]), log: log, lease: o.HoldLease,
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	if err := b.c.Ping(ctx).Err(); err != nil {
		_ = b.c.Close()
		return nil, fmt.Errorf("connecting to redis at %s: %w", o.Address, err)
	}
	return b, nil
}

// Client is the connection pool, for the ledger's scripts.
func (b *RedisBackend) Client() *redis.Client { return b.c }

// Prefix starts every key of this gateway's data.
func (b *RedisBackend) Prefix() string { return b.prefix }

// Replica is this process's id in the change feed.
func (b *RedisBackend) Replica() string { return b.replica }

// HoldLease is the configured lease of running requests' holds.
func (b *RedisBackend) HoldLease() time.Duration { return b.lease }

// FeedKey is the change feed's stream key.
func (b *RedisBackend) FeedKey() string { return b.feed }

// Available reports whether the last command reached the server.
func (b *RedisBackend) Available() bool { return !b.down.Load() }

// UpSince is when a command last reached the server after one had failed
// to: the end of the last outage this process saw (zero: none).
func (b *RedisBackend) UpSince() time.Time {
	if ns := b.upSince.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// up records a command that reached the server.
func (b *RedisBackend) up() {
	if b.down.Swap(false) {
		b.upSince.Store(time.Now().UnixNano())
	}
}

// Observe records the outcome of a command: a network failure marks the
// server down until a command succeeds again.
func (b *RedisBackend) Observe(err error) error {
	if err == nil || errors.Is(err, redis.Nil) {
		b.up()
		return err
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return err // the server answered: it is up
	}
	b.down.Store(true)
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

func (b *RedisBackend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), redisTimeout)
}

// Commit writes the batch and its feed entry in one MULTI/EXEC: the other
// replicas see either all of it or nothing. With appendfsync always the
// server answers only once the batch is on its disk.
func (b *RedisBackend) Commit(writes []Write) error {
	if len(writes) == 0 {
		return nil
	}
	keys := make([]string, 0, len(writes))
	ctx, cancel := b.ctx()
	defer cancel()
	_, err := b.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, w := range writes {
			keys = append(keys, w.Key)
			if w.Value == nil {
				p.Del(ctx, b.prefix+w.Key)
				continue
			}
			v, err := encode(w.Value)
			if err != nil {
				return err
			}
			p.Set(ctx, b.prefix+w.Key, v, 0)
			if at := b.exp.at(w.Key, v); at > 0 {
				p.PExpireAt(ctx, b.prefix+w.Key, time.UnixMilli(at))
			}
		}
		p.XAdd(ctx, &redis.XAddArgs{
			Stream: b.feed, MaxLen: feedMaxLen, Approx: true,
			Values: []string{"r", b.replica, "k", strings.Join(keys, "\n")},
		})
		return nil
	})
	return b.Observe(err)
}

func (b *RedisBackend) Get(key string, decode func(value []byte) error) error {
	ctx, cancel := b.ctx()
	defer cancel()
	v, err := b.c.Get(ctx, b.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		b.up()
		return ErrNotFound
	}
	if err := b.Observe(err); err != nil {
		return err
	}
	return decode(v)
}

// GetMany calls fn with the value of each of keys that exists, reading
// them in chunks of one round trip each.
func (b *RedisBackend) GetMany(keys []string, fn func(key string, value []byte)) error {
	for chunk := range slices.Chunk(keys, 500) {
		full := make([]string, len(chunk))
		for i, k := range chunk {
			full[i] = b.prefix + k
		}
		ctx, cancel := b.ctx()
		vals, err := b.c.MGet(ctx, full...).Result()
		cancel()
		if err := b.Observe(err); err != nil {
			return err
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				fn(chunk[i], []byte(s))
			}
		}
	}
	return nil
}

// Scan lists the keys under prefix with SCAN, sorts them (Badger's key
// order, which loading relies on) and reads them in chunks.
func (b *RedisBackend) Scan(prefix string, fn func(key, value []byte) (bool, error)) error {
	ctx := context.Background()
	var keys []string
	iter := b.c.Scan(ctx, 0, GlobEscape(b.prefix+prefix)+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := b.Observe(iter.Err()); err != nil {
		return err
	}
	slices.Sort(keys)
	for chunk := range slices.Chunk(keys, 500) {
		cctx, cancel := b.ctx()
		vals, err := b.c.MGet(cctx, chunk...).Result()
		cancel()
		if err := b.Observe(err); err != nil {
			return err
		}
		for i, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue // deleted since the SCAN
			}
			more, err := fn([]byte(chunk[i][len(b.prefix):]), []byte(s))
			if err != nil || !more {
				return err
			}
		}
	}
	return nil
}

// Empty reports whether no record exists under the key prefix (migrate
// refuses to overwrite a database in use).
func (b *RedisBackend) Empty() (bool, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	keys, _, err := b.c.Scan(ctx, 0, GlobEscape(b.prefix)+"*", 100).Result()
	return len(keys) == 0, b.Observe(err)
}

func (b *RedisBackend) Close() error { return b.c.Close() }

// GlobEscape quotes SCAN MATCH's special characters.
func GlobEscape(s string) string {
	var sb strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\^`, c) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// Change is one entry of the change feed written by another replica:
// the record keys it committed, or the account whose money it changed.
type Change struct {
	Keys    []string
	Account string // a ledger script's entry: the account's money changed
	// Fields are the money fields it changed.
	Fields []string
	// Generations are the ids of the generation records the settlements
	// of a batch of ledger scripts wrote.
	Generations []string
}

// FeedPosition is where Follow starts: taken before the warm-up Load, so
// that nothing committed meanwhile is missed.
func (b *RedisBackend) FeedPosition() (string, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	return b.lastFeedID(ctx)
}

// FeedHandler is what Follow does with the change feed.
type FeedHandler struct {
	// Apply brings a batch of other replicas' entries into memory. An
	// error means memory may lack some of them: Follow then reloads.
	Apply func([]Change) error
	// Resync replaces memory by the database's: every record of every
	// kind (Kernel.Reload) and the money fields.
	Resync func() error
}

// errFeedGap is a read of the change feed that cannot prove it follows
// the last entry read.
var errFeedGap = errors.New("the change feed lost continuity")

// Synced reports whether memory provably holds every change announced on
// the feed up to the last entry read: false from the moment the feed
// cannot prove continuity (see Follow) until a full reload succeeds. A
// replica that is not synced must not decide on its records (admission
// answers 503 meanwhile).
func (b *RedisBackend) Synced() bool { return !b.stale.Load() }

// Follow reads the change feed after position last until ctx ends, giving
// other replicas' entries to h.Apply (a replica's own are already in its
// memory). Whenever the feed cannot prove that nothing was missed since
// the last entry read, it marks the replica not synced and, once the
// server answers, reloads everything with h.Resync from a position taken
// before the reload. Continuity is lost when the connection breaks (a
// restart or a failover may have lost or replayed entries), when the
// last entry read no longer exists (the stream went backwards to an older
// state, was deleted and recreated, or was trimmed past it), or when a
// batch could not be applied.
func (b *RedisBackend) Follow(ctx context.Context, last string, h FeedHandler) {
	var failed resyncFailures
	for ctx.Err() == nil {
		if b.stale.Load() {
			id, err := b.resync(ctx, h)
			if err != nil {
				if ctx.Err() == nil {
					failed.report(b.log, err)
				}
				sleep(ctx, 100*time.Millisecond)
				continue
			}
			b.log.Info("resynchronized from redis", zap.String("feed_position", id), zap.Int("failed_attempts", failed.total))
			failed = resyncFailures{}
			last = id
			b.stale.Store(false)
		}
		msgs, err := b.readFeed(ctx, last)
		if err == nil && len(msgs) == 0 {
			err = b.waitFeed(ctx, last)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			b.stale.Store(true)
			if errors.Is(err, errFeedGap) {
				b.log.Warn("the redis change feed lost continuity; reloading every record", zap.String("last_read", last))
			} else {
				b.log.Warn("reading the redis change feed failed; reloading every record once it answers", zap.Error(err))
				sleep(ctx, 50*time.Millisecond)
			}
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		last = msgs[len(msgs)-1].ID
		if changes := b.changes(msgs); len(changes) > 0 {
			if err := h.Apply(changes); err != nil {
				b.stale.Store(true)
				b.log.Warn("applying other replicas' changes failed; reloading every record", zap.Error(err))
			}
		}
	}
}

// resyncFailures logs the failed attempts of one resynchronization: the
// first at once, then one line per resyncLogEvery with the count, so that
// an outage retried every 100 ms does not flood the log.
type resyncFailures struct {
	total, unlogged int
	logged          time.Time
}

// resyncLogEvery spaces the log lines of a failing resynchronization.
const resyncLogEvery = 10 * time.Second

func (f *resyncFailures) report(log *zap.Logger, err error) {
	f.total++
	f.unlogged++
	if f.total > 1 && time.Since(f.logged) < resyncLogEvery {
		return
	}
	log.Error("resynchronizing from redis failed; retrying every 100ms", zap.Error(err), zap.Int("failed_attempts", f.unlogged))
	f.unlogged, f.logged = 0, time.Now()
}

// resync takes the feed's position, then reloads memory from the server:
// what is committed meanwhile is read again after the position.
func (b *RedisBackend) resync(ctx context.Context, h FeedHandler) (string, error) {
	if err := b.Observe(b.c.Ping(ctx).Err()); err != nil {
		return "", err
	}
	id, err := b.lastFeedID(ctx)
	if err != nil {
		return "", err
	}
	return id, h.Resync()
}

// readFeed returns the feed's entries after last (at most 1000), in one
// MULTI with a check that last still exists, so that the entries read are
// provably the ones that follow it: errFeedGap otherwise. Position "0" (an
// empty feed at warm-up) has nothing to check.
func (b *RedisBackend) readFeed(ctx context.Context, last string) ([]redis.XMessage, error) {
	args := &redis.XReadArgs{Streams: []string{b.feed, last}, Count: 1000, Block: -1}
	var check *redis.XMessageSliceCmd
	var read *redis.XStreamSliceCmd
	_, err := b.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if last != "0" {
			check = p.XRangeN(ctx, b.feed, last, last, 1)
		}
		read = p.XRead(ctx, args)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, b.Observe(err)
	}
	b.up()
	if check != nil && len(check.Val()) == 0 {
		return nil, errFeedGap
	}
	var msgs []redis.XMessage
	for _, s := range read.Val() {
		msgs = append(msgs, s.Messages...)
	}
	return msgs, nil
}

// waitFeed waits up to feedBlock for an entry after last; readFeed then
// reads it.
func (b *RedisBackend) waitFeed(ctx context.Context, last string) error {
	err := b.c.XRead(ctx, &redis.XReadArgs{Streams: []string{b.feed, last}, Count: 1, Block: feedBlock}).Err()
	if errors.Is(err, redis.Nil) {
		b.up()
		return nil
	}
	return b.Observe(err)
}

// changes decodes the entries other replicas wrote.
func (b *RedisBackend) changes(msgs []redis.XMessage) []Change {
	var changes []Change
	for _, m := range msgs {
		if m.Values["r"] == b.replica {
			continue
		}
		var c Change
		if k, _ := m.Values["k"].(string); k != "" {
			c.Keys = strings.Split(k, "\n")
		}
		c.Account, _ = m.Values["m"].(string)
		if g, _ := m.Values["g"].(string); g != "" {
			c.Generations = strings.Fields(g)
		}
		if f, _ := m.Values["f"].(string); f != "" {
			c.Fields = strings.Fields(f)
		}
		changes = append(changes, c)
	}
	return changes
}

// lastFeedID is the id of the feed's newest entry ("0" when empty).
func (b *RedisBackend) lastFeedID(ctx context.Context) (string, error) {
	msgs, err := b.c.XRevRangeN(ctx, b.feed, "+", "-", 1).Result()
	if err := b.Observe(err); err != nil {
		return "", err
	}
	if len(msgs) == 0 {
		return "0", nil
	}
	return msgs[0].ID, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// GetValues reads keys in one round trip per chunk: nil for a key that
// does not exist.
func (b *RedisBackend) GetValues(keys []string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	idx := make(map[string]int, len(keys))
	for i, k := range keys {
		idx[k] = i
	}
	err := b.GetMany(keys, func(key string, v []byte) { out[idx[key]] = v })
	return out, err
}
