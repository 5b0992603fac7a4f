package kernel

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// rawRecord is a record already encoded.
type rawRecord []byte

func (r rawRecord) MarshalJSON() ([]byte, error) { return r, nil }

// processCPU is the process's user and system time so far, background
// goroutines (Badger's flushes and compactions) included.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBadgerCommit is the gateway's write pattern on Badger alone:
// group commits of eight generation-sized records plus the account and key
// records each commit rewrites. cpu-ns/record counts all of the process's
// CPU, so that memtable flushes and compactions are in it.
func BenchmarkBadgerCommit(b *testing.B) {
	be, err := openBadgerDB(Options{Dir: b.TempDir()}, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	benchCommits(b, be)
}

// BenchmarkJournalCommit is the same pattern through the journal,
// checkpoints included, the generation records chunked 100 to a slot.
func BenchmarkJournalCommit(b *testing.B) {
	be, err := openBadger(Options{Dir: b.TempDir()}, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	be.(*journal).chunk("g/", func(key string) (string, bool) { return key[2 : len(key)-2], true })
	benchCommits(b, be)
}

// benchCommits commits b.N generation records in groups of eight, with the
// account's and key's records, and closes be (a journal's last checkpoint
// is counted).
func benchCommits(b *testing.B, be Backend) {
	gen := make(rawRecord, 520)
	for i := range gen {
		gen[i] = 'a' + byte(i%26)
	}
	acct, key := make(rawRecord, 449), make(rawRecord, 678)
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i += 8 {
		ws := []Write{{Key: "a/acct", Value: acct}, {Key: "k/key", Value: key}}
		for j := i; j < i+8; j++ {
			ws = append(ws, Write{Key: fmt.Sprintf("g/%012d", j), Value: gen})
		}
		if err := be.Commit(ws); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/record")
}

// BenchmarkCheckpointWrites is a checkpoint's grouping of a second's
// journaled writes into chunks: 8,000 generation records over 100 slots,
// with the account's and key's records.
func BenchmarkCheckpointWrites(b *testing.B) {
	m := map[string][]byte{"a/acct": make([]byte, 449), "k/key": make([]byte, 678)}
	for i := range 8000 {
		m[fmt.Sprintf("g/gen-%013d-%012x", 1795300000000+i/8, i*7919)] = make([]byte, 520)
	}
	cs := []chunker{{"g/", func(key string) (string, bool) { return key[6:18], true }}}
	b.ReportAllocs()
	for b.Loop() {
		_ = checkpointWrites(m, cs, &expiries{})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(m)), "ns/record")
}
