package storage

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// sharedBenchStore is one replica on a fresh redis-server (fsync once a
// second by default, so that the disk does not hide the replica's own
// cost: see benchFsync) with one funded account and key.
func sharedBenchStore(b *testing.B) (*Store, Account, APIKey) {
	b.Helper()
	srv := redistest.Start(b, "--appendfsync", benchFsync)
	s, err := Open(Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "b:"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	a, err := s.CreateAccount(NewAccount{Name: "bench", Kind: AccountOrganization})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.RecordPurchase(a.ID, 1_000_000*money.AmountScale, ""); err != nil {
		b.Fatal(err)
	}
	limit := money.Amount(1_000_000 * money.AmountScale)
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k", Limit: &limit})
	if err != nil {
		b.Fatal(err)
	}
	return s, a, k
}

// reserveSettle is one inference request's ledger calls: an in-flight
// hold, then a charge with a settlement window and a generation record.
func reserveSettle(b *testing.B, s *Store, a Account, k APIKey) {
	res, err := s.Reserve(a.ID, k.Hash, Holds{Hold: 1000, InFlight: 1000})
	if err != nil {
		b.Error(err) // not Fatal: RunParallel's goroutines may not end the benchmark
		return
	}
	t := time.Now()
	gen := &Generation{ID: NewGenerationID(t), AccountID: a.ID, KeyHash: k.Hash, Model: "m", Provider: "p",
		PromptTokens: 100, CompletionTokens: 50, Cost: 900, Status: "completed", CreatedAt: t}
	if err := s.Settle(res, Charge{Cost: 900, SettlementWindow: time.Second, Generation: gen}); err != nil {
		b.Error(err)
	}
}

// BenchmarkSharedReserveSettle is one request after another on one
// account of the shared ledger: two scripts, two round trips each.
func BenchmarkSharedReserveSettle(b *testing.B) {
	s, a, k := sharedBenchStore(b)
	b.ReportAllocs()
	cpu := redisCPU(b, s)
	for b.Loop() {
		reserveSettle(b, s, a, k)
	}
	reportScriptCPU(b, s, cpu)
}

// BenchmarkSharedReserveSettleParallel is many requests of one account at
// once, as under load: they queue on the account's lock.
func BenchmarkSharedReserveSettleParallel(b *testing.B) {
	s, a, k := sharedBenchStore(b)
	b.ReportAllocs()
	b.SetParallelism(8)
	cpu := redisCPU(b, s)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			reserveSettle(b, s, a, k)
		}
	})
	reportScriptCPU(b, s, cpu)
}

// reportScriptCPU reports the server's CPU per request (reservation and
// settlement) since it used cpu0 seconds, and per script call, from its
// statistics: less noisy than ns/op on a shared machine.
func reportScriptCPU(b *testing.B, s *Store, cpu0 float64) {
	b.Helper()
	b.ReportMetric((redisCPU(b, s)-cpu0)/float64(b.N)*1e6, "redis-µs/op")
	info, err := sharedOf(b, s).Backend().Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if os.Getenv("TOLLGATE_BENCH_STATS") != "" {
			fmt.Fprintf(os.Stderr, "N=%d %s\n", b.N, strings.TrimSpace(line))
		}
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec_per_call="); ok {
				f, _ := strconv.ParseFloat(v, 64)
				b.ReportMetric(f, "redis-µs/call")
			}
		}
	}
}

// redisCPU is the CPU seconds the server used so far (user and system,
// of every thread).
func redisCPU(b *testing.B, s *Store) float64 {
	b.Helper()
	info, err := sharedOf(b, s).Backend().Client().Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}

// benchFsync is the benchmarks' appendfsync: everysec, or always with
// TOLLGATE_BENCH_FSYNC=always (the setting production runs with).
var benchFsync = cmp.Or(os.Getenv("TOLLGATE_BENCH_FSYNC"), "everysec")

// BenchmarkSharedReserveSettleParallelAccounts is many requests at once
// spread over 100 accounts: one script call per account's batch, the
// calls of different accounts pipelined together.
func BenchmarkSharedReserveSettleParallelAccounts(b *testing.B) {
	s, a, k := sharedBenchStore(b)
	type acctKey struct {
		a Account
		k APIKey
	}
	accts := []acctKey{{a, k}}
	for i := 1; i < 100; i++ {
		a, err := s.CreateAccount(NewAccount{Name: "bench", Kind: AccountOrganization})
		if err != nil {
			b.Fatal(err)
		}
		k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
		if err != nil {
			b.Fatal(err)
		}
		accts = append(accts, acctKey{a, k})
	}
	b.ReportAllocs()
	b.SetParallelism(16)
	cpu := redisCPU(b, s)
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ak := accts[next.Add(1)%int64(len(accts))]
			reserveSettle(b, s, ak.a, ak.k)
		}
	})
	reportScriptCPU(b, s, cpu)
}
