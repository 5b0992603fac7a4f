package storage

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/analytics"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// TestStartReadsOnlyUnsealedHoursGenerations: once every account's hours
// before H are sealed and H is stored (the second SealRollup), a restart
// reads none of those hours' generations, only the later ones', and the
// rollup is what it was; a generation of a sealed hour that settles after
// that (a request longer than sealGrace, for an account without a cell in
// that hour) is sealed as it is counted, and survives the next restart.
func TestStartReadsOnlyUnsealedHoursGenerations(t *testing.T) {
	dir := t.TempDir()
	clock := time.Now().UTC()
	setClock(t, &clock)
	s := openTemp(t, dir)
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	b, _ := s.CreateAccount(NewAccount{Name: "B", Kind: AccountOrganization})
	ka, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	kb, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: b.ID, Name: "k"})
	gen := func(acct, key string, at time.Time, cost int64) {
		settleGen(t, s, acct, key, Generation{Model: "m", Provider: "p", Status: "completed", User: "u", CreatedAt: at}, money.Amount(cost))
	}
	for _, ago := range []time.Duration{5 * time.Hour, 5*time.Hour - time.Minute, 3 * time.Hour} {
		gen(a.ID, ka.Hash, clock.Add(-ago), 100)
	}
	gen(b.ID, kb.Hash, clock.Add(-4*time.Hour), 10)
	gen(a.ID, ka.Hash, clock, 1)
	gen(b.ID, kb.Hash, clock, 2)
	for range 2 {
		if err := s.SealRollup(clock); err != nil {
			t.Fatal(err)
		}
	}
	wantA, wantB := sumsOf(s, a.ID), sumsOf(s, b.ID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	if s.AnalyticsStore.a.GenerationsRead() != 2 {
		t.Fatalf("a start read %d generation records, want the current hour's 2", s.AnalyticsStore.a.GenerationsRead())
	}
	if got := sumsOf(s, a.ID); got != wantA {
		t.Fatalf("account A after the restart: %+v, want %+v", got, wantA)
	}
	if got := sumsOf(s, b.ID); got != wantB {
		t.Fatalf("account B after the restart: %+v, want %+v", got, wantB)
	}
	// Late: B had no generation in that hour; A's hour gets one more.
	gen(b.ID, kb.Hash, clock.Add(-5*time.Hour), 1000)
	gen(a.ID, ka.Hash, clock.Add(-3*time.Hour), 1000)
	wantA, wantB = sumsOf(s, a.ID), sumsOf(s, b.ID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	if got := sumsOf(s, a.ID); got != wantA || got.Requests != 5 {
		t.Fatalf("account A after the late generation: %+v, want %+v", got, wantA)
	}
	if got := sumsOf(s, b.ID); got != wantB || got.Requests != 3 {
		t.Fatalf("account B after the late generation: %+v, want %+v", got, wantB)
	}
	if s.AnalyticsStore.a.GenerationsRead() != 2 {
		t.Fatalf("the second start read %d generation records, want 2", s.AnalyticsStore.a.GenerationsRead())
	}
}

// TestStartWithoutWatermarkReadsEveryGeneration: a database without the
// watermark (written before it existed) is read whole, and counts every
// hour once.
func TestStartWithoutWatermarkReadsEveryGeneration(t *testing.T) {
	dir := t.TempDir()
	clock := time.Now().UTC()
	setClock(t, &clock)
	s := openTemp(t, dir)
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	ka, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	settleGen(t, s, a.ID, ka.Hash, Generation{Model: "m", Provider: "p", Status: "completed", CreatedAt: clock.Add(-4 * time.Hour)}, 100)
	settleGen(t, s, a.ID, ka.Hash, Generation{Model: "m", Provider: "p", Status: "completed", CreatedAt: clock}, 1)
	if err := s.SealRollup(clock); err != nil {
		t.Fatal(err)
	}
	s.AnalyticsStore.a.StopSealing()
	b := s.AnalyticsStore.a.ForgetWatermark()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	want := sumsOf(s, a.ID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	if s.AnalyticsStore.a.GenerationsRead() != 2 {
		t.Fatalf("a start without a stored watermark read %d generation records, want 2", s.AnalyticsStore.a.GenerationsRead())
	}
	if got := sumsOf(s, a.ID); got != want || got.Requests != 2 {
		t.Fatalf("after the restart: %+v, want %+v", got, want)
	}
}

func sumsOf(s *Store, acct string) Sums {
	sum, _ := totals(s, acct)
	return sum
}

// TestWatermarkChangeIsNotAReload: on Redis, another replica storing its
// watermark is applied as nothing, not as a reload of every record.
func TestWatermarkChangeIsNotAReload(t *testing.T) {
	keys, incremental := changedRecords([]kernel.Change{{Keys: []string{analytics.SealedBeforeKey, analytics.SealedHourPrefix + "a/1"}}},
		func(string) bool { return false })
	if !incremental || len(keys) != 0 {
		t.Fatalf("changedRecords = %q, %v; want nothing to apply, incrementally", keys, incremental)
	}
}
