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
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// RedisOptions select the shared backend: several gateway replicas on one
// Redis (or Valkey) server, or on a Redis Cluster (or Valkey Cluster).
type RedisOptions struct {
	Address string // host:port of one server
	// Cluster are the host:port of some of a cluster's nodes (any of them;
	// the client learns the others): set instead of Address.
	Cluster   []string
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
// on a change feed (a Redis stream per bucket of the key layout:
// Layout) so that the other replicas reload what changed.
type RedisBackend struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient // nil on one server
	exp     expiries             // the records' expiries (useExpiry)
	prefix  string
	layout  layout
	places  placements
	replica string // this process's id in the feed's entries
	log     *zap.Logger
	down    atomic.Bool
	upSince atomic.Int64 // unix ns of the first success after the last failure
	stale   atomic.Bool  // the feed lost continuity; cleared by a full reload (Follow)
	lease   time.Duration
}

// OpenRedis connects to the server, or to the cluster, and checks that it
// answers: on a cluster, that every node given answers and that every one
// of the 16384 slots has a master.
func OpenRedis(o RedisOptions, log *zap.Logger) (*RedisBackend, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if o.Address != "" && len(o.Cluster) > 0 {
		return nil, errors.New("redis: address and cluster are exclusive: one server or a cluster")
	}
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand does not fail (it panics if the system's source breaks)
	b := &RedisBackend{prefix: o.KeyPrefix, replica: hex.EncodeToString(id[:]), log: log, lease: o.HoldLease}
	var tlsConfig *tls.Config
	if o.TLS {
		addr := o.Address
		if addr == "" && len(o.Cluster) > 0 {
			addr = o.Cluster[0]
		}
		host, _, _ := strings.Cut(addr, ":")
		tlsConfig = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
	}
	if len(o.Cluster) > 0 {
		if o.DB != 0 {
			return nil, errors.New("redis: db: a cluster has only database 0")
		}
		b.cluster = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: o.Cluster, Username: o.Username, Password: o.Password, TLSConfig: tlsConfig,
			DialTimeout: redisTimeout, ReadTimeout: redisTimeout, WriteTimeout: redisTimeout,
			// A node's own retries are off, as on one server; the
			// cluster client still follows MOVED and ASK (a reshard)
			// and finds a promoted replica.
			MaxRetries: -1,
			// A reshard may take a few redirections while the nodes
			// learn the slot's new owner.
			MaxRedirects: 8,
		})
		b.c = b.cluster
		b.layout = newLayout(o.KeyPrefix, ClusterBuckets)
		if err := b.checkCluster(o.Cluster, tlsConfig, o); err != nil {
			_ = b.c.Close() // opening failed with err, which is returned; closing only frees what was opened
			return nil, err
		}
		return b, nil
	}
	b.c = redis.NewClient(&redis.Options{
		Addr: o.Address, Username: o.Username, Password: o.Password, DB: o.DB, TLSConfig: tlsConfig,
		DialTimeout: redisTimeout, ReadTimeout: redisTimeout, WriteTimeout: redisTimeout,
		// A failed command is answered at once (503) rather than retried
		// behind the client's back; the feed reader reconnects.
		MaxRetries: -1,
	})
	b.layout = newLayout(o.KeyPrefix, 1)
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	if err := b.c.Ping(ctx).Err(); err != nil {
		_ = b.c.Close() // opening failed with err, which is returned; closing only frees what was opened
		return nil, fmt.Errorf("connecting to redis at %s: %w", o.Address, err)
	}
	if err := b.upgradeLayout(ctx); err != nil {
		_ = b.c.Close() // opening failed with err, which is returned; closing only frees what was opened
		return nil, err
	}
	return b, nil
}

// checkCluster refuses a cluster the gateway could not use: a node given
// that does not answer (named), a node that is not in cluster mode, or a
// slot no master serves.
func (b *RedisBackend) checkCluster(addrs []string, tlsConfig *tls.Config, o RedisOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*redisTimeout)
	defer cancel()
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr, Username: o.Username, Password: o.Password, TLSConfig: tlsConfig,
			DialTimeout: redisTimeout, ReadTimeout: redisTimeout, WriteTimeout: redisTimeout, MaxRetries: -1})
		shards, err := c.ClusterShards(ctx).Result()
		_ = c.Close() // a probe's client: its answer is in err
		if err != nil {
			return fmt.Errorf("redis: cluster: node %s does not answer as a cluster node: %w", addr, err)
		}
		covered := 0
		for _, sh := range shards {
			if !slices.ContainsFunc(sh.Nodes, func(n redis.Node) bool { return n.Role == "master" && n.Health == "online" }) {
				continue // its master failed, no replica promoted yet
			}
			for _, r := range sh.Slots {
				covered += int(r.End - r.Start + 1)
			}
		}
		if covered < clusterSlots {
			return fmt.Errorf("redis: cluster: node %s: only %d of the %d slots have a master (every slot must be served)", addr, covered, clusterSlots)
		}
	}
	return nil
}

