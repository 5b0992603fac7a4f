package storage

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Ledger is the money seam: admission and charging, each one atomic
// operation over every level that caps a request. One implementation is
// chosen with the backend when the store opens (openBackend): the in-process ledger
// (localLedger, under the kernel's one lock) on Badger, or a shared
// ledger for several replicas (sharedLedger on Redis: one server-side
// script per call, one round trip at admission and one at settlement).
// Every implementation applies the same arithmetic to the levels
// (package storage/levels) and passes the same conformance tests
// (TestLedgerConformance).
//
// Admission is decided outside the ledger, on a snapshot: its rules
// (free-model request caps, guardrail and workspace budgets, key cap,
// balance, in-flight budget: handlers' admission and package billing)
// belong to the gateway's policy, not to storage, and their rejections
// carry the policy's messages. So a reservation is two calls with the
// decision between them, made by the caller on the figures the first
// returned, and the ledger never calls back into it:
//
//   - Snapshot reads every level's figures at one instant (a LedgerView)
//     and what a commit compares: the in-process ledger takes the kernel's
//     lock only to copy them, a shared one reads its copy of the
//     account's money fields;
//   - Commit places the holds decided only if every figure the decision
//     read is unchanged (compare and set: the in-process ledger compares
//     them under the kernel's lock, the shared one in the script that
//     writes them), and answers ErrStale otherwise: the caller takes a new
//     snapshot and decides again.
//
// A decision is a pure function of the view, so deciding again on fresh
// figures is what deciding under one lock would have done. On an account
// so busy that its figures keep changing under the decision, the later
// attempts' snapshots are exclusive (Snapshot's attempt): they hold the
// account's own lock (never the kernel's) until Commit or Abandon, so that
// no other reservation or settlement of this process changes the figures
// meanwhile and the commit succeeds unless another replica wrote them.
//
// Holds carry a lease in a shared ledger, since a replica may die holding
// them; Settle releases the holds, adds the charge to every counter and
// appends the generation record in one step, and returns only once the
// database accepted it.
type Ledger interface {
	// Snapshot reads the figures of every level of a request at one
	// instant, for a decision on the view, and the stamp its commit
	// compares; exclusive: the stamp keeps the account's lock until
	// Commit or Abandon (see above).
	Snapshot(accountID, keyHash string, exclusive bool) (LedgerView, Stamp, error)
	// Commit places the holds decided on a snapshot if the figures it
	// read are unchanged, else answers ErrStale (a stamp committed once is
	// stale). It ends the snapshot either way.
	Commit(st Stamp, h Holds) (*Reservation, error)
	// Abandon ends a snapshot without a commit (the decision refused);
	// after Commit it does nothing.
	Abandon(st Stamp)
	// Settle turns a reservation into a charge, exactly once.
	Settle(res *Reservation, c Charge) error
	// Release drops a reservation without a charge.
	Release(res *Reservation) error
	// ReapExpired releases the holds whose lease lapsed (the replica that
	// placed them stopped renewing them: it died) and reports how many.
	// The in-process ledger's holds live and die with its process: none.
	ReapExpired() (int, error)
}

// ledgerBackend is a Ledger with what the store needs of it besides
// reservations: its lifecycle, and for a ledger whose counters live in a
// shared database, bringing them into the records in memory.
type ledgerBackend interface {
	Ledger
	// start runs background work (the lease keeper) until ctx ends; wait
	// returns once it stopped.
	start(ctx context.Context)
	wait()
	// admissible is nil when the ledger may decide a reservation now
	// (ErrUnavailable, ErrResyncing otherwise).
	admissible() error
	// settleFailed is called with a settlement that failed for err: a
	// shared ledger retries one its database could not take until it lands.
	settleFailed(res *Reservation, c Charge, err error)
	// releaseFailed is called with a release that failed for err: a
	// shared ledger retries it as settleFailed does.
	releaseFailed(res *Reservation, err error)
	// loadAll reads every account's counters from the ledger's database;
	// refresh re-reads the named fields of the named accounts (changes
	// other replicas announced on the feed); overlay and overlayAll
	// apply what was read to the records in memory (under the kernel's
	// lock).
	loadAll() error
	refresh(fields map[string][]string) error
	overlay(accountID string)
	overlayAll()
	// shareKeyCeiling makes the per-key abuse ceiling one bucket per key
	// for every replica, when the ledger is shared.
	shareKeyCeiling(c *KeyCeiling)
	// held is what running requests hold against an account's balance and
	// against a key's cap ("": none), as this replica last knows it.
	held(accountID, keyHash string) (account, key money.Amount)
}

var (
	_ Ledger = (*localLedger)(nil)
	_ Ledger = (*sharedLedger)(nil)
)

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
	if err := s.impl.admissible(); err != nil {
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
		s.impl.settleFailed(res, c, err)
	}
	return err
}

