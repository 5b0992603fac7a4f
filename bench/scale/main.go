// Command scale fills a gateway's Badger directory with many accounts and
// keys, and measures what bench/scale.sh asks of a running gateway.
//
//	scale populate -dir D -keys N [-per 10] [-big 10000] -out F
//	scale lists -url http://127.0.0.1:P -in F [-n 200]
//	scale open -dir D [-cpuprofile F] [-exit] [-gc N]
//
// populate writes through the storage package (the gateway is stopped),
// with many concurrent writers so that the group commit batches them: one
// account per -per keys, one account with -big keys, each account with
// credits; F records a management key of a small and of the big account
// and 1,000 API key strings spread over the accounts (the keys are
// otherwise stored only as hashes). lists times GET /api/v1/keys of both
// accounts through the gateway. open times storage.Open of D (wall and
// CPU), then closes it, or with -exit leaves it as a kill -9 would (no
// close: its journal stays to be replayed); -gc N then runs N full garbage
// collections and prints their median CPU time and the live heap: the
// collector's cost per cycle for the store's records, which a gateway
// under load pays once per heap's worth of allocation.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage"
)

type sample struct {
	SmallMgmt string   `json:"small_mgmt"`
	BigMgmt   string   `json:"big_mgmt"`
	Keys      []string `json:"keys"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scale populate|lists ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "populate":
		err = populate(os.Args[2:])
	case "lists":
		err = lists(os.Args[2:])
	case "open":
		err = open(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func populate(args []string) error {
	fs := flag.NewFlagSet("populate", flag.ExitOnError)
	dir := fs.String("dir", "", "Badger directory")
	keys := fs.Int("keys", 10000, "API keys in all")
	per := fs.Int("per", 10, "keys per account")
	big := fs.Int("big", 10000, "keys of the one big account (part of -keys)")
	out := fs.String("out", "", "sample file")
	_ = fs.Parse(args)
	if *dir == "" || *out == "" {
		return fmt.Errorf("-dir and -out are required")
	}
	*big = min(*big, *keys/2)
	s, err := storage.Open(storage.Options{Dir: *dir})
	if err != nil {
		return err
	}
	defer s.Close()
	start := time.Now()
	account := func(n int) (storage.Account, []string, string, error) {
		a, err := s.CreateAccount(storage.NewAccount{Name: "bench", Kind: storage.AccountOrganization})
		if err != nil {
			return a, nil, "", err
		}
		if _, _, err := s.RecordPurchase(a.ID, money.Amount(1_000_000)*money.Amount(1e9), "bench"); err != nil {
			return a, nil, "", err
		}
		_, mgmt, err := s.CreateManagementKey(storage.NewManagementKey{AccountID: a.ID, Name: "bench"})
		if err != nil {
			return a, nil, "", err
		}
		secrets := make([]string, 0, n)
		for range n {
			_, secret, err := s.CreateAPIKey(storage.NewAPIKey{AccountID: a.ID, Name: "bench key"})
			if err != nil {
				return a, nil, "", err
			}
			secrets = append(secrets, secret)
		}
		return a, secrets, mgmt, nil
	}
	var smp sample
	// The big account's keys are written by many writers too.
	bigAcct, _, bigMgmt, err := account(0)
	if err != nil {
		return err
	}
	smp.BigMgmt = bigMgmt
	accounts := (*keys - *big + *per - 1) / *per
	const writers = 64
	keep := 1000.0 / float64(*keys)
	var mu sync.Mutex
	var next, done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= accounts+*big || firstErr.Load() != nil {
					return
				}
				var secrets []string
				if i < accounts {
					_, ss, mgmt, err := account(*per)
					if err != nil {
						firstErr.Store(err)
						return
					}
					secrets = ss
					if i == 0 {
						mu.Lock()
						smp.SmallMgmt = mgmt
						mu.Unlock()
					}
				} else {
					_, secret, err := s.CreateAPIKey(storage.NewAPIKey{AccountID: bigAcct.ID, Name: "bench key"})
					if err != nil {
						firstErr.Store(err)
						return
					}
					secrets = []string{secret}
				}
				mu.Lock()
				for _, k := range secrets {
					if rand.Float64() < keep {
						smp.Keys = append(smp.Keys, k)
					}
				}
				mu.Unlock()
				if n := done.Add(1); n%20000 == 0 {
					fmt.Fprintf(os.Stderr, "scale: %d/%d accounts and big-account keys\n", n, accounts+*big)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Printf("populated %d keys in %d accounts (+1 of %d keys) in %.1fs: %.0f keys/s\n",
		*keys, accounts, *big, elapsed.Seconds(), float64(*keys)/elapsed.Seconds())
	b, _ := json.Marshal(smp)
	return os.WriteFile(*out, b, 0o600)
}

func lists(args []string) error {
	fs := flag.NewFlagSet("lists", flag.ExitOnError)
	url := fs.String("url", "", "gateway base URL")
	in := fs.String("in", "", "sample file")
	n := fs.Int("n", 200, "requests per account")
	_ = fs.Parse(args)
	b, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var smp sample
	if err := json.Unmarshal(b, &smp); err != nil {
		return err
	}
	for _, c := range []struct{ name, key string }{{"small", smp.SmallMgmt}, {"big", smp.BigMgmt}} {
		var ds []time.Duration
		for range *n {
			req, _ := http.NewRequest("GET", *url+"/api/v1/keys", nil)
			req.Header.Set("Authorization", "Bearer "+c.key)
			t := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("GET /keys: %s", resp.Status)
			}
			ds = append(ds, time.Since(t))
		}
		slices.Sort(ds)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fmt.Printf("list_%s_p50_ms %.2f\nlist_%s_p99_ms %.2f\n", c.name, ms(ds[len(ds)/2]), c.name, ms(ds[len(ds)*99/100]))
	}
	return nil
}

func open(args []string) error {
	fs := flag.NewFlagSet("open", flag.ExitOnError)
	dir := fs.String("dir", "", "Badger directory")
	profile := fs.String("cpuprofile", "", "CPU profile of the open")
	exit := fs.Bool("exit", false, "exit without closing, as a kill -9 would")
	gcs := fs.Int("gc", 0, "full collections to time after the open")
	_ = fs.Parse(args)
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	began, cpu0 := time.Now(), cpu()
	s, err := storage.Open(storage.Options{Dir: *dir})
	if err != nil {
		return err
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("open: %.2f s, CPU %.2f s, peak RSS %d MB\n", time.Since(began).Seconds(), (cpu() - cpu0).Seconds(), ru.Maxrss>>10)
	if *profile != "" {
		pprof.StopCPUProfile()
	}
	if *gcs > 0 {
		times := make([]time.Duration, *gcs)
		for i := range times {
			c := cpu()
			runtime.GC()
			times[i] = cpu() - c
		}
		slices.Sort(times)
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Printf("gc: median %.1f ms CPU per full collection (of %d), live heap %d MB, %d objects\n",
			float64(times[len(times)/2].Microseconds())/1000, len(times), m.HeapAlloc>>20, m.HeapObjects)
	}
	if *exit {
		os.Exit(0)
	}
	return s.Close()
}