// Client is the connection pool (one server's, or the cluster's), for the
// ledger's scripts.
func (b *RedisBackend) Client() redis.UniversalClient { return b.c }

// Cluster reports whether the backend is a Redis Cluster.
func (b *RedisBackend) Cluster() bool { return b.cluster != nil }

// Layout is the key layout, for the ledger's scripts.
func (b *RedisBackend) Layout() Layout { return Layout{b.layout} }

// ScanKeys lists the keys matching a SCAN pattern, on every master of a
// cluster.
func (b *RedisBackend) ScanKeys(ctx context.Context, match string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		var ks []string
		for iter.Next(ctx) {
			ks = append(ks, iter.Val())
		}
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return iter.Err()
	}
	var err error
	if b.cluster != nil {
		err = b.cluster.ForEachMaster(ctx, scan)
	} else {
		err = scan(ctx, b.c.(*redis.Client))
	}
	return keys, b.Observe(err)
}

// Claim sets name (under the prefix) for ttl unless it is set: true for
// the one replica whose claim came first (SET NX).
func (b *RedisBackend) Claim(name string, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	won, err := b.c.SetNX(ctx, b.prefix+name, b.replica, ttl).Result()
	return won, b.Observe(err)
}

// Prefix starts every key of this gateway's data.
func (b *RedisBackend) Prefix() string { return b.prefix }

// Replica is this process's id in the change feed.
func (b *RedisBackend) Replica() string { return b.replica }

// HoldLease is the configured lease of running requests' holds.
func (b *RedisBackend) HoldLease() time.Duration { return b.lease }

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
	if errors.As(err, &rerr) && !clusterUnavailable(rerr.Error()) {
		return err // the server answered: it is up
	}
	b.down.Store(true)
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// clusterUnavailable reports a cluster's answer that it cannot serve the
// slot now: a shard without a master (CLUSTERDOWN), keys of one slot
// split by a reshard (TRYAGAIN), a server still loading its data
// (LOADING), a replica cut from its master (MASTERDOWN), a redirection
// still not followed after MaxRedirects (MOVED, ASK). The request is
// refused (503) as when the server cannot be reached, and a charge owed
// is settled once it answers.
func clusterUnavailable(msg string) bool {
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN", "MOVED", "ASK"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func (b *RedisBackend) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), redisTimeout)
}

// placements are the kinds whose records live in their account's bucket
// (the ledger's scripts write them): the account from a record's key, or
// its value. Registered before the first commit, read by every commit.
type placements struct {
	mu sync.RWMutex
	ps []placement
}

type placement struct {
	prefix  string
	account func(key string, value []byte) (string, bool)
}

func (x *placements) add(prefix string, account func(key string, value []byte) (string, bool)) {
	x.mu.Lock()
	x.ps = append(x.ps, placement{prefix, account})
	x.mu.Unlock()
}

// bucketOf is the bucket of a record (value nil: from its key alone);
// false when only its value could say (a lookup then reads every bucket).
func (b *RedisBackend) bucketOf(key string, value []byte) (int, bool) {
	if b.layout.buckets() == 1 {
		return 0, true
	}
	b.places.mu.RLock()
	defer b.places.mu.RUnlock()
	for _, p := range b.places.ps {
		if strings.HasPrefix(key, p.prefix) {
			id, ok := p.account(key, value)
			if !ok {
				return 0, false
			}
			return b.layout.accountBucket(id), true
		}
	}
	return 0, true
}

