package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// setClock makes the store's clock read t until the test ends.
func setClock(t *testing.T, at *time.Time) {
	t.Helper()
	prev := now
	now = func() time.Time { return *at }
	t.Cleanup(func() { now = prev })
}

// wantExpired checks that a lookup of id answers ExpiredError (and so
// ErrNotFound).
func wantExpired(t *testing.T, s *Store, acct, id string) {
	t.Helper()
	_, err := s.AccountGeneration(acct, id)
	var exp *ExpiredError
	if !errors.As(err, &exp) || !errors.Is(err, ErrNotFound) || exp.ID != id {
		t.Fatalf("lookup of %s: %v, want expired", id, err)
	}
}

// TestGenerationRetentionBadger: a generation older than the retention
// reads as expired at once (the test's clock), is gone from Badger with
// its upstream-id index once its TTL passed, and its hour's analytics
// sums stay, sealed, across a restart.
func TestGenerationRetentionBadger(t *testing.T) {
	dir := t.TempDir()
	clock := time.Now().UTC()
	setClock(t, &clock)
	s := openTemp(t, dir)
	if err := s.SetGenerationRetention(30 * time.Minute); err == nil {
		t.Fatal("a retention under an hour was accepted")
	}
	if err := s.SetGenerationRetention(time.Hour); err != nil {
		t.Fatal(err)
	}
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	key, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	// Old: created 4 hours ago, so its backend expiry (retention plus the
	// sealing margin) has passed too. Fresh: created now.
	old := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed",
		UpstreamID: "resp_old", CreatedAt: clock.Add(-4 * time.Hour)}, 1000)
	fresh := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed",
		UpstreamID: "resp_fresh", CreatedAt: clock}, 500)
	wantExpired(t, s, acct.ID, old.ID)
	if _, err := s.AccountGeneration(acct.ID, "resp_old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old upstream id: %v", err)
	}
	if g, err := s.AccountGeneration(acct.ID, "resp_fresh"); err != nil || g.ID != fresh.ID {
		t.Fatalf("fresh generation by its upstream id: %v", err)
	}
	if err := s.SealRollup(clock); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	defer s.Close()
	if err := s.SetGenerationRetention(time.Hour); err != nil {
		t.Fatal(err)
	}
	// The backend dropped the old record and its index (TTL), kept the
	// fresh ones.
	raw := func(key string) error { return s.k.Get(key, func([]byte) error { return nil }) }
	if err := raw(prefixGeneration + old.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired generation still stored: %v", err)
	}
	if err := raw(prefixUpstreamID + acct.ID + "/resp_old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired upstream index still stored: %v", err)
	}
	if err := raw(prefixGeneration + fresh.ID); err != nil {
		t.Fatalf("fresh generation: %v", err)
	}
	// The rollup still counts both: the old hour from its sealed record.
	if sum, _ := totals(s, acct.ID); sum.Requests != 2 || sum.Usage != 1500 {
		t.Fatalf("rollup after the old generation expired: %+v", sum)
	}
	// Two hours on, by the test's clock, the fresh one has expired too.
	clock = clock.Add(2 * time.Hour)
	wantExpired(t, s, acct.ID, fresh.ID)
	if _, err := s.AccountGeneration(acct.ID, "resp_fresh"); !errors.As(err, new(*ExpiredError)) {
		t.Fatalf("fresh generation by its upstream id, expired: %v", err)
	}
}

