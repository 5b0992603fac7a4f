// Package freeport hands tests loopback TCP ports for servers that another
// process binds (a Caddy binary, redis-server).
//
// The usual trick, listening on port 0 and closing, leaves a gap before the
// child binds: the kernel may give the same port to the next such call (CI
// saw a Caddyfile with two sites on one port) or to an outgoing connection.
// So ports come from below the kernel's ephemeral range, which neither
// port 0 nor connect uses, and none twice in one test binary.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowest keeps clear of well-known ports and of the fixed ports of the
// in-process tests (9480, 9481, 2999).
const lowest = 20000

var (
	mu    sync.Mutex
	next  int
	given = map[int]bool{}
)

// Loopback returns a port on 127.0.0.1 that nothing listens on now and that
// this test binary was not given before.
func Loopback(t testing.TB) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	lo, hi := span()
	if next == 0 {
		// A random start, so that test binaries running side by side
		// (go test ./...) walk different stretches.
		next = lo + rand.IntN(hi-lo)
	}
	for range hi - lo {
		p := next
		if next++; next == hi {
			next = lo
		}
		if given[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		l.Close()
		given[p] = true
		return p
	}
	t.Fatalf("freeport: no free loopback port in %d-%d", lo, hi-1)
	return 0
}

// Addr is Loopback as host:port.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Loopback(t)))
}

// span is the ports to pick from: [lowest, start of the ephemeral range),
// or, where that range starts too low to leave room, the ports above it.
func span() (lo, hi int) {
	ephLo, ephHi := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			a, errA := strconv.Atoi(f[0])
			z, errZ := strconv.Atoi(f[1])
			if errA == nil && errZ == nil && a <= z {
				ephLo, ephHi = a, z
			}
		}
	}
	if ephLo-lowest >= 1000 {
		return lowest, ephLo
	}
	if 65535-ephHi >= 1000 {
		return ephHi + 1, 65536
	}
	return lowest, 65536 // no room outside it: at least never the same port twice
}
