package storage

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	mrand "math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// Ledger is the money seam: admission and charging, each one atomic
// operation over every level that caps a request. LedgerStore implements
// it over the kernel's one lock; a ledger for several replicas implements
// it as one server-side script per call (one round trip at admission, one
// at settlement).
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
// the generation record in one step, and returns only once the shared
// database accepted it.
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
}

var _ Ledger = (*LedgerStore)(nil)

// LedgerStore reserves and settles requests' money: the holds of running
// requests against every level that caps them, the charges that land in
// the counters, and the generation records (see Ledger).
type LedgerStore struct {
	k       *kernel.Kernel
	ledger  ledger
	genSubs generationSubscribers // SubscribeGenerations
	// retention is how long generation records are kept (retention.go).
	retention retention
	// the domain stores it reads or updates, under the same lock
	acct *AccountStore
	org  *OrgStore
}

// prefixGeneration keys the generation records: append-only, read from
// disk on demand, never loaded into memory.
const prefixGeneration = "g/"

// prefixUpstreamID keys the generation ids by "<account id>/<upstream id>":
// the provider's id of an answer the client saw unchanged (a Responses
// object passed through), so that it finds its generation.
const prefixUpstreamID = "gu/"

func (s *LedgerStore) kinds() []kernel.Kind {
	return append(ChunkedKinds(), kernel.Kind{Prefix: prefixUpstreamID, Append: true})
}

