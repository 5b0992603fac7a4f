package integration

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// connCounter is a TCP proxy in front of the mock provider that counts the
// connections the gateway opens to it.
type connCounter struct {
	addr   string
	opened atomic.Int64
}

func startConnCounter(t *testing.T, target string) *connCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cc := &connCounter{addr: ln.Addr().String()}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			cc.opened.Add(1)
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			open = append(open, in, out)
			mu.Unlock()
			conns.Add(2)
			pipe := func(dst, src net.Conn) {
				defer conns.Done()
				_, _ = io.Copy(dst, src)
				_ = dst.(*net.TCPConn).CloseWrite()
			}
			go pipe(out, in)
			go pipe(in, out)
		}
	}()
	return cc
}

// The provider proxies keep their connections to a provider for the next
// requests, also when more requests are in flight than Caddy's default
// idle pool (32 per host) holds: rounds of 48 concurrent requests open
// about 48 connections once, and later rounds open none. An operator's
// own `keepalive_idle_conns_per_host` applies instead, and then requests
// beyond it open new connections every round.
func TestProviderConnectionsReused(t *testing.T) {
	const concurrent, rounds = 48, 4
	run := func(t *testing.T, idle string) (first, later int64) {
		counter := startConnCounter(t, mockAddr)
		startInProcessWith(t, func(cfg string) string {
			cfg = strings.ReplaceAll(cfg, "provider mock http://"+mockAddr+"/v1", "provider mock http://"+counter.addr+"/v1")
			if idle != "" {
				cfg = replaceOnce(t, cfg, "load_balancing ordered\n",
					"load_balancing ordered\n\t\ttransport http {\n\t\t\tkeepalive_idle_conns_per_host "+idle+"\n\t\t}\n")
			}
			return cfg
		})
		c := newClient(t, gatewayAddr, adminAddr)
		org := c.newTenant("organization", "100")
		key, _ := c.newKey(org.MgmtKey, `{"name":"conns"}`)
		body := chatBody("tollgate-mock", "")
		// Each request is held long enough that a round's requests are
		// all in flight at once.
		slow := map[string]string{"X-Mock-Latency": "300ms"}
		for round := range rounds {
			var wg sync.WaitGroup
			errs := make([]error, concurrent)
			for i := range concurrent {
				wg.Go(func() {
					r, err := c.post("/chat/completions", key, body, slow)
					if err == nil && r.Status != 200 {
						err = errors.New(string(r.Body))
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if round == 0 {
				first = counter.opened.Load()
			}
		}
		return first, counter.opened.Load() - first
	}

	t.Run("default", func(t *testing.T) {
		first, later := run(t, "")
		t.Logf("first round opened %d connections, the next %d rounds %d", first, rounds-1, later)
		if first < concurrent/2 || first > 2*concurrent {
			t.Errorf("the first round of %d concurrent requests opened %d connections", concurrent, first)
		}
		if later > 2 {
			t.Errorf("%d rounds of %d concurrent requests after the first opened %d connections, want them reused", rounds-1, concurrent, later)
		}
	})
	t.Run("operator's idle pool", func(t *testing.T) {
		first, later := run(t, "8")
		t.Logf("first round opened %d connections, the next %d rounds %d", first, rounds-1, later)
		if later < int64(rounds-1)*(concurrent/2) {
			t.Errorf("with 8 idle connections per host, %d rounds of %d concurrent requests opened only %d connections: the operator's setting is not applied", rounds-1, concurrent, later)
		}
	})
}