// TestRollupSealsAndResealsLateGenerations: an hour is sealed once it
// ended an hour ago; a generation of that hour that settles later writes
// the sealed record again, so that a restart counts it once.
func TestRollupSealsAndResealsLateGenerations(t *testing.T) {
	dir := t.TempDir()
	clock := time.Now().UTC()
	setClock(t, &clock)
	s := openTemp(t, dir)
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	key, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	hour := clock.Add(-3 * time.Hour).Truncate(time.Hour)
	settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed", User: "bob", CreatedAt: hour}, 100)
	if err := s.SealRollup(clock); err != nil {
		t.Fatal(err)
	}
	if !s.AnalyticsStore.a.Sealed(acct.ID, hour) {
		t.Fatal("an hour that ended two hours ago is not sealed")
	}
	if s.AnalyticsStore.a.Sealed(acct.ID, clock) {
		t.Fatal("the current hour is sealed")
	}
	late := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed", CreatedAt: hour.Add(time.Minute)}, 10)
	if _, err := s.AddFeedback(late, "latency", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	if sum, cells := totals(s, acct.ID); sum.Requests != 2 || sum.Usage != 110 || sum.Feedback != 1 || cells != 2 {
		t.Fatalf("after a restart: %+v in %d cells", sum, cells)
	}
	if u := s.EndUserUsage(acct.ID, "bob"); u.Requests != 1 {
		t.Fatalf("bob's usage %+v", u)
	}
	// Past the rollup's retention the hour is dropped.
	clock = clock.Add(RollupRetention + time.Hour)
	if err := s.SealRollup(clock); err != nil {
		t.Fatal(err)
	}
	if sum, _ := totals(s, acct.ID); sum.Requests != 0 {
		t.Fatalf("rollup past its retention: %+v", sum)
	}
}

// TestGenerationRetentionRedis: on the shared backend the settlement
// script writes the generation and its upstream id with PXAT, and Redis
// deletes both when it passes; a lookup answers expired from the
// retention on.
func TestGenerationRetentionRedis(t *testing.T) {
	srv := redistest.Start(t)
	clock := time.Now().UTC()
	setClock(t, &clock)
	s := openSharedReplica(t, srv, "ret:")
	if err := s.SetGenerationRetention(time.Hour); err != nil {
		t.Fatal(err)
	}
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	key, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	// Stored until its creation + retention + margin: 5 s from now.
	created := time.Now().Add(-time.Hour - expiryMargin + 5*time.Second)
	g := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed",
		UpstreamID: "resp_1", CreatedAt: created}, 100)
	fresh := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed", CreatedAt: clock}, 100)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx := context.Background()
	genKey, upKey := "ret:{tg}"+prefixGeneration+g.ID, "ret:{tg}"+prefixUpstreamID+acct.ID+"/resp_1"
	for _, k := range []string{genKey, upKey, "ret:{tg}" + prefixGeneration + fresh.ID} {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= 0 {
			t.Fatalf("%s: TTL %v, %v; want one set with the write", k, ttl, err)
		}
	}
	if ttl := c.PTTL(ctx, "ret:{tg}"+prefixGeneration+fresh.ID).Val(); ttl < time.Hour+expiryMargin-time.Minute {
		t.Fatalf("fresh generation's TTL %v, want the retention plus the margin", ttl)
	}
	wantExpired(t, s, acct.ID, g.ID) // past the retention already
	eventually(t, 20*time.Second, "redis deletes the expired generation and its index", func() bool {
		return c.Exists(ctx, genKey, upKey).Val() == 0
	})
	if _, err := s.AccountGeneration(acct.ID, fresh.ID); err != nil {
		t.Fatalf("fresh generation: %v", err)
	}
}

// TestGenerationRetentionRedisBatched: generations settled together, so
// that the ledger sends one account's settlements as one batch script,
// get their expiry as one settled alone does.
func TestGenerationRetentionRedisBatched(t *testing.T) {
	srv := redistest.Start(t)
	s := openSharedReplica(t, srv, "retb:")
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	key, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	const n = 32
	ids := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed",
				UpstreamID: fmt.Sprintf("resp_%d", i), CreatedAt: time.Now()}, 100)
			ids <- g.ID
		}()
	}
	wg.Wait()
	close(ids)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx := context.Background()
	for id := range ids {
		if ttl := c.PTTL(ctx, "retb:{tg}"+prefixGeneration+id).Val(); ttl <= 0 {
			t.Fatalf("generation %s: TTL %v, want the retention's", id, ttl)
		}
	}
	for i := range n {
		if ttl := c.PTTL(ctx, fmt.Sprintf("retb:{tg}%s%s/resp_%d", prefixUpstreamID, acct.ID, i)).Val(); ttl <= 0 {
			t.Fatalf("upstream id %d: TTL %v, want the retention's", i, ttl)
		}
	}
}
