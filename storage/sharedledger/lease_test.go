package sharedledger

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

const testLease = 300 * time.Millisecond

// A hold's lease runs from when its script is sent, not from the snapshot
// its decision read: a decision or a wait for the account's batch longer
// than the lease (a loaded replica) must not leave a live request's hold
// already expired, for another replica to reap and admit over the cap.
func TestLeaseStartsWhenTheHoldIsSent(t *testing.T) {
	srv := redistest.Start(t)
	a := openReplicaKeeping(t, srv, "lease1:", testLease, false)
	b := openReplicaKeeping(t, srv, "lease1:", testLease, false)
	limit := money.Amount(1000)
	k := addAccount("acct", &limit, a, b)
	_, st, err := a.l.Snapshot("acct", k.Hash, false)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * testLease) // the decision, or the queue, was slow
	if _, err := a.l.Commit(st, ledger.Holds{Hold: limit}); err != nil {
		t.Fatal(err)
	}
	n, err := b.l.ReapExpired()
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("another replica reaped %d holds placed a moment ago by a live one", n)
	}
}

// A replica renews its leases while its reaper waits: releasing another
// replica's expired holds on a busy account (its lock held longer than a
// lease here) must not let the replica's own running requests' leases
// lapse.
func TestRenewalDoesNotWaitForTheReaper(t *testing.T) {
	srv := redistest.Start(t)
	dead := openReplicaKeeping(t, srv, "lease2:", testLease, false)
	a := openReplica(t, srv, "lease2:", testLease)
	b := openReplicaKeeping(t, srv, "lease2:", testLease, false)
	limit := money.Amount(1000)
	kx := addAccount("x", &limit, dead, a, b)
	ky := addAccount("y", &limit, dead, a, b)
	if _, err := dead.reserve("x", kx.Hash, ledger.Holds{Hold: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.reserve("y", ky.Hash, ledger.Holds{Hold: 10}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "a reads the dead replica's hold", func() bool {
		held, _ := a.held("x", kx.Hash)
		return held == 10
	})
	// a's own account lock on x, held while a's reaper comes for the
	// dead replica's expired hold there.
	_, st, err := a.l.Snapshot("x", kx.Hash, true)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * testLease)
	n, err := b.l.ReapExpired()
	a.l.Abandon(st)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("reaped %d holds, want only the dead replica's", n)
	}
	if held, _ := b.held("y", ky.Hash); held != 10 {
		t.Fatalf("the live replica's hold is %s, want 10", held)
	}
}
