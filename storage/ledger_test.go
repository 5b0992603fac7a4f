package storage

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

var errRefused = errors.New("refused")

// capDecide admits while the key's cap covers usage, holds and the new hold.
func capDecide(hold money.Amount) func(LedgerView) error {
	return func(v LedgerView) error {
		if v.Key.Limit != nil && v.Key.CapUsage(v.Now)+v.KeyHeld+hold > *v.Key.Limit {
			return errRefused
		}
		return nil
	}
}

// reserveIf is an admission as the gateway makes it: decide on a snapshot
// and commit the holds, again on fresh figures when the commit finds them
// changed.
func reserveIf(s *Store, accountID, keyHash string, h Holds, decide func(LedgerView) error) (*Reservation, error) {
	return reserveHolds(s, accountID, keyHash, func(v LedgerView) (Holds, error) { return h, decide(v) })
}

// reserveHolds is reserveIf with holds that decide computes from the view.
func reserveHolds(s *Store, accountID, keyHash string, decide func(LedgerView) (Holds, error)) (*Reservation, error) {
	for attempt := 0; ; attempt++ {
		var snap Snapshot
		if err := s.Snapshot(&snap, accountID, keyHash, attempt); err != nil {
			return nil, err
		}
		h, err := decide(snap.View)
		if err != nil {
			s.Abandon(&snap)
			return nil, err
		}
		res, err := s.Commit(&snap, h)
		if !errors.Is(err, ErrStale) {
			return res, err
		}
	}
}

