package storage

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// fixturesOnEveryMaster creates one conformance fixture (an account with a
// capped key) per master of the cluster: each account's slot on another
// shard.
func fixturesOnEveryMaster(t *testing.T, c *redistest.Cluster, s *Store, limit money.Amount) []conformanceFixture {
	t.Helper()
	byMaster := map[*redistest.Server]conformanceFixture{}
	for range 200 {
		f := newConformanceFixture(t, s, limit)
		m := c.MasterOf(kernel.Slot(sharedOf(t, s).MoneyKey(f.acct.ID)))
		if _, ok := byMaster[m]; !ok {
			byMaster[m] = f
		}
		if len(byMaster) == 3 {
			break
		}
	}
	if len(byMaster) != 3 {
		t.Fatalf("accounts on %d masters, want 3", len(byMaster))
	}
	var out []conformanceFixture
	for _, f := range byMaster {
		out = append(out, f)
	}
	return out
}

// Two replicas on a 3-master cluster share keys, and every account's cap
// is exact under concurrent requests at both, for accounts whose slots are
// on different shards.
func TestClusterReplicasExactCapsAcrossShards(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	a, b := openClusterReplica(t, c, "cl:", 0), openClusterReplica(t, c, "cl:", 0)
	fs := fixturesOnEveryMaster(t, c, a, 10*money.AmountScale)
	hold := money.Amount(money.AmountScale)
	reps := []*Store{a, b}
	var wg sync.WaitGroup
	charged := make([]atomic.Int64, len(fs))
	start := make(chan struct{})
	for fi, f := range fs {
		f.seen(t, b)
		for i := range 30 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := reps[i%2]
				<-start
				res, err := reserveIf(r, f.acct.ID, f.key.Hash, Holds{Hold: hold}, capDecide(hold))
				if errors.Is(err, errRefused) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := r.Settle(res, Charge{Cost: hold}); err != nil {
					t.Error(err)
					return
				}
				charged[fi].Add(int64(hold))
			}()
		}
	}
	close(start)
	wg.Wait()
	for fi, f := range fs {
		if charged[fi].Load() != int64(f.limit) {
			t.Errorf("account %d: charged %d against a cap of %s", fi, charged[fi].Load(), f.limit)
		}
		want := counters{f.limit, f.limit, f.limit, f.limit}
		for _, r := range reps {
			eventually(t, 2*time.Second, "every replica reads the full cap", func() bool { return f.counters(r) == want })
			if _, err := reserveIf(r, f.acct.ID, f.key.Hash, Holds{Hold: 1}, capDecide(1)); !errors.Is(err, errRefused) {
				t.Fatalf("a full cap admitted: %v", err)
			}
		}
	}
}

// clusterLoad runs requests of cost 1 on the fixtures at both replicas
// until stop is closed, each settled with a generation: acked counts the
// settlements acknowledged, owed those that failed for want of Redis or
// for contention (settled later: SettleFailed), by fixture.
type clusterLoad struct {
	acked, owed []atomic.Int64
	failed      atomic.Int64 // reservations refused for want of Redis
	wg          sync.WaitGroup
}

func runClusterLoad(t *testing.T, reps []*Store, fs []conformanceFixture, stop chan struct{}) *clusterLoad {
	l := &clusterLoad{acked: make([]atomic.Int64, len(fs)), owed: make([]atomic.Int64, len(fs))}
	for fi, f := range fs {
		for w := range 4 {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				r := reps[w%len(reps)]
				for {
					select {
					case <-stop:
						return
					default:
					}
					res, err := reserveIf(r, f.acct.ID, f.key.Hash, Holds{Hold: 1}, capDecide(1))
					// Refused, nothing held: Redis unreachable, the replica
					// reloading, or the other replica changing the account's
					// counters at every attempt (maxAttempts).
					if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrResyncing) || errors.Is(err, ErrContended) {
						l.failed.Add(1)
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if err != nil {
						t.Errorf("reserve: %v", err)
						return
					}
					g := Generation{ID: NewGenerationID(time.Now()), AccountID: f.acct.ID, KeyHash: f.key.Hash, Model: "m", Provider: "p", Status: "completed", Cost: 1, CreatedAt: time.Now()}
					err = r.Settle(res, Charge{Cost: 1, Generation: &g})
					switch {
					case err == nil:
						l.acked[fi].Add(1)
					case errors.Is(err, ErrUnavailable), errors.Is(err, ErrContended):
						l.owed[fi].Add(1) // lands later (SettleFailed)
					default:
						t.Errorf("settle: %v", err)
						return
					}
				}
			}()
		}
	}
	return l
}

