package storage

import (
	"context"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
)

// localLedger is the in-process Ledger: the holds of running requests in
// memory, the counters in the records (made durable by the kernel's group
// commit), every change under the kernel's one lock. A snapshot copies the
// figures under the lock's read side and the decision runs without it; the
// commit compares the account's version under the lock.
type localLedger struct {
	k *kernel.Kernel
	runningHolds
	acct    *AccountStore
	org     *OrgStore
	publish func(Generation) // a settled generation, once durable
	// stripes are the accounts' versions and locks, by a hash of the
	// account id (see stripe).
	stripes [256]stripe
	seed    maphash.Seed
}

// stripe is the version and the lock of the accounts whose ids hash to
// it. The version counts the changes of their figures (holds, counters,
// in-flight use: every commit, settlement and release, under the
// kernel's lock), so a commit whose snapshot read the current version
// decides on current figures; it only grows, so a version read once is
// never read again after a change. The lock is taken by each of those
// changes (before the kernel's lock) and held by an exclusive snapshot
// across its decision, so that its commit finds the version unchanged.
// Accounts sharing a stripe only make each other's commits retry now and
// then.
type stripe struct {
	mu      sync.Mutex
	version uint64
}

func newLocalLedger(k *kernel.Kernel, acct *AccountStore, org *OrgStore, publish func(Generation)) *localLedger {
	return &localLedger{k: k, runningHolds: newRunningHolds(), acct: acct, org: org, publish: publish, seed: maphash.MakeSeed()}
}

// stripeOf is the account's stripe.
func (l *localLedger) stripeOf(accountID string) uint16 {
	return uint16(maphash.String(l.seed, accountID) % uint64(len(l.stripes)))
}

// Snapshot copies the account's and its key's figures, and the account's
// version, under the kernel's read lock.
func (l *localLedger) Snapshot(accountID, keyHash string, exclusive bool) (LedgerView, Stamp, error) {
	var v LedgerView
	var st Stamp
	err := l.snapshot(&v, &st, accountID, keyHash, exclusive)
	return v, st, err
}

// snapshot is Snapshot into the caller's view and stamp.
func (l *localLedger) snapshot(v *LedgerView, st *Stamp, accountID, keyHash string, exclusive bool) error {
	*st = Stamp{AccountID: accountID, KeyHash: keyHash, Stripe: l.stripeOf(accountID)}
	if exclusive {
		mu := &l.stripes[st.Stripe].mu
		mu.Lock()
		st.Lock = ledger.NewAccountLock(mu.Unlock)
	}
	l.k.RLock()
	err := l.read(v, st, now())
	l.k.RUnlock()
	if err != nil {
		st.Lock.Release()
		*st = Stamp{}
	}
	return err
}

// read fills in the view of the stamp's account and key at t, and the
// stamp. Callers hold the kernel's lock (either side).
func (l *localLedger) read(v *LedgerView, st *Stamp, t time.Time) error {
	accountID, keyHash := st.AccountID, st.KeyHash
	acct := l.acct.ledgerAccount(accountID)
	if acct == nil {
		return ErrNotFound
	}
	st.Version, st.At = l.stripes[st.Stripe].version, t
	v.Now, v.Account, v.AccountHeld = t, *acct, l.accountHeld.get(accountID)
	// Every field set (the caller's view may be a used one), none twice.
	v.KeyHeld, v.Workspace, v.WorkspaceHeld, v.Member, v.MemberHeld = 0, nil, 0, nil, 0
	var k *APIKey
	if keyHash != "" {
		k = l.acct.ledgerKey(keyHash)
		v.KeyHeld = l.keyHeld.get(keyHash)
	}
	if k == nil {
		v.Key = APIKey{}
	} else {
		v.Key = *k
		if ws := l.org.ledgerWorkspace(accountID, k.WorkspaceID); ws != nil {
			st.Workspace, st.CountsBYOK = accountID+"/"+ws.ID, ws.IncludeBYOKInBudgets
			v.Workspace, v.WorkspaceHeld = ws, l.workspaceHeld.get(st.Workspace)
		}
		if k.CreatorUserID != nil {
			if m := l.org.ledgerMember(accountID, *k.CreatorUserID); m != nil {
				st.Member = accountID + "/" + m.ID
				v.Member, v.MemberHeld = m, l.memberHeld.get(st.Member)
			}
		}
	}
	v.AccountRate, v.KeyRate, v.WorkspaceRate = l.rates.get(l.rates.account, accountID), l.rates.get(l.rates.key, keyHash), l.rates.get(l.rates.workspace, st.Workspace)
	running, settled, next := l.inFlightAt(accountID, t)
	v.InFlightHeld, v.NextRelease = running+settled, next
	st.InFlightHeld = v.InFlightHeld
	return nil
}

