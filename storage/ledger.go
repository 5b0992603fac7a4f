package storage

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
	"go.uber.org/zap"
)

// Ledger is the money seam: admission and charging, each one atomic
// operation over every level that caps a request. One implementation is
// chosen when the store opens (openLedger): the in-process ledger
// (localLedger, under the kernel's one lock) on Badger, or a shared
// ledger for several replicas (sharedLedger on Redis: one server-side
// script per call, one round trip at admission and one at settlement).
// Every implementation applies the same arithmetic to the levels
// (package storage/levels) and passes the same conformance tests
// (ledger_conformance_test.go).
//
// Admission is a decision function over a LedgerView, not data, because
// its rules (free-model request caps, guardrail and workspace budgets,
// key cap, balance, in-flight budget: handlers/meter.go and package
// billing) belong to the gateway's policy, not to storage, and their
// rejections carry the policy's messages. decide is a pure function of
// the view, so a replicated Ledger has two ways to keep Reserve atomic
// without changing behaviour:
//
//   - run decide on a view read in the same script that places the
//     holds, with the limits passed in as data: per level, the limit, the
//     usage counted against it in its window (money.Interval) and what
//     running requests hold: the key's cap (limit, limit_reset,
//     include_byok_in_limit), the account's balance (credits purchased
//     minus usage minus holds) and in-flight budget (running holds plus
//     costs settling until their window ends, with the time to the next
//     release), each workspace budget (daily, weekly, monthly, lifetime),
//     each guardrail's limit on the key and on its member, and the
//     account's free-model counters for the current UTC minute and day;
//     the hold is placed only if every level admits it;
//   - or read the view, decide locally, and place the holds with a
//     script that re-checks the figures the decision read (optimistic
//     concurrency), retrying on a change.
//
// Either way holds carry a lease, since a replica may die holding them;
// Settle releases the holds, adds the charge to every counter and appends
// the generation record in one step, and returns only once the database
// accepted it.
type Ledger interface {
	// ReserveHolds runs decide on the figures of every level at one
	// instant and, when it returns no error, places the holds it returns
	// before any other reservation can read those figures. The holds
	// depend on the view when a request is fitted to what its caps still
	// afford (the output clamp, billing.PlanOutput).
	ReserveHolds(accountID, keyHash string, decide func(LedgerView) (Holds, error)) (*Reservation, error)
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

// sharedLedgers open the shared ledgers, tried in order when the store
// opens: each claims the backends it runs on (the Redis one, its own). The
// in-process ledger runs on any other.
var sharedLedgers []func(s *Store, b kernel.Backend, log *zap.Logger) (ledgerBackend, bool)

// openLedger chooses the store's ledger, once.
func openLedger(s *Store, log *zap.Logger) ledgerBackend {
	for _, open := range sharedLedgers {
		if l, ok := open(s, s.k.Backend(), log); ok {
			return l
		}
	}
	return newLocalLedger(s.k, s.AccountStore, s.OrgStore, s.LedgerStore.genSubs.publish)
}

var (
	_ Ledger = (*LedgerStore)(nil)
	_ Ledger = (*localLedger)(nil)
)

// LedgerStore reserves and settles requests' money through the store's
// Ledger, and keeps the generation records.
type LedgerStore struct {
	k       *kernel.Kernel
	impl    ledgerBackend
	genSubs generationSubscribers // SubscribeGenerations
	// retention is how long generation records are kept (retention.go).
	retention retention
}

// Reserve runs decide on the account's and key's current figures and, if it
// returns nil, places the holds, atomically: concurrent requests cannot
// both fit in the same room.
func (s *LedgerStore) Reserve(accountID, keyHash string, h Holds, decide func(LedgerView) error) (*Reservation, error) {
	return s.ReserveHolds(accountID, keyHash, func(v LedgerView) (Holds, error) { return h, decide(v) })
}

// ReserveHolds is Reserve with holds that decide computes from the view.
func (s *LedgerStore) ReserveHolds(accountID, keyHash string, decide func(LedgerView) (Holds, error)) (*Reservation, error) {
	if err := s.impl.admissible(); err != nil {
		return nil, err
	}
	return s.impl.ReserveHolds(accountID, keyHash, decide)
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
func (s *LedgerStore) Release(res *Reservation) error { return s.impl.Release(res) }

// ReapExpired releases the holds whose lease lapsed (see Ledger).
func (s *LedgerStore) ReapExpired() (int, error) { return s.impl.ReapExpired() }

// prefixGeneration keys the generation records: append-only, read from
// disk on demand, never loaded into memory.
const prefixGeneration = "g/"

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
	return []kernel.Kind{{Prefix: prefixGeneration, Append: true, Slot: generationSlot, Account: generationAccount}}
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

// generationSlot is the 10 ms of its creation a generation record falls in,
// from the time its id starts with (NewGenerationID): the on-disk store
// keeps the records of one slot together, so that a lookup reads one slot's
// and a scan returns them about in creation order.
func generationSlot(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, prefixGeneration+"gen-")
	if !ok || len(id) < 13 {
		return "", false
	}
	for i := range 13 {
		if id[i] < '0' || id[i] > '9' {
			return "", false
		}
	}
	return id[:12], true
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

// Generation is the record of one inference request. Credits is the part
// of a BYOK generation's Cost paid in credits (a gateway-side web search).
type Generation struct {
	ID            string `json:"id"`
	AccountID     string `json:"account_id"`
	KeyHash       string `json:"key_hash"`
	WorkspaceID   string `json:"workspace_id,omitempty"`
	Model         string `json:"model"`
	Provider      string `json:"provider"`
	UpstreamModel string `json:"upstream_model,omitempty"`
	// UpstreamID is the provider's id of the answer (chatcmpl-..., resp_...).
	UpstreamID string `json:"upstream_id,omitempty"`
	// UpstreamIDHidden: the client never saw UpstreamID (a chat answer
	// carries the generation id instead), so no lookup by it is indexed:
	// one write less per request.
	UpstreamIDHidden bool  `json:"-"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// Of PromptTokens, those the provider read from or wrote to its
	// prompt cache, charged at the model's cache prices.
	CacheReadTokens  int64        `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64        `json:"cache_write_tokens,omitempty"`
	SearchResults    int64        `json:"search_results,omitempty"`
	Cost             money.Amount `json:"cost"`
	BYOK             bool         `json:"byok,omitempty"`
	Credits          money.Amount `json:"credits,omitempty"`
	Status           string       `json:"status"` // completed, incomplete, aborted, error
	Streamed         bool         `json:"streamed"`
	FinishReason     string       `json:"finish_reason,omitempty"`
	UsageEstimated   bool         `json:"usage_estimated,omitempty"`
	LatencyMS        int64        `json:"latency_ms"`
	User             string       `json:"user,omitempty"`
	CreatedAt        time.Time    `json:"created_at"`
	// ContentFlags are the flagging content filters that matched the
	// request (never the text they matched).
	ContentFlags []ContentFlag `json:"content_flags,omitempty"`
	// Attempts are the provider calls, in order, the last the one that
	// answered; Routing says how the endpoints were ranked.
	Attempts []ProviderAttempt `json:"attempts,omitempty"`
	Routing  string            `json:"routing,omitempty"`
}

// ContentFlag is a flagging content filter that matched a request: its
// guardrail, its label and, for a builtin, its slug.
type ContentFlag struct {
	GuardrailID string `json:"guardrail_id"`
	Label       string `json:"label"`
	Builtin     string `json:"builtin,omitempty"`
}

// ProviderAttempt is one provider call of a generation.
type ProviderAttempt struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Status    int    `json:"status"` // 0: no answer (unreachable, broken)
	LatencyMS int64  `json:"latency_ms"`
	BYOK      bool   `json:"byok,omitempty"`
}

// NewGenerationID returns an id that sorts by creation time.
func NewGenerationID(t time.Time) string {
	var b [8]byte
	g := idRand.Get().(*mrand.ChaCha8)
	binary.LittleEndian.PutUint64(b[:], g.Uint64())
	idRand.Put(g)
	id := make([]byte, 0, 30)
	id = append(id, "gen-"...)
	var msb [20]byte
	ms := strconv.AppendInt(msb[:0], t.UnixMilli(), 10)
	for range 13 - len(ms) {
		id = append(id, '0')
	}
	id = append(id, ms...)
	id = append(id, '-')
	return string(hex.AppendEncode(id, b[:6]))
}

// idRand holds the generators of generation ids' random part: ChaCha8,
// cryptographically strong, each seeded once from crypto/rand, so that ids
// stay unguessable without a getrandom system call per request (0.4 µs of
// CPU in profiles of bench/run.sh's chain).
var idRand = sync.Pool{New: func() any {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return mrand.NewChaCha8(seed)
}}

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