// Moving an account's slot, and the records' slot, to another master while
// both replicas serve it (MIGRATING/IMPORTING, then MOVED: go-redis follows
// ASK and MOVED) loses no charge and keeps serving.
func TestClusterReshardWhileServing(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	a, b := openClusterReplica(t, c, "rs:", 0), openClusterReplica(t, c, "rs:", 0)
	f := newConformanceFixture(t, a, 1000000*money.AmountScale)
	f.seen(t, b)
	stop := make(chan struct{})
	load := runClusterLoad(t, []*Store{a, b}, []conformanceFixture{f}, stop)
	waitCharged := func(n int64) {
		eventually(t, 10*time.Second, "requests are served", func() bool { return load.acked[0].Load() >= n })
	}
	waitCharged(50)
	move := func(slot int) {
		from := c.MasterOf(slot)
		for _, n := range c.Nodes[:3] {
			if n != from {
				c.MoveSlot(slot, n)
				if got := c.MasterOf(slot); got != n {
					t.Fatalf("slot %d still on %s after the move", slot, got.Addr)
				}
				return
			}
		}
	}
	move(kernel.Slot(sharedOf(t, a).MoneyKey(f.acct.ID)))
	n := load.acked[0].Load()
	waitCharged(n + 50)
	// The records' slot: a key created now reaches the other replica.
	move(kernel.Slot(sharedOf(t, a).Backend().Layout().Tag(0)))
	k, secret, err := a.CreateAPIKey(NewAPIKey{AccountID: f.acct.ID, Name: "after the move"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, "a key created after the move authenticates at the other replica", func() bool {
		got, err := b.Authenticate(secret)
		return err == nil && got.Hash == k.Hash
	})
	n = load.acked[0].Load()
	waitCharged(n + 50)
	close(stop)
	load.wg.Wait()
	// A request that meets the slot in the instant it changes owner may
	// be refused (503) rather than served unmetered; none is lost.
	t.Logf("%d reservations refused and %d settlements owed during the reshards, %d settled", load.failed.Load(), load.owed[0].Load(), load.acked[0].Load())
	want := money.Amount(load.acked[0].Load() + load.owed[0].Load())
	for _, r := range []*Store{a, b} {
		eventually(t, 2*time.Second, "every replica reads every charge", func() bool {
			return f.counters(r) == counters{want, want, want, want}
		})
	}
}

// A master killed with kill -9 (no replica to take over): the accounts on
// it are refused (ErrUnavailable, 503 at the handlers) rather than served
// unmetered; once it is back (its append-only file fsynced every write)
// every acknowledged charge is there, the charges owed meanwhile land, and
// the holds of the requests cut are released.
func TestClusterMasterKilledLosesNothingAcknowledged(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	a, b := openClusterReplica(t, c, "kl:", conformanceLease), openClusterReplica(t, c, "kl:", conformanceLease)
	fs := fixturesOnEveryMaster(t, c, a, 1000000*money.AmountScale)
	for _, f := range fs {
		f.seen(t, b)
	}
	stop := make(chan struct{})
	load := runClusterLoad(t, []*Store{a, b}, fs, stop)
	eventually(t, 10*time.Second, "requests are served", func() bool { return load.acked[0].Load() >= 50 })
	victim := c.MasterOf(kernel.Slot(sharedOf(t, a).MoneyKey(fs[0].acct.ID)))
	victim.Kill()
	failed := load.failed.Load()
	eventually(t, 10*time.Second, "requests of the account on the dead master are refused", func() bool { return load.failed.Load() > failed })
	victim.Restart()
	c.WaitHealthy(20 * time.Second)
	n := load.acked[0].Load()
	eventually(t, 20*time.Second, "the account is served again", func() bool { return load.acked[0].Load() > n+20 })
	close(stop)
	load.wg.Wait()
	for fi, f := range fs {
		want := money.Amount(load.acked[fi].Load() + load.owed[fi].Load())
		for _, r := range []*Store{a, b} {
			eventually(t, 10*time.Second, "every acknowledged and owed charge is there", func() bool {
				return f.counters(r) == counters{want, want, want, want}
			})
			eventually(t, 5*time.Second, "the holds of the requests cut are released", func() bool {
				acct, key := sharedOf(t, r).Held(f.acct.ID, f.key.Hash)
				return acct == 0 && key == 0
			})
		}
	}
}

// The migration copies a Badger database into a cluster: every record in
// its slot (generations and their upstream ids in their account's), so
// that a replica on the cluster authenticates the key, reads the usage and
// finds the generation by either id, then charges on from there.
func TestMigrateIntoCluster(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	key, secret, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	g := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed",
		UpstreamID: "resp_1", CreatedAt: time.Now()}, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	c := redistest.StartCluster(t, 3, 0)
	src, err := kernel.OpenBadger(dir, ChunkedKinds()...)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := kernel.OpenRedis(kernel.RedisOptions{Cluster: c.Addrs()[:1], KeyPrefix: "mc:"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	kinds, err := ExpiringKinds(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kernel.CopyToRedis(src, dst, false, kinds...); err != nil {
		t.Fatal(err)
	}

	r := openClusterReplica(t, c, "mc:", 0)
	if _, err := r.Authenticate(secret); err != nil {
		t.Fatalf("the migrated key: %v", err)
	}
	if a, _ := r.Account(acct.ID); a.Usage != 300 {
		t.Fatalf("migrated usage %v, want 300", a.Usage)
	}
	for _, id := range []string{g.ID, "resp_1"} {
		if got, err := r.AccountGeneration(acct.ID, id); err != nil || got.ID != g.ID {
			t.Fatalf("the migrated generation by %s: %v, %v", id, got.ID, err)
		}
	}
	settleGen(t, r, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed", CreatedAt: time.Now()}, 200)
	if a, _ := r.Account(acct.ID); a.Usage != 500 {
		t.Fatalf("usage after a charge on the cluster %v, want 500", a.Usage)
	}
}