// Release drops a reservation without a charge: the request failed before
// it cost anything.
func (s *LedgerStore) Release(res *Reservation) error {
	err := s.impl.Release(res)
	if err != nil {
		s.impl.releaseFailed(res, err)
	}
	return err
}

// ReapExpired releases the holds whose lease lapsed (see Ledger).
func (s *LedgerStore) ReapExpired() (int, error) { return s.impl.ReapExpired() }

// prefixGeneration keys the generation records (package record).
const prefixGeneration = record.GenerationPrefix

// prefixUpstreamID keys the generation ids by "<account id>/<upstream id>":
// the provider's id of an answer the client saw unchanged (a Responses
// object passed through), so that it finds its generation.
const prefixUpstreamID = "gu/"

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

// ErrStale answers a Commit whose snapshot's figures changed before it:
// the decision must be made again on a new snapshot.
var ErrStale = errors.New("ledger: the figures changed since the snapshot")

// ErrContended is returned when maxAttempts commits of one admission all
// found the figures changed.
var ErrContended = errors.New("ledger: the account's counters kept changing")

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

// Stamp is what a ledger's commit needs of a snapshot besides the view:
// the request's levels, what the snapshot read of them, and an exclusive
// snapshot's lock on the account.
type Stamp struct {
	accountID, keyHash string
	// workspace and member are the scope keys ("<account id>/<id>") of
	// the key's workspace and member the view has; "": none.
	workspace, member string
	countsBYOK        bool // the workspace counts BYOK spending
	at                time.Time
	inFlightHeld      money.Amount
	// The in-process ledger's: the account's stripe and its version as
	// read.
	stripe  uint16
	version uint64
	// A shared ledger's: the fields as read, and the account's queue.
	shared *fieldLevels
	queue  *acctQueue
	// lock is an exclusive snapshot's hold on the account; nil otherwise.
	lock *accountLock
}

// accountLock is an exclusive snapshot's hold on its account, let go of
// once, by Commit or Abandon.
type accountLock struct {
	unlock   func()
	released bool
}

func (l *accountLock) release() {
	if l != nil && !l.released {
		l.released = true
		l.unlock()
	}
}

// LedgerView is what an admission decision sees, all taken at one instant.
type LedgerView struct {
	Now          time.Time
	Account      Account
	Key          APIKey       // zero when the request has no key
	AccountHeld  money.Amount // holds of the account's running requests
	KeyHeld      money.Amount // holds of the key's running requests
	InFlightHeld money.Amount // in-flight holds plus settling costs
	NextRelease  time.Duration
	// Workspace is the key's workspace (nil without a key); WorkspaceHeld
	// the holds of its running requests. Both are read-only snapshots.
	Workspace     *Workspace
	WorkspaceHeld money.Amount
	// Member is the key's member (its creator_user_id, when a member of
	// the organization), nil otherwise; MemberHeld the holds of the
	// member's running requests.
	Member     *Member
	MemberHeld money.Amount
}

// Holds are the amounts a request reserves at admission (see
// levels.Holds).
type Holds = levels.Holds

// Reservation is an admitted request's holds, until Settle or Release.
type Reservation struct {
	AccountID string
	KeyHash   string
	Holds
	done bool
	// stripe is the in-process ledger's stripe of the account.
	stripe uint16
	// scope keys ("<account id>/<id>") of the key's workspace and member,
	// and what the reservation placed on each level.
	workspace, member string
	placed            levels.Placed
}

// ErrSettled is returned when a reservation is settled or released twice.
var ErrSettled = errors.New("reservation already settled")

// Charge is the settled outcome of a request.
type Charge struct {
	Cost money.Amount
	// BYOK charges land in the byok_usage counters and spend no credits,
	// but for Credits.
	BYOK bool
	// Credits is the part of a BYOK charge that the platform bills in
	// credits (a gateway-side web search); at most Cost.
	Credits money.Amount
	// SettlementWindow keeps the cost in the in-flight budget this long,
	// for requests that counted against it.
	SettlementWindow time.Duration
	Generation       *Generation
}

// within bounds the charge by what the account's counters can still take
// (levels.Charge.Within), the generation record alike.
func (c Charge) within(usage, byokUsage money.Amount) Charge {
	lc := levels.Charge{Cost: c.Cost, BYOK: c.BYOK, Credits: c.Credits}.Within(usage, byokUsage)
	if lc.Cost == c.Cost {
		return c
	}
	c.Cost, c.Credits = lc.Cost, lc.Credits
	if c.Generation != nil {
		g := *c.Generation
		g.Cost, g.Credits = c.Cost, c.Credits
		c.Generation = &g
	}
	return c
}

// levels is the charge as the levels' arithmetic takes it.
func (c Charge) levels() levels.Charge {
	return levels.Charge{Cost: c.Cost, BYOK: c.BYOK, Credits: c.Credits}
}

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
