package kernel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// ErrNotFound is returned for a record that does not exist.
var ErrNotFound = errors.New("not found")

// Kind is one kind of record, identified by its key prefix.
type Kind struct {
	// Prefix starts the database key of every record of the kind; no
	// registered prefix may start another.
	Prefix string
	// Load decodes one stored record into memory at warm-up. key and value
	// are valid only during the call. Nil: the kind is not loaded (records
	// read from the backend on demand, such as generations).
	Load func(key, value []byte) error
	// Reset empties the kind's records in memory before a full reload
	// (Reload) loads the backend's, so that a record deleted by another
	// writer is gone afterwards: a reload replaces, it does not merge. It
	// runs under Lock and must empty the maps Load fills in place (a
	// Load that captured a map keeps filling that map). Required with a
	// Load (Register panics otherwise); a kind that only decorates
	// another kind's records, which that kind's Reset empties, has a
	// Reset that does nothing.
	Reset func()
	// Snapshot returns a copy of the record under key for the group
	// commit, or nil when it was deleted. It runs under Lock. Append-only
	// kinds have none.
	Snapshot func(key string) any
	// Append marks immutable records, written once through Append and
	// never rewritten.
	Append bool
	// Expires, when set, gives each record of the kind its expiry (Unix
	// milliseconds, 0: never) from its key and encoded value: the backend
	// deletes the record then. A chunk of records expires
	// with its last record.
	Expires func(key string, value []byte) int64
	// LogDeletes has the on-disk backend log each deletion of a record
	// of the kind, so that a snapshot of the kind can be
	// caught up from the records changed since it (ScanVersions and
	// ScanDeletions after its version). Not with Expires: Badger drops
	// an expired record without a marker (Register panics).
	LogDeletes bool
	// Slot, for an Append kind, names the slot a record's key falls in
	// (false: none); slots sort in the order the records should scan. The
	// on-disk backend then stores a checkpoint's records of one slot as
	// one chunk instead of one entry each.
	Slot func(key string) (string, bool)
	// Remove, when set, drops the record under key from memory (it runs
	// under Lock). A kind with Remove is applied record by record from
	// other replicas' changes on a shared backend (Load for a changed
	// record, Remove for a deleted one) instead of reloading every kind.
	Remove func(key string)
	// Account, when set, names the account whose bucket holds a record on
	// Redis (Layout), from its key or its encoded value (value nil
	// when only the key is known; false: the key alone cannot say): the
	// records the ledger's scripts write in the account's slot.
	Account func(key string, value []byte) (string, bool)
}

// Options configure a store's backend and kernel (storage.Open).
type Options struct {
	// Dir is the Badger directory; it is created if missing.
	Dir string
	// GCInterval is how often value-log garbage collection runs; zero
	// disables it.
	GCInterval time.Duration
	// InMemory keeps everything in RAM (tests and benchmarks only).
	InMemory bool
	// SyncWrites fsyncs every group commit, so that acknowledged writes
	// survive a power loss, not only a process crash.
	SyncWrites bool
	Logger     *zap.Logger
	// OnCommit, if set, is told each group commit's duration and error
	// (the metrics' hook; the storage imports no metrics library).
	OnCommit func(time.Duration, error)
	// Redis, when set, selects the shared backend instead of Badger (Dir,
	// GCInterval, InMemory and SyncWrites then do not apply): the store
	// chooses (OpenEmbedded or OpenRedis).
	Redis *RedisOptions
}

// Kernel is the in-memory state's lock and its way to the database.
type Kernel struct {
	mu      sync.RWMutex
	backend Backend
	log     *zap.Logger
	kinds   []Kind
	seq     uint64

	// group commit (Batch, flushLoop)
	dirty map[string]struct{}
	names map[string]string // the last commit's dirty keys (MarkDirtyAt)
	// creates are the dirty keys written only if absent (MarkCreated).
	creates   map[string]struct{}
	appends   []Write
	open      *Batch
	wake      chan struct{}
	stopFlush chan struct{}
	flushDone chan struct{}
	closing   bool
	crashed   bool // Crash: nothing more is committed
	started   bool
	onCommit  func(time.Duration, error) // Options.OnCommit
	commits   uint64                     // successful commits, under mu (Reload)
	// inFlight is the batch being committed and inFlightWrites its writes,
	// under mu: taken from dirty but not yet in the backend, so that a
	// read of the backend meanwhile may miss them (Reload, Apply).
	inFlight       *Batch
	inFlightWrites []Write
	// trackers are the running Trackers, under mu.
	trackers []*Tracker
	// visits counts the records account-scoped reads walked (Visited):
	// tests assert with it that a read's cost follows its account's
	// records, not the gateway's.
	visits atomic.Uint64

	// scans lets Close wait for the scans under way before it closes the
	// backend, which panics under a scan; scansStop makes each of them
	// stop at its next record instead of reading on to its end.
	scans     sync.RWMutex
	scansStop atomic.Bool
}

