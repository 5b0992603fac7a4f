package respcache

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// DefaultMaxBytes bounds a Memory table made with max 0.
const DefaultMaxBytes = 256 << 20

// entryOverhead is what an entry costs beside its bytes: its key and
// its place in the lists, counted against the bound.
const entryOverhead = 160

// Memory is a Table in this process's memory (one node): past its bound
// in bytes, the least recently used entries are evicted; an expired
// entry is a miss, dropped when read or when room is made.
type Memory struct {
	mu    sync.Mutex
	max   int64
	size  int64
	lru   *list.List // of *memoryEntry, most recently used first
	m     map[Key]*list.Element
	now   func() time.Time
	watch Observer
}

type memoryEntry struct {
	key     Key
	entry   []byte
	expires int64 // unix ns
}

// NewMemory is an empty table of at most max bytes (0:
// DefaultMaxBytes), telling watch (nil: none) what it evicts.
func NewMemory(max int64, watch Observer) *Memory {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	return &Memory{max: max, lru: list.New(), m: map[Key]*list.Element{}, now: time.Now, watch: watch}
}

func cost(e *memoryEntry) int64 {
	return int64(len(e.entry)+len(e.key.Scope)+len(e.key.Model)) + entryOverhead
}

// Get implements Table.
func (t *Memory) Get(_ context.Context, k Key) ([]byte, bool) {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.m[k]
	if !ok {
		return nil, false
	}
	e := el.Value.(*memoryEntry)
	if e.expires <= now {
		t.remove(el)
		return nil, false
	}
	t.lru.MoveToFront(el)
	return e.entry, true
}

// Set implements Table. An entry larger than the whole bound is not
// kept.
func (t *Memory) Set(k Key, entry []byte, ttl time.Duration) {
	now := t.now().UnixNano()
	e := &memoryEntry{key: k, entry: entry, expires: now + int64(ttl)}
	c := cost(e)
	if c > t.max || ttl <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.m[k]; ok {
		t.remove(el)
	}
	evicted := 0
	for t.size+c > t.max {
		last := t.lru.Back()
		if last.Value.(*memoryEntry).expires > now {
			evicted++
		}
		t.remove(last)
	}
	t.m[k] = t.lru.PushFront(e)
	t.size += c
	if t.watch != nil {
		t.watch.Bytes(c)
		if evicted > 0 {
			t.watch.Evicted(evicted)
		}
	}
}

// remove drops el; t.mu is held.
func (t *Memory) remove(el *list.Element) {
	e := t.lru.Remove(el).(*memoryEntry)
	delete(t.m, e.key)
	c := cost(e)
	t.size -= c
	if t.watch != nil {
		t.watch.Bytes(-c)
	}
}

// Purge implements Table.
func (t *Memory) Purge(_ context.Context, scope, model string) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, el := range t.m {
		if k.Scope == scope && (model == "" || k.Model == model) {
			t.remove(el)
			n++
		}
	}
	return n, nil
}

// Size is the bytes the entries take, as counted against the bound.
func (t *Memory) Size() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.size
}

// Interface guard
var _ Table = (*Memory)(nil)
