package affinity

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxEntries bounds a Memory table made with max 0.
const DefaultMaxEntries = 1 << 20

// memoryShards spread the table's lock: each shard has its own.
const memoryShards = 16

// Memory is a Table in this process's memory (one node). Past its bound,
// a shard drops its expired entries, and while still full refuses new
// keys (those conversations are then load balanced as without
// stickiness) rather than grow.
type Memory struct {
	shards [memoryShards]memoryShard
	max    int // per shard
	now    func() time.Time
}

type memoryShard struct {
	sync.Mutex
	m map[Key]memoryEntry
}

type memoryEntry struct {
	endpoint string
	expires  int64 // unix ns
}

// NewMemory is an empty table of at most max entries (0:
// DefaultMaxEntries).
func NewMemory(max int) *Memory {
	if max <= 0 {
		max = DefaultMaxEntries
	}
	t := &Memory{max: (max + memoryShards - 1) / memoryShards, now: time.Now}
	for i := range t.shards {
		t.shards[i].m = map[Key]memoryEntry{}
	}
	return t
}

func (t *Memory) shard(k Key) *memoryShard { return &t.shards[k[0]%memoryShards] }

// Get implements Table.
func (t *Memory) Get(_ context.Context, k Key, idle time.Duration) (string, bool) {
	now := t.now().UnixNano()
	s := t.shard(k)
	s.Lock()
	defer s.Unlock()
	e, ok := s.m[k]
	if !ok {
		return "", false
	}
	if e.expires <= now {
		delete(s.m, k)
		return "", false
	}
	e.expires = now + int64(idle)
	s.m[k] = e
	return e.endpoint, true
}

// Set implements Table.
func (t *Memory) Set(k Key, endpoint string, idle time.Duration) {
	now := t.now().UnixNano()
	s := t.shard(k)
	s.Lock()
	defer s.Unlock()
	if _, ok := s.m[k]; !ok && len(s.m) >= t.max {
		for key, e := range s.m {
			if e.expires <= now {
				delete(s.m, key)
			}
		}
		if len(s.m) >= t.max {
			return
		}
	}
	s.m[k] = memoryEntry{endpoint: endpoint, expires: now + int64(idle)}
}

// Len is the number of entries, expired ones not yet dropped included.
func (t *Memory) Len() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.Lock()
		n += len(s.m)
		s.Unlock()
	}
	return n
}
