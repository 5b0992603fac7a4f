package storage

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// A store written before the hash-tagged key layout ("<prefix><name>") is
// moved to it when this version first opens it: its records, money
// fields, holds and generations all read back, and nothing stays under an
// old name.
func TestSharedStoreOfTheOldLayoutIsUpgraded(t *testing.T) {
	srv := redistest.Start(t)
	s, err := Open(Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "old:"}})
	if err != nil {
		t.Fatal(err)
	}
	acct, err := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	g := settleGen(t, s, acct.ID, k.Hash, Generation{Model: "m", Provider: "p", Status: "completed", CreatedAt: time.Now()}, 700)
	held, err := s.Reserve(acct.ID, k.Hash, Holds{Hold: 50})
	if err != nil {
		t.Fatal(err)
	}
	_ = held
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the old names, as the previous version wrote them.
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	ctx := t.Context()
	keys, err := rc.Keys(ctx, "old:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys: %v, %v", keys, err)
	}
	for _, key := range keys {
		rest, ok := strings.CutPrefix(key, "old:{tg}")
		if !ok {
			t.Fatalf("key %q is not in the hash-tagged layout", key)
		}
		if err := rc.Rename(ctx, key, "old:"+rest).Err(); err != nil {
			t.Fatal(err)
		}
	}

	r := openSharedReplica(t, srv, "old:")
	if _, err := r.Authenticate(secret); err != nil {
		t.Fatalf("the key of the old layout does not authenticate: %v", err)
	}
	got, ok := r.Account(acct.ID)
	if !ok || got.Usage != money.Amount(700) {
		t.Fatalf("account after the upgrade: usage %v, found %v; want 700", got.Usage, ok)
	}
	if a, _ := sharedOf(t, r).Held(acct.ID, k.Hash); a != 50 {
		t.Fatalf("the running request's hold after the upgrade is %v, want 50", a)
	}
	if _, err := r.AccountGeneration(acct.ID, g.ID); err != nil {
		t.Fatalf("the generation after the upgrade: %v", err)
	}
	keys, _ = rc.Keys(ctx, "old:*").Result()
	for _, key := range keys {
		if !strings.HasPrefix(key, "old:{tg}") {
			t.Fatalf("key %q left under its old name", key)
		}
	}
	if n, _ := rc.ZCard(ctx, "old:{tg}~leases").Result(); n != 1 {
		t.Fatalf("%d leases after the upgrade, want the running request's", n)
	}
}
