package storage

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/internal/testkit/redistest"
	"github.com/tollgate-dev/caddy-tollgate/money"
)

// checkDecodedFields fails unless every decoded value the replica keeps is
// what its string decodes to.
func checkDecodedFields(t *testing.T, s *Store, accountID string) {
	t.Helper()
	s.k.RLock()
	defer s.k.RUnlock()
	for name, f := range sharedOf(t, s).raw[accountID] {
		if f.val == nil {
			continue
		}
		want, err := decodeField(name, f.raw)
		if err != nil {
			t.Fatalf("field %s = %q: %v", name, f.raw, err)
		}
		if am, ok := f.val.(*acctMoney); ok && len(am.Settling) == 0 {
			c := *am
			c.Settling = nil // encoded alike: omitted
			f.val = &c
		}
		if !reflect.DeepEqual(f.val, want) {
			t.Fatalf("field %s keeps %+v, its string %q decodes to %+v", name, f.val, f.raw, want)
		}
	}
}

func TestSharedDecodedFieldsMatchTheirStrings(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openSharedReplica(t, srv, "f:"), openSharedReplica(t, srv, "f:")
	acct, _ := a.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	limit := money.Amount(10 * money.AmountScale)
	k, _, _ := a.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", Limit: &limit})
	eventually(t, time.Second, "key reaches B", func() bool { _, ok := b.APIKey(k.Hash); return ok })
	for i, r := range []*Store{a, b, a} {
		res, err := reserveIf(r, acct.ID, k.Hash, Holds{Hold: 1000, InFlight: 1000}, capDecide(1000))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Settle(res, Charge{Cost: money.Amount(900 + i), SettlementWindow: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	// One request still running: its hold record is a field too.
	if _, err := reserveIf(b, acct.ID, k.Hash, Holds{Hold: 1000, InFlight: 1000}, capDecide(1000)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Store{a, b} {
		eventually(t, time.Second, "the charges reach both replicas", func() bool {
			got, _ := r.APIKey(k.Hash)
			return got.Usage.Total == 2703
		})
		checkDecodedFields(t, r, acct.ID)
	}
}

// A request's levels are copies: changing them, as reserve and settle do,
// leaves the kept values (shared by every later read) alone.
func TestSharedLevelsDoNotChangeTheKeptValues(t *testing.T) {
	srv := redistest.Start(t)
	s := openSharedReplica(t, srv, "c:")
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	for range 2 {
		res, err := reserveIf(s, acct.ID, k.Hash, Holds{Hold: 1000, InFlight: 1000}, capDecide(1000))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(res, Charge{Cost: 900, SettlementWindow: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	l := sharedOf(t, s)
	s.k.RLock()
	lv, err := l.readLevels(fieldView{raw: l.raw[acct.ID]}, acct.ID, k.Hash, "", "", "")
	s.k.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(lv.settling) == 0 {
		t.Fatal("no settling costs to change")
	}
	lv.settling[0].Amount += 7
	lv.settling = keepSettling(lv.settling, time.Now(), time.Hour, 5)
	lv.figures.Account.Held += 3
	lv.ks.Held += 3
	lv.ks.Usage.Total += 3
	checkDecodedFields(t, s, acct.ID)
}
