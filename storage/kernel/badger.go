package kernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"go.uber.org/zap"
)

// Backend is the database under the kernel: the seam where a shared
// database for several replicas plugs in (see the package doc for what
// such a backend must add).
type Backend interface {
	// Commit writes one batch, all or nothing as far as the backend
	// allows, and returns once it is durable.
	Commit(writes []Write) error
	// Get calls decode with the value stored under key; ErrNotFound when
	// there is none.
	Get(key string, decode func(value []byte) error) error
	// Scan calls fn for each record under prefix in key order until fn
	// returns false or an error; key and value are valid only during fn.
	// (On disk, the records of a kind with a Slot come after the others,
	// in slot order: see chunker.)
	Scan(prefix string, fn func(key, value []byte) (bool, error)) error
	Close() error
}

// KindKeeper is a backend that keeps some kinds' records its own way
// (an expiry, an account's bucket, chunks, a log of deletions): Register
// tells it each kind before the first commit.
type KindKeeper interface {
	KeepKind(Kind)
}

var (
	_ KindKeeper = (*journal)(nil)
	_ KindKeeper = (*badgerBackend)(nil)
	_ KindKeeper = (*RedisBackend)(nil)
)

// Versioned is a backend that can say which version of its content it
// opened on and closed with, so that a snapshot of memory state written at
// a clean close can be recognized as current at the next open (Badger on
// disk: its highest commit version, which every commit raises).
type Versioned interface {
	// OpenVersion is the version the backend opened on; false when it
	// cannot tell (it had a journal to replay).
	OpenVersion() (uint64, bool)
	// ClosedVersion is the version it closed with, everything written;
	// false before Close, or when Close left something unwritten.
	ClosedVersion() (uint64, bool)
	// ReadVersion moves the writes still in the journal into the
	// database, then returns the version of everything committed to it:
	// every later commit gets a higher one.
	ReadVersion() (uint64, error)
	// ScanVersions calls fn for each record under prefix (not a chunked
	// kind) whose version, the highest commit that wrote it, is above
	// since, in key order, without reading its value: fn reads it
	// through value if it needs it. It returns the version it read at.
	// Writes still in the journal are moved into the database first. A
	// record deleted after since is not among them, nor always its
	// deletion: ScanDeletions names those of a kind with LogDeletes.
	ScanVersions(prefix string, since uint64, fn func(key []byte, version uint64, value func(func([]byte) error) error) (bool, error)) (uint64, error)
	// ScanDeletions calls fn with the key of each record under prefix (a
	// kind with LogDeletes) whose last deletion was committed at a
	// version above since; it may have been written again since.
	ScanDeletions(prefix string, since uint64, fn func(key []byte) error) error
	// ForgetDeletions drops what the deletion log holds of the records
	// under prefix deleted at a version at most upTo (a snapshot of upTo
	// covering prefix is durably in place), and returns how many.
	ForgetDeletions(prefix string, upTo uint64) (int, error)
	// Sync makes everything committed so far durable on disk, not only
	// safe from a crash of the process.
	Sync() error
}

// valueThreshold is the size from which Badger keeps a value in its value
// log rather than in the LSM tree: index records (a provider's answer id)
// stay in the tree, records and generations go to the log.
const valueThreshold = 256

// badgerBackend is the embedded single-node Backend.
type badgerBackend struct {
	db        *badger.DB
	dir       string      // on disk; empty in memory
	exp       expiries    // the records' expiries (useExpiry)
	deletions deletionLog // the log of deletions (logDeletion)
	stopGC    chan struct{}
	gcDone    chan struct{}
	pageOut   chan struct{} // closed when pageOutLoop returned
}

// openBadger opens the embedded backend: on disk, Badger with its commits
// journaled (openJournal); in memory, Badger alone.
func openBadger(opts Options, log *zap.Logger) (Backend, error) {
	db, err := openBadgerDB(opts, log)
	if err != nil {
		return nil, err
	}
	if opts.InMemory {
		return db, nil
	}
	j, err := openJournal(db, opts.Dir, opts.SyncWrites, log)
	if err != nil {
		_ = db.Close() // opening failed with err, which is returned; closing only frees what was opened
		return nil, err
	}
	return j, nil
}

func openBadgerDB(opts Options, log *zap.Logger) (*badgerBackend, error) {
	bopts := badger.DefaultOptions(opts.Dir).
		WithLogger(badgerLogger{log.Sugar()}).
		WithNumVersionsToKeep(1).
		WithMemTableSize(16 << 20).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20).
		WithSyncWrites(opts.SyncWrites).
		// Only the flusher writes, one transaction at a time, and its
		// transactions read nothing: there is never a conflict to detect,
		// so Badger need not track every key written.
		WithDetectConflicts(false).
		// Tables are written uncompressed: Snappy on every memtable flush
		// and compaction (and the decompression of every block compaction
		// reads back) cost about a tenth of the gateway's CPU per request,
		// for records that are mostly small JSON. Tables written
		// compressed before stay readable: Badger records each table's
		// compression in its manifest, and the block cache still serves them.
		WithCompression(options.None)
	if opts.InMemory {
		bopts = bopts.WithInMemory(true).WithDir("").WithValueDir("")
	} else {
		// Values from valueThreshold bytes up go to the value log, written
		// once, with only a pointer in the LSM tree. A generation record
		// (about 500 bytes, one per request, kept forever) otherwise
		// passes through the memtable, its L0 table and every compaction
		// below: at the gateway's write rate that was most of Badger's
		// CPU (BenchmarkBadgerCommit: about twice the CPU per record at
		// saturation). The account and key records rewritten by each
		// commit leave garbage there instead, which value-log GC
		// (gc_interval) reclaims from any file that is half garbage.
		// (In memory, Badger refuses values above the threshold.)
		bopts = bopts.WithValueThreshold(valueThreshold)
	}
	db, err := badger.Open(bopts)
	if err != nil {
		return nil, fmt.Errorf("opening badger at %q: %w", opts.Dir, err)
	}
	b := &badgerBackend{db: db, stopGC: make(chan struct{}), gcDone: make(chan struct{}), pageOut: make(chan struct{})}
	if !opts.InMemory {
		b.dir = opts.Dir
	}
	if opts.GCInterval > 0 && !opts.InMemory {
		go b.gcLoop(opts.GCInterval)
	} else {
		close(b.gcDone)
	}
	if opts.InMemory {
		close(b.pageOut)
	} else {
		go pageOutLoop(opts.Dir, b.stopGC, b.pageOut)
	}
	return b, nil
}

