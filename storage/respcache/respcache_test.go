package respcache

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

type watch struct {
	evicted int
	bytes   int64
}

func (w *watch) Evicted(n int)     { w.evicted += n }
func (w *watch) Bytes(delta int64) { w.bytes += delta }

func TestMemoryTTL(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := NewMemory(0, nil)
	m.now = func() time.Time { return clock }
	ctx := context.Background()
	k := Key{Scope: "acct-1", Model: "m", Hash: [32]byte{1}}
	m.Set(k, []byte("answer"), time.Minute)
	if got, ok := m.Get(ctx, k); !ok || string(got) != "answer" {
		t.Fatalf("Get = %q, %v", got, ok)
	}
	// Another scope's key with the same hash is another entry.
	if _, ok := m.Get(ctx, Key{Scope: "acct-2", Model: "m", Hash: k.Hash}); ok {
		t.Fatal("a key of another scope read the entry")
	}
	clock = clock.Add(61 * time.Second)
	if _, ok := m.Get(ctx, k); ok {
		t.Fatal("an expired entry was read")
	}
	if m.Size() != 0 {
		t.Fatalf("Size = %d after the expired entry was read", m.Size())
	}
}

func TestMemoryEvictsLeastRecentlyUsed(t *testing.T) {
	w := &watch{}
	entry := make([]byte, 1000)
	m := NewMemory(3*(1000+entryOverhead+2), w)
	ctx := context.Background()
	k := func(i byte) Key { return Key{Scope: "a", Model: "m", Hash: [32]byte{i}} }
	m.Set(k(1), entry, time.Hour)
	m.Set(k(2), entry, time.Hour)
	m.Set(k(3), entry, time.Hour)
	m.Get(ctx, k(1)) // 2 is now the least recently used
	m.Set(k(4), entry, time.Hour)
	if _, ok := m.Get(ctx, k(2)); ok {
		t.Fatal("the least recently used entry outlived the bound")
	}
	for _, i := range []byte{1, 3, 4} {
		if _, ok := m.Get(ctx, k(i)); !ok {
			t.Fatalf("entry %d was evicted", i)
		}
	}
	if w.evicted != 1 || w.bytes != m.Size() || m.Size() > m.max {
		t.Fatalf("evicted %d, bytes %d (size %d, bound %d)", w.evicted, w.bytes, m.Size(), m.max)
	}
	// An entry larger than the bound is not kept.
	m.Set(k(5), make([]byte, m.max), time.Hour)
	if _, ok := m.Get(ctx, k(5)); ok {
		t.Fatal("an entry over the bound was kept")
	}
}

func TestMemoryPurge(t *testing.T) {
	m := NewMemory(0, nil)
	ctx := context.Background()
	m.Set(Key{Scope: "a", Model: "x", Hash: [32]byte{1}}, []byte("1"), time.Hour)
	m.Set(Key{Scope: "a", Model: "y", Hash: [32]byte{2}}, []byte("2"), time.Hour)
	m.Set(Key{Scope: "b", Model: "x", Hash: [32]byte{3}}, []byte("3"), time.Hour)
	if n, _ := m.Purge(ctx, "a", "x"); n != 1 {
		t.Fatalf("Purge(a, x) = %d", n)
	}
	if n, _ := m.Purge(ctx, "a", ""); n != 1 {
		t.Fatalf("Purge(a) = %d", n)
	}
	if _, ok := m.Get(ctx, Key{Scope: "b", Model: "x", Hash: [32]byte{3}}); !ok {
		t.Fatal("another scope's entry was purged")
	}
}

func TestRedisShared(t *testing.T) {
	srv := redistest.Start(t)
	c1 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	c2 := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c1.Close()
	defer c2.Close()
	scan := func(ctx context.Context, match string) ([]string, error) {
		return c1.Keys(ctx, match).Result()
	}
	one, two := NewRedis(c1, scan, "tg*~rc/"), NewRedis(c2, scan, "tg*~rc/")
	ctx := context.Background()
	k := Key{Scope: "acct-1", Model: "openai/gpt-4o", Hash: [32]byte{9}}
	if _, ok := two.Get(ctx, k); ok {
		t.Fatal("an empty table has the key")
	}
	one.Set(k, []byte("answer"), time.Minute)
	one.Set(Key{Scope: "acct-1", Model: "other", Hash: [32]byte{9}}, []byte("other"), time.Minute)
	one.Set(Key{Scope: "acct-2", Model: "openai/gpt-4o", Hash: [32]byte{9}}, []byte("theirs"), time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, ok := two.Get(ctx, k)
		if ok && string(got) == "answer" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica reads %q, %v; want answer", got, ok)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ttl, err := c1.TTL(ctx, one.key(k)).Result()
	if err != nil || ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL = %v, %v; want the entry's", ttl, err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if n, _ := c1.DBSize(ctx).Result(); n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writes did not land")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n, err := two.Purge(ctx, "acct-1", "openai/gpt-4o"); n != 1 || err != nil {
		t.Fatalf("Purge(acct-1, model) = %d, %v", n, err)
	}
	if n, err := two.Purge(ctx, "acct-1", ""); n != 1 || err != nil {
		t.Fatalf("Purge(acct-1) = %d, %v", n, err)
	}
	if got, ok := one.Get(ctx, Key{Scope: "acct-2", Model: "openai/gpt-4o", Hash: [32]byte{9}}); !ok || string(got) != "theirs" {
		t.Fatal("another scope's entry was purged")
	}
}

func TestRedisUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	if _, ok := NewRedis(c, nil, "p:").Get(context.Background(), Key{}); ok {
		t.Fatal("an unreachable table answered")
	}
}
