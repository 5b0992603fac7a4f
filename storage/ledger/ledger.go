// Package ledger is the money seam: the Ledger interface every ledger
// implements (the store's in-process one on Badger, package sharedledger's
// on Redis and Redis Cluster), the figures and stamps of a reservation,
// and Records, the narrow view of the accounts, keys, workspaces and
// members whose counters a ledger reads and changes. It holds no state
// and imports no backend, so that a ledger's package depends on it and
// never on the store.
package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Ledger is the money seam: admission and charging, each one atomic
// operation over every level that caps a request. One implementation is
// chosen with the backend when the store opens: the in-process ledger
// (under the kernel's one lock) on Badger, or a shared ledger for several
// replicas (package sharedledger, on Redis: one server-side script per
// call, one round trip at admission and one at settlement). Every
// implementation applies the same arithmetic to the levels (package
// storage/levels) and passes the same conformance tests (package
// storage/ledgertest).
//
// Admission is decided outside the ledger, on a snapshot: its rules
// (free-model request caps, guardrail and workspace budgets, key cap,
// balance, in-flight budget: handlers' admission and package billing)
// belong to the gateway's policy, not to storage, and their rejections
// carry the policy's messages. So a reservation is two calls with the
// decision between them, made by the caller on the figures the first
// returned, and the ledger never calls back into it:
//
//   - Snapshot reads every level's figures at one instant (a View) and
//     what a commit compares: the in-process ledger takes the kernel's
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
	Snapshot(accountID, keyHash string, exclusive bool) (View, Stamp, error)
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

// Backend is a Ledger with what the store needs of it besides
// reservations: its lifecycle, and for a ledger whose counters live in a
// shared database, bringing them into the records in memory.
type Backend interface {
	Ledger
	// Start runs background work (the lease keeper) until ctx ends; Wait
	// returns once it stopped.
	Start(ctx context.Context)
	Wait()
	// Admissible is nil when the ledger may decide a reservation now
	// (ErrUnavailable, ErrResyncing otherwise).
	Admissible() error
	// SettleFailed is called with a settlement that failed for err: a
	// shared ledger retries one its database could not take until it lands.
	SettleFailed(res *Reservation, c Charge, err error)
	// ReleaseFailed is called with a release that failed for err: a
	// shared ledger retries it as SettleFailed does.
	ReleaseFailed(res *Reservation, err error)
	// LoadAll reads every account's counters from the ledger's database;
	// Refresh re-reads the named fields of the named accounts (changes
	// other replicas announced on the feed); Overlay and OverlayAll
	// apply what was read to the records in memory (under the kernel's
	// lock).
	LoadAll() error
	Refresh(fields map[string][]string) error
	Overlay(accountID string)
	OverlayAll()
	// ShareKeyCeiling makes the per-key abuse ceiling one bucket per key
	// for every replica, when the ledger is shared.
	ShareKeyCeiling(c *KeyCeiling)
	// Held is what running requests hold against an account's balance and
	// against a key's cap ("": none), as this replica last knows it.
	// Callers hold the kernel's lock (either side).
	Held(accountID, keyHash string) (account, key money.Amount)
}

// Records are the records whose counters a ledger reads and changes: the
// accounts and keys (the store's account store), the workspaces and
// members (its org store). A ledger reaches them only through these
// methods, which read the record in memory and replace it with its
// counters changed; they never mark a record dirty (the in-process ledger
// does, for the records it charged; a shared ledger's counters live in
// its own database). Callers hold the kernel's lock.
type Records interface {
	// LedgerAccount is the account's record; nil when there is none.
	LedgerAccount(id string) *record.Account
	// LedgerKey is a copy of the API key's record; nil when there is none.
	LedgerKey(hash string) *record.APIKey
	// LedgerAccountIDs calls fn with every account's id.
	LedgerAccountIDs(fn func(id string))
	// SetAccountCounters replaces the account's record with its usage and
	// free-model counters taken from a; false when there is no record.
	SetAccountCounters(id string, a levels.Account) bool
	// SetKeyCounters replaces the key's record with its usage counters
	// taken from sc; false when there is no record.
	SetKeyCounters(hash string, sc levels.Scope) bool
	// LedgerWorkspace and LedgerMember are the workspace's and the
	// member's records; nil when there is none.
	LedgerWorkspace(accountID, id string) *record.Workspace
	LedgerMember(accountID, id string) *record.Member
	// SetWorkspaceCounters and SetMemberCounters replace the workspace's
	// or member's record with its usage counters taken from sc; false
	// when there is no record.
	SetWorkspaceCounters(accountID, id string, sc levels.Scope) bool
	SetMemberCounters(accountID, id string, sc levels.Scope) bool
}

