package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// everyKind is one record of every loaded kind of the built-in domain
// stores, under one account.
type everyKind struct {
	account, mgmtKey, apiKey, member, workspace, guardrail, byok, endUser, destination, endpoint string
}

// populate creates an account with one record of every kind at s.
func populate(t *testing.T, s *Store, sealer *Sealer, name string) everyKind {
	t.Helper()
	var f everyKind
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	acct, err := s.CreateAccount(NewAccount{Name: name, Kind: AccountOrganization})
	must(err)
	f.account = acct.ID
	_, _, err = s.RecordPurchase(acct.ID, money.Amount(10*money.AmountScale), "")
	must(err)
	mk, _, err := s.CreateManagementKey(NewManagementKey{AccountID: acct.ID, Name: "m"})
	must(err)
	f.mgmtKey = mk.Hash
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	must(err)
	f.apiKey = k.Hash
	m, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: name + "@example.com"})
	must(err)
	f.member = m.ID
	w, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "W", "w-"+name })
	must(err)
	f.workspace = w.ID
	g, err := s.CreateGuardrail(acct.ID, func(g *Guardrail) error { g.Name = "g"; return nil })
	must(err)
	f.guardrail = g.ID
	c, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "openai", Secret: "sk-provider"}, sealer)
	must(err)
	f.byok = c.ID
	f.endUser = "user-" + name
	_, err = s.CreateEndUser(acct.ID, f.endUser, nil)
	must(err)
	d, err := s.CreateDestination(Destination{AccountID: acct.ID, Type: "webhook"})
	must(err)
	f.destination = d.ID
	e, err := s.CreatePrivateEndpoint(PrivateEndpoint{AccountID: acct.ID, Name: "e", Model: "m", BaseURL: "https://example.com/v1"})
	must(err)
	f.endpoint = e.ID
	return f
}

// known lists which of f's records s has in memory, by kind.
func known(s *Store, f everyKind) map[string]bool {
	_, acct := s.Account(f.account)
	mk := len(s.ManagementKeys(f.account)) == 1
	_, k := s.APIKey(f.apiKey)
	_, m := s.Member(f.account, f.member)
	_, w := s.Workspace(f.account, f.workspace)
	_, g := s.Guardrail(f.account, f.guardrail)
	_, c := s.BYOK(f.account, f.byok)
	_, u := s.EndUser(f.account, f.endUser)
	_, d := s.Destination(f.account, f.destination)
	_, e := s.PrivateEndpoint(f.account, f.endpoint)
	return map[string]bool{"account": acct, "purchase": len(s.Purchases(f.account)) == 1, "management key": mk, "api key": k,
		"member": m, "workspace": w, "guardrail": g, "byok": c, "end user": u, "destination": d, "private endpoint": e}
}

// knowsAll reports whether every kind is known (want true) or unknown.
func knowsAll(s *Store, f everyKind, want bool) bool {
	for _, ok := range known(s, f) {
		if ok != want {
			return false
		}
	}
	return true
}

// deleteAccountRecords deletes every record of an account straight in
// Redis, announcing nothing: changes the other replicas can only learn
// of by reloading.
func deleteAccountRecords(t *testing.T, rc *redis.Client, prefix, accountID string) {
	t.Helper()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, kernel.GlobEscape(prefix)+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, prefix+"{tg}~") {
			continue
		}
		v, err := rc.Get(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(k, accountID) || strings.Contains(v, `"`+accountID+`"`) {
			if err := rc.Del(ctx, k).Err(); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n < 11 {
		t.Fatalf("deleted %d records of %s, want one of every kind", n, accountID)
	}
}

// TestSharedFeedGapReloadsEveryKind: whenever the change feed cannot
// prove that nothing was missed since the last entry read (a broken
// connection, a stream recreated, gone backwards or trimmed past that
// entry), the other replica reloads every record of every kind: records
// deleted meanwhile without an entry it read are gone, the others kept,
// and later changes of every kind still reach it one by one.
func TestSharedFeedGapReloadsEveryKind(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	sealer, err := NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	gaps := []struct {
		name string
		gap  func(ctx context.Context, feed string) error
	}{
		{"connection broke", func(ctx context.Context, _ string) error {
			return rc.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err()
		}},
		{"stream recreated", func(ctx context.Context, feed string) error {
			if err := rc.Del(ctx, feed).Err(); err != nil {
				return err
			}
			return rc.XAdd(ctx, &redis.XAddArgs{Stream: feed, Values: []string{"r", "elsewhere"}}).Err()
		}},
		{"stream went backwards", func(ctx context.Context, feed string) error {
			if err := rc.Del(ctx, feed).Err(); err != nil {
				return err
			}
			return rc.XAdd(ctx, &redis.XAddArgs{Stream: feed, ID: "1-1", Values: []string{"r", "elsewhere"}}).Err()
		}},
		{"stream trimmed past the last entry read", func(ctx context.Context, feed string) error {
			return rc.XTrimMaxLen(ctx, feed, 0).Err()
		}},
	}
	for i, g := range gaps {
		t.Run(g.name, func(t *testing.T) {
			prefix := fmt.Sprintf("gap%d:", i)
			a, b := openSharedReplica(t, srv, prefix), openSharedReplica(t, srv, prefix)
			kept := populate(t, a, sealer, "kept")
			gone := populate(t, a, sealer, "gone")
			eventually(t, time.Second, "every record reaches B", func() bool { return knowsAll(b, kept, true) && knowsAll(b, gone, true) })

			deleteAccountRecords(t, rc, prefix, gone.account)
			// Without a gap B cannot know: no entry announced it.
			if !knowsAll(b, gone, true) {
				t.Fatal("B forgot records before any gap")
			}
			if err := g.gap(t.Context(), prefix+"{tg}~feed"); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Second, "B reloads every kind", func() bool { return b.Synced() && knowsAll(b, gone, false) })
			if got := known(b, kept); !knowsAll(b, kept, true) {
				t.Fatalf("records lost by the reload: %v", got)
			}
			// After the reload, a record of every kind created at A
			// reaches B alone.
			later := populate(t, a, sealer, "later")
			eventually(t, time.Second, "records created after the reload reach B", func() bool { return knowsAll(b, later, true) })
		})
	}
}

// TestSharedNotSyncedRefusesAdmission: while a replica cannot reload
// after a gap (here a record it cannot decode), it does not decide on its
// possibly stale records: reservations fail with ErrResyncing, and work
// again once the reload succeeds.
func TestSharedNotSyncedRefusesAdmission(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	a, b := openSharedReplica(t, srv, "ns:"), openSharedReplica(t, srv, "ns:")
	acct, _ := a.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization, Billing: BillingInvoiced})
	k, _, err := a.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "the key reaches B", func() bool { _, ok := b.APIKey(k.Hash); return ok })
	reserve := func() error {
		res, err := b.Reserve(acct.ID, k.Hash, Holds{Hold: 1})
		if err == nil {
			return b.Release(res)
		}
		return err
	}
	if err := reserve(); err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	if err := rc.Set(ctx, "ns:{tg}"+prefixGuardrail+acct.ID+"/broken", "{not json", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.XTrimMaxLen(ctx, "ns:{tg}~feed", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "B notices the gap", func() bool { return !b.Synced() })
	if err := reserve(); err != ErrResyncing {
		t.Fatalf("a reservation at a replica that is not synced: %v, want ErrResyncing", err)
	}
	if err := rc.Del(ctx, "ns:{tg}"+prefixGuardrail+acct.ID+"/broken").Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "B reloads once it can", func() bool { return b.Synced() })
	if err := reserve(); err != nil {
		t.Fatal(err)
	}
}
