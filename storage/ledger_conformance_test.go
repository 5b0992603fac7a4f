package storage

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/redistest"
)

// The ledger's conformance suite: every Ledger implementation, on its
// backend, passes the same tests.

// conformanceLease is the shared backends' hold lease in the suite: the
// shortest allowed, so that an abandoned hold lapses quickly.
const conformanceLease = 300 * time.Millisecond

// ledgerBackendCase opens replicas of one database on a backend.
type ledgerBackendCase struct {
	name string
	// open opens n replicas of one new database (one store n times on a
	// backend only one process writes), and die, which stops a replica
	// as kill -9 would, leaving its holds behind, and returns a live
	// replica of the same database (on Badger, the store reopened).
	open func(t *testing.T, n int) (reps []*Store, die func(s *Store) *Store)
}

func ledgerBackends() []ledgerBackendCase {
	return []ledgerBackendCase{
		{
			name: "badger",
			open: func(t *testing.T, n int) ([]*Store, func(*Store) *Store) {
				dir := t.TempDir()
				cur := openTemp(t, dir)
				t.Cleanup(func() { _ = cur.Close() })
				out := make([]*Store, n)
				for i := range out {
					out[i] = cur
				}
				return out, func(s *Store) *Store {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					cur = openTemp(t, dir)
					return cur
				}
			},
		},
		{
			name: "redis",
			open: func(t *testing.T, n int) ([]*Store, func(*Store) *Store) {
				srv := redistest.Start(t)
				out := make([]*Store, n)
				for i := range out {
					out[i] = openLeasedReplica(t, srv, "conf:", conformanceLease)
				}
				return out, func(s *Store) *Store {
					s.stopFollowing() // no more lease renewals
					for _, o := range out {
						if o != s {
							return o
						}
					}
					t.Fatal("no other replica")
					return nil
				}
			},
		},
		{
			name: "redis-cluster",
			open: func(t *testing.T, n int) ([]*Store, func(*Store) *Store) {
				c := redistest.StartCluster(t, 3, 0)
				out := make([]*Store, n)
				for i := range out {
					out[i] = openClusterReplica(t, c, "conf:", conformanceLease)
				}
				return out, func(s *Store) *Store {
					s.stopFollowing() // no more lease renewals
					for _, o := range out {
						if o != s {
							return o
						}
					}
					t.Fatal("no other replica")
					return nil
				}
			},
		},
	}
}

// conformanceFixture is an organization with a member, a key of that
// member in the default workspace, and the key's cap.
type conformanceFixture struct {
	acct   Account
	member Member
	key    APIKey
	limit  money.Amount
}

func newConformanceFixture(t *testing.T, s *Store, limit money.Amount) conformanceFixture {
	t.Helper()
	acct, err := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "mia@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", Limit: &limit, CreatorUserID: &m.ID})
	if err != nil {
		t.Fatal(err)
	}
	return conformanceFixture{acct: acct, member: m, key: k, limit: limit}
}

// seen waits until replica r has the fixture's records.
func (f conformanceFixture) seen(t *testing.T, r *Store) {
	t.Helper()
	eventually(t, 2*time.Second, "the records reach the replica", func() bool {
		_, ok := r.APIKey(f.key.Hash)
		_, mok := r.Member(f.acct.ID, f.member.ID)
		return ok && mok
	})
}

// counters are every level's charged total, as r reads them.
type counters struct{ account, key, workspace, member money.Amount }

func (f conformanceFixture) counters(r *Store) counters {
	a, _ := r.Account(f.acct.ID)
	k, _ := r.APIKey(f.key.Hash)
	w, _ := r.Workspace(f.acct.ID, f.key.WorkspaceID)
	m, _ := r.Member(f.acct.ID, f.member.ID)
	return counters{a.Usage, k.Usage.Total, w.Usage.Total, m.Usage.Total}
}