// ErrStale answers a Commit whose snapshot's figures changed before it:
// the decision must be made again on a new snapshot.
var ErrStale = errors.New("ledger: the figures changed since the snapshot")

// ErrContended is returned when every commit of one admission, or every
// attempt of one settlement, found the figures changed.
var ErrContended = errors.New("ledger: the account's counters kept changing")

// ErrSettled is returned when a reservation is settled or released twice.
var ErrSettled = errors.New("reservation already settled")

// ErrResyncing is returned by admission while the replica reloads its
// records from the shared database after its change feed lost continuity:
// it does not decide on rules that may be stale. Handlers answer 503.
var ErrResyncing = errors.New("reloading the records from the shared database")

// Stamp is what a ledger's commit needs of a snapshot besides the view:
// the request's levels, what the snapshot read of them, and an exclusive
// snapshot's lock on the account. Its fields are the ledger's that took
// the snapshot; the caller only hands it back.
type Stamp struct {
	AccountID, KeyHash string
	// Workspace and Member are the scope keys ("<account id>/<id>") of
	// the key's workspace and member the view has; "": none.
	Workspace, Member string
	CountsBYOK        bool // the workspace counts BYOK spending
	At                time.Time
	InFlightHeld      money.Amount
	// The in-process ledger's: the account's stripe and its version as
	// read.
	Stripe  uint16
	Version uint64
	// Shared is a shared ledger's own record of what it read (the fields
	// as read, and the account's queue); nil for the in-process one.
	Shared any
	// Lock is an exclusive snapshot's hold on the account; nil otherwise.
	Lock *AccountLock
}

// AccountLock is an exclusive snapshot's hold on its account, let go of
// once, by Commit or Abandon.
type AccountLock struct {
	unlock   func()
	released bool
}

// NewAccountLock is a hold that unlock lets go of.
func NewAccountLock(unlock func()) *AccountLock { return &AccountLock{unlock: unlock} }

// Release lets go of the hold, once; nothing on a nil hold.
func (l *AccountLock) Release() {
	if l != nil && !l.released {
		l.released = true
		l.unlock()
	}
}

// Released reports whether the hold was let go of.
func (l *AccountLock) Released() bool { return l.released }

// View is what an admission decision sees, all taken at one instant.
type View struct {
	Now          time.Time
	Account      record.Account
	Key          record.APIKey // zero when the request has no key
	AccountHeld  money.Amount  // holds of the account's running requests
	KeyHeld      money.Amount  // holds of the key's running requests
	InFlightHeld money.Amount  // in-flight holds plus settling costs
	NextRelease  time.Duration
	// Workspace is the key's workspace (nil without a key); WorkspaceHeld
	// the holds of its running requests. Both are read-only snapshots.
	Workspace     *record.Workspace
	WorkspaceHeld money.Amount
	// Member is the key's member (its creator_user_id, when a member of
	// the organization), nil otherwise; MemberHeld the holds of the
	// member's running requests.
	Member     *record.Member
	MemberHeld money.Amount
	// AccountRate, KeyRate and WorkspaceRate are their use of their rate
	// limits; zero for a scope without any.
	AccountRate, KeyRate, WorkspaceRate levels.Rate
}

// Holds are the amounts a request reserves at admission (see
// levels.Holds).
type Holds = levels.Holds

// Reservation is an admitted request's holds, until Settle or Release.
// Past AccountID, KeyHash and Holds, its fields are the bookkeeping of
// the ledger that placed it, which alone sets them.
type Reservation struct {
	AccountID string
	KeyHash   string
	Holds
	// Done: settled or released.
	Done bool
	// Stripe is the in-process ledger's stripe of the account.
	Stripe uint16
	// Workspace and Member are the scope keys ("<account id>/<id>") of
	// the key's workspace and member, and Placed what the reservation
	// placed on each level.
	Workspace, Member string
	Placed            levels.Placed
}

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
	Generation       *record.Generation
}

// Within bounds the charge by what the account's counters can still take
// (levels.Charge.Within), the generation record alike.
func (c Charge) Within(usage, byokUsage money.Amount) Charge {
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

// Levels is the charge as the levels' arithmetic takes it.
func (c Charge) Levels() levels.Charge {
	return levels.Charge{Cost: c.Cost, BYOK: c.BYOK, Credits: c.Credits}
}

// KeyCeiling is a per-key abuse ceiling: Requests per Window, bursts up to
// Burst.
type KeyCeiling struct {
	Requests float64
	Window   time.Duration
	Burst    int
}

// CeilingError is a refusal of the shared per-key abuse ceiling: Burst
// requests at once, the next token at Reset.
type CeilingError struct {
	Burst int
	Reset time.Time
}

func (e *CeilingError) Error() string { return "the key's abuse ceiling is reached" }