// Commit places the holds under the account's and the kernel's locks if
// the account's version is the one the snapshot read. The records'
// settings (limits, budgets) are not compared: an administrator changes
// them without reading the figures, so a decision on the settings as they
// were is one made just before the change.
func (l *localLedger) Commit(st Stamp, h Holds) (*Reservation, error) {
	sp := &l.stripes[st.Stripe]
	if st.Lock == nil {
		sp.mu.Lock()
		defer sp.mu.Unlock()
	} else {
		defer st.Lock.Release()
		if st.Lock.Released() {
			return nil, ErrStale
		}
	}
	l.k.Lock()
	defer l.k.Unlock()
	if sp.version != st.Version {
		return nil, ErrStale
	}
	accountID := st.AccountID
	t := now()
	ifs := l.state(accountID, t)
	res := &Reservation{AccountID: accountID, KeyHash: st.KeyHash, Holds: h, Stripe: st.Stripe, Workspace: st.Workspace, Member: st.Member}
	var sc heldScopes
	lv := l.heldLevels(res, ifs, &sc)
	lv.WorkspaceCountsBYOK = st.CountsBYOK
	if h.CountFree {
		// The counters too: a free-model request writes the account's
		// counters back (setAccountCounters), usage included.
		acct := l.acct.ledgerAccount(accountID)
		if acct == nil {
			return nil, ErrNotFound
		}
		lv.Account.Usage, lv.Account.BYOKUsage = acct.Usage, acct.BYOKUsage
		lv.Account.FreeDay, lv.Account.FreeMinute = acct.FreeModelRequests, acct.FreeModelMinute
	}
	if !lv.Fits(h, ifs.held()) {
		return nil, money.ErrAmountRange
	}
	sp.version++
	res.Placed = lv.Place(h, t)
	l.storeHeld(res, lv, ifs)
	if h.CountFree {
		// Not waited for: a count lost in a crash only favours the client.
		l.acct.setAccountCounters(accountID, lv.Account)
		l.k.MarkDirty(prefixAccount + accountID)
	}
	return res, nil
}

// Abandon lets go of the account's lock, if the snapshot holds it.
func (l *localLedger) Abandon(st Stamp) { st.Lock.Release() }

// heldScopes holds the scopes of heldLevels, on the caller's stack.
type heldScopes struct{ key, ws, member levels.Scope }

// heldLevels are the holds on a reservation's levels (no counters), and
// the account's running in-flight holds; sc holds the scopes. A level is
// there whether or not its record still is: holds are summed by key,
// apart from the records. Callers hold the kernel's lock.
func (l *localLedger) heldLevels(res *Reservation, st *inFlightState, sc *heldScopes) levels.Levels {
	lv := levels.Levels{Account: levels.Account{Held: l.accountHeld.get(res.AccountID), Running: st.running}}
	if res.KeyHash != "" {
		sc.key.Held = l.keyHeld.get(res.KeyHash)
		lv.Key = &sc.key
	}
	if res.Workspace != "" {
		sc.ws.Held = l.workspaceHeld.get(res.Workspace)
		lv.Workspace = &sc.ws
	}
	if res.Member != "" {
		sc.member.Held = l.memberHeld.get(res.Member)
		lv.Member = &sc.member
	}
	if res.Holds.Rate.On|res.Placed.Rate.On != 0 {
		lv.Account.Rate = l.rates.get(l.rates.account, res.AccountID)
		sc.key.Rate = l.rates.get(l.rates.key, res.KeyHash)
		sc.ws.Rate = l.rates.get(l.rates.workspace, res.Workspace)
	}
	return lv
}

// storeHeld writes the levels' holds back (see heldLevels). Callers hold
// the kernel's lock.
func (l *localLedger) storeHeld(res *Reservation, lv levels.Levels, st *inFlightState) {
	l.accountHeld.set(res.AccountID, lv.Account.Held)
	if lv.Key != nil {
		l.keyHeld.set(res.KeyHash, lv.Key.Held)
	}
	if lv.Workspace != nil {
		l.workspaceHeld.set(res.Workspace, lv.Workspace.Held)
	}
	if lv.Member != nil {
		l.memberHeld.set(res.Member, lv.Member.Held)
	}
	if st.running != lv.Account.Running {
		st.running = lv.Account.Running
		l.keepState(res.AccountID, st)
	}
	if on := res.Holds.Rate.On | res.Placed.Rate.On; on != 0 {
		if on&levels.RateOnAccount != 0 {
			l.rates.set(l.rates.account, res.AccountID, lv.Account.Rate)
		}
		if on&levels.RateOnKey != 0 && lv.Key != nil {
			l.rates.set(l.rates.key, res.KeyHash, lv.Key.Rate)
		}
		if on&levels.RateOnWorkspace != 0 && lv.Workspace != nil {
			l.rates.set(l.rates.workspace, res.Workspace, lv.Workspace.Rate)
		}
	}
}

