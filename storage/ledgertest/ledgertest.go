// Package ledgertest is the ledger's conformance suite: the ledger of
// every backend (the in-process one on Badger, the shared one on Redis and
// on a Redis Cluster) passes the same tests, through the store's exported
// admission (Snapshot, Commit, Settle, Release, ReapExpired). A backend's
// tests call Run with a way to open replicas of one new database.
package ledgertest

import (
	"errors"
	"github.com/tollgate-dev/caddy-tollgate/internal/wait"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

// Lease is the hold lease a shared backend under the suite should have:
// the shortest allowed, so that an abandoned hold lapses quickly.
const Lease = 300 * time.Millisecond

// Backend opens replicas of one database on a backend.
type Backend struct {
	Name string
	// Open opens n replicas of one new database (one store n times on a
	// backend only one process writes), and die, which stops a replica
	// as kill -9 would, leaving its holds behind, and returns a live
	// replica of the same database (on Badger, the store reopened).
	Open func(t *testing.T, n int) (reps []*storage.Store, die func(s *storage.Store) *storage.Store)
}

// Run runs the suite on b.
func Run(t *testing.T, b Backend) {
	t.Run("SettleChargesEveryLevelOnce", func(t *testing.T) { conformSettle(t, b) })
	t.Run("ReleaseChargesNothing", func(t *testing.T) { conformRelease(t, b) })
	t.Run("ExactCapUnderConcurrency", func(t *testing.T) { conformExactCap(t, b) })
	t.Run("BYOKAndFreeModels", func(t *testing.T) { conformBYOK(t, b) })
	t.Run("FreeModelRequestKeepsTheUsage", func(t *testing.T) { conformFreeKeepsUsage(t, b) })
	t.Run("SettlementWindowHoldsTheInFlightBudget", func(t *testing.T) { conformSettling(t, b) })
	t.Run("AbandonedHoldsAreReleased", func(t *testing.T) { conformAbandoned(t, b) })
	t.Run("ExactlyTheCapsHoldsAreAdmitted", func(t *testing.T) { conformExactlyN(t, b) })
	t.Run("StaleCommitDecidesAgain", func(t *testing.T) { conformStale(t, b) })
	t.Run("ExclusiveSnapshotCommits", func(t *testing.T) { conformExclusive(t, b) })
	t.Run("BusyAccountDoesNotStarve", func(t *testing.T) { conformBusy(t, b) })
}

// errRefused is a decision's refusal.
var errRefused = errors.New("refused")

// conformanceFixture is an organization with a member, a key of that
// member in the default workspace, and the key's cap.
type conformanceFixture struct {
	acct   storage.Account
	member storage.Member
	key    storage.APIKey
	limit  money.Amount
}

func newConformanceFixture(t *testing.T, s *storage.Store, limit money.Amount) conformanceFixture {
	t.Helper()
	acct, err := s.CreateAccount(storage.NewAccount{Name: "A", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.CreateMember(storage.NewMember{AccountID: acct.ID, Email: "mia@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: "k", Limit: &limit, CreatorUserID: &m.ID})
	if err != nil {
		t.Fatal(err)
	}
	return conformanceFixture{acct: acct, member: m, key: k, limit: limit}
}

// seen waits until replica r has the fixture's records.
func (f conformanceFixture) seen(t *testing.T, r *storage.Store) {
	t.Helper()
	eventually(t, 2*time.Second, "the records reach the replica", func() bool {
		_, ok := r.APIKey(f.key.Hash)
		_, mok := r.Member(f.acct.ID, f.member.ID)
		return ok && mok
	})
}

// counters are every level's charged total, as r reads them.
type counters struct{ account, key, workspace, member money.Amount }

func (f conformanceFixture) counters(r *storage.Store) counters {
	a, _ := r.Account(f.acct.ID)
	k, _ := r.APIKey(f.key.Hash)
	w, _ := r.Workspace(f.acct.ID, f.key.WorkspaceID)
	m, _ := r.Member(f.acct.ID, f.member.ID)
	return counters{a.Usage, k.Usage.Total, w.Usage.Total, m.Usage.Total}
}

func conformSettle(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 2)
	f := newConformanceFixture(t, reps[0], 10*money.AmountScale)
	f.seen(t, reps[1])
	var view storage.LedgerView
	res, err := reserveIf(reps[1], f.acct.ID, f.key.Hash, storage.Holds{Hold: 500}, func(v storage.LedgerView) error { view = v; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if view.Workspace == nil || view.Member == nil || view.Key.Hash != f.key.Hash {
		t.Fatalf("the view lacks a level: workspace %v, member %v, key %q", view.Workspace, view.Member, view.Key.Hash)
	}
	v := viewOf(t, reps[1], f.acct.ID, f.key.Hash)
	if v.AccountHeld != 500 || v.KeyHeld != 500 || v.WorkspaceHeld != 500 || v.MemberHeld != 500 {
		t.Fatalf("held: account %s key %s workspace %s member %s, want 500 each", v.AccountHeld, v.KeyHeld, v.WorkspaceHeld, v.MemberHeld)
	}
	g := &storage.Generation{ID: storage.NewGenerationID(time.Now()), AccountID: f.acct.ID, KeyHash: f.key.Hash, Cost: 300, CreatedAt: time.Now()}
	if err := reps[1].Settle(res, storage.Charge{Cost: 300, Generation: g}); err != nil {
		t.Fatal(err)
	}
	if err := reps[1].Settle(res, storage.Charge{Cost: 300, Generation: g}); !errors.Is(err, storage.ErrSettled) {
		t.Fatalf("a second Settle: %v, want storage.ErrSettled", err)
	}
	if err := reps[1].Release(res); !errors.Is(err, storage.ErrSettled) {
		t.Fatalf("a Release after Settle: %v, want storage.ErrSettled", err)
	}
	want := counters{300, 300, 300, 300}
	for i, r := range reps {
		eventually(t, 2*time.Second, "the charge at every level", func() bool { return f.counters(r) == want })
		v := viewOf(t, r, f.acct.ID, f.key.Hash)
		if v.AccountHeld != 0 || v.KeyHeld != 0 || v.WorkspaceHeld != 0 || v.MemberHeld != 0 {
			t.Fatalf("replica %d still holds: %+v", i, v)
		}
		if v.Key.Usage.In(money.IntervalDaily, v.Now) != 300 {
			t.Fatalf("replica %d: the key's day counts %s", i, v.Key.Usage.In(money.IntervalDaily, v.Now))
		}
	}
	if got, err := reps[0].Generation(g.ID); err != nil || got.Cost != 300 {
		t.Fatalf("generation %+v, %v", got, err)
	}
}

func conformRelease(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 1)
	f := newConformanceFixture(t, reps[0], money.AmountScale)
	res, err := reserveIf(reps[0], f.acct.ID, f.key.Hash, storage.Holds{Hold: money.AmountScale, InFlight: 10}, capDecide(money.AmountScale))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reserveIf(reps[0], f.acct.ID, f.key.Hash, storage.Holds{Hold: 1}, capDecide(1)); !errors.Is(err, errRefused) {
		t.Fatalf("a full cap admitted another request: %v", err)
	}
	if err := reps[0].Release(res); err != nil {
		t.Fatal(err)
	}
	if err := reps[0].Release(res); !errors.Is(err, storage.ErrSettled) {
		t.Fatalf("a second Release: %v, want storage.ErrSettled", err)
	}
	v := viewOf(t, reps[0], f.acct.ID, f.key.Hash)
	if v.AccountHeld != 0 || v.KeyHeld != 0 || v.WorkspaceHeld != 0 || v.MemberHeld != 0 || v.InFlightHeld != 0 {
		t.Fatalf("released, still held: %+v", v)
	}
	if c := f.counters(reps[0]); c != (counters{}) {
		t.Fatalf("a release charged %+v", c)
	}
	if _, err := reserveIf(reps[0], f.acct.ID, f.key.Hash, storage.Holds{Hold: money.AmountScale}, capDecide(money.AmountScale)); err != nil {
		t.Fatalf("the whole cap after a release: %v", err)
	}
}

func conformExactCap(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 3)
	f := newConformanceFixture(t, reps[0], 10*money.AmountScale)
	for _, r := range reps[1:] {
		f.seen(t, r)
	}
	hold := money.Amount(money.AmountScale)
	var admitted, charged atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := reps[i%len(reps)]
			<-start
			res, err := reserveIf(r, f.acct.ID, f.key.Hash, storage.Holds{Hold: hold}, capDecide(hold))
			if errors.Is(err, errRefused) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			admitted.Add(1)
			if i%4 == 0 {
				if err := r.Release(res); err != nil {
					t.Error(err)
				}
				return
			}
			// Every admitted request costs its whole hold, so the cap
			// admits exactly 10 charges.
			if err := r.Settle(res, storage.Charge{Cost: hold}); err != nil {
				t.Error(err)
			}
			charged.Add(int64(hold))
		}()
	}
	close(start)
	wg.Wait()
	// Releases free room for more: keep admitting until the cap is full.
	// (A replica decides on its copy of the counters, which another
	// replica's release reaches within the feed's delay: a refusal may
	// come before it.)
	for deadline := time.Now().Add(5 * time.Second); charged.Load() < int64(f.limit); {
		res, err := reserveIf(reps[0], f.acct.ID, f.key.Hash, storage.Holds{Hold: hold}, capDecide(hold))
		if errors.Is(err, errRefused) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("after %d charged: %v", charged.Load(), err)
		}
		if err := reps[0].Settle(res, storage.Charge{Cost: hold}); err != nil {
			t.Fatal(err)
		}
		charged.Add(int64(hold))
	}
	if charged.Load() != int64(f.limit) {
		t.Fatalf("charged %d against a cap of %s", charged.Load(), f.limit)
	}
	want := counters{f.limit, f.limit, f.limit, f.limit}
	for _, r := range reps {
		eventually(t, 2*time.Second, "every replica reads the full cap", func() bool { return f.counters(r) == want })
		if _, err := reserveIf(r, f.acct.ID, f.key.Hash, storage.Holds{Hold: 1}, capDecide(1)); !errors.Is(err, errRefused) {
			t.Fatalf("a full cap admitted: %v", err)
		}
	}
}

func conformBYOK(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 1)
	s := reps[0]
	f := newConformanceFixture(t, s, 10*money.AmountScale)
	res, err := reserveIf(s, f.acct.ID, f.key.Hash, storage.Holds{Hold: 1000, KeyOnly: true, Credits: 100, CountFree: true}, capDecide(1000))
	if err != nil {
		t.Fatal(err)
	}
	v := viewOf(t, s, f.acct.ID, f.key.Hash)
	if v.AccountHeld != 100 || v.KeyHeld != 1000 || v.WorkspaceHeld != 100 || v.MemberHeld != 1000 {
		t.Fatalf("BYOK holds: account %s key %s workspace %s member %s", v.AccountHeld, v.KeyHeld, v.WorkspaceHeld, v.MemberHeld)
	}
	if n := v.Account.FreeModelRequests.At(money.IntervalDaily, v.Now); n != 1 {
		t.Fatalf("free-model requests today: %s, want 1", n)
	}
	if err := s.Settle(res, storage.Charge{Cost: 900, BYOK: true, Credits: 100}); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Account(f.acct.ID)
	k, _ := s.APIKey(f.key.Hash)
	w, _ := s.Workspace(f.acct.ID, f.key.WorkspaceID)
	if a.Usage != 100 || a.BYOKUsage != 800 || k.Usage.Total != 100 || k.BYOKUsage.Total != 800 || w.Usage.Total != 100 || w.BYOKUsage.Total != 800 {
		t.Fatalf("BYOK charge: account %s+%s key %s+%s workspace %s+%s", a.Usage, a.BYOKUsage, k.Usage.Total, k.BYOKUsage.Total, w.Usage.Total, w.BYOKUsage.Total)
	}
	v = viewOf(t, s, f.acct.ID, f.key.Hash)
	if v.AccountHeld != 0 || v.KeyHeld != 0 || v.WorkspaceHeld != 0 || v.MemberHeld != 0 {
		t.Fatalf("still held: %+v", v)
	}
}