// loaded hands back the value-log pages the warm-up read.
func (b *badgerBackend) loaded() {
	if b.dir != "" {
		pageOutDir(b.dir)
	}
}

func (b *badgerBackend) Close() error {
	close(b.stopGC)
	<-b.gcDone
	<-b.pageOut
	return b.db.Close()
}

// gcLoop runs value-log GC until no more rewriting is worthwhile, on every tick.
func (b *badgerBackend) gcLoop(every time.Duration) {
	defer close(b.gcDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stopGC:
			return
		case <-t.C:
			for b.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

// encode marshals a record; a type with its own encoder is called directly,
// since encoding/json would re-validate and compact its output.
func encode(v any) ([]byte, error) {
	switch v := v.(type) {
	case json.Marshaler:
		return v.MarshalJSON()
	case string:
		// An index record (a provider's answer id to its generation):
		// ids need no escaping, and encoding/json's reflection cost more
		// than the quoting.
		if plainJSONString(v) {
			return append(append(append(make([]byte, 0, len(v)+2), '"'), v...), '"'), nil
		}
	}
	return json.Marshal(v)
}

// plainJSONString reports whether encoding/json writes s quoted as it is:
// printable ASCII without quotes, backslashes or HTML's <, > and &.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// Commit writes one batch in one transaction, splitting only when Badger
// says the transaction is too big (then each part is still a consistent
// prefix of the snapshot's records, and the flusher never reports success
// before all parts landed).
func (b *badgerBackend) Commit(writes []Write) error {
	// The batch's keys in one buffer and its entries in one slice: two
	// allocations per commit instead of two per record.
	n := 0
	for _, w := range writes {
		n += len(w.Key)
	}
	keys := make([]byte, 0, n)
	entries := make([]badger.Entry, len(writes))
	txn := b.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for i, w := range writes {
		keys = append(keys, w.Key...)
		key := keys[len(keys)-len(w.Key) : len(keys) : len(keys)]
		err := b.put(txn, key, w, &entries[i])
		if errors.Is(err, badger.ErrTxnTooBig) {
			if txn, err = b.split(txn); err == nil {
				entries[i] = badger.Entry{}
				err = b.put(txn, key, w, &entries[i])
			}
		}
		if err == nil && w.Value == nil && b.deletions.logs(w.Key) {
			// With the deletion, or after it when the transaction
			// splits: never a marker older than its tombstone.
			if err = logDeletion(txn, key); errors.Is(err, badger.ErrTxnTooBig) {
				if txn, err = b.split(txn); err == nil {
					err = logDeletion(txn, key)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return txn.Commit()
}

// split commits a transaction Badger found too big and starts the next.
func (b *badgerBackend) split(txn *badger.Txn) (*badger.Txn, error) {
	if err := txn.Commit(); err != nil {
		return txn, err
	}
	return b.db.NewTransaction(true), nil
}

// put adds one write to a transaction, in e unless it deletes; a record
// that expires gets its TTL.
func (b *badgerBackend) put(txn *badger.Txn, key []byte, w Write, e *badger.Entry) error {
	if w.Value == nil {
		return txn.Delete(key)
	}
	v, err := encode(w.Value)
	if err != nil {
		return err
	}
	e.Key, e.Value = key, v
	exp := w.ExpiresAt
	if exp == 0 {
		exp = b.exp.at(w.Key, v)
	}
	e.ExpiresAt = ttlSeconds(exp)
	return txn.SetEntry(e)
}

func (b *badgerBackend) Get(key string, decode func(value []byte) error) error {
	return b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte(key))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return item.Value(decode)
	})
}

func (b *badgerBackend) Scan(prefix string, fn func(key, value []byte) (bool, error)) error {
	return b.scanFrom(prefix, prefix, fn)
}

// scanFrom is Scan from the first key at or after from.
func (b *badgerBackend) scanFrom(prefix, from string, fn func(key, value []byte) (bool, error)) error {
	return b.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte(prefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek([]byte(from)); it.Valid(); it.Next() {
			item := it.Item()
			more := true
			err := item.Value(func(v []byte) error {
				var err error
				more, err = fn(item.Key(), v)
				return err
			})
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
		return nil
	})
}

// badgerLogger routes Badger's log lines into zap.
type badgerLogger struct{ l *zap.SugaredLogger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Errorf(f, a...) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warnf(f, a...) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debugf(f, a...) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Debugf(f, a...) }