// keepState registers the account's in-flight state while it holds
// anything, and drops it once it holds nothing.
func (l *localLedger) keepState(accountID string, st *inFlightState) {
	if st.running != 0 || st.head != len(st.settling) {
		l.inFlight[accountID] = st
	} else {
		delete(l.inFlight, accountID)
	}
}

// Release drops a reservation without a charge: the request failed before
// it cost anything.
func (l *localLedger) Release(res *Reservation) error {
	sp := &l.stripes[res.Stripe]
	sp.mu.Lock()
	defer sp.mu.Unlock()
	l.k.Lock()
	defer l.k.Unlock()
	if res.Done {
		return ErrSettled
	}
	res.Done = true
	sp.version++
	t := now()
	st := l.state(res.AccountID, t)
	var sc heldScopes
	lv := l.heldLevels(res, st, &sc)
	lv.Unhold(res.Placed)
	// Nothing was charged: neither were the tokens.
	lv.SettleRate(res.Placed.Rate, 0, 0, t)
	l.storeHeld(res, lv, st)
	return nil
}

// Settle turns a reservation into a charge, exactly once: it releases the
// holds, adds the cost to every level's counters, keeps the cost in the
// in-flight budget for the settlement window, and appends the generation
// record. It returns once all of that is durable.
func (l *localLedger) Settle(res *Reservation, c Charge) error {
	b, err := l.settle(res, c)
	if err != nil {
		return err
	}
	if err := b.Wait(); err != nil {
		return err
	}
	if c.Generation != nil {
		l.publish(*c.Generation)
	}
	return nil
}

// settle applies the settlement in memory under the account's and the
// kernel's locks and returns the batch that makes it durable.
func (l *localLedger) settle(res *Reservation, c Charge) (*kernel.Batch, error) {
	sp := &l.stripes[res.Stripe]
	sp.mu.Lock()
	defer sp.mu.Unlock()
	l.k.Lock()
	defer l.k.Unlock()
	if res.Done {
		return nil, ErrSettled
	}
	res.Done = true
	sp.version++
	t := now()
	st := l.state(res.AccountID, t)
	var sc heldScopes
	lv := l.heldLevels(res, st, &sc)
	lv.Unhold(res.Placed)
	if g := c.Generation; g != nil {
		lv.SettleRate(res.Placed.Rate, g.PromptTokens, g.CompletionTokens, t)
	}
	acct := l.acct.ledgerAccount(res.AccountID)
	if acct != nil {
		lv.Account.Usage, lv.Account.BYOKUsage = acct.Usage, acct.BYOKUsage
		lv.Account.FreeDay, lv.Account.FreeMinute = acct.FreeModelRequests, acct.FreeModelMinute
		c = c.Within(acct.Usage, acct.BYOKUsage)
	}
	keyUsage, keyBYOK, keySlot, hasKey := l.acct.ledgerKeyUsage(res.KeyHash)
	if hasKey && lv.Key != nil {
		lv.Key.Usage, lv.Key.BYOKUsage = keyUsage, keyBYOK
	}
	wsAccount, wsID, _ := cutScope(res.Workspace)
	ws := l.org.ledgerWorkspace(wsAccount, wsID)
	if ws != nil && lv.Workspace != nil {
		lv.Workspace.Usage, lv.Workspace.BYOKUsage = ws.Usage, ws.BYOKUsage
	}
	mAccount, memberID, _ := cutScope(res.Member)
	mem := l.org.ledgerMember(mAccount, memberID)
	if mem != nil && lv.Member != nil {
		lv.Member.Usage, lv.Member.BYOKUsage = mem.Usage, mem.BYOKUsage
	}
	charged := lv.Charge(c.Levels(), t)
	l.storeHeld(res, lv, st)
	if charged {
		if acct != nil && l.acct.setAccountCounters(res.AccountID, lv.Account) {
			l.k.MarkDirtyAt(prefixAccount, res.AccountID)
		}
		if hasKey {
			l.acct.setKeySlotCounters(keySlot, *lv.Key)
			l.k.MarkDirtyAt(prefixAPIKey, res.KeyHash)
		}
		if ws != nil && l.org.setWorkspaceCounters(wsAccount, wsID, *lv.Workspace) {
			l.k.MarkDirtyAt(prefixWorkspaceUsage, res.Workspace)
		}
		if mem != nil && l.org.setMemberCounters(mAccount, memberID, *lv.Member) {
			l.k.MarkDirtyAt(prefixMemberUsage, res.Member)
		}
	}
	if levels.KeepsSettling(res.Holds.InFlight, c.Cost, c.SettlementWindow) {
		st.settle(settling{until: t.Add(c.SettlementWindow), amount: c.Cost})
		l.inFlight[res.AccountID] = st
	}
	var b *kernel.Batch
	if g := c.Generation; g != nil {
		if g.UpstreamID != "" && g.UpstreamID != g.ID && !g.UpstreamIDHidden {
			l.k.Append(prefixUpstreamID+g.AccountID+"/"+g.UpstreamID, g.ID)
		}
		// The record itself, not a copy: Settle returns only once the
		// flusher has encoded it, so the caller cannot change it before.
		b = l.k.Append(prefixGeneration+g.ID, g)
	} else {
		b = l.k.Pending()
	}
	return b, nil
}

