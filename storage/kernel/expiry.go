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

// useExpiry has the backend give the records of a kind with Expires their
// expiry.
func useExpiry(b Backend, kind Kind) {
	if kind.Expires == nil {
		return
	}
	switch b := b.(type) {
	case *journal:
		b.db.exp.add(kind.Prefix, kind.Expires)
	case *badgerBackend:
		b.exp.add(kind.Prefix, kind.Expires)
	case *RedisBackend:
		b.exp.add(kind.Prefix, kind.Expires)
	}
}

// ttlSeconds is Badger's expiry (Unix seconds, rounded up) of a record
// expiring at ms; 0 for never.
func ttlSeconds(ms int64) uint64 {
	if ms <= 0 {
		return 0
	}
	return uint64((ms + 999) / 1000)
}

// usePlacement has the shared backend keep the records of a kind with
// Account in their account's bucket.
func usePlacement(b Backend, kind Kind) {
	if rb, ok := b.(*RedisBackend); ok && kind.Account != nil {
		rb.places.add(kind.Prefix, kind.Account)
	}
}
