package sharedledger

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// checkDecodedFields fails unless every decoded value the replica keeps is
// what its string decodes to.
func checkDecodedFields(t *testing.T, r *replica, accountID string) {
	t.Helper()
	r.k.RLock()
	defer r.k.RUnlock()
	for name, f := range r.l.raw[accountID] {
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
	a, b := openReplica(t, srv, "f:", 0), openReplica(t, srv, "f:", 0)
	const acctID = "acct-f"
	limit := money.Amount(10 * money.AmountScale)
	k := addAccount(acctID, &limit, a, b)
	for i, r := range []*replica{a, b, a} {
		res, err := r.reserve(acctID, k.Hash, ledger.Holds{Hold: 1000, InFlight: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.l.Settle(res, ledger.Charge{Cost: money.Amount(900 + i), SettlementWindow: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	// One request still running: its hold record is a field too.
	if _, err := b.reserve(acctID, k.Hash, ledger.Holds{Hold: 1000, InFlight: 1000}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*replica{a, b} {
		eventually(t, time.Second, "the charges reach both replicas", func() bool {
			return r.key(k.Hash).Usage.Total == 2703
		})
		checkDecodedFields(t, r, acctID)
	}
}

// A request's levels are copies: changing them, as reserve and settle do,
// leaves the kept values (shared by every later read) alone.
func TestSharedLevelsDoNotChangeTheKeptValues(t *testing.T) {
	srv := redistest.Start(t)
	s := openReplica(t, srv, "c:", 0)
	const acctID = "acct-c"
	k := addAccount(acctID, nil, s)
	for range 2 {
		res, err := s.reserve(acctID, k.Hash, ledger.Holds{Hold: 1000, InFlight: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.l.Settle(res, ledger.Charge{Cost: 900, SettlementWindow: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	l := s.l
	s.k.RLock()
	lv, err := l.readLevels(fieldView{raw: l.raw[acctID]}, acctID, k.Hash, "", "", "")
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
	checkDecodedFields(t, s, acctID)
}
