package affinity

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

func TestMemoryIdleExpiry(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := NewMemory(0)
	m.now = func() time.Time { return clock }
	ctx := context.Background()
	k := Key{1, 2, 3}
	if _, ok := m.Get(ctx, k, time.Minute); ok {
		t.Fatal("an empty table has the key")
	}
	m.Set(k, "acme", time.Minute)
	clock = clock.Add(50 * time.Second)
	if got, ok := m.Get(ctx, k, time.Minute); !ok || got != "acme" {
		t.Fatalf("Get = %q, %v; want acme", got, ok)
	}
	// The read renewed the expiry: 50 s later it still sticks.
	clock = clock.Add(50 * time.Second)
	if got, ok := m.Get(ctx, k, time.Minute); !ok || got != "acme" {
		t.Fatalf("Get after a renewal = %q, %v; want acme", got, ok)
	}
	clock = clock.Add(61 * time.Second)
	if _, ok := m.Get(ctx, k, time.Minute); ok {
		t.Fatal("an idle key outlived its expiry")
	}
	if m.Len() != 0 {
		t.Fatalf("Len = %d after the expired key was read", m.Len())
	}
}

func TestMemoryBound(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := NewMemory(memoryShards) // one entry a shard
	m.now = func() time.Time { return clock }
	a, b := Key{0, 1}, Key{memoryShards, 2} // one shard
	m.Set(a, "acme", time.Minute)
	m.Set(b, "zeta", time.Minute)
	if _, ok := m.Get(context.Background(), b, time.Minute); ok {
		t.Fatal("a full shard took a new key")
	}
	m.Set(a, "zeta", time.Minute) // a key it holds is replaced
	if got, _ := m.Get(context.Background(), a, time.Minute); got != "zeta" {
		t.Fatalf("Get = %q, want zeta", got)
	}
	clock = clock.Add(2 * time.Minute)
	m.Set(b, "zeta", time.Minute) // the expired entry makes room
	if got, ok := m.Get(context.Background(), b, time.Minute); !ok || got != "zeta" {
		t.Fatalf("Get = %q, %v once the shard's entry expired; want zeta", got, ok)
	}
}

func TestRedisShared(t *testing.T) {
	srv := redistest.Start(t)
	c1 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c1.Close()
	defer c2.Close()
	one, two := NewRedis(c1, "tg~sticky:"), NewRedis(c2, "tg~sticky:")
	ctx := context.Background()
	k := Key{9}
	if _, ok := two.Get(ctx, k, time.Minute); ok {
		t.Fatal("an empty table has the key")
	}
	one.Set(k, "acme", time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, ok := two.Get(ctx, k, time.Minute)
		if ok && got == "acme" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica reads %q, %v; want acme", got, ok)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ttl, err := c1.TTL(ctx, "tg~sticky:"+k.String()).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL = %v, %v; want the idle expiry", ttl, err)
	}
	// A read renews the expiry.
	if err := c1.Expire(ctx, "tg~sticky:"+k.String(), 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	two.Get(ctx, k, time.Hour)
	if ttl, _ := c1.TTL(ctx, "tg~sticky:"+k.String()).Result(); ttl < 59*time.Minute {
		t.Fatalf("TTL after a read = %v, want about an hour", ttl)
	}
}

func TestRedisUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	if _, ok := NewRedis(c, "p:").Get(context.Background(), Key{1}, time.Minute); ok {
		t.Fatal("an unreachable table answered")
	}
}
