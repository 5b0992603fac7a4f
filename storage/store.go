// Package storage holds the gateway's state: accounts, keys, credits and
// the counters that cap them, organizations, secrets, analytics and SCIM
// records. Every read is served from memory, so that the request path
// never waits on disk for a lookup; every write goes through the kernel
// (package storage/kernel), which makes it durable before it returns.
package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// Errors returned by the store; handlers map them to HTTP statuses.
var (
	ErrNotFound = kernel.ErrNotFound
	ErrInvalid  = errors.New("invalid")
	// ErrConflict: the change contradicts the current state (a duplicate,
	// or a workspace that still holds keys).
	ErrConflict = errors.New("conflict")
	// ErrForbidden: the change is never allowed (the default workspace
	// cannot be deleted).
	ErrForbidden = errors.New("forbidden")
)

// ErrNotDurable is returned when a write could not be committed in time; the
// kernel keeps retrying it.
var ErrNotDurable = kernel.ErrNotDurable

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
// state returns only once the change is durable (group-committed by the
// kernel), so a caller never acknowledges what a crash would lose.
type Store struct {
	k *kernel.Kernel

	accounts  map[string]*Account
	keys      map[string]*APIKey        // by hash
	mgmtKeys  map[string]*ManagementKey // by hash
	purchases map[string][]Purchase     // by account id
	ledger    ledger

	byok kernel.Records[Credential] // BYOK credentials by account id, then id

	destinations kernel.Records[Destination]     // observability destinations by account id, then id
	endpoints    kernel.Records[PrivateEndpoint] // private endpoints by account id, then id
	// Organizations' members, workspaces and guardrails, by account id,
	// then id (members.go, workspaces.go, guardrails.go).
	members    kernel.Records[Member]
	workspaces kernel.Records[Workspace]
	guardrails kernel.Records[Guardrail]
	// rules caches each key's effective rules (rules.go); rulesGen
	// invalidates them.
	rules    sync.Map
	rulesGen atomic.Uint64

	genSubs generationSubscribers // SubscribeGenerations

	endUsers  kernel.Records[EndUser] // by account id, then user (endusers.go)
	analytics *rollup                 // usage rollup (analytics.go)
	scim      *scimState              // SCIM tokens, users, groups, mappings, sync jobs (scim.go)
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
	k, err := kernel.Open(kernel.Options(opts))
	if err != nil {
		return nil, err
	}
	s := &Store{
		k:         k,
		accounts:  map[string]*Account{},
		keys:      map[string]*APIKey{},
		mgmtKeys:  map[string]*ManagementKey{},
		purchases: map[string][]Purchase{},
		byok:      kernel.Records[Credential]{},
		endUsers:  kernel.Records[EndUser]{},
		ledger:    newLedger(),
	}
	s.destinations = kernel.Records[Destination]{}
	s.endpoints = kernel.Records[PrivateEndpoint]{}
	s.members = kernel.Records[Member]{}
	s.workspaces = kernel.Records[Workspace]{}
	s.guardrails = kernel.Records[Guardrail]{}
	s.scim = newSCIMState()
	s.registerKinds()
	if err := k.Start(); err != nil {
		_ = k.Close()
		return nil, err
	}
	s.ensureDefaultWorkspaces()
	if err := s.buildAnalytics(); err != nil {
		_ = k.Close()
		return nil, fmt.Errorf("building the analytics rollup: %w", err)
	}
	return s, nil
}

// Close commits what is pending, stops background work and closes the
// database.
func (s *Store) Close() error { return s.k.Close() }

// registerKinds tells the kernel how to load and snapshot each kind of
// record, in load order: workspace and member usage counters decorate
// the workspaces and members loaded before them.
func (s *Store) registerKinds() {
	s.k.Register(
		kernel.Kind{Prefix: prefixAccount, Load: s.loadAccount, Snapshot: s.accountSnapshot},
		kernel.Kind{Prefix: prefixPurchase, Load: s.loadPurchase, Append: true},
		kernel.Kind{Prefix: prefixMgmtKey, Load: s.loadMgmtKey, Snapshot: s.mgmtKeySnapshot},
		kernel.Kind{Prefix: prefixAPIKey, Load: s.loadAPIKey, Snapshot: s.apiKeySnapshot},
		s.byok.Kind(prefixBYOK, func(c *Credential) { s.k.ObserveSeq(c.Seq) }),
		s.endUsers.Kind(prefixEndUser, nil),
		s.destinations.Kind(prefixDestination, func(d *Destination) { s.k.ObserveSeq(d.Seq) }),
		s.endpoints.Kind(prefixPrivateEndpoint, func(e *PrivateEndpoint) { s.k.ObserveSeq(e.Seq) }),
		s.members.Kind(prefixMember, nil),
		s.workspaces.Kind(prefixWorkspace, (*Workspace).initMaps),
		s.guardrails.Kind(prefixGuardrail, (*Guardrail).initMaps),
		kernel.Kind{Prefix: prefixWorkspaceUsage, Load: func(k, v []byte) error { return s.loadUsage(prefixWorkspaceUsage, k, v) }, Snapshot: s.usageSnapshot},
		kernel.Kind{Prefix: prefixMemberUsage, Load: func(k, v []byte) error { return s.loadUsage(prefixMemberUsage, k, v) }, Snapshot: s.usageSnapshot},
		kernel.Kind{Prefix: prefixSCIM, Load: s.loadSCIM, Snapshot: s.scimSnapshot},
		kernel.Kind{Prefix: prefixGeneration, Append: true},
		kernel.Kind{Prefix: prefixFeedback, Append: true},
	)
}

func (s *Store) loadAccount(_, v []byte) error {
	var a Account
	if err := json.Unmarshal(v, &a); err != nil {
		return err
	}
	s.accounts[a.ID] = &a
	return nil
}

func (s *Store) loadPurchase(_, v []byte) error {
	var p Purchase
	if err := json.Unmarshal(v, &p); err != nil {
		return err
	}
	s.purchases[p.AccountID] = append(s.purchases[p.AccountID], p)
	return nil
}

func (s *Store) loadMgmtKey(_, v []byte) error {
	var m ManagementKey
	if err := json.Unmarshal(v, &m); err != nil {
		return err
	}
	s.mgmtKeys[m.Hash] = &m
	return nil
}

func (s *Store) loadAPIKey(_, v []byte) error {
	var k APIKey
	if err := json.Unmarshal(v, &k); err != nil {
		return err
	}
	s.keys[k.Hash] = &k
	s.k.ObserveSeq(k.Seq)
	return nil
}

func (s *Store) accountSnapshot(key string) any {
	if a, ok := s.accounts[key[len(prefixAccount):]]; ok {
		return *a
	}
	return nil
}

func (s *Store) apiKeySnapshot(key string) any {
	if k, ok := s.keys[key[len(prefixAPIKey):]]; ok {
		return *k
	}
	return nil
}

func (s *Store) mgmtKeySnapshot(key string) any {
	if m, ok := s.mgmtKeys[key[len(prefixMgmtKey):]]; ok {
		return *m
	}
	return nil
}
