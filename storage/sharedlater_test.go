package storage

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// A settlement or release that failed because other replicas changed the
// account's counters at every attempt (ErrContended) is owed as one that
// failed for want of Redis: it lands later, and the request's lease stops
// being renewed once it has. Before, the charge was lost and the lease
// renewed until the replica stopped, so its holds were never released.
func TestSharedContendedSettleAndReleaseLandLater(t *testing.T) {
	srv := redistest.Start(t)
	s := openLeasedReplica(t, srv, "cl:", conformanceLease)
	f := newConformanceFixture(t, s, 1000)
	l := sharedOf(t, s)
	live := l.Renewing
	held := func() money.Amount {
		s.k.RLock()
		defer s.k.RUnlock()
		a, _ := l.Held(f.acct.ID, f.key.Hash)
		return a
	}

	settled, err := reserveIf(s, f.acct.ID, f.key.Hash, Holds{Hold: 100}, capDecide(100))
	if err != nil {
		t.Fatal(err)
	}
	released, err := reserveIf(s, f.acct.ID, f.key.Hash, Holds{Hold: 100}, capDecide(100))
	if err != nil {
		t.Fatal(err)
	}
	// As LedgerStore.Settle and Release do after the ledger answered
	// ErrContended.
	g := &Generation{ID: NewGenerationID(time.Now()), AccountID: f.acct.ID, KeyHash: f.key.Hash, Model: "m", Provider: "p",
		Status: "completed", Cost: 70, CreatedAt: time.Now()}
	l.SettleFailed(settled, Charge{Cost: 70, Generation: g}, ErrContended)
	l.ReleaseFailed(released, ErrContended)
	eventually(t, 5*time.Second, "the contended charge lands", func() bool {
		return f.counters(s) == counters{70, 70, 70, 70}
	})
	eventually(t, 5*time.Second, "both holds are released", func() bool { return held() == 0 })
	eventually(t, time.Second, "neither lease is renewed", func() bool { return !live(settled) && !live(released) })

	// A failure that no retry mends stops the lease's renewal: the reaper
	// releases the holds once it lapses.
	stuck, err := reserveIf(s, f.acct.ID, f.key.Hash, Holds{Hold: 100}, capDecide(100))
	if err != nil {
		t.Fatal(err)
	}
	l.ReleaseFailed(stuck, errors.New("a failure no retry mends"))
	if live(stuck) {
		t.Fatal("the lease of a release that cannot land is still renewed")
	}
	eventually(t, 10*conformanceLease, "the reaper releases its hold", func() bool {
		_, _ = s.ReapExpired()
		return held() == 0
	})
}