// ErrClosed is the error of a scan begun or cut short by Close.
var ErrClosed = errors.New("storage closed")

// scanning starts a scan: false after Close began. done ends it.
func (k *Kernel) scanning() (ok bool) {
	k.scans.RLock()
	if k.scansStop.Load() {
		k.scans.RUnlock()
		return false
	}
	return true
}

func (k *Kernel) scanDone() { k.scans.RUnlock() }

// stopping wraps a scan's fn so that the scan ends at the next record
// once Close began.
func (k *Kernel) stopping(fn func(key, value []byte) (bool, error)) func(key, value []byte) (bool, error) {
	return func(key, value []byte) (bool, error) {
		if k.scansStop.Load() {
			return false, ErrClosed
		}
		return fn(key, value)
	}
}

// stopScans makes the scans under way stop and waits for them.
func (k *Kernel) stopScans() {
	k.scansStop.Store(true)
	k.scans.Lock()
	//lint:ignore SA2001 the lock is taken only to wait for the scans' read locks
	k.scans.Unlock()
}

// OpenEmbedded opens (or creates) the embedded backend: the Badger
// database at opts.Dir behind its journal, or in memory (InMemory).
func OpenEmbedded(opts Options, log *zap.Logger) (Backend, error) {
	if log == nil {
		log = zap.NewNop()
	}
	return openBadger(opts, log)
}

// New returns a kernel over an opened backend.
func New(b Backend, log *zap.Logger) *Kernel {
	return &Kernel{
		backend:   b,
		log:       log,
		dirty:     map[string]struct{}{},
		names:     map[string]string{},
		open:      newBatch(),
		wake:      make(chan struct{}, 1),
		stopFlush: make(chan struct{}),
		flushDone: make(chan struct{}),
	}
}

// ObserveCommits has fn told each group commit's duration and error
// (Options.OnCommit), on any backend. Call it before Start.
func (k *Kernel) ObserveCommits(fn func(time.Duration, error)) { k.onCommit = fn }

// Register adds record kinds. It panics on a prefix that overlaps one
// already registered (a key must name exactly one kind) and on a loaded
// kind without a Reset (a full reload could not replace its records).
func (k *Kernel) Register(kinds ...Kind) {
	for _, n := range kinds {
		if strings.HasPrefix(n.Prefix, "~") {
			panic(fmt.Sprintf("kernel: record prefix %q: '~' starts the backend's own keys", n.Prefix))
		}
		if n.Load != nil && n.Reset == nil {
			panic(fmt.Sprintf("kernel: record prefix %q: a loaded kind needs a Reset", n.Prefix))
		}
		if n.Slot != nil && !n.Append {
			panic(fmt.Sprintf("kernel: record prefix %q: only an Append kind has slots", n.Prefix))
		}
		if n.LogDeletes && n.Expires != nil {
			panic(fmt.Sprintf("kernel: record prefix %q: an expiring record leaves no mark in the deletion log", n.Prefix))
		}
		for _, o := range k.kinds {
			if strings.HasPrefix(n.Prefix, o.Prefix) || strings.HasPrefix(o.Prefix, n.Prefix) {
				panic(fmt.Sprintf("kernel: record prefix %q overlaps %q", n.Prefix, o.Prefix))
			}
		}
		k.kinds = append(k.kinds, n)
		if kk, ok := k.backend.(KindKeeper); ok {
			kk.KeepKind(n)
		}
	}
}

