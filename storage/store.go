// Package storage persists the gateway's accounts, keys and counters in an
// embedded Badger database and serves every read from an in-memory copy, so
// that the request path never waits on disk for a lookup.
package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Errors returned by the store; handlers map them to HTTP statuses.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid")
)

// now is the store's clock; tests replace it to cross UTC boundaries.
var now = time.Now

// Options configure Open.
type Options struct {
	// Dir is the Badger directory; it is created if missing.
	Dir string
	// GCInterval is how often value-log garbage collection runs; zero
	// disables it.
	GCInterval time.Duration
	// InMemory keeps everything in RAM (tests and benchmarks only).
	InMemory bool
	Logger   *zap.Logger
}

// Store is the gateway's persistent state. All methods are safe for
// concurrent use. Writes commit to Badger first and are published to the
// in-memory index only after the commit succeeded, so readers never see a
// state that is not durable.
type Store struct {
	db  *badger.DB
	log *zap.Logger

	mu        sync.RWMutex
	accounts  map[string]*Account
	keys      map[string]*APIKey        // by hash
	mgmtKeys  map[string]*ManagementKey // by hash
	purchases map[string][]Purchase     // by account id
	seq       uint64

	stopGC chan struct{}
	gcDone chan struct{}
}

// Badger key prefixes, one per record type.
const (
	prefixAccount  = "a/"
	prefixPurchase = "p/"
	prefixMgmtKey  = "m/"
	prefixAPIKey   = "k/"
)

// Open opens (or creates) the database at opts.Dir and loads it into memory.
func Open(opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	bopts := badger.DefaultOptions(opts.Dir).
		WithLogger(badgerLogger{log.Sugar()}).
		WithNumVersionsToKeep(1).
		WithMemTableSize(16 << 20).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20)
	if opts.InMemory {
		bopts = bopts.WithInMemory(true).WithDir("").WithValueDir("")
	}
	db, err := badger.Open(bopts)
	if err != nil {
		return nil, fmt.Errorf("opening badger at %q: %w", opts.Dir, err)
	}
	s := &Store{
		db:        db,
		log:       log,
		accounts:  map[string]*Account{},
		keys:      map[string]*APIKey{},
		mgmtKeys:  map[string]*ManagementKey{},
		purchases: map[string][]Purchase{},
		stopGC:    make(chan struct{}),
		gcDone:    make(chan struct{}),
	}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if opts.GCInterval > 0 && !opts.InMemory {
		go s.gcLoop(opts.GCInterval)
	} else {
		close(s.gcDone)
	}
	return s, nil
}

// Close stops background work and closes the database.
func (s *Store) Close() error {
	close(s.stopGC)
	<-s.gcDone
	return s.db.Close()
}

// load reads every record into the in-memory index (the warm-up).
func (s *Store) load() error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := string(item.Key())
			err := item.Value(func(v []byte) error {
				switch {
				case hasPrefix(k, prefixAccount):
					var a Account
					if err := json.Unmarshal(v, &a); err != nil {
						return err
					}
					s.accounts[a.ID] = &a
				case hasPrefix(k, prefixPurchase):
					var p Purchase
					if err := json.Unmarshal(v, &p); err != nil {
						return err
					}
					s.purchases[p.AccountID] = append(s.purchases[p.AccountID], p)
				case hasPrefix(k, prefixMgmtKey):
					var m ManagementKey
					if err := json.Unmarshal(v, &m); err != nil {
						return err
					}
					s.mgmtKeys[m.Hash] = &m
				case hasPrefix(k, prefixAPIKey):
					var ak APIKey
					if err := json.Unmarshal(v, &ak); err != nil {
						return err
					}
					s.keys[ak.Hash] = &ak
					s.seq = max(s.seq, ak.Seq)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("loading record %q: %w", k, err)
			}
		}
		return nil
	})
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// gcLoop runs value-log GC until no more rewriting is worthwhile, on every tick.
func (s *Store) gcLoop(every time.Duration) {
	defer close(s.gcDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stopGC:
			return
		case <-t.C:
			for s.db.RunValueLogGC(0.5) == nil {
			}
		}
	}
}

// write commits the given records in one transaction.
func (s *Store) write(recs map[string]any) error {
	return s.db.Update(func(txn *badger.Txn) error {
		for k, v := range recs {
			if v == nil {
				if err := txn.Delete([]byte(k)); err != nil {
					return err
				}
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			if err := txn.Set([]byte(k), b); err != nil {
				return err
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
