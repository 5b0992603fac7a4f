package storage

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Ledger is the money seam (see package storage/ledger): one
// implementation is chosen with the backend when the store opens
// (openBackend), the in-process ledger (localLedger) on Badger or the
// shared one (package sharedledger) on Redis.
type Ledger = ledger.Ledger

// ledgerBackend is a Ledger with its lifecycle (see ledger.Backend).
type ledgerBackend = ledger.Backend

var _ ledgerBackend = (*localLedger)(nil)

// LedgerStore reserves and settles requests' money through the store's
// Ledger, and keeps the generation records.
type LedgerStore struct {
	k       *kernel.Kernel
	impl    ledgerBackend
	genSubs generationSubscribers // SubscribeGenerations
	// retention is how long generation records are kept
	// (SetGenerationRetention).
	retention retention
}

// OptimisticAttempts is how many snapshots of one admission are taken
// without the account's lock: past them, the account is so busy that its
// figures kept changing under the decision, and the snapshot holds the
// lock so that the next commit cannot fail for this process's requests.
const OptimisticAttempts = 2

// Snapshot reads into snap the figures of every level of a request, for
// an admission decision on snap.View (see Ledger): attempt counts the
// commits of this admission that answered ErrStale. The decision is then
// Commit, or Abandon on a refusal. Past maxAttempts it answers
// ErrContended. snap is filled in place (the in-process ledger writes the
// view where the caller keeps it: a view is 600 bytes, and copying it
// along the calls cost more than the rest of the snapshot).
func (s *LedgerStore) Snapshot(snap *Snapshot, accountID, keyHash string, attempt int) error {
	if attempt >= maxAttempts {
		return ErrContended
	}
	if err := s.impl.Admissible(); err != nil {
		return err
	}
	exclusive := attempt >= OptimisticAttempts
	if l, ok := s.impl.(*localLedger); ok {
		return l.snapshot(&snap.View, &snap.stamp, accountID, keyHash, exclusive)
	}
	var err error
	snap.View, snap.stamp, err = s.impl.Snapshot(accountID, keyHash, exclusive)
	return err
}

// Commit places the holds decided on snap, if the figures it read are
// unchanged; ErrStale otherwise (take a new snapshot and decide again).
func (s *LedgerStore) Commit(snap *Snapshot, h Holds) (*Reservation, error) {
	return s.impl.Commit(snap.stamp, h)
}

// Abandon ends a snapshot whose decision refused (nothing after Commit).
func (s *LedgerStore) Abandon(snap *Snapshot) { s.impl.Abandon(snap.stamp) }

// Reserve places holds without a decision (nothing but their sums' range
// is checked): for tools and tests that need running requests. Admission
// is Snapshot, the gateway's decision, then Commit.
func (s *LedgerStore) Reserve(accountID, keyHash string, h Holds) (*Reservation, error) {
	for attempt := 0; ; attempt++ {
		var snap Snapshot
		if err := s.Snapshot(&snap, accountID, keyHash, attempt); err != nil {
			return nil, err
		}
		res, err := s.Commit(&snap, h)
		if !errors.Is(err, ErrStale) {
			return res, err
		}
	}
}

// Settle turns a reservation into a charge, exactly once: it releases the
// holds, adds the cost to every level's counters, keeps the cost in the
// in-flight budget for the settlement window, and appends the generation
// record. It returns once all of that is durable.
func (s *LedgerStore) Settle(res *Reservation, c Charge) error {
	err := s.impl.Settle(res, c)
	if err != nil {
		s.impl.SettleFailed(res, c, err)
	}
	return err
}

// Release drops a reservation without a charge: the request failed before
// it cost anything.
func (s *LedgerStore) Release(res *Reservation) error {
	err := s.impl.Release(res)
	if err != nil {
		s.impl.ReleaseFailed(res, err)
	}
	return err
}

// ReapExpired releases the holds whose lease lapsed (see Ledger).
func (s *LedgerStore) ReapExpired() (int, error) { return s.impl.ReapExpired() }

// prefixGeneration keys the generation records (package record).
const prefixGeneration = record.GenerationPrefix

// prefixUpstreamID keys the generation ids by upstream id (package
// record).
const prefixUpstreamID = record.UpstreamIDPrefix

