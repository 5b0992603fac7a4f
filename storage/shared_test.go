package storage

import (
	"fmt"
	"github.com/tollgate-dev/caddy-tollgate/internal/wait"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/sharedledger"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// openSharedReplica opens a replica on srv under prefix.
func openSharedReplica(t *testing.T, srv *redistest.Server, prefix string) *Store {
	t.Helper()
	return openLeasedReplica(t, srv, prefix, 0)
}

// openLeasedReplica is openSharedReplica with holds leased for lease
// (0: the default).
func openLeasedReplica(t *testing.T, srv *redistest.Server, prefix string, lease time.Duration) *Store {
	t.Helper()
	s, err := Open(Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: prefix, HoldLease: lease}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openClusterReplica opens a replica on a Redis Cluster, its holds
// leased for lease (0: the default).
func openClusterReplica(t *testing.T, c *redistest.Cluster, prefix string, lease time.Duration) *Store {
	t.Helper()
	s, err := Open(Options{Redis: &kernel.RedisOptions{Cluster: c.Addrs()[:1], KeyPrefix: prefix, HoldLease: lease}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// eventually is wait.Eventually.
var eventually = wait.Eventually

func TestSharedRecordsReachTheOtherReplica(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openSharedReplica(t, srv, "t1:"), openSharedReplica(t, srv, "t1:")
	acct, err := a.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := a.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 100*time.Millisecond, "key created at A authenticates at B", func() bool {
		_, err := b.Authenticate(secret)
		return err == nil
	})
	// A charge at B, then a change of the key's record at A that B had
	// not yet seen the charge of: B keeps the charge.
	hold := money.Amount(money.AmountScale)
	res, err := b.Reserve(acct.ID, k.Hash, Holds{Hold: hold})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Settle(res, Charge{Cost: hold}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.UpdateAPIKey(k.Hash, func(k *APIKey) error { k.Name = "renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 100*time.Millisecond, "the rename reaches B", func() bool {
		got, _ := b.APIKey(k.Hash)
		return got.Name == "renamed"
	})
	for name, r := range map[string]*Store{"A": a, "B": b} {
		eventually(t, 100*time.Millisecond, "the charge at "+name, func() bool {
			got, _ := r.APIKey(k.Hash)
			acct, _ := r.Account(acct.ID)
			return got.Usage.Total == hold && acct.Usage == hold
		})
	}
	if _, err := a.UpdateAPIKey(k.Hash, func(k *APIKey) error { k.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, 100*time.Millisecond, "key disabled at A is disabled at B", func() bool {
		got, ok := b.APIKey(k.Hash)
		return ok && got.Disabled
	})
	if err := a.DeleteAPIKey(k.Hash); err != nil {
		t.Fatal(err)
	}
	eventually(t, 100*time.Millisecond, "key deleted at A is gone at B", func() bool {
		_, ok := b.APIKey(k.Hash)
		return !ok
	})
	// A third replica started now loads everything.
	c := openSharedReplica(t, srv, "t1:")
	if _, ok := c.Account(acct.ID); !ok {
		t.Fatal("a replica started later does not see the account")
	}
	// Another prefix is another gateway.
	d := openSharedReplica(t, srv, "t2:")
	if _, ok := d.Account(acct.ID); ok {
		t.Fatal("key_prefix does not separate gateways")
	}
}

func TestSharedReserveIsExactAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	reps := []*Store{openSharedReplica(t, srv, "x:"), openSharedReplica(t, srv, "x:"), openSharedReplica(t, srv, "x:")}
	acct, _ := reps[0].CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	limit := money.Amount(10 * money.AmountScale)
	k, _, _ := reps[0].CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", Limit: &limit})
	for _, r := range reps[1:] {
		eventually(t, time.Second, "key reaches replica", func() bool { _, ok := r.APIKey(k.Hash); return ok })
	}
	hold := money.Amount(money.AmountScale)
	var admitted, charged atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := reps[i%3]
			res, err := reserveIf(r, acct.ID, k.Hash, Holds{Hold: hold}, capDecide(hold))
			if err != nil {
				return
			}
			admitted.Add(1)
			time.Sleep(time.Millisecond)
			cost := hold - money.Amount(i)
			if err := r.Settle(res, Charge{Cost: cost, Generation: &Generation{ID: NewGenerationID(time.Now()), AccountID: acct.ID, KeyHash: k.Hash, Cost: cost, CreatedAt: time.Now()}}); err != nil {
				t.Error(err)
				return
			}
			charged.Add(int64(cost))
		}()
	}
	close(start)
	wg.Wait()
	if admitted.Load() > 10 || admitted.Load() == 0 {
		t.Fatalf("admitted %d of 300 against a cap of 10", admitted.Load())
	}
	for i, r := range reps {
		var got APIKey
		start := time.Now()
		for got, _ = r.APIKey(k.Hash); int64(got.Usage.Total) != charged.Load(); got, _ = r.APIKey(k.Hash) {
			if time.Since(start) > time.Second {
				t.Fatalf("replica %d reads usage %s, charged %d", i, got.Usage.Total, charged.Load())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	got, _ := reps[1].APIKey(k.Hash)
	if got.Usage.Total > limit {
		t.Fatalf("usage %s over the cap %s", got.Usage.Total, limit)
	}
	a, _ := reps[2].Account(acct.ID)
	if int64(a.Usage) != charged.Load() {
		t.Fatalf("account usage %s, charged %d", a.Usage, charged.Load())
	}
	var gens int64
	var sum money.Amount
	_ = reps[0].Generations(func(g Generation) bool { gens++; sum += g.Cost; return true })
	if gens != admitted.Load() || int64(sum) != charged.Load() {
		t.Fatalf("%d generations summing %s; %d admitted, %d charged", gens, sum, admitted.Load(), charged.Load())
	}
	// Every replica's analytics count every replica's generations.
	for i, r := range reps {
		eventually(t, time.Second, fmt.Sprintf("replica %d's analytics", i), func() bool {
			var n int64
			var usage money.Amount
			r.ScanUsage(acct.ID, time.Unix(0, 0), time.Now().Add(time.Hour), func(c *Cell) { n += c.Sums.Requests; usage += c.Sums.Usage })
			return n == admitted.Load() && int64(usage) == charged.Load()
		})
	}
}

func TestSharedExpiredLeaseReleasesHolds(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 600 * time.Millisecond
	a, b := openLeasedReplica(t, srv, "l:", lease), openLeasedReplica(t, srv, "l:", lease)
	acct, _ := a.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	limit := money.Amount(2 * money.AmountScale)
	k, _, _ := a.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", Limit: &limit})
	hold := money.Amount(money.AmountScale)
	// A's running request renews its lease past its first term.
	res, err := reserveIf(a, acct.ID, k.Hash, Holds{Hold: hold}, capDecide(hold))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	_, held := b.impl.Held(acct.ID, k.Hash)
	if held != hold {
		t.Fatalf("a renewed hold reads %s at B, want %s", held, hold)
	}
	if err := a.Release(res); err != nil {
		t.Fatal(err)
	}
	// Then A "dies" holding another: its lease keeper stops, and B's
	// reaper releases the hold once the lease lapses.
	if _, err := reserveIf(a, acct.ID, k.Hash, Holds{Hold: hold}, capDecide(hold)); err != nil {
		t.Fatal(err)
	}
	leases := func() int64 {
		n, err := sharedOf(t, b).Backend().Client().ZCard(t.Context(), "l:{tg}~leases").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := leases(); n != 1 {
		t.Fatalf("%d leases while one request runs", n)
	}
	a.stopFollowing()
	eventually(t, 3*time.Second, "the dead replica's hold is released", func() bool {
		b.k.RLock()
		defer b.k.RUnlock()
		_, held := b.impl.Held(acct.ID, k.Hash)
		return held == 0 && leases() == 0
	})
}

// TestSharedOutageKeepsRunningHolds: no replica can renew its leases
// while Redis is down, so after an outage longer than the lease every
// running request's lease reads expired. A reaper that released them at
// once would let the caps admit more than they allow while those requests
// still run; the reapers wait a lease after the outage instead, in which
// a live replica renews its leases, and a dead replica's holds are still
// released after it.
func TestSharedOutageKeepsRunningHolds(t *testing.T) {
	srv := redistest.Start(t)
	const lease = time.Second
	open := func() *Store { return openLeasedReplica(t, srv, "o:", lease) }
	alive, dying, b := open(), open(), open()
	acct, _ := alive.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	limit := money.Amount(3 * money.AmountScale)
	k, _, _ := alive.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", Limit: &limit})
	hold := money.Amount(money.AmountScale)
	eventually(t, time.Second, "the key reaches every replica", func() bool {
		_, atDying := dying.APIKey(k.Hash)
		_, atB := b.APIKey(k.Hash)
		return atDying && atB
	})
	// One request runs at a live replica, one at a replica that dies.
	running, err := reserveIf(alive, acct.ID, k.Hash, Holds{Hold: hold}, capDecide(hold))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reserveIf(dying, acct.ID, k.Hash, Holds{Hold: hold}, capDecide(hold)); err != nil {
		t.Fatal(err)
	}
	dying.stopFollowing() // its lease, renewed a third of a lease ago at most, lapses during the outage
	srv.Stop()
	time.Sleep(2 * lease) // every lease expires
	srv.Restart()
	restarted := time.Now()

	held := func() money.Amount {
		_, held := b.impl.Held(acct.ID, k.Hash)
		return held
	}
	eventually(t, 2*time.Second, "B reads Redis again", func() bool { return b.Available() && held() != 0 })
	// Within the lease after the outage both holds stand, and the cap
	// counts them: 1 credit is left of 3, not 2 or 3.
	time.Sleep(time.Until(restarted.Add(lease / 2)))
	if got := held(); got != 2*hold {
		t.Fatalf("%v after Redis came back, B holds %s; want both holds (%s)", time.Since(restarted), got, 2*hold)
	}
	if _, err := reserveIf(b, acct.ID, k.Hash, Holds{Hold: 2 * hold}, capDecide(2*hold)); err == nil {
		t.Fatal("B admitted 2 credits on a key capped at 3 while 2 are held")
	}
	// The dead replica's hold is released a lease later; the live one's,
	// renewed, stands until its request ends.
	eventually(t, 5*lease, "the dead replica's hold is released", func() bool { return held() == hold })
	time.Sleep(lease)
	if got := held(); got != hold {
		t.Fatalf("the live replica's renewed hold reads %s at B, want %s", got, hold)
	}
	if err := alive.Release(running); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "the live hold is released at B", func() bool { return held() == 0 })
}

// sharedOf is the store's ledger on Redis.
func sharedOf(t testing.TB, s *Store) *sharedledger.Ledger {
	t.Helper()
	l, ok := s.impl.(*sharedledger.Ledger)
	if !ok {
		t.Fatalf("the store's ledger is %T, not the shared one", s.impl)
	}
	return l
}
