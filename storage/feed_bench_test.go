package storage

import (
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// BenchmarkFeedPropagation measures how long a change committed at one
// replica takes to be applied at another (the change feed's delay): per
// iteration a key is created at replica a and b is polled until it knows
// the key. It reports the median and the 99th percentile; the tests only
// require that a change arrives, so this is where its speed is watched.
//
//	go test ./storage -run '^$' -bench FeedPropagation -benchtime 200x
func BenchmarkFeedPropagation(b *testing.B) {
	srv := redistest.Start(b)
	open := func() *Store {
		s, err := Open(Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "feed:"}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, r := open(), open()
	acct, err := a.CreateAccount(NewAccount{Name: "feed", Kind: AccountOrganization})
	if err != nil {
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		k, _, err := a.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for {
			if _, ok := r.APIKey(k.Hash); ok {
				break
			}
			if time.Since(start) > 10*time.Second {
				b.Fatal("the key did not reach the other replica in 10 s")
			}
			runtime.Gosched()
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