func (s *LedgerStore) kinds() []kernel.Kind {
	return append(ChunkedKinds(), kernel.Kind{Prefix: prefixUpstreamID, Append: true, Account: upstreamIDAccount})
}

// ChunkedKinds are the record kinds whose records the on-disk store keeps
// in chunks (kernel.Kind.Slot): a tool that opens the database itself
// (kernel.OpenBadger) passes them, so that it reads those records.
func ChunkedKinds() []kernel.Kind {
	return []kernel.Kind{{Prefix: prefixGeneration, Append: true, Slot: record.GenerationSlot, Account: generationAccount}}
}

// generationAccount is the account of a generation record, from its value:
// on Redis the record lives in its account's slot, where the ledger's
// script writes it.
func generationAccount(_ string, value []byte) (string, bool) {
	if value == nil {
		return "", false
	}
	id := gjson.GetBytes(value, "account_id").String()
	return id, id != ""
}

// upstreamIDAccount is the account of an upstream id's record, from its
// key ("gu/<account id>/<upstream id>").
func upstreamIDAccount(key string, _ []byte) (string, bool) {
	id, _, ok := strings.Cut(strings.TrimPrefix(key, prefixUpstreamID), "/")
	return id, ok && id != ""
}

// The ledger's errors (package storage/ledger).
var (
	ErrStale     = ledger.ErrStale
	ErrContended = ledger.ErrContended
	ErrSettled   = ledger.ErrSettled
)

// maxAttempts bounds the attempts of one ledger call: each retry follows
// another writer's success, so only a storm of them exhausts it.
const maxAttempts = 100

// Snapshot is one admission's read of the ledger (LedgerStore.Snapshot):
// the view its decision reads, and the stamp of what its commit compares.
// The caller keeps it (an admission allocates nothing for it).
type Snapshot struct {
	// View is every level's figures at one instant, for the decision.
	View  LedgerView
	stamp Stamp
}

// The ledger's figures, stamps, holds, reservations and charges (package
// storage/ledger).
type (
	Stamp       = ledger.Stamp
	LedgerView  = ledger.View
	Holds       = ledger.Holds
	Reservation = ledger.Reservation
	Charge      = ledger.Charge
	KeyCeiling  = ledger.KeyCeiling
	// CeilingError is a refusal of the shared per-key abuse ceiling.
	CeilingError = ledger.CeilingError
	// RateUse is a scope's use of its rate limits, RateHold what a
	// request takes from them.
	RateUse  = levels.Rate
	RateHold = levels.RateHold
)

// Generation is the record of one inference request (package record).
type (
	Generation      = record.Generation
	ContentFlag     = record.ContentFlag
	ProviderAttempt = record.ProviderAttempt
)

// NewGenerationID returns an id that sorts by creation time.
func NewGenerationID(t time.Time) string { return record.NewGenerationID(t) }

// Generation reads a stored generation record (from disk: it is not a hot
// path).
func (s *LedgerStore) Generation(id string) (Generation, error) {
	if err := s.expired(id); err != nil {
		return Generation{}, err
	}
	var g Generation
	err := s.k.Get(prefixGeneration+id, func(v []byte) error { return json.Unmarshal(v, &g) })
	return g, err
}

// AccountGeneration reads one of the account's generation records by any
// id its client saw: the generation id, or the provider's id of an answer
// passed through. Another account's generation is ErrNotFound.
func (s *LedgerStore) AccountGeneration(accountID, id string) (Generation, error) {
	g, err := s.Generation(id)
	var expired *ExpiredError
	if errors.As(err, &expired) {
		return Generation{}, err
	}
	if errors.Is(err, ErrNotFound) {
		var genID string
		if err = s.k.Get(prefixUpstreamID+accountID+"/"+id, func(v []byte) error { return json.Unmarshal(v, &genID) }); err == nil {
			g, err = s.Generation(genID)
		}
	}
	if err == nil && g.AccountID != accountID {
		return Generation{}, ErrNotFound
	}
	return g, err
}

// Generations calls fn for each stored generation in creation order, until
// fn returns false.
func (s *LedgerStore) Generations(fn func(Generation) bool) error {
	return s.k.Scan(prefixGeneration, func(_, v []byte) (bool, error) {
		var g Generation
		if err := json.Unmarshal(v, &g); err != nil {
			return false, err
		}
		return fn(g), nil
	})
}