// ChunkedKinds are the record kinds whose records the on-disk store keeps
// in chunks (kernel.Kind.Slot): a tool that opens the database itself
// (kernel.OpenBadger) passes them, so that it reads those records.
func ChunkedKinds() []kernel.Kind {
	return []kernel.Kind{{Prefix: prefixGeneration, Append: true, Slot: generationSlot}}
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

// ledger is the in-memory state of running requests: what they hold against
// balances, key caps and the in-flight budget. It is not persisted: after a
// restart nothing is running, so nothing is held.
type ledger struct {
	accountHeld held
	keyHeld     held
	inFlight    map[string]*inFlightState
	// workspaceHeld and memberHeld are by "<account id>/<id>".
	workspaceHeld held
	memberHeld    held
}

// held sums the holds of running requests by account, key, workspace or
// member. Its sums are pointers, so that adding to one is one map access,
// and a sum back at zero stays for the key's next request (no allocation,
// no map write) until zeros are half of the map, when they are removed.
type held struct {
	sums  map[string]*money.Amount
	zeros int // sums at zero
}

func newHeld() held { return held{sums: map[string]*money.Amount{}} }

func (h *held) get(k string) money.Amount {
	if p := h.sums[k]; p != nil {
		return *p
	}
	return 0
}

func (h *held) add(k string, d money.Amount) {
	if d == 0 {
		return
	}
	p := h.sums[k]
	switch {
	case p == nil:
		p = new(money.Amount)
		h.sums[k] = p
	case *p == 0:
		h.zeros--
	}
	if *p += d; *p == 0 {
		h.zeros++
		if h.zeros > 64 && 2*h.zeros > len(h.sums) {
			h.sweep()
		}
	}
}

// set makes k's sum v.
func (h *held) set(k string, v money.Amount) { h.add(k, v-h.get(k)) }

// sweep removes the sums at zero: amortized over the zeros it removes,
// at least half of the map's entries.
func (h *held) sweep() {
	for k, p := range h.sums {
		if *p == 0 {
			delete(h.sums, k)
		}
	}
	h.zeros = 0
}

// live is how many sums are not zero.
func (h *held) live() int { return len(h.sums) - h.zeros }

// inFlightState is one account's use of its in-flight budget.
type inFlightState struct {
	running money.Amount // in-flight holds of running requests
	// settling[head:] holds finished requests' costs until their window
	// ends, ordered by expiry; settled is their sum.
	settling []settling
	head     int
	settled  money.Amount
}

type settling struct {
	until  time.Time
	amount money.Amount
}

func newLedger() ledger {
	return ledger{accountHeld: newHeld(), keyHeld: newHeld(), inFlight: map[string]*inFlightState{}, workspaceHeld: newHeld(), memberHeld: newHeld()}
}

// state returns the account's in-flight state with expired settlements
// released; the state is registered only once something is added to it.
func (l *ledger) state(accountID string, t time.Time) *inFlightState {
	st, ok := l.inFlight[accountID]
	if !ok {
		return &inFlightState{}
	}
	for st.head < len(st.settling) && !st.settling[st.head].until.After(t) {
		st.settled -= st.settling[st.head].amount
		st.head++
	}
	// Compact once the released prefix dominates: amortized O(1).
	if st.head > 64 && st.head*2 > len(st.settling) {
		st.settling = append(st.settling[:0], st.settling[st.head:]...)
		st.head = 0
	}
	if st.running == 0 && st.head == len(st.settling) {
		delete(l.inFlight, accountID)
	}
	return st
}

// settle keeps a finished request's cost until the window ends. Windows are
// usually equal, so this appends; a changed window inserts in order.
func (st *inFlightState) settle(e settling) {
	st.settled += e.amount
	if n := len(st.settling); n == st.head || !st.settling[n-1].until.After(e.until) {
		st.settling = append(st.settling, e) // the usual case: no search
		return
	}
	live := st.settling[st.head:]
	i := st.head + sort.Search(len(live), func(i int) bool { return live[i].until.After(e.until) })
	st.settling = slices.Insert(st.settling, i, e)
}

func (st *inFlightState) held() money.Amount { return st.running + st.settled }

// nextRelease is the time until the first settling cost is released.
func (st *inFlightState) nextRelease(t time.Time) time.Duration {
	if st.head == len(st.settling) {
		return 0
	}
	return st.settling[st.head].until.Sub(t)
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

// Holds are the amounts a request reserves at admission.
type Holds struct {
	Hold     money.Amount // against the balance and the key cap
	InFlight money.Amount // against the in-flight budget
	// CountFree counts the request against the account's free-model
	// request windows when it is admitted.
	CountFree bool
	// KeyOnly holds against the key's cap but not the account's balance:
	// the request spends the caller's own provider credits (BYOK).
	KeyOnly bool
	// Credits is held against the account's balance even with KeyOnly:
	// what a BYOK request costs the platform itself (a gateway-side web
	// search).
	Credits money.Amount
}

// Reservation is an admitted request's holds, until Settle or Release.
type Reservation struct {
	AccountID string
	KeyHash   string
	Holds
	done bool
	// scope keys ("<account id>/<id>") of the key's workspace and member,
	// and what the workspace holds for this reservation.
	workspace, member string
	workspaceHold     money.Amount
}

// ErrSettled is returned when a reservation is settled or released twice.
var ErrSettled = errors.New("reservation already settled")

// Reserve runs decide on the account's and key's current figures and, if it
// returns nil, places the holds, atomically: concurrent requests cannot
// both fit in the same room.
func (s *LedgerStore) Reserve(accountID, keyHash string, h Holds, decide func(LedgerView) error) (*Reservation, error) {
	return s.ReserveHolds(accountID, keyHash, func(v LedgerView) (Holds, error) { return h, decide(v) })
}

// ReserveHolds is Reserve with holds that decide computes from the view,
// under the same lock.
func (s *LedgerStore) ReserveHolds(accountID, keyHash string, decide func(LedgerView) (Holds, error)) (*Reservation, error) {
	s.k.Lock()
	defer s.k.Unlock()
	acct, ok := s.acct.accounts[accountID]
	if !ok {
		return nil, ErrNotFound
	}
	t := now()
	v := LedgerView{Now: t, Account: *acct, AccountHeld: s.ledger.accountHeld.get(accountID)}
	var wsKey, memberKey string
	if keyHash != "" {
		if k, ok := s.acct.keys[keyHash]; ok {
			v.Key = *k
			if ws, ok := s.org.workspaces[accountID][k.WorkspaceID]; ok {
				wsKey = accountID + "/" + ws.ID
				v.Workspace, v.WorkspaceHeld = ws, s.ledger.workspaceHeld.get(wsKey)
			}
			if k.CreatorUserID != nil {
				if m, ok := s.org.members[accountID][*k.CreatorUserID]; ok {
					memberKey = accountID + "/" + m.ID
					v.Member, v.MemberHeld = m, s.ledger.memberHeld.get(memberKey)
				}
			}
		}
		v.KeyHeld = s.ledger.keyHeld.get(keyHash)
	}
	st := s.ledger.state(accountID, t)
	v.InFlightHeld, v.NextRelease = st.held(), st.nextRelease(t)
	h, err := decide(v)
	if err != nil {
		return nil, err
	}
	if !holdsFit(v, st, h) {
		return nil, money.ErrAmountRange
	}
	if !h.KeyOnly {
		s.ledger.accountHeld.add(accountID, h.Hold)
	} else if h.Credits > 0 {
		s.ledger.accountHeld.add(accountID, h.Credits)
	}
	if keyHash != "" {
		s.ledger.keyHeld.add(keyHash, h.Hold)
	}
	// A BYOK request holds all of its hold against its workspace only when
	// the workspace counts BYOK spending, else only its Credits; the charge
	// lands in the counters either way.
	var wsHold money.Amount
	if wsKey != "" {
		wsHold = h.Hold
		if h.KeyOnly && !v.Workspace.IncludeBYOKInBudgets {
			wsHold = max(h.Credits, 0)
		}
		s.ledger.workspaceHeld.add(wsKey, wsHold)
	}
	if memberKey != "" {
		s.ledger.memberHeld.add(memberKey, h.Hold)
	}
	if h.InFlight > 0 {
		st.running += h.InFlight
		s.ledger.inFlight[accountID] = st
	}
	if h.CountFree {
		// Not waited for: a count lost in a crash only favours the client.
		a := *acct
		a.FreeModelRequests = a.FreeModelRequests.Add(money.IntervalDaily, t, 1)
		a.FreeModelMinute = a.FreeModelMinute.Add(money.IntervalMinute, t, 1)
		s.acct.accounts[a.ID] = &a
		s.k.MarkDirty(prefixAccount + a.ID)
	}
	res := &Reservation{AccountID: accountID, KeyHash: keyHash, Holds: h, workspace: wsKey, member: memberKey, workspaceHold: wsHold}
	return res, nil
}

// holdsFit reports whether adding h to every sum it lands in (the
// account's, key's, workspace's and member's holds, the in-flight budget)
// stays within MaxAmount; holds never wrap. A caller's decide usually
// refuses long before, but a key without a cap on an account billed after
// use has no other bound.
func holdsFit(v LedgerView, st *inFlightState, h Holds) bool {
	hold := max(h.Hold, h.Credits)
	for _, sum := range []money.Amount{v.AccountHeld, v.KeyHeld, v.WorkspaceHeld, v.MemberHeld} {
		if _, ok := money.AddAmounts(sum, hold); !ok {
			return false
		}
	}
	_, ok := money.SumAmounts(st.held(), h.InFlight)
	return ok
}

// release drops the reservation's holds. Callers hold the kernel's lock.
func (s *LedgerStore) release(res *Reservation) {
	if !res.KeyOnly {
		s.ledger.accountHeld.add(res.AccountID, -res.Hold)
	} else if res.Credits > 0 {
		s.ledger.accountHeld.add(res.AccountID, -res.Credits)
	}
	if res.KeyHash != "" {
		s.ledger.keyHeld.add(res.KeyHash, -res.Hold)
	}
	if res.workspace != "" {
		s.ledger.workspaceHeld.add(res.workspace, -res.workspaceHold)
	}
	if res.member != "" {
		s.ledger.memberHeld.add(res.member, -res.Hold)
	}
	if res.InFlight > 0 {
		st := s.ledger.state(res.AccountID, now())
		st.running -= res.InFlight
		if st.running != 0 || st.head != len(st.settling) {
			s.ledger.inFlight[res.AccountID] = st
		} else {
			delete(s.ledger.inFlight, res.AccountID)
		}
	}
}

// Release drops a reservation without a charge: the request failed before
// it cost anything.
func (s *LedgerStore) Release(res *Reservation) error {
	s.k.Lock()
	defer s.k.Unlock()
	if res.done {
		return ErrSettled
	}
	res.done = true
	s.release(res)
	return nil
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
	Generation       *Generation
}

// Settle turns a reservation into a charge, exactly once: it releases the
// holds, adds the cost to the account's and key's counters, keeps the cost
// in the in-flight budget for the settlement window, and appends the
// generation record. It returns once all of that is durable.
func (s *LedgerStore) Settle(res *Reservation, c Charge) error {
	s.k.Lock()
	if res.done {
		s.k.Unlock()
		return ErrSettled
	}
	res.done = true
	s.release(res)
	t := now()
	c = c.within(s.acct.accounts[res.AccountID])
	credits, byok := c.Cost, money.Amount(0)
	if c.BYOK {
		credits = min(max(c.Credits, 0), c.Cost)
		byok = c.Cost - credits
	}
	if acct, ok := s.acct.accounts[res.AccountID]; ok && c.Cost != 0 {
		a := *acct
		a.BYOKUsage += byok
		a.Usage += credits
		s.acct.accounts[a.ID] = &a
		s.k.MarkDirtyAt(prefixAccount, a.ID)
	}
	if key, ok := s.acct.keys[res.KeyHash]; ok && c.Cost != 0 {
		k := *key
		if c.BYOK {
			k.BYOKUsage = k.BYOKUsage.Add(t, byok)
		}
		if !c.BYOK || credits != 0 {
			k.Usage = k.Usage.Add(t, credits)
		}
		s.acct.keys[k.Hash] = &k
		s.k.MarkDirtyAt(prefixAPIKey, k.Hash)
	}
	if c.Cost != 0 {
		s.chargeScopes(res, credits, byok, t)
	}
	if res.InFlight > 0 && c.SettlementWindow > 0 && c.Cost > 0 {
		st := s.ledger.state(res.AccountID, t)
		st.settle(settling{until: t.Add(c.SettlementWindow), amount: c.Cost})
		s.ledger.inFlight[res.AccountID] = st
	}
	var b *kernel.Batch
	if g := c.Generation; g != nil {
		if g.UpstreamID != "" && g.UpstreamID != g.ID && !g.UpstreamIDHidden {
			s.k.Append(prefixUpstreamID+g.AccountID+"/"+g.UpstreamID, g.ID)
		}
		// The record itself, not a copy: Settle returns only once the
		// flusher has encoded it, so the caller cannot change it before.
		b = s.k.Append(prefixGeneration+g.ID, g)
	} else {
		b = s.k.Pending()
	}
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return err
	}
	if c.Generation != nil {
		s.genSubs.publish(*c.Generation)
	}
	return nil
}

// within bounds the charge by what the account's counters can still take.
// Admission holds only requests whose hold fits in them, so only a cost
// above its hold on an account that has charged about MaxAmount in all gets
// here; the counters then stop at MaxAmount instead of wrapping. Every
// other counter a charge lands in (key, workspace, member, in-flight) is at
// most the account's all-time charges.
func (c Charge) within(acct *Account) Charge {
	if acct == nil || c.Cost <= 0 {
		return c
	}
	room := money.MaxAmount - max(acct.Usage, 0)
	room -= min(max(acct.BYOKUsage, 0), room)
	if c.Cost <= room {
		return c
	}
	c.Cost, c.Credits = room, min(c.Credits, room)
	if c.Generation != nil {
		g := *c.Generation
		g.Cost, g.Credits = c.Cost, c.Credits
		c.Generation = &g
	}
	return c
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

// chargeScopes adds a charge to the counters of the key's workspace and
// member, which workspace budgets and member guardrails cap, split like the
// account's and key's: the part paid in credits to Usage, the caller's own
// provider spending to BYOKUsage. The records are replaced, not edited,
// and these counters do not change any key's rules, so the rules cache
// stays valid. Callers hold the kernel's lock.
func (s *LedgerStore) chargeScopes(res *Reservation, credits, byok money.Amount, t time.Time) {
	add := func(usage, byokUsage *money.UsageCounters) {
		if credits != 0 {
			*usage = usage.Add(t, credits)
		}
		if byok != 0 {
			*byokUsage = byokUsage.Add(t, byok)
		}
	}
	if accountID, id, ok := strings.Cut(res.workspace, "/"); ok {
		if ws, ok := s.org.workspaces[accountID][id]; ok {
			w := *ws
			add(&w.Usage, &w.BYOKUsage)
			s.org.workspaces[accountID][id] = &w
			s.k.MarkDirtyAt(prefixWorkspaceUsage, res.workspace) // accountID + "/" + id
		}
	}
	if accountID, id, ok := strings.Cut(res.member, "/"); ok {
		if mem, ok := s.org.members[accountID][id]; ok {
			m := *mem
			add(&m.Usage, &m.BYOKUsage)
			s.org.members[accountID][id] = &m
			s.k.MarkDirtyAt(prefixMemberUsage, res.member) // accountID + "/" + id
		}
	}
}
