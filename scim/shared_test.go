package scim

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// With storage redis, a SCIM token rotated or revoked at one replica stops
// authenticating at the others: their index is rebuilt, not only added to.
func TestSharedTokenRotationReachesOtherReplicas(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *storage.Store {
		st, err := storage.Open(storage.Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "scim:"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b := open(), open()
	org, err := a.CreateAccount(storage.NewAccount{Name: "org", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := StoreOf(a).RotateToken(org.ID)
	if err != nil {
		t.Fatal(err)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Since(start) > time.Second {
				t.Fatalf("%s: not within 1s", what)
			}
		}
	}
	until("the token authenticates at B", func() bool { _, ok := StoreOf(b).Account(first); return ok })
	second, _, err := StoreOf(a).RotateToken(org.ID)
	if err != nil {
		t.Fatal(err)
	}
	until("the rotated token authenticates at B", func() bool { _, ok := StoreOf(b).Account(second); return ok })
	if _, ok := StoreOf(b).Account(first); ok {
		t.Fatal("the replaced token still authenticates at B")
	}
	if err := StoreOf(a).RevokeToken(org.ID); err != nil {
		t.Fatal(err)
	}
	until("the revoked token is refused at B", func() bool { _, ok := StoreOf(b).Account(second); return !ok })
}
