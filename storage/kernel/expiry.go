package kernel

import (
	"strings"
	"sync"
)

// Records of a kind with an Expires function (generations and their
// index) carry an expiry in the backend: Badger drops an entry once its
// TTL passes (reads no longer see it; compaction and value-log GC reclaim
// its space), Redis deletes the key (PEXPIREAT in the transaction that
// writes it). The kinds decide the time from the record itself, so that
// every backend, and every replica, gives a record the same expiry.

// expirer is a kind whose records expire.
type expirer struct {
	prefix string
	at     func(key string, value []byte) int64
}

// expiries are a backend's expiring kinds. Registered before the first
// commit, read by every commit.
type expiries struct {
	mu sync.RWMutex
	es []expirer
}

func (x *expiries) add(prefix string, at func(key string, value []byte) int64) {
	x.mu.Lock()
	x.es = append(x.es, expirer{prefix, at})
	x.mu.Unlock()
}

// at is the Unix time in milliseconds at which the record expires, 0 for
// never.
func (x *expiries) at(key string, value []byte) int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, e := range x.es {
		if strings.HasPrefix(key, e.prefix) {
			return e.at(key, value)
		}
	}
	return 0
}

// ttlSeconds is Badger's expiry (Unix seconds, rounded up) of a record
// expiring at ms; 0 for never.
func ttlSeconds(ms int64) uint64 {
	if ms <= 0 {
		return 0
	}
	return uint64((ms + 999) / 1000)
}

// KeepKind has Badger give the records of a kind with Expires their TTL.
func (b *badgerBackend) KeepKind(kind Kind) {
	if kind.Expires != nil {
		b.exp.add(kind.Prefix, kind.Expires)
	}
}

// KeepKind has the journal chunk the records of a kind with a Slot, log
// the deletions of one with LogDeletes, and Badger expire those of one
// with Expires.
func (j *journal) KeepKind(kind Kind) {
	if kind.Slot != nil {
		j.chunk(kind.Prefix, kind.Slot)
	}
	if kind.LogDeletes {
		j.db.deletions.add(kind.Prefix)
	}
	if kind.Expires != nil {
		j.db.exp.add(kind.Prefix, kind.Expires)
	}
}

// KeepKind has Redis expire the records of a kind with Expires and keep
// those of a kind with Account in their account's bucket.
func (b *RedisBackend) KeepKind(kind Kind) {
	if kind.Expires != nil {
		b.exp.add(kind.Prefix, kind.Expires)
	}
	if kind.Account != nil {
		b.places.add(kind.Prefix, kind.Account)
	}
}