// Commit writes the batch and its feed entry in one MULTI/EXEC: the other
// replicas see either all of it or nothing. With appendfsync always the
// server answers only once the batch is on its disk. On a cluster the
// records are in bucket 0 but for those written in their account's bucket
// (a migration's generations): each bucket's writes are one MULTI/EXEC
// with their own feed entry.
func (b *RedisBackend) Commit(writes []Write) error {
	if len(writes) == 0 {
		return nil
	}
	type cmd struct {
		key, full string
		value     []byte // nil: delete
		at        int64
		ifAbsent  bool
	}
	byBucket := map[int][]cmd{}
	for _, w := range writes {
		if w.Value == nil {
			bk, ok := b.bucketOf(w.Key, nil)
			for i := range b.layout.buckets() {
				if !ok || i == bk {
					byBucket[i] = append(byBucket[i], cmd{key: w.Key, full: b.layout.key(i, w.Key)})
				}
			}
			continue
		}
		v, err := encode(w.Value)
		if err != nil {
			return err
		}
		bk, _ := b.bucketOf(w.Key, v)
		byBucket[bk] = append(byBucket[bk], cmd{w.Key, b.layout.key(bk, w.Key), v, b.exp.at(w.Key, v), w.IfAbsent})
	}
	ctx, cancel := b.ctx()
	defer cancel()
	for bk, cmds := range byBucket {
		keys := make([]string, len(cmds))
		var created []*redis.BoolCmd // of the IfAbsent writes, in order
		_, err := b.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range cmds {
				keys[i] = c.key
				switch {
				case c.value == nil:
					p.Del(ctx, c.full)
				case c.ifAbsent:
					var ttl time.Duration
					if c.at > 0 {
						ttl = max(time.Until(time.UnixMilli(c.at)), time.Millisecond)
					}
					created = append(created, p.SetNX(ctx, c.full, c.value, ttl))
				default:
					p.Set(ctx, c.full, c.value, 0)
					if c.at > 0 {
						p.PExpireAt(ctx, c.full, time.UnixMilli(c.at))
					}
				}
			}
			p.XAdd(ctx, &redis.XAddArgs{
				Stream: b.layout.feedKey(bk), MaxLen: feedMaxLen, Approx: true,
				Values: []string{"r", b.replica, "k", strings.Join(keys, "\n")},
			})
			return nil
		})
		if err := b.Observe(err); err != nil {
			return err
		}
		if len(created) == 0 {
			continue
		}
		// A record an IfAbsent write found stored (another replica's) is
		// announced in an entry of no replica, so that this replica too
		// reads it back in place of its own copy.
		var kept []string
		i := 0
		for _, c := range cmds {
			if c.ifAbsent && c.value != nil {
				if !created[i].Val() {
					kept = append(kept, c.key)
				}
				i++
			}
		}
		if len(kept) == 0 {
			continue
		}
		err = b.c.XAdd(ctx, &redis.XAddArgs{
			Stream: b.layout.feedKey(bk), MaxLen: feedMaxLen, Approx: true,
			Values: []string{"r", "", "k", strings.Join(kept, "\n")},
		}).Err()
		if err := b.Observe(err); err != nil {
			return err
		}
	}
	return nil
}

func (b *RedisBackend) Get(key string, decode func(value []byte) error) error {
	var v []byte
	err := b.GetMany([]string{key}, func(_ string, value []byte) { v = value })
	if err != nil {
		return err
	}
	if v == nil {
		return ErrNotFound
	}
	return decode(v)
}

// GetMany calls fn with the value of each of keys that exists, reading
// them in chunks of one round trip each (on a cluster, one per master).
func (b *RedisBackend) GetMany(keys []string, fn func(key string, value []byte)) error {
	for chunk := range slices.Chunk(keys, 500) {
		var full []string
		var of []string // the record key of each of full
		for _, k := range chunk {
			bk, ok := b.bucketOf(k, nil)
			for i := range b.layout.buckets() {
				if !ok || i == bk {
					full, of = append(full, b.layout.key(i, k)), append(of, k)
				}
			}
		}
		vals, err := b.values(full)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for i, v := range vals {
			if v != nil && !seen[of[i]] {
				seen[of[i]] = true
				fn(of[i], v)
			}
		}
	}
	return nil
}

// values reads Redis keys: MGET on one server, GETs pipelined by master on
// a cluster (a cluster refuses an MGET across slots). Nil for a missing
// key.
func (b *RedisBackend) values(full []string) ([][]byte, error) {
	out := make([][]byte, len(full))
	if len(full) == 0 {
		return out, nil
	}
	ctx, cancel := b.ctx()
	defer cancel()
	if b.cluster == nil {
		vals, err := b.c.MGet(ctx, full...).Result()
		if err := b.Observe(err); err != nil {
			return nil, err
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				out[i] = []byte(s)
			}
		}
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(full))
	_, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range full {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, b.Observe(err)
	}
	b.up()
	for i, c := range cmds {
		if v, err := c.Bytes(); err == nil {
			out[i] = v
		}
	}
	return out, nil
}

