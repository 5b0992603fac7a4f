package kernel

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Writes are group-committed. A mutation changes the in-memory state under
// Lock, marks the records it touched dirty and takes the current batch;
// the flusher then writes a snapshot of every dirty record in one backend
// transaction and closes the batch. Because a snapshot is taken atomically
// under Lock, the database only ever moves from one consistent in-memory
// state to a later one, in mutation order, and many requests share one
// disk round trip.

// ErrNotDurable is returned when a write could not be committed in time; the
// flusher keeps retrying it.
var ErrNotDurable = errors.New("write not yet durable")

// durableTimeout bounds how long a caller waits for its batch (a variable
// for the tests).
var durableTimeout = 30 * time.Second

// Batch is one group commit.
type Batch struct {
	done    chan struct{} // closed once durable
	durable atomic.Bool   // set before done and over are closed
	// over is closed once the batch is durable or its waiters' time ran
	// out, whichever comes first: waiting on one channel costs each
	// request less than a select over two.
	over     chan struct{}
	overOnce sync.Once

	// One timer per batch, made by its first waiter, bounds every
	// waiter's wait: a timer per request cost each request a timer's
	// allocation and two trips through the runtime's timer heap.
	timerOnce sync.Once
	timer     *time.Timer
}

func newBatch() *Batch { return &Batch{done: make(chan struct{}), over: make(chan struct{})} }

// durableBatch is the batch of no change: already durable.
var durableBatch = func() *Batch { b := newBatch(); b.finish(); return b }()

// finish marks b durable and stops its timer.
func (b *Batch) finish() {
	b.durable.Store(true)
	close(b.done)
	b.end()
	b.timerOnce.Do(func() {}) // no timer is made after this
	if b.timer != nil {
		b.timer.Stop()
	}
}

// end releases b's waiters.
func (b *Batch) end() { b.overOnce.Do(func() { close(b.over) }) }

// Write is one record to store: Value nil deletes Key.
type Write struct {
	Key   string
	Value any
	// ExpiresAt, when not zero, is the record's expiry in Unix
	// milliseconds (a chunk's, set by the checkpoint); otherwise the
	// backend asks the record's kind (Kind.Expires).
	ExpiresAt int64
	// IfAbsent writes the record only where the backend has none under
	// Key (MarkCreated); a shared backend then has every replica,
	// this one too, read back the record it kept.
	IfAbsent bool
}

// MarkDirty records that the record under key must be written (or
// deleted, if its kind's Snapshot no longer finds it). Callers hold Lock.
func (k *Kernel) MarkDirty(key string) *Batch {
	k.dirty[key] = struct{}{}
	if len(k.creates) > 0 {
		delete(k.creates, key) // a change of the record is written whole
	}
	return k.Pending()
}

// MarkCreated records that the record under key, new in this replica's
// memory, must be written unless the backend has one already: a record
// a request creates on first use (an end user) must not overwrite the
// one another replica made and changed meanwhile, which this replica has
// not yet read. A later MarkDirty of the key writes it whole. Callers
// hold Lock.
func (k *Kernel) MarkCreated(key string) *Batch {
	if _, ok := k.dirty[key]; !ok {
		if k.creates == nil {
			k.creates = map[string]struct{}{}
		}
		k.creates[key] = struct{}{}
	}
	k.dirty[key] = struct{}{}
	return k.Pending()
}

// MarkDirtyAt is MarkDirty(prefix + id), except that it builds the key
// only for a record not dirty yet: under load the requests of one group
// commit charge the same account, key and workspace, each marking their
// records. Callers hold Lock.
func (k *Kernel) MarkDirtyAt(prefix, id string) *Batch {
	var buf [96]byte
	key := append(append(buf[:0], prefix...), id...)
	if _, ok := k.dirty[string(key)]; !ok { // no allocation for the lookup
		// The records one commit writes are mostly the last one's (the
		// busy account's, key's and workspace's): their names are reused.
		name, ok := k.names[string(key)]
		if !ok {
			name = string(key)
		}
		k.dirty[name] = struct{}{}
	}
	if len(k.creates) > 0 {
		delete(k.creates, string(key))
	}
	return k.Pending()
}

// Append queues an immutable record. Callers hold Lock.
func (k *Kernel) Append(key string, v any) *Batch {
	k.appends = append(k.appends, Write{Key: key, Value: v})
	return k.Pending()
}

// Pending returns the open batch and wakes the flusher: waiting for it
// waits for every change made so far. With nothing dirty, those changes
// are in the batch being committed, or already durable: the open batch
// would wait for a commit nothing asks for. Callers hold Lock.
func (k *Kernel) Pending() *Batch {
	if len(k.dirty) == 0 && len(k.appends) == 0 {
		if k.inFlight != nil {
			return k.inFlight
		}
		return durableBatch
	}
	select {
	case k.wake <- struct{}{}:
	default:
	}
	return k.open
}