// Load loads every loaded kind into memory, in registration order (the
// warm-up), but the kinds whose prefix is in skip (restored otherwise, from
// a snapshot the caller validated with OpenVersion). Nothing commits until
// Start, so the caller may still fix up what it loaded, without the lock.
func (k *Kernel) Load(skip ...string) error {
	for _, kind := range k.kinds {
		if kind.Load == nil || slices.Contains(skip, kind.Prefix) {
			continue
		}
		err := k.backend.Scan(kind.Prefix, func(key, value []byte) (bool, error) {
			if err := kind.Load(key, value); err != nil {
				return false, fmt.Errorf("loading record %q: %w", key, err)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	// The records were read through the backend's memory mappings;
	// nothing reads most of them again.
	if l, ok := k.backend.(interface{ loaded() }); ok {
		l.loaded()
	}
	return nil
}

// Versioned reports whether the backend can tell its content's version
// (Versioned): Badger on disk, not in memory nor Redis.
func (k *Kernel) Versioned() bool {
	_, ok := k.backend.(Versioned)
	return ok
}

// OpenVersion is the version of the backend's content at open, when it
// can tell (Versioned).
func (k *Kernel) OpenVersion() (uint64, bool) {
	if v, ok := k.backend.(Versioned); ok {
		return v.OpenVersion()
	}
	return 0, false
}

// ClosedVersion, after Close, is the version of the backend's content
// that memory matches: false when the backend cannot tell or memory holds
// a change that did not reach it (made after the last commit). Callers
// hold the lock, so that memory does not change meanwhile.
func (k *Kernel) ClosedVersion() (uint64, bool) {
	v, ok := k.backend.(Versioned)
	if !ok || !k.closing || len(k.dirty) != 0 || len(k.appends) != 0 || k.inFlight != nil {
		return 0, false
	}
	return v.ClosedVersion()
}

// ReadVersion is Versioned.ReadVersion; an error when the backend cannot
// tell versions.
func (k *Kernel) ReadVersion() (uint64, error) {
	if v, ok := k.backend.(Versioned); ok {
		return v.ReadVersion()
	}
	return 0, errNoVersions
}

// ScanVersions is Versioned.ScanVersions; an error when the backend
// cannot tell versions.
func (k *Kernel) ScanVersions(prefix string, since uint64, fn func(key []byte, version uint64, value func(func([]byte) error) error) (bool, error)) (uint64, error) {
	v, ok := k.backend.(Versioned)
	if !ok {
		return 0, errNoVersions
	}
	return v.ScanVersions(prefix, since, fn)
}

// ScanDeletions is Versioned.ScanDeletions; an error when the backend
// cannot tell versions, or the kind under prefix has no LogDeletes.
func (k *Kernel) ScanDeletions(prefix string, since uint64, fn func(key []byte) error) error {
	v, ok := k.backend.(Versioned)
	if !ok {
		return errNoVersions
	}
	if !k.logsDeletes(prefix) {
		return fmt.Errorf("kernel: the deletions of the records under %q are not logged", prefix)
	}
	return v.ScanDeletions(prefix, since, fn)
}

// ForgetDeletions is Versioned.ForgetDeletions; nothing to do for a
// backend without versions.
func (k *Kernel) ForgetDeletions(prefix string, upTo uint64) (int, error) {
	if v, ok := k.backend.(Versioned); ok {
		return v.ForgetDeletions(prefix, upTo)
	}
	return 0, nil
}

// logsDeletes reports whether prefix is a registered kind's with
// LogDeletes.
func (k *Kernel) logsDeletes(prefix string) bool {
	for _, kind := range k.kinds {
		if kind.Prefix == prefix {
			return kind.LogDeletes
		}
	}
	return false
}

var errNoVersions = errors.New("kernel: the backend has no versions")

// Sync is Versioned.Sync; nothing to do for a backend without versions.
func (k *Kernel) Sync() error {
	if v, ok := k.backend.(Versioned); ok {
		return v.Sync()
	}
	return nil
}

// Tracker records which records under a prefix this process changed
// while it ran (Track): a snapshot of memory taken in steps, between
// which the lock is released, trusts only the records no change touched.
type Tracker struct {
	prefix string
	keys   map[string]struct{} // nil: only counted
	n      int
}

// Track starts a Tracker of the records under prefix: those changed and
// not yet durable now, and those every commit writes from now on until
// EndTrack (which adds those not yet durable then). keep: remember their
// keys, else only count them. Callers hold Lock.
func (k *Kernel) Track(prefix string, keep bool) *Tracker {
	t := &Tracker{prefix: prefix}
	if keep {
		t.keys = map[string]struct{}{}
	}
	t.unsettled(k)
	k.trackers = append(k.trackers, t)
	return t
}

// EndTrack stops t and adds the records under its prefix not yet
// durable now. Callers hold Lock.
func (k *Kernel) EndTrack(t *Tracker) {
	t.unsettled(k)
	k.trackers = slices.DeleteFunc(k.trackers, func(o *Tracker) bool { return o == t })
}

// unsettled adds the dirty records and those of the commit in flight.
func (t *Tracker) unsettled(k *Kernel) {
	for key := range k.dirty {
		t.add(key)
	}
	for _, w := range k.inFlightWrites {
		t.add(w.Key)
	}
}

func (t *Tracker) add(key string) {
	if !strings.HasPrefix(key, t.prefix) {
		return
	}
	t.n++
	if t.keys != nil {
		t.keys[key] = struct{}{}
	}
}

// Keys are the tracked records' keys (Track with keep), Changes how many
// changes it counted (a record changed twice counts twice). Read them
// after EndTrack, or under Lock.
func (t *Tracker) Keys() map[string]struct{} { return t.keys }
func (t *Tracker) Changes() int              { return t.n }

// Start begins committing: from now on, writes reach the backend.
func (k *Kernel) Start() {
	k.started = true
	go k.flushLoop()
}

// Close commits what is pending, stops background work and closes the
// backend.
func (k *Kernel) Close() error {
	k.mu.Lock()
	k.closing = true
	k.mu.Unlock()
	close(k.stopFlush)
	if k.started {
		<-k.flushDone
	}
	k.stopScans()
	return k.backend.Close()
}

// Crash stops the kernel as a killed process would, for the tests of a
// start after a crash: what is dirty is not committed (a commit under way
// finishes, as it may have before a kill), the journal is not moved into
// the database and its files stay. The backend is closed.
func (k *Kernel) Crash() error {
	k.mu.Lock()
	k.closing, k.crashed = true, true
	k.mu.Unlock()
	close(k.stopFlush)
	if k.started {
		<-k.flushDone
	}
	k.stopScans()
	if c, ok := k.backend.(interface{ crash() error }); ok {
		return c.crash()
	}
	return k.backend.Close()
}

// Lock, Unlock, RLock and RUnlock guard the domain stores' in-memory
// state and the kernel's pending writes.
func (k *Kernel) Lock()    { k.mu.Lock() }
func (k *Kernel) Unlock()  { k.mu.Unlock() }
func (k *Kernel) RLock()   { k.mu.RLock() }
func (k *Kernel) RUnlock() { k.mu.RUnlock() }

// NextSeq returns the next creation sequence number: it orders records
// created within one clock tick. Callers hold Lock.
func (k *Kernel) NextSeq() uint64 {
	k.seq++
	return k.seq
}

// Visited counts n records walked by an account-scoped read.
func (k *Kernel) Visited(n int) { k.visits.Add(uint64(n)) }

// Visits is the number of records account-scoped reads walked so far.
func (k *Kernel) Visits() uint64 { return k.visits.Load() }

// ObserveSeq raises the sequence to a loaded record's, so that new records
// sort after it. Called from Kind.Load.
func (k *Kernel) ObserveSeq(n uint64) { k.seq = max(k.seq, n) }

// Get decodes the stored record under key into v, reading the backend:
// for records that are not kept in memory, off the hot path. ErrNotFound
// when there is none.
func (k *Kernel) Get(key string, decode func(value []byte) error) error {
	return k.backend.Get(key, decode)
}

// Scan calls fn for every stored record whose key starts with prefix, in
// key order (see Backend.Scan for kinds with a Slot), until fn returns
// false or an error; it reads the backend.
func (k *Kernel) Scan(prefix string, fn func(key, value []byte) (bool, error)) error {
	if !k.scanning() {
		return ErrClosed
	}
	defer k.scanDone()
	return k.backend.Scan(prefix, k.stopping(fn))
}

// SlotScanner is a backend that stores the records of kinds with a Slot
// by slot (Badger on disk) and can start a scan at one.
type SlotScanner interface {
	// ScanFrom is Scan, but skips the records of those kinds whose slot
	// sorts before slot without reading them (the records stored alone
	// are all read).
	ScanFrom(prefix, slot string, fn func(key, value []byte) (bool, error)) error
}

// ScanFrom is Scan, but a backend that stores records by slot
// (SlotScanner) skips those of the slots before slot; other backends read
// them too, so the caller still tells them apart.
func (k *Kernel) ScanFrom(prefix, slot string, fn func(key, value []byte) (bool, error)) error {
	if !k.scanning() {
		return ErrClosed
	}
	defer k.scanDone()
	fn = k.stopping(fn)
	if b, ok := k.backend.(SlotScanner); ok {
		return b.ScanFrom(prefix, slot, fn)
	}
	return k.backend.Scan(prefix, fn)
}

// Backend is the database under the kernel.
func (k *Kernel) Backend() Backend { return k.backend }

// kind returns the registered kind of a key.
func (k *Kernel) kind(key string) (Kind, bool) {
	for _, kind := range k.kinds {
		if strings.HasPrefix(key, kind.Prefix) {
			return kind, true
		}
	}
	return Kind{}, false
}

// Reload replaces the in-memory state by the backend's, for a backend
// shared with other writers: it reads every loaded kind, then under Lock
// empties every loaded kind (Kind.Reset), loads every record in
// registration order and calls after. A commit of this process that
// lands while the backend is read would be missing from what was read, so
// Reload then reads again; changes still waiting for the flusher are
// committed first, since a reset would otherwise drop them.
func (k *Kernel) Reload(after func()) error {
	type record struct{ key, value []byte }
	for {
		k.mu.Lock()
		commits, wait := k.commits, k.unsettled()
		k.mu.Unlock()
		if wait != nil {
			if err := wait.Wait(); err != nil {
				return err
			}
			continue
		}
		read := make([][]record, len(k.kinds))
		for i, kind := range k.kinds {
			if kind.Load == nil {
				continue
			}
			err := k.backend.Scan(kind.Prefix, func(key, value []byte) (bool, error) {
				read[i] = append(read[i], record{slices.Clone(key), slices.Clone(value)})
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		k.mu.Lock()
		if k.commits != commits || k.unsettled() != nil {
			k.mu.Unlock()
			continue
		}
		for _, kind := range k.kinds {
			if kind.Load != nil {
				kind.Reset()
			}
		}
		var err error
		for i, kind := range k.kinds {
			for _, r := range read[i] {
				if lerr := kind.Load(r.key, r.value); lerr != nil && err == nil {
					err = fmt.Errorf("loading record %q: %w", r.key, lerr)
				}
			}
		}
		after()
		k.mu.Unlock()
		return err
	}
}

// unsettled is what a read of the whole backend must wait for: the open
// batch while changes wait for the flusher, the batch being committed
// while one is in flight; nil when memory and the backend agree on this
// process's changes. Callers hold Lock.
func (k *Kernel) unsettled() *Batch {
	if len(k.dirty) > 0 || len(k.appends) > 0 {
		return k.Pending()
	}
	return k.inFlight
}

// Apply applies other writers' changes of a few records to memory, for a
// backend shared with them: read fetches the current values of keys (nil:
// deleted), then under Lock apply gets each key and value, and after runs.
// A record this process changed and has not committed yet keeps its own
// value (its commit comes later and wins in the backend too); a commit of
// this process that lands while keys are read, or was in flight with one
// of keys, makes Apply read them again once it landed (the value read may
// predate it).
func (k *Kernel) Apply(keys []string, read func(keys []string) ([][]byte, error), apply func(key string, value []byte) error, after func()) error {
	for {
		k.mu.RLock()
		commits := k.commits
		k.mu.RUnlock()
		values, err := read(keys)
		if err != nil {
			return err
		}
		k.mu.Lock()
		if k.commits != commits {
			k.mu.Unlock()
			continue
		}
		if b := k.inFlight; b != nil && writesAny(k.inFlightWrites, keys) {
			k.mu.Unlock()
			if err := b.Wait(); err != nil {
				return err
			}
			continue
		}
		for i, key := range keys {
			if _, dirty := k.dirty[key]; dirty {
				continue
			}
			if aerr := apply(key, values[i]); aerr != nil && err == nil {
				err = fmt.Errorf("applying record %q: %w", key, aerr)
			}
		}
		after()
		k.mu.Unlock()
		return err
	}
}

// writesAny reports whether writes touch one of keys.
func writesAny(writes []Write, keys []string) bool {
	for _, w := range writes {
		if slices.Contains(keys, w.Key) {
			return true
		}
	}
	return false
}

// Incremental reports whether the kind of key has a Remove, so that
// another replica's change of it is applied alone.
func (k *Kernel) Incremental(key string) bool {
	kind, ok := k.kind(key)
	return ok && kind.Remove != nil
}

// RemoveRecord drops a record another writer deleted through its kind's
// Remove, if it has one. Callers hold Lock.
func (k *Kernel) RemoveRecord(key string) {
	if kind, ok := k.kind(key); ok && kind.Remove != nil {
		kind.Remove(key)
	}
}

// LoadRecord decodes one record into memory through its kind's Load.
// Callers hold Lock (Apply's apply).
func (k *Kernel) LoadRecord(key string, value []byte) error {
	kind, ok := k.kind(key)
	if !ok || kind.Load == nil {
		return nil
	}
	return kind.Load([]byte(key), value)
}