// Scan lists the keys under prefix with SCAN (every master of a cluster),
// sorts them (Badger's key order, which loading relies on) and reads them
// in chunks.
func (b *RedisBackend) Scan(prefix string, fn func(key, value []byte) (bool, error)) error {
	match := GlobEscape(b.layout.tags[0]+prefix) + "*"
	if b.layout.buckets() > 1 {
		match = GlobEscape(b.prefix) + "{*}" + GlobEscape(prefix) + "*"
	}
	found, err := b.ScanKeys(context.Background(), match)
	if err != nil {
		return err
	}
	type entry struct{ record, full string }
	var entries []entry
	for _, k := range found {
		if rec, _, ok := b.layout.record(k); ok && strings.HasPrefix(rec, prefix) {
			entries = append(entries, entry{rec, k})
		}
	}
	slices.SortFunc(entries, func(x, y entry) int { return strings.Compare(x.record, y.record) })
	for chunk := range slices.Chunk(entries, 500) {
		full := make([]string, len(chunk))
		for i, e := range chunk {
			full[i] = e.full
		}
		vals, err := b.values(full)
		if err != nil {
			return err
		}
		for i, v := range vals {
			if v == nil {
				continue // deleted since the SCAN
			}
			more, err := fn([]byte(chunk[i].record), v)
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
	keys, err := b.ScanKeys(context.Background(), GlobEscape(b.prefix)+"*")
	return len(keys) == 0, err
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
	return b.lastFeedIDs(ctx)
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
		msgs, next, err := b.readFeed(ctx, last)
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
		last = next
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
	id, err := b.lastFeedIDs(ctx)
	if err != nil {
		return "", err
	}
	return id, h.Resync()
}

// feedPoll is how often a replica reads the feeds of a cluster's buckets
// when they had nothing new (one server's single feed is read blocking).
const feedPoll = 20 * time.Millisecond

// positions splits a feed position ("<id>" per bucket, comma-separated)
// into the buckets' ids; a position of another layout reads every
// bucket's feed from its start.
func (b *RedisBackend) positions(pos string) []string {
	ids := strings.Split(pos, ",")
	if len(ids) != b.layout.buckets() {
		ids = make([]string, b.layout.buckets())
		for i := range ids {
			ids[i] = "0"
		}
	}
	return ids
}

// readFeed returns the feeds' entries after last (at most 1000 per
// bucket) and the position after them, each bucket's in one MULTI with a
// check that its last entry read still exists, so that the entries read
// are provably the ones that follow it: errFeedGap otherwise. Position
// "0" (an empty feed at warm-up) has nothing to check.
func (b *RedisBackend) readFeed(ctx context.Context, last string) ([]redis.XMessage, string, error) {
	ids := b.positions(last)
	checks := make([]*redis.XMessageSliceCmd, len(ids))
	reads := make([]*redis.XStreamSliceCmd, len(ids))
	pipelined := b.c.TxPipelined
	if b.cluster != nil {
		// A cluster runs no MULTI across slots: each bucket's check
		// follows its read on the same connection instead. An entry that
		// still exists after the read existed at the read (a stream only
		// loses its oldest entries, and ids only grow).
		pipelined = b.c.Pipelined
	}
	_, err := pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			reads[i] = p.XRead(ctx, &redis.XReadArgs{Streams: []string{b.layout.feedKey(i), id}, Count: 1000, Block: -1})
			if id != "0" {
				checks[i] = p.XRangeN(ctx, b.layout.feedKey(i), id, id, 1)
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", b.Observe(err)
	}
	b.up()
	var msgs []redis.XMessage
	for i := range ids {
		if checks[i] != nil && len(checks[i].Val()) == 0 {
			return nil, "", errFeedGap
		}
		for _, st := range reads[i].Val() {
			if n := len(st.Messages); n > 0 {
				msgs = append(msgs, st.Messages...)
				ids[i] = st.Messages[n-1].ID
			}
		}
	}
	return msgs, strings.Join(ids, ","), nil
}

// waitFeed waits up to feedBlock for an entry after last on one server's
// feed, feedPoll on a cluster's; readFeed then reads it.
func (b *RedisBackend) waitFeed(ctx context.Context, last string) error {
	if b.layout.buckets() > 1 {
		sleep(ctx, feedPoll)
		return nil
	}
	err := b.c.XRead(ctx, &redis.XReadArgs{Streams: []string{b.layout.feedKey(0), last}, Count: 1, Block: feedBlock}).Err()
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

// lastFeedIDs is the position of the feeds' newest entries ("0" for an
// empty one), in one round trip (per master).
func (b *RedisBackend) lastFeedIDs(ctx context.Context) (string, error) {
	cmds := make([]*redis.XMessageSliceCmd, b.layout.buckets())
	_, err := b.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range cmds {
			cmds[i] = p.XRevRangeN(ctx, b.layout.feedKey(i), "+", "-", 1)
		}
		return nil
	})
	if err := b.Observe(err); err != nil {
		return "", err
	}
	ids := make([]string, len(cmds))
	for i, c := range cmds {
		ids[i] = "0"
		if msgs := c.Val(); len(msgs) > 0 {
			ids[i] = msgs[0].ID
		}
	}
	return strings.Join(ids, ","), nil
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