// Wait blocks until b is durable, at most durableTimeout from the first
// wait on b (a batch collects mutations for milliseconds, so that is about
// every waiter's own).
func (b *Batch) Wait() error {
	if !b.durable.Load() {
		b.timerOnce.Do(func() { b.timer = time.AfterFunc(durableTimeout, b.end) })
		<-b.over
	}
	if !b.durable.Load() {
		return ErrNotDurable
	}
	return nil
}

// reuseDirty is the largest dirty set whose map the next commit reuses,
// cleared, and whose record names MarkDirtyAt reuses: a commit of a few
// requests allocates neither; a bulk change's map is dropped, so that
// clearing and walking it does not cost every later commit.
const reuseDirty = 256

// flushLoop commits batches until Close.
func (k *Kernel) flushLoop() {
	defer close(k.flushDone)
	for {
		select {
		case <-k.wake:
		case <-k.stopFlush:
			k.mu.RLock()
			crashed := k.crashed
			k.mu.RUnlock()
			if !crashed {
				k.flushAll()
			}
			return
		}
		// Let the requests that are ready to run reach their own
		// mutation first, so that they join this commit rather than wait
		// for the next: the wake-up made the flusher the next goroutine
		// to run, and on a busy core that gave commits of one or two
		// requests, each paying a whole commit (a journal write, or a
		// Redis round trip) and the snapshots of the account's and key's
		// records.
		runtime.Gosched()
		k.flushAll()
	}
}

// flushAll commits everything dirty, retrying on failure: memory is the
// truth and the disk must catch up with it.
func (k *Kernel) flushAll() {
	for backoff := 10 * time.Millisecond; ; backoff = min(backoff*2, 5*time.Second) {
		err := k.flushOnce()
		if err == nil {
			return
		}
		k.log.Error("committing to the database failed; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-time.After(backoff):
		case <-k.stopFlush:
			if k.closing {
				return
			}
		}
	}
}

// flushOnce takes a snapshot of the dirty records and commits it.
func (k *Kernel) flushOnce() error {
	k.mu.Lock()
	if k.crashed || len(k.dirty) == 0 && len(k.appends) == 0 {
		k.mu.Unlock()
		return nil
	}
	writes := make([]Write, 0, len(k.dirty)+len(k.appends))
	small := len(k.dirty) <= reuseDirty
	if small {
		clear(k.names)
	} else {
		k.names = nil
	}
	for key := range k.dirty {
		for _, t := range k.trackers {
			t.add(key)
		}
		_, create := k.creates[key]
		writes = append(writes, Write{Key: key, Value: k.snapshot(key), IfAbsent: create})
		if small {
			k.names[key] = key
		}
	}
	writes = append(writes, k.appends...)
	clear(k.creates)
	b := k.open
	if small {
		clear(k.dirty) // its buckets serve the next commit
	} else {
		k.dirty = make(map[string]struct{})
		k.names = make(map[string]string)
	}
	k.appends = nil
	k.open = newBatch()
	k.inFlight, k.inFlightWrites = b, writes
	k.mu.Unlock()

	began := time.Now()
	err := k.backend.Commit(writes)
	if k.onCommit != nil {
		k.onCommit(time.Since(began), err)
	}
	if err != nil {
		// Put the work back; newer mutations may have re-dirtied the same
		// records, and their next snapshot covers this one.
		k.mu.Lock()
		for _, w := range writes {
			if kind, _ := k.kind(w.Key); kind.Append {
				k.appends = append(k.appends, w)
			} else if _, again := k.dirty[w.Key]; !again {
				k.dirty[w.Key] = struct{}{}
				if w.IfAbsent {
					if k.creates == nil {
						k.creates = map[string]struct{}{}
					}
					k.creates[w.Key] = struct{}{}
				}
			}
		}
		// Waiters of b and of the batch opened meanwhile are now waiting
		// on the next commit. Later mutations join a new batch, so that
		// their wait is bounded from their own first wait, not from b's
		// (whose timer may have run out during a long outage).
		old, next := k.open, newBatch()
		k.open = next
		k.inFlight, k.inFlightWrites = nil, nil
		go func() { <-next.done; b.finish(); old.finish() }()
		k.mu.Unlock()
		return err
	}
	// b is durable before it stops being the batch in flight, so that
	// Pending never answers durableBatch while b's writes are not.
	b.finish()
	k.mu.Lock()
	k.commits++
	k.inFlight, k.inFlightWrites = nil, nil
	k.mu.Unlock()
	return nil
}

// snapshot returns a copy of the record behind a dirty key, or nil when it
// was deleted. Callers hold Lock.
func (k *Kernel) snapshot(key string) any {
	if kind, ok := k.kind(key); ok && kind.Snapshot != nil {
		return kind.Snapshot(key)
	}
	return nil
}