// conformFreeKeepsUsage: counting a free-model request leaves the
// account's charged usage as it was.
func conformFreeKeepsUsage(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 1)
	s := reps[0]
	f := newConformanceFixture(t, s, 10*money.AmountScale)
	res, err := reserveIf(s, f.acct.ID, f.key.Hash, storage.Holds{Hold: 1000}, capDecide(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(res, storage.Charge{Cost: 700}); err != nil {
		t.Fatal(err)
	}
	res, err = reserveIf(s, f.acct.ID, f.key.Hash, storage.Holds{CountFree: true}, capDecide(0))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Account(f.acct.ID); a.Usage != 700 {
		t.Fatalf("account usage %s after a free-model request was counted, want 700", a.Usage)
	}
	if err := s.Settle(res, storage.Charge{}); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Account(f.acct.ID); a.Usage != 700 || a.FreeModelRequests.At(money.IntervalDaily, time.Now()) != 1 {
		t.Fatalf("after the free request: usage %s, free requests today %s; want 700 and 1", a.Usage, a.FreeModelRequests.At(money.IntervalDaily, time.Now()))
	}
}

func conformSettling(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 1)
	s := reps[0]
	f := newConformanceFixture(t, s, 10*money.AmountScale)
	res, err := reserveIf(s, f.acct.ID, f.key.Hash, storage.Holds{Hold: 1000, InFlight: 1000}, capDecide(1000))
	if err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, s, f.acct.ID, f.key.Hash); v.InFlightHeld != 1000 {
		t.Fatalf("in flight %s, want 1000", v.InFlightHeld)
	}
	if err := s.Settle(res, storage.Charge{Cost: 700, SettlementWindow: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, s, f.acct.ID, f.key.Hash); v.InFlightHeld != 700 || v.NextRelease <= 0 {
		t.Fatalf("settling: in flight %s, next release in %v; want 700 and a wait", v.InFlightHeld, v.NextRelease)
	}
	eventually(t, 2*time.Second, "the window ends", func() bool {
		return viewOf(t, s, f.acct.ID, f.key.Hash).InFlightHeld == 0
	})
}