// cutScope splits a scope key "<account id>/<id>".
func cutScope(key string) (accountID, id string, ok bool) { return strings.Cut(key, "/") }

// ReapExpired: the in-process ledger's holds end with its process.
func (l *localLedger) ReapExpired() (int, error) { return 0, nil }

func (l *localLedger) Start(context.Context)                    {}
func (l *localLedger) Wait()                                    {}
func (l *localLedger) Admissible() error                        { return nil }
func (l *localLedger) SettleFailed(*Reservation, Charge, error) {}
func (l *localLedger) ReleaseFailed(*Reservation, error)        {}
func (l *localLedger) LoadAll() error                           { return nil }
func (l *localLedger) Refresh(map[string][]string) error        { return nil }
func (l *localLedger) Overlay(string)                           {}
func (l *localLedger) OverlayAll()                              {}
func (l *localLedger) ShareKeyCeiling(*KeyCeiling)              {}

func (l *localLedger) Held(accountID, keyHash string) (account, key money.Amount) {
	l.k.RLock()
	defer l.k.RUnlock()
	account = l.accountHeld.get(accountID)
	if keyHash != "" {
		key = l.keyHeld.get(keyHash)
	}
	return account, key
}

// runningHolds is the in-memory state of running requests: what they hold against
// balances, key caps and the in-flight budget. It is not persisted: after a
// restart nothing is running, so nothing is held.
type runningHolds struct {
	accountHeld held
	keyHeld     held
	inFlight    map[string]*inFlightState
	// workspaceHeld and memberHeld are by "<account id>/<id>".
	workspaceHeld held
	memberHeld    held
	// rates are the rate limits' use, in memory only: after a restart
	// the windows start again.
	rates rateUse
}

// rateUse is the rate limits' use of accounts (by id), keys (by hash) and
// workspaces (by "<account id>/<id>"); only scopes with a limit have one.
type rateUse struct {
	account, key, workspace map[string]*levels.Rate
}

func (rateUse) get(m map[string]*levels.Rate, k string) levels.Rate {
	if p := m[k]; p != nil {
		return *p
	}
	return levels.Rate{}
}

func (rateUse) set(m map[string]*levels.Rate, k string, r levels.Rate) {
	if p := m[k]; p != nil {
		*p = r
	} else if r != (levels.Rate{}) {
		p = new(levels.Rate)
		*p = r
		m[k] = p
	}
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

func newRunningHolds() runningHolds {
	return runningHolds{accountHeld: newHeld(), keyHeld: newHeld(), inFlight: map[string]*inFlightState{}, workspaceHeld: newHeld(), memberHeld: newHeld(),
		rates: rateUse{account: map[string]*levels.Rate{}, key: map[string]*levels.Rate{}, workspace: map[string]*levels.Rate{}}}
}

// state returns the account's in-flight state with expired settlements
// released; the state is registered only once something is added to it.
func (l *runningHolds) state(accountID string, t time.Time) *inFlightState {
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

// inFlightAt is the account's in-flight use at t: its running holds, the
// settling costs not released by t, and the time until the next release;
// read only (callers may hold the kernel's read lock).
func (l *runningHolds) inFlightAt(accountID string, t time.Time) (running, settled money.Amount, next time.Duration) {
	st := l.inFlight[accountID]
	if st == nil {
		return 0, 0, 0
	}
	settled = st.settled
	i := st.head
	for ; i < len(st.settling) && !st.settling[i].until.After(t); i++ {
		settled -= st.settling[i].amount
	}
	if i < len(st.settling) {
		next = st.settling[i].until.Sub(t)
	}
	return st.running, settled, next
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
