package storage

import (
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func benchStore(b *testing.B, dir string) (*Store, Account, APIKey) {
	b.Helper()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	a, _ := s.CreateAccount(NewAccount{Name: "bench", Kind: AccountOrganization})
	_, _, _ = s.RecordPurchase(a.ID, 1_000_000*money.AmountScale, "")
	limit := money.Amount(1_000_000 * money.AmountScale)
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k", Limit: &limit})
	return s, a, k
}

// BenchmarkReserve is the admission hold alone: memory only.
func BenchmarkReserve(b *testing.B) {
	s, a, k := benchStore(b, b.TempDir())
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.Reserve(a.ID, k.Hash, Holds{Hold: 1000, InFlight: 1000})
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Release(res)
	}
}

// BenchmarkReserveRunning is the admission hold and its release while
// other requests of the account and key are running, as under load: each
// loop releases the reservation the one before placed.
func BenchmarkReserveRunning(b *testing.B) {
	s, a, k := benchStore(b, b.TempDir())
	defer s.Close()
	running, err := s.Reserve(a.ID, k.Hash, Holds{Hold: 1000, InFlight: 1000})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.Reserve(a.ID, k.Hash, Holds{Hold: 1000, InFlight: 1000})
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Release(running)
		running = res
	}
}

// BenchmarkReserveSettle is one request after another: each charge is a
// group commit of its own, so the work per request is the same in every
// run (compare instruction counts, valgrind --tool=cachegrind, rather than
// times on a busy machine).
func BenchmarkReserveSettle(b *testing.B) {
	s, a, k := benchStore(b, b.TempDir())
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		reserveSettle(b, s, a, k)
	}
}

// BenchmarkReserveSettleParallel is admission plus a durable charge with a
// generation record, from many goroutines as under load: the group commit
// shares disk round trips between them. cpu-ns/op is the process's CPU
// per request, the flusher's and the checkpoints' included: ns/op is
// mostly waiting for the disk.
func BenchmarkReserveSettleParallel(b *testing.B) {
	s, a, k := benchStore(b, b.TempDir())
	defer s.Close()
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			reserveSettle(b, s, a, k)
		}
	})
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAuthenticate is the per-request key lookup.
func BenchmarkAuthenticate(b *testing.B) {
	s, _ := Open(Options{InMemory: true})
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "bench", Kind: AccountOrganization})
	_, secret, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Authenticate(secret); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEffectiveRules is the hot-path lookup of a key's guardrails: a
// cached entry costs no lock and no allocation.
func BenchmarkEffectiveRules(b *testing.B) {
	s, acct, key := benchStore(b, b.TempDir())
	g, err := s.CreateGuardrail(acct.ID, func(g *Guardrail) error { g.Name, g.AllowedModels = "g", []string{"m"}; return nil })
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.AssignKeys(acct.ID, g.ID, []string{key.Hash}, nil); err != nil {
		b.Fatal(err)
	}
	s.EffectiveRules(key.Hash)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := s.EffectiveRules(key.Hash); len(r.Guardrails) != 1 {
				b.Fatal("rules")
			}
		}
	})
}

// BenchmarkNewGenerationID is the id every request's generation gets.
func BenchmarkNewGenerationID(b *testing.B) {
	b.ReportAllocs()
	t := time.Now()
	for b.Loop() {
		_ = NewGenerationID(t)
	}
}