func conformAbandoned(t *testing.T, b Backend) {
	reps, die := b.Open(t, 2)
	f := newConformanceFixture(t, reps[0], money.AmountScale)
	f.seen(t, reps[1])
	if _, err := reserveIf(reps[0], f.acct.ID, f.key.Hash, storage.Holds{Hold: money.AmountScale}, capDecide(money.AmountScale)); err != nil {
		t.Fatal(err)
	}
	// The hold outlives a lease while its replica lives (renewed).
	time.Sleep(2 * Lease)
	if _, err := reserveIf(reps[1], f.acct.ID, f.key.Hash, storage.Holds{Hold: 1}, capDecide(1)); !errors.Is(err, errRefused) {
		t.Fatalf("a live replica's hold was released: %v", err)
	}
	live := die(reps[0])
	eventually(t, 10*time.Second, "the dead replica's hold is released", func() bool {
		if _, err := live.ReapExpired(); err != nil {
			t.Fatal(err)
		}
		return viewOf(t, live, f.acct.ID, f.key.Hash).KeyHeld == 0
	})
	res, err := reserveIf(live, f.acct.ID, f.key.Hash, storage.Holds{Hold: money.AmountScale}, capDecide(money.AmountScale))
	if err != nil {
		t.Fatalf("the whole cap once the hold is released: %v", err)
	}
	if err := live.Settle(res, storage.Charge{Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if c := f.counters(live); c != (counters{1, 1, 1, 1}) {
		t.Fatalf("counters %+v: the abandoned request was charged", c)
	}
}

// conformExactlyN: many requests at once, at every replica, on a cap of
// exactly n holds: exactly n are admitted, whatever their order.
func conformExactlyN(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 3)
	const n = 7
	hold := money.Amount(money.AmountScale)
	f := newConformanceFixture(t, reps[0], n*hold)
	for _, r := range reps[1:] {
		f.seen(t, r)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 90 {
		wg.Go(func() {
			<-start
			_, err := reserveIf(reps[i%len(reps)], f.acct.ID, f.key.Hash, storage.Holds{Hold: hold}, capDecide(hold))
			switch {
			case err == nil:
				admitted.Add(1)
			case !errors.Is(err, errRefused):
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != n {
		t.Fatalf("admitted %d against a cap of exactly %d holds", admitted.Load(), n)
	}
	for i, r := range reps {
		eventually(t, 2*time.Second, "every replica reads the cap's holds", func() bool {
			return viewOf(t, r, f.acct.ID, f.key.Hash).KeyHeld == n*hold
		})
		if v := viewOf(t, r, f.acct.ID, f.key.Hash); v.AccountHeld != n*hold || v.WorkspaceHeld != n*hold || v.MemberHeld != n*hold {
			t.Fatalf("replica %d holds %+v", i, v)
		}
	}
}

// conformStale: a commit whose figures another request changed after its
// snapshot (at another replica, or at its own) fails and places nothing;
// the next snapshot reads the change, and the decision made on it holds.
func conformStale(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 2)
	hold := money.Amount(money.AmountScale)
	f := newConformanceFixture(t, reps[0], 2*hold)
	f.seen(t, reps[1])
	for i, other := range []*storage.Store{reps[0], reps[1]} {
		var snap storage.Snapshot
		if err := reps[1].Snapshot(&snap, f.acct.ID, f.key.Hash, 0); err != nil {
			t.Fatal(err)
		}
		if snap.View.KeyHeld != money.Amount(i)*hold {
			t.Fatalf("round %d: the snapshot reads %s held", i, snap.View.KeyHeld)
		}
		// Room for one more on this snapshot; another request takes it.
		if _, err := other.Reserve(f.acct.ID, f.key.Hash, storage.Holds{Hold: hold}); err != nil {
			t.Fatal(err)
		}
		if _, err := reps[1].Commit(&snap, storage.Holds{Hold: hold}); !errors.Is(err, storage.ErrStale) {
			t.Fatalf("round %d: a commit on changed figures: %v, want storage.ErrStale", i, err)
		}
		reps[1].Abandon(&snap) // nothing after a commit
	}
	// The two holds fill the cap: a decision on fresh figures refuses.
	eventually(t, 2*time.Second, "the replica reads both holds", func() bool {
		return viewOf(t, reps[1], f.acct.ID, f.key.Hash).KeyHeld == 2*hold
	})
	if _, err := reserveIf(reps[1], f.acct.ID, f.key.Hash, storage.Holds{Hold: hold}, capDecide(hold)); !errors.Is(err, errRefused) {
		t.Fatalf("over the cap after stale commits: %v", err)
	}
	for i, r := range reps {
		eventually(t, 2*time.Second, "both holds reach the replica", func() bool {
			return viewOf(t, r, f.acct.ID, f.key.Hash).AccountHeld == 2*hold
		})
		if v := viewOf(t, r, f.acct.ID, f.key.Hash); v.KeyHeld != 2*hold || v.WorkspaceHeld != 2*hold || v.MemberHeld != 2*hold {
			t.Fatalf("replica %d: a stale commit placed holds: %+v", i, v)
		}
	}
}

// conformExclusive: an exclusive snapshot (a late attempt) holds the
// account: another reservation of the same replica waits for its commit,
// which therefore succeeds.
func conformExclusive(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 1)
	s := reps[0]
	hold := money.Amount(money.AmountScale)
	f := newConformanceFixture(t, s, 2*hold)
	var snap storage.Snapshot
	if err := s.Snapshot(&snap, f.acct.ID, f.key.Hash, storage.OptimisticAttempts); err != nil {
		t.Fatal(err)
	}
	other := make(chan error, 1)
	go func() {
		_, err := reserveIf(s, f.acct.ID, f.key.Hash, storage.Holds{Hold: hold}, capDecide(hold))
		other <- err
	}()
	select {
	case err := <-other:
		t.Fatalf("a reservation ran beside an exclusive snapshot: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := s.Commit(&snap, storage.Holds{Hold: hold}); err != nil {
		t.Fatalf("the exclusive commit: %v", err)
	}
	if err := <-other; err != nil {
		t.Fatalf("the reservation after it: %v", err)
	}
	if v := viewOf(t, s, f.acct.ID, f.key.Hash); v.KeyHeld != 2*hold {
		t.Fatalf("held %s, want both holds", v.KeyHeld)
	}
	// A snapshot commits once: again, it is stale, and places nothing.
	if _, err := s.Commit(&snap, storage.Holds{Hold: hold}); !errors.Is(err, storage.ErrStale) {
		t.Fatalf("a second commit of an exclusive snapshot: %v, want storage.ErrStale", err)
	}
	s.Abandon(&snap) // nothing after a commit
	if err := s.Snapshot(&snap, f.acct.ID, f.key.Hash, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(&snap, storage.Holds{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(&snap, storage.Holds{Hold: hold}); !errors.Is(err, storage.ErrStale) {
		t.Fatalf("a second commit of a snapshot: %v, want storage.ErrStale", err)
	}
	// Abandon lets go of an exclusive snapshot's lock too.
	if err := s.Snapshot(&snap, f.acct.ID, f.key.Hash, storage.OptimisticAttempts); err != nil {
		t.Fatal(err)
	}
	s.Abandon(&snap)
	s.Abandon(&snap)
	if _, err := s.Reserve(f.acct.ID, f.key.Hash, storage.Holds{}); err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, s, f.acct.ID, f.key.Hash); v.KeyHeld != 2*hold {
		t.Fatalf("held %s after commits of used snapshots, want 2 holds", v.KeyHeld)
	}
}

// conformBusy: requests reserving and settling on one account as fast as
// they can, each deciding slowly enough that the figures change under
// most decisions: every one is admitted (the later attempts decide
// holding the account), none fails for contention.
func conformBusy(t *testing.T, b Backend) {
	reps, _ := b.Open(t, 2)
	f := newConformanceFixture(t, reps[0], 1000*money.AmountScale)
	f.seen(t, reps[1])
	slow := func(storage.LedgerView) error {
		for range 20 {
			runtime.Gosched()
		}
		return nil
	}
	var wg sync.WaitGroup
	var charged atomic.Int64
	for i := range 16 {
		wg.Go(func() {
			r := reps[i%len(reps)]
			for range 20 {
				res, err := reserveIf(r, f.acct.ID, f.key.Hash, storage.Holds{Hold: 10, InFlight: 10}, slow)
				if err != nil {
					t.Error(err)
					return
				}
				if err := r.Settle(res, storage.Charge{Cost: 3}); err != nil {
					t.Error(err)
					return
				}
				charged.Add(3)
			}
		})
	}
	wg.Wait()
	want := money.Amount(charged.Load())
	if want != 16*20*3 {
		t.Fatalf("charged %s, want every request's", want)
	}
	eventually(t, 2*time.Second, "every charge on every level", func() bool {
		return f.counters(reps[0]) == counters{want, want, want, want}
	})
}

// capDecide admits while the key's cap covers usage, holds and the new hold.
func capDecide(hold money.Amount) func(storage.LedgerView) error {
	return func(v storage.LedgerView) error {
		if v.Key.Limit != nil && v.Key.CapUsage(v.Now)+v.KeyHeld+hold > *v.Key.Limit {
			return errRefused
		}
		return nil
	}
}

// reserveIf is an admission as the gateway makes it: decide on a snapshot
// and commit the holds, again on fresh figures when the commit finds them
// changed.
func reserveIf(s *storage.Store, accountID, keyHash string, h storage.Holds, decide func(storage.LedgerView) error) (*storage.Reservation, error) {
	return reserveHolds(s, accountID, keyHash, func(v storage.LedgerView) (storage.Holds, error) { return h, decide(v) })
}

// reserveHolds is reserveIf with holds that decide computes from the view.
func reserveHolds(s *storage.Store, accountID, keyHash string, decide func(storage.LedgerView) (storage.Holds, error)) (*storage.Reservation, error) {
	for attempt := 0; ; attempt++ {
		var snap storage.Snapshot
		if err := s.Snapshot(&snap, accountID, keyHash, attempt); err != nil {
			return nil, err
		}
		h, err := decide(snap.View)
		if err != nil {
			s.Abandon(&snap)
			return nil, err
		}
		res, err := s.Commit(&snap, h)
		if !errors.Is(err, storage.ErrStale) {
			return res, err
		}
	}
}

// viewOf is the figures a decision on s would see now.
func viewOf(t *testing.T, s *storage.Store, accountID, keyHash string) storage.LedgerView {
	t.Helper()
	var v storage.LedgerView
	if _, err := reserveIf(s, accountID, keyHash, storage.Holds{}, func(lv storage.LedgerView) error { v = lv; return errRefused }); err != errRefused {
		t.Fatal(err)
	}
	return v
}

// eventually is wait.Eventually.
var eventually = wait.Eventually
