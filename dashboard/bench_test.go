package dashboard

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

const (
	benchKeys        = 10_000
	benchGenerations = 1_000_000
)

var (
	benchOnce   sync.Once
	benchD      *Dashboard
	benchCookie *http.Cookie
	benchAcct   string
	benchKey    string
)

// benchDashboard is a dashboard over an account with 10,000 keys and
// 1,000,000 generations over 90 days (20 models, 5 providers, every key),
// signed in as its owner. The generation records are appended to the
// database in large batches and the store reopened, so that its analytics
// rollup is built from them as at any start.
func benchDashboard(b *testing.B) (*Dashboard, *http.Cookie) {
	benchOnce.Do(func() {
		dir := b.TempDir()
		st, err := storage.Open(storage.Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		acct, err := st.CreateAccount(storage.NewAccount{Name: "Big Co", Kind: storage.AccountOrganization})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := st.RecordPurchase(acct.ID, 1000*money.AmountScale, ""); err != nil {
			b.Fatal(err)
		}
		hashes := make([]string, benchKeys)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < benchKeys; i += 8 {
					limit := money.Amount(10 * money.AmountScale)
					k, _, err := st.CreateAPIKey(storage.NewAPIKey{AccountID: acct.ID, Name: fmt.Sprintf("key-%05d", i), Limit: &limit})
					if err != nil {
						b.Error(err)
						return
					}
					hashes[i] = k.Hash
				}
			})
		}
		wg.Wait()
		rng := rand.New(rand.NewPCG(1, 2))
		end := time.Now().UTC()
		k := st.Kernel()
		for batch := 0; batch < benchGenerations; batch += 20_000 {
			k.Lock()
			var last = k.Pending()
			for range 20_000 {
				t := end.Add(-time.Duration(rng.Int64N(int64(90 * 24 * time.Hour))))
				g := storage.Generation{
					ID: storage.NewGenerationID(t), AccountID: acct.ID, KeyHash: hashes[rng.IntN(benchKeys)],
					Model: fmt.Sprintf("vendor/model-%02d", rng.IntN(20)), Provider: fmt.Sprintf("provider-%d", rng.IntN(5)),
					WorkspaceID: acct.DefaultWorkspaceID, Status: "completed", FinishReason: "stop",
					PromptTokens: rng.Int64N(2000), CompletionTokens: rng.Int64N(1000), Cost: money.Amount(rng.Int64N(1_000_000)),
					LatencyMS: rng.Int64N(3000), CreatedAt: t,
				}
				last = k.Append("g/"+g.ID, g)
			}
			k.Unlock()
			if err := last.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		if st, err = storage.Open(storage.Options{Dir: dir}); err != nil {
			b.Fatal(err)
		}
		d := &Dashboard{}
		if err := d.setup(fakeGateway{st}, zap.NewNop()); err != nil {
			b.Fatal(err)
		}
		<-recentOf(st, zap.NewNop()).seeded
		token, _, err := StoreOf(st).createSession(Principal{AccountID: acct.ID}, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		benchD, benchCookie, benchAcct, benchKey = d, &http.Cookie{Name: CookieName, Value: token}, acct.ID, hashes[0]
	})
	return benchD, benchCookie
}

// BenchmarkPages renders each page server-side over the big account; the
// goal is under 50 ms a page (ns/op below 50,000,000).
func BenchmarkPages(b *testing.B) {
	d, cookie := benchDashboard(b)
	for _, path := range []string{
		"/dashboard/", "/dashboard/keys", "/dashboard/keys?offset=9900", "/dashboard/keys/" + benchKey,
		"/dashboard/activity", "/dashboard/activity?by=key", "/dashboard/activity?by=key&days=90&offset=9900", "/dashboard/activity?by=provider&days=365&model=vendor/model-03",
		"/dashboard/settings",
	} {
		b.Run(path, func(b *testing.B) {
			cpu := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/1e6, "cpu-ms/op") }()
			for b.Loop() {
				r := httptest.NewRequest("GET", path, nil)
				r.AddCookie(cookie)
				w := httptest.NewRecorder()
				if err := d.ServeHTTP(w, r, nil); err != nil || w.Code != http.StatusOK {
					b.Fatalf("%s: %d %v", path, w.Code, err)
				}
			}
		})
	}
}

// cpuTime is the process's CPU time: on a machine shared with other
// work, the wall time of ns/op includes waiting for a core, and cpu-ms/op
// (this process's CPU time per page, background work included) is the
// page's own cost.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkActivityByKey is the Activity page by key alone (for
// profiles): the page with the most values (two passes over the cells).
func BenchmarkActivityByKey(b *testing.B) {
	d, cookie := benchDashboard(b)
	for b.Loop() {
		r := httptest.NewRequest("GET", "/dashboard/activity?by=key", nil)
		r.AddCookie(cookie)
		w := httptest.NewRecorder()
		if err := d.ServeHTTP(w, r, nil); err != nil || w.Code != http.StatusOK {
			b.Fatal(w.Code, err)
		}
	}
}
