package kernel

import (
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
)

// The key layout on Redis and on Redis Cluster (or Valkey Cluster).
//
// A cluster runs a script or a transaction only when every key it touches
// hashes to one slot, so every key the gateway writes carries a hash tag,
// "<prefix>{<tag>}<name>": Redis hashes the tag alone. The accounts are
// spread over buckets, each with its own tag: an account's money hash,
// generation records, upstream ids and abuse-ceiling buckets, and the
// change feed and the lease set its scripts write, all share its bucket's
// tag, so every ledger script touches one slot. The records the kernel
// commits (accounts, keys, workspaces...) carry bucket 0's tag, so that a
// commit and its feed entry stay one MULTI/EXEC. Each bucket has its own
// change feed and lease set: a replica reads every bucket's feed and its
// reaper every bucket's lease set, whichever shard holds them.
//
// One server has one bucket (one feed, read blocking as before); a
// cluster has ClusterBuckets, whose tags hash to slots spread evenly over
// the 16384, so that the usual even split of the slots between masters
// spreads the buckets evenly too (a bucket is the unit a reshard moves
// with its slot).

// ClusterBuckets is the number of buckets on a cluster: enough to spread
// the accounts over 64 masters, few enough that a replica reads every
// bucket's feed in one pipelined round trip per master.
const ClusterBuckets = 64

// clusterSlots is Redis Cluster's number of hash slots.
const clusterSlots = 16384

// layout names the keys of one gateway (prefix) over n buckets.
type layout struct {
	prefix string
	tags   []string // "<prefix>{<tag>}" by bucket
}

func newLayout(prefix string, buckets int) layout {
	l := layout{prefix: prefix, tags: make([]string, buckets)}
	for b := range buckets {
		l.tags[b] = prefix + "{" + bucketTag(buckets, b) + "}"
	}
	return l
}

// bucketTag is bucket b's hash tag: with one bucket "tg"; on a cluster the
// shortest decimal string hashing to slot b*16384/n + 16384/n/2.
func bucketTag(n, b int) string {
	if n == 1 {
		return "tg"
	}
	return clusterTags()[b*clusterSlots/n+clusterSlots/n/2]
}

// clusterTags finds a decimal tag for each slot the buckets use.
var clusterTags = sync.OnceValue(func() map[int]string {
	want := map[int]bool{}
	for b := range ClusterBuckets {
		want[b*clusterSlots/ClusterBuckets+clusterSlots/ClusterBuckets/2] = true
	}
	tags := map[int]string{}
	for i := 0; len(tags) < len(want); i++ {
		s := strconv.Itoa(i)
		if slot := Slot(s); want[slot] && tags[slot] == "" {
			tags[slot] = s
		}
	}
	return tags
})

// Buckets is the number of buckets.
func (l layout) buckets() int { return len(l.tags) }

// accountBucket is the bucket an account's keys live in.
func (l layout) accountBucket(accountID string) int {
	if len(l.tags) == 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(accountID)) // hash.Hash's Write never fails
	return int(h.Sum32() % uint32(len(l.tags)))
}

// feedKey is a bucket's change feed.
func (l layout) feedKey(b int) string { return l.tags[b] + "~feed" }

// key is the Redis key of a record in bucket b.
func (l layout) key(b int, record string) string { return l.tags[b] + record }

// record is the record key of a Redis key under the prefix, with its
// bucket; false for a key of another layout.
func (l layout) record(key string) (string, int, bool) {
	for b, t := range l.tags {
		if rest, ok := strings.CutPrefix(key, t); ok {
			return rest, b, true
		}
	}
	return "", 0, false
}

// Slot is the Redis Cluster hash slot of a key: CRC16 (XMODEM) of its
// hash tag when it has one, of the whole key otherwise, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// Layout is the public view of the key layout, for the ledger's scripts:
// they name their keys with it.
type Layout struct{ l layout }

// Buckets is how many buckets the accounts are spread over.
func (p Layout) Buckets() int { return p.l.buckets() }

// AccountBucket is the bucket of an account's keys.
func (p Layout) AccountBucket(accountID string) int { return p.l.accountBucket(accountID) }

// Key is the Redis key name in bucket b ("<prefix>{<tag>}<name>").
func (p Layout) Key(b int, name string) string { return p.l.key(b, name) }

// AccountKey is the Redis key name in the account's bucket.
func (p Layout) AccountKey(accountID, name string) string {
	return p.l.key(p.l.accountBucket(accountID), name)
}

// FeedKey is bucket b's change feed.
func (p Layout) FeedKey(b int) string { return p.l.feedKey(b) }

// Tag is bucket b's "<prefix>{<tag>}".
func (p Layout) Tag(b int) string { return p.l.tags[b] }

// ClusterAccountSlot is the slot of an account's keys on a cluster, for
// tests that place accounts on different shards.
func ClusterAccountSlot(accountID string) int {
	l := newLayout("", ClusterBuckets)
	return Slot(l.tags[l.accountBucket(accountID)])
}

// ClusterAccountKey is the Redis key name of an account's key on a
// cluster (name as the ledger names it: "~leases", "~m/<account id>"),
// for tests that read them.
func ClusterAccountKey(prefix, accountID, name string) string {
	l := newLayout(prefix, ClusterBuckets)
	return l.key(l.accountBucket(accountID), name)
}