func TestReserveNeverOverspendsUnderConcurrency(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	limit := money.Amount(10 * money.AmountScale)
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k", Limit: &limit})

	hold := money.Amount(money.AmountScale) // each request may cost up to 1 credit
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := reserveIf(s, a.ID, k.Hash, Holds{Hold: hold}, capDecide(hold))
			if err != nil {
				refused.Add(1)
				return
			}
			admitted.Add(1)
			time.Sleep(time.Millisecond)
			// Actual costs vary below the hold.
			if err := s.Settle(res, Charge{Cost: hold - money.Amount(i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if admitted.Load() > 10 || admitted.Load() == 0 {
		t.Fatalf("admitted %d of 200 against a cap of 10", admitted.Load())
	}
	got, _ := s.APIKey(k.Hash)
	if got.Usage.Total > limit {
		t.Fatalf("usage %s over the cap %s", got.Usage.Total, limit)
	}
	acct, _ := s.Account(a.ID)
	if acct.Usage != got.Usage.Total {
		t.Fatalf("account usage %s != key usage %s", acct.Usage, got.Usage.Total)
	}
	// Holds are all released: a request that fits is admitted.
	if _, err := reserveIf(s, a.ID, k.Hash, Holds{Hold: 1}, capDecide(1)); err != nil && got.Usage.Total < limit {
		t.Fatalf("phantom refusal after all holds were released: %v", err)
	}
}

// Holds computed from the view (a request fitted to what the cap still
// affords) are placed under the same lock: 200 requests taking whatever
// room is left never hold more than the cap together.
func TestReserveHoldsFromTheView(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	limit := money.Amount(10 * money.AmountScale)
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k", Limit: &limit})
	fitted := func(v LedgerView) (Holds, error) {
		room := *v.Key.Limit - v.Key.CapUsage(v.Now) - v.KeyHeld
		if room < money.AmountScale/10 {
			return Holds{}, errRefused
		}
		return Holds{Hold: min(room, 3*money.AmountScale)}, nil
	}
	var mu sync.Mutex
	var held []*Reservation
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if res, err := reserveHolds(s, a.ID, k.Hash, fitted); err == nil {
				mu.Lock()
				held = append(held, res)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var sum money.Amount
	for _, res := range held {
		sum += res.Hold
	}
	if v := viewOf(t, s, a.ID, k.Hash); sum != limit || v.KeyHeld != limit || v.AccountHeld != limit || len(held) != 4 {
		t.Fatalf("%d reservations hold %s (key %s, account %s) under a cap of %s", len(held), sum, v.KeyHeld, v.AccountHeld, limit)
	}
	for _, res := range held {
		if err := s.Settle(res, Charge{Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := reserveHolds(s, a.ID, k.Hash, fitted); err != nil || res.Hold != 3*money.AmountScale {
		t.Fatalf("after settling: %+v, %v", res, err)
	}
}

func viewOf(t *testing.T, s *Store, accountID, keyHash string) LedgerView {
	t.Helper()
	var v LedgerView
	if _, err := reserveIf(s, accountID, keyHash, Holds{}, func(lv LedgerView) error { v = lv; return errRefused }); err != errRefused {
		t.Fatal(err)
	}
	return v
}

func TestSettleOnceAndDurable(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountPersonal})
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	res, err := s.Reserve(a.ID, k.Hash, Holds{Hold: 100, InFlight: 100})
	if err != nil {
		t.Fatal(err)
	}
	gen := &Generation{ID: NewGenerationID(time.Now()), AccountID: a.ID, KeyHash: k.Hash, Cost: 42, Status: "completed"}
	if err := s.Settle(res, Charge{Cost: 42, Generation: gen, SettlementWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(res, Charge{Cost: 42}); !errors.Is(err, ErrSettled) {
		t.Fatalf("second settle: %v", err)
	}
	if err := s.Release(res); !errors.Is(err, ErrSettled) {
		t.Fatalf("release after settle: %v", err)
	}
	// The settled cost stays in the in-flight budget for its window.
	var seen LedgerView
	_, _ = reserveIf(s, a.ID, k.Hash, Holds{}, func(v LedgerView) error { seen = v; return errRefused })
	if seen.InFlightHeld != 42 || seen.AccountHeld != 0 || seen.KeyHeld != 0 || seen.NextRelease <= 0 {
		t.Fatalf("after settle: %+v", seen)
	}
	// BYOK charges land in their own counters.
	res, _ = s.Reserve(a.ID, k.Hash, Holds{Hold: 5})
	if err := s.Settle(res, Charge{Cost: 5, BYOK: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	acct, _ := s.Account(a.ID)
	key, _ := s.APIKey(k.Hash)
	if acct.Usage != 42 || acct.BYOKUsage != 5 || key.Usage.Total != 42 || key.BYOKUsage.Total != 5 {
		t.Fatalf("after reopen: account %+v key %+v", acct, key)
	}
	g, err := s.Generation(gen.ID)
	if err != nil || g.Cost != 42 || g.KeyHash != k.Hash {
		t.Fatalf("generation: %+v %v", g, err)
	}
	var n int
	_ = s.Generations(func(Generation) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d generations", n)
	}
}

func TestSettlementWindowExpires(t *testing.T) {
	s, _ := Open(Options{InMemory: true})
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountPersonal})
	base := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now = func() time.Time { return base }
	defer func() { now = time.Now }()
	res, _ := s.Reserve(a.ID, "", Holds{Hold: 10, InFlight: 10})
	_ = s.Settle(res, Charge{Cost: 7, SettlementWindow: 10 * time.Second})
	view := func() LedgerView {
		var v LedgerView
		_, _ = reserveIf(s, a.ID, "", Holds{}, func(lv LedgerView) error { v = lv; return errRefused })
		return v
	}
	if v := view(); v.InFlightHeld != 7 || v.NextRelease != 10*time.Second {
		t.Fatalf("in window: %+v", v)
	}
	now = func() time.Time { return base.Add(10 * time.Second) }
	if v := view(); v.InFlightHeld != 0 {
		t.Fatalf("after window: %+v", v)
	}
	// A released reservation charges nothing.
	res, _ = s.Reserve(a.ID, "", Holds{Hold: 10, InFlight: 10})
	_ = s.Release(res)
	acct, _ := s.Account(a.ID)
	if v := view(); v.InFlightHeld != 0 || v.AccountHeld != 0 || acct.Usage != 7 {
		t.Fatalf("after release: %+v usage %s", v, acct.Usage)
	}
}

func TestGenerationIDsSortByTime(t *testing.T) {
	a := NewGenerationID(time.UnixMilli(999))
	b := NewGenerationID(time.UnixMilli(1795300000000))
	if len(a) != len("gen-0000000000999-")+12 || a[:18] != "gen-0000000000999-" || !(a < b) {
		t.Fatalf("ids %q %q", a, b)
	}
}

// Ids made in the same millisecond, from several goroutines (so from
// several of idRand's generators), differ in their random part.
func TestGenerationIDsUniqueWithinAMillisecond(t *testing.T) {
	at := time.UnixMilli(1795300000000)
	const workers, each = 4, 20000
	ids := make(chan string, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				ids <- NewGenerationID(at)
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := make(map[string]bool, workers*each)
	for id := range ids {
		random, ok := strings.CutPrefix(id, "gen-1795300000000-")
		if !ok || len(random) != 12 || strings.Trim(random, "0123456789abcdef") != "" {
			t.Fatalf("id %q", id)
		}
		if seen[id] {
			t.Fatalf("id %q made twice", id)
		}
		seen[id] = true
	}
}

// Holds never wrap: a hold that does not fit beside those already placed is
// refused, even where decide admits everything (an uncapped key).
func TestReserveRefusesOverflowingHolds(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	admit := func(LedgerView) error { return nil }
	first, err := reserveIf(s, a.ID, k.Hash, Holds{Hold: money.MaxAmount - 1}, admit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reserveIf(s, a.ID, k.Hash, Holds{Hold: 2}, admit); !errors.Is(err, money.ErrAmountRange) {
		t.Fatalf("overflowing hold: %v", err)
	}
	if _, err := reserveIf(s, a.ID, "", Holds{InFlight: 1, Hold: 1}, admit); err != nil {
		t.Fatalf("a hold that fits: %v", err)
	}
	if err := s.Release(first); err != nil {
		t.Fatal(err)
	}
	if _, err := reserveIf(s, a.ID, k.Hash, Holds{Hold: 2}, admit); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// A charge the account's counters cannot take stops them at MaxAmount: it
// never wraps to a negative usage (a credit).
func TestSettleNeverWrapsCounters(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	admit := func(LedgerView) error { return nil }
	for _, cost := range []money.Amount{money.MaxAmount - 10, 100} {
		res, err := reserveIf(s, a.ID, k.Hash, Holds{Hold: 1}, admit)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(res, Charge{Cost: cost}); err != nil {
			t.Fatal(err)
		}
	}
	acct, _ := s.Account(a.ID)
	key, _ := s.APIKey(k.Hash)
	if acct.Usage != money.MaxAmount || key.Usage.Total != money.MaxAmount || key.Usage.Daily.Value != money.MaxAmount {
		t.Fatalf("usage %s, key %s", acct.Usage, key.Usage.Total)
	}
}

func TestAccountGenerationByEveryID(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	b, _ := s.CreateAccount(NewAccount{Name: "B", Kind: AccountOrganization})
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	g := settleGen(t, s, a.ID, k.Hash, Generation{Model: "m", UpstreamID: "resp_abc", CreatedAt: time.Now()}, 10)
	for _, id := range []string{g.ID, "resp_abc"} {
		if got, err := s.AccountGeneration(a.ID, id); err != nil || got.ID != g.ID {
			t.Errorf("%s: %+v %v", id, got, err)
		}
		if _, err := s.AccountGeneration(b.ID, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s from another account: %v", id, err)
		}
	}
	if _, err := s.AccountGeneration(a.ID, "resp_other"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}

// A held sum back at zero stays for its key's next request, until zeros
// are half of the sums: then they are removed, so that the ledger does not
// keep an entry for every account and key that ever ran a request.
func TestHeldSumsAtZeroAreSwept(t *testing.T) {
	m := newHeld()
	m.add("a", 0)
	m.add("b", 5)
	m.add("b", 7)
	if len(m.sums) != 1 || m.get("a") != 0 || m.get("b") != 12 || m.live() != 1 {
		t.Fatalf("after adding: %d sums, a %s, b %s", len(m.sums), m.get("a"), m.get("b"))
	}
	m.add("b", -12)
	if m.get("b") != 0 || m.live() != 0 || m.zeros != 1 {
		t.Fatalf("b back at zero: %s, %d live, %d zeros", m.get("b"), m.live(), m.zeros)
	}
	m.add("b", 3) // its next request
	if m.get("b") != 3 || m.live() != 1 || m.zeros != 0 {
		t.Fatalf("b again: %s, %d live, %d zeros", m.get("b"), m.live(), m.zeros)
	}
	m.set("c", 9)
	m.set("c", 4)
	if m.get("c") != 4 {
		t.Fatalf("c = %s after set 4", m.get("c"))
	}
	m.set("c", 0)
	if m.live() != 1 {
		t.Fatalf("%d live after c set to zero", m.live())
	}
	// Many keys, each held once and released: the zeros are swept, and
	// the sums still held stay.
	for i := range 1000 {
		k := fmt.Sprint("k", i)
		m.add(k, 1)
		m.add(k, -1)
	}
	if len(m.sums) > 2*65+1 || m.get("b") != 3 || m.live() != 1 {
		t.Fatalf("after 1000 keys held and released: %d sums, %d live, b %s", len(m.sums), m.live(), m.get("b"))
	}
}