func TestLedgerConformance(t *testing.T) {
	for _, b := range ledgerBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			t.Run("SettleChargesEveryLevelOnce", func(t *testing.T) { conformSettle(t, b) })
			t.Run("ReleaseChargesNothing", func(t *testing.T) { conformRelease(t, b) })
			t.Run("ExactCapUnderConcurrency", func(t *testing.T) { conformExactCap(t, b) })
			t.Run("BYOKAndFreeModels", func(t *testing.T) { conformBYOK(t, b) })
			t.Run("FreeModelRequestKeepsTheUsage", func(t *testing.T) { conformFreeKeepsUsage(t, b) })
			t.Run("SettlementWindowHoldsTheInFlightBudget", func(t *testing.T) { conformSettling(t, b) })
			t.Run("AbandonedHoldsAreReleased", func(t *testing.T) { conformAbandoned(t, b) })
		})
	}
}

func conformSettle(t *testing.T, b ledgerBackendCase) {
	reps, _ := b.open(t, 2)
	f := newConformanceFixture(t, reps[0], 10*money.AmountScale)
	f.seen(t, reps[1])
	var view LedgerView
	res, err := reps[1].Reserve(f.acct.ID, f.key.Hash, Holds{Hold: 500}, func(v LedgerView) error { view = v; return nil })
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
	g := &Generation{ID: NewGenerationID(time.Now()), AccountID: f.acct.ID, KeyHash: f.key.Hash, Cost: 300, CreatedAt: time.Now()}
	if err := reps[1].Settle(res, Charge{Cost: 300, Generation: g}); err != nil {
		t.Fatal(err)
	}
	if err := reps[1].Settle(res, Charge{Cost: 300, Generation: g}); !errors.Is(err, ErrSettled) {
		t.Fatalf("a second Settle: %v, want ErrSettled", err)
	}
	if err := reps[1].Release(res); !errors.Is(err, ErrSettled) {
		t.Fatalf("a Release after Settle: %v, want ErrSettled", err)
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

func conformRelease(t *testing.T, b ledgerBackendCase) {
	reps, _ := b.open(t, 1)
	f := newConformanceFixture(t, reps[0], money.AmountScale)
	res, err := reps[0].Reserve(f.acct.ID, f.key.Hash, Holds{Hold: money.AmountScale, InFlight: 10}, capDecide(money.AmountScale))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reps[0].Reserve(f.acct.ID, f.key.Hash, Holds{Hold: 1}, capDecide(1)); !errors.Is(err, errRefused) {
		t.Fatalf("a full cap admitted another request: %v", err)
	}
	if err := reps[0].Release(res); err != nil {
		t.Fatal(err)
	}
	if err := reps[0].Release(res); !errors.Is(err, ErrSettled) {
		t.Fatalf("a second Release: %v, want ErrSettled", err)
	}
	v := viewOf(t, reps[0], f.acct.ID, f.key.Hash)
	if v.AccountHeld != 0 || v.KeyHeld != 0 || v.WorkspaceHeld != 0 || v.MemberHeld != 0 || v.InFlightHeld != 0 {
		t.Fatalf("released, still held: %+v", v)
	}
	if c := f.counters(reps[0]); c != (counters{}) {
		t.Fatalf("a release charged %+v", c)
	}
	if _, err := reps[0].Reserve(f.acct.ID, f.key.Hash, Holds{Hold: money.AmountScale}, capDecide(money.AmountScale)); err != nil {
		t.Fatalf("the whole cap after a release: %v", err)
	}
}

func conformExactCap(t *testing.T, b ledgerBackendCase) {
	reps, _ := b.open(t, 3)
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
			res, err := r.Reserve(f.acct.ID, f.key.Hash, Holds{Hold: hold}, capDecide(hold))
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
			if err := r.Settle(res, Charge{Cost: hold}); err != nil {
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
		res, err := reps[0].Reserve(f.acct.ID, f.key.Hash, Holds{Hold: hold}, capDecide(hold))
		if errors.Is(err, errRefused) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("after %d charged: %v", charged.Load(), err)
		}
		if err := reps[0].Settle(res, Charge{Cost: hold}); err != nil {
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
		if _, err := r.Reserve(f.acct.ID, f.key.Hash, Holds{Hold: 1}, capDecide(1)); !errors.Is(err, errRefused) {
			t.Fatalf("a full cap admitted: %v", err)
		}
	}
}

func conformBYOK(t *testing.T, b ledgerBackendCase) {
	reps, _ := b.open(t, 1)
	s := reps[0]
	f := newConformanceFixture(t, s, 10*money.AmountScale)
	res, err := s.Reserve(f.acct.ID, f.key.Hash, Holds{Hold: 1000, KeyOnly: true, Credits: 100, CountFree: true}, capDecide(1000))
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
	if err := s.Settle(res, Charge{Cost: 900, BYOK: true, Credits: 100}); err != nil {
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
func conformFreeKeepsUsage(t *testing.T, b ledgerBackendCase) {
	reps, _ := b.open(t, 1)
	s := reps[0]
	f := newConformanceFixture(t, s, 10*money.AmountScale)
	res, err := s.Reserve(f.acct.ID, f.key.Hash, Holds{Hold: 1000}, capDecide(1000))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(res, Charge{Cost: 700}); err != nil {
		t.Fatal(err)
	}
	res, err = s.Reserve(f.acct.ID, f.key.Hash, Holds{CountFree: true}, capDecide(0))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Account(f.acct.ID); a.Usage != 700 {
		t.Fatalf("account usage %s after a free-model request was counted, want 700", a.Usage)
	}
	if err := s.Settle(res, Charge{}); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Account(f.acct.ID); a.Usage != 700 || a.FreeModelRequests.At(money.IntervalDaily, now()) != 1 {
		t.Fatalf("after the free request: usage %s, free requests today %s; want 700 and 1", a.Usage, a.FreeModelRequests.At(money.IntervalDaily, now()))
	}
}

func conformSettling(t *testing.T, b ledgerBackendCase) {
	reps, _ := b.open(t, 1)
	s := reps[0]
	f := newConformanceFixture(t, s, 10*money.AmountScale)
	res, err := s.Reserve(f.acct.ID, f.key.Hash, Holds{Hold: 1000, InFlight: 1000}, capDecide(1000))
	if err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, s, f.acct.ID, f.key.Hash); v.InFlightHeld != 1000 {
		t.Fatalf("in flight %s, want 1000", v.InFlightHeld)
	}
	if err := s.Settle(res, Charge{Cost: 700, SettlementWindow: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if v := viewOf(t, s, f.acct.ID, f.key.Hash); v.InFlightHeld != 700 || v.NextRelease <= 0 {
		t.Fatalf("settling: in flight %s, next release in %v; want 700 and a wait", v.InFlightHeld, v.NextRelease)
	}
	eventually(t, 2*time.Second, "the window ends", func() bool {
		return viewOf(t, s, f.acct.ID, f.key.Hash).InFlightHeld == 0
	})
}

func conformAbandoned(t *testing.T, b ledgerBackendCase) {
	reps, die := b.open(t, 2)
	f := newConformanceFixture(t, reps[0], money.AmountScale)
	f.seen(t, reps[1])
	if _, err := reps[0].Reserve(f.acct.ID, f.key.Hash, Holds{Hold: money.AmountScale}, capDecide(money.AmountScale)); err != nil {
		t.Fatal(err)
	}
	// The hold outlives a lease while its replica lives (renewed).
	time.Sleep(2 * conformanceLease)
	if _, err := reps[1].Reserve(f.acct.ID, f.key.Hash, Holds{Hold: 1}, capDecide(1)); !errors.Is(err, errRefused) {
		t.Fatalf("a live replica's hold was released: %v", err)
	}
	live := die(reps[0])
	eventually(t, 10*time.Second, "the dead replica's hold is released", func() bool {
		if _, err := live.ReapExpired(); err != nil {
			t.Fatal(err)
		}
		_, held := live.impl.held(f.acct.ID, f.key.Hash)
		return held == 0
	})
	res, err := live.Reserve(f.acct.ID, f.key.Hash, Holds{Hold: money.AmountScale}, capDecide(money.AmountScale))
	if err != nil {
		t.Fatalf("the whole cap once the hold is released: %v", err)
	}
	if err := live.Settle(res, Charge{Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if c := f.counters(live); c != (counters{1, 1, 1, 1}) {
		t.Fatalf("counters %+v: the abandoned request was charged", c)
	}
}
