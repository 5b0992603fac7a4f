// Package storage persists the gateway's accounts, keys and counters in an
// embedded Badger database and serves every read from an in-memory copy, so
// that the request path never waits on disk for a lookup.
package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Errors returned by the store; handlers map them to HTTP statuses.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid")
	// ErrConflict: the change contradicts the current state (a duplicate,
	// or a workspace that still holds keys).
	ErrConflict = errors.New("conflict")
	// ErrForbidden: the change is never allowed (the default workspace
	// cannot be deleted).
	ErrForbidden = errors.New("forbidden")
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
	// SyncWrites fsyncs every group commit, so that acknowledged writes
	// survive a power loss, not only a process crash.
	SyncWrites bool
	Logger     *zap.Logger
}

// Store is the gateway's persistent state. All methods are safe for
// concurrent use. Memory is the truth for reads; every method that changes
// state returns only once the change is durable (group-committed, see
// flush.go), so a caller never acknowledges what a crash would lose.
type Store struct {
	db  *badger.DB
	log *zap.Logger

	mu        sync.RWMutex
	accounts  map[string]*Account
	keys      map[string]*APIKey        // by hash
	mgmtKeys  map[string]*ManagementKey // by hash
	purchases map[string][]Purchase     // by account id
	seq       uint64
	ledger    ledger

	byok accountRecords[Credential] // BYOK credentials by account id, then id

	destinations accountRecords[Destination]     // observability destinations by account id, then id
	endpoints    accountRecords[PrivateEndpoint] // private endpoints by account id, then id
	// Organizations' members, workspaces and guardrails, by account id,
	// then id (members.go, workspaces.go, guardrails.go).
	members    accountRecords[Member]
	workspaces accountRecords[Workspace]
	guardrails accountRecords[Guardrail]
	// rules caches each key's effective rules (rules.go); rulesGen
	// invalidates them.
	rules    sync.Map
	rulesGen atomic.Uint64

	genSubs generationSubscribers // SubscribeGenerations

	endUsers  accountRecords[EndUser] // by account id, then user (endusers.go)
	analytics *rollup                 // usage rollup (analytics.go)
	scim      *scimState              // SCIM tokens, users, groups, mappings, sync jobs (scim.go)

	// group commit (flush.go)
	dirty     map[string]struct{}
	appends   []kv
	open      *batch
	wake      chan struct{}
	stopFlush chan struct{}
	flushDone chan struct{}
	closing   bool

	stopGC chan struct{}
	gcDone chan struct{}
}

// Badger key prefixes, one per record type.
const (
	prefixAccount  = "a/"
	prefixPurchase = "p/"
	prefixMgmtKey  = "m/"
	prefixAPIKey   = "k/"
	prefixBYOK     = "b/" // b/<account id>/<credential id>
	// o/<account id>/<destination id>: observability destinations
	prefixDestination = "o/"
	// pe/<account id>/<endpoint id>: private endpoints
	prefixPrivateEndpoint = "pe/"
	// prefixMember, prefixWorkspace and prefixGuardrail are in their files.
	// Generation records are append-only and not loaded into memory.
	prefixGeneration = "g/"
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
		WithIndexCacheSize(8 << 20).
		WithSyncWrites(opts.SyncWrites)
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
		byok:      map[string]map[string]*Credential{},
		endUsers:  map[string]map[string]*EndUser{},
		ledger:    newLedger(),
		dirty:     map[string]struct{}{},
		open:      &batch{done: make(chan struct{})},
		wake:      make(chan struct{}, 1),
		stopFlush: make(chan struct{}),
		flushDone: make(chan struct{}),
		stopGC:    make(chan struct{}),
		gcDone:    make(chan struct{}),
	}
	s.destinations = map[string]map[string]*Destination{}
	s.endpoints = map[string]map[string]*PrivateEndpoint{}
	s.members = map[string]map[string]*Member{}
	s.workspaces = map[string]map[string]*Workspace{}
	s.guardrails = map[string]map[string]*Guardrail{}
	s.scim = newSCIMState()
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.ensureDefaultWorkspaces()
	if err := s.buildAnalytics(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("building the analytics rollup: %w", err)
	}
	go s.flushLoop()
	if opts.GCInterval > 0 && !opts.InMemory {
		go s.gcLoop(opts.GCInterval)
	} else {
		close(s.gcDone)
	}
	return s, nil
}

// Close commits what is pending, stops background work and closes the
// database.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	close(s.stopFlush)
	<-s.flushDone
	close(s.stopGC)
	<-s.gcDone
	return s.db.Close()
}

// load reads accounts, purchases and keys into the in-memory index (the
// warm-up). Generation records stay on disk.
func (s *Store) load() error {
	return s.db.View(func(txn *badger.Txn) error {
		for _, prefix := range []string{prefixAccount, prefixPurchase, prefixMgmtKey, prefixAPIKey, prefixBYOK, prefixEndUser,
			prefixDestination, prefixPrivateEndpoint, prefixMember, prefixWorkspace, prefixGuardrail,
			prefixWorkspaceUsage, prefixMemberUsage, prefixSCIM} {
			opts := badger.DefaultIteratorOptions
			opts.Prefix = []byte(prefix)
			it := txn.NewIterator(opts)
			for it.Rewind(); it.Valid(); it.Next() {
				item := it.Item()
				load := func(v []byte) error { return s.loadRecord(prefix, v) }
				if prefix == prefixWorkspaceUsage || prefix == prefixMemberUsage {
					key := item.KeyCopy(nil)
					load = func(v []byte) error { return s.loadUsage(prefix, key, v) }
				}
				if prefix == prefixSCIM {
					key := string(item.KeyCopy(nil))
					load = func(v []byte) error { return s.loadSCIM(key, v) }
				}
				if err := item.Value(load); err != nil {
					it.Close()
					return fmt.Errorf("loading record %q: %w", item.Key(), err)
				}
			}
			it.Close()
		}
		return nil
	})
}

// loadRecord decodes one record of the given type into memory.
func (s *Store) loadRecord(prefix string, v []byte) error {
	switch prefix {
	case prefixAccount:
		var a Account
		if err := json.Unmarshal(v, &a); err != nil {
			return err
		}
		s.accounts[a.ID] = &a
	case prefixPurchase:
		var p Purchase
		if err := json.Unmarshal(v, &p); err != nil {
			return err
		}
		s.purchases[p.AccountID] = append(s.purchases[p.AccountID], p)
	case prefixMgmtKey:
		var m ManagementKey
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		s.mgmtKeys[m.Hash] = &m
	case prefixAPIKey:
		var k APIKey
		if err := json.Unmarshal(v, &k); err != nil {
			return err
		}
		s.keys[k.Hash] = &k
		s.seq = max(s.seq, k.Seq)
	case prefixBYOK:
		return s.loadBYOK(v)
	case prefixEndUser:
		return s.loadEndUser(v)
	case prefixDestination:
		return s.loadDestination(v)
	case prefixPrivateEndpoint:
		return s.loadPrivateEndpoint(v)
	case prefixMember:
		return s.loadMember(v)
	case prefixWorkspace:
		return s.loadWorkspace(v)
	case prefixGuardrail:
		return s.loadGuardrail(v)
	}
	return nil
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

// badgerLogger routes Badger's log lines into zap.
type badgerLogger struct{ l *zap.SugaredLogger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Errorf(f, a...) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warnf(f, a...) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debugf(f, a...) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Debugf(f, a...) }
