package storage

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// TestMigrateGivesGenerationsTheirExpiry: the migration copies a fresh
// generation and its upstream-id index with the expiry the gateway gives
// its own writes, and leaves out one already past the retention.
func TestMigrateGivesGenerationsTheirExpiry(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	key, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	old := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed",
		CreatedAt: time.Now().Add(-2*time.Hour - expiryMargin)}, 100)
	fresh := settleGen(t, s, acct.ID, key.Hash, Generation{Model: "m", Provider: "p", Status: "completed",
		UpstreamID: "resp_1", CreatedAt: time.Now()}, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	srv := redistest.Start(t)
	src, err := kernel.OpenBadger(dir, ChunkedKinds()...)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := kernel.OpenRedis(kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "mig:"}, nil)
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

	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	ctx := context.Background()
	for _, k := range []string{"mig:{tg}" + prefixGeneration + fresh.ID, "mig:{tg}" + prefixUpstreamID + acct.ID + "/resp_1"} {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil || ttl <= time.Hour || ttl > time.Hour+expiryMargin+time.Minute {
			t.Fatalf("%s: TTL %v, %v; want the retention plus the margin", k, ttl, err)
		}
	}
	if n := c.Exists(ctx, "mig:{tg}"+prefixGeneration+old.ID).Val(); n != 0 {
		t.Fatalf("a generation past the retention was copied")
	}
	if ttl := c.PTTL(ctx, "mig:{tg}"+prefixAccount+acct.ID).Val(); ttl != -1 {
		t.Fatalf("account record TTL %v, want none", ttl)
	}
	if _, err := ExpiringKinds(time.Minute); err == nil {
		t.Fatal("a retention under an hour was accepted")
	}
}
