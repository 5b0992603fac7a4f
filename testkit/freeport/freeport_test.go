package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestLoopbackGivesDistinctBindablePorts(t *testing.T) {
	lo, hi := span()
	seen := map[int]bool{}
	for range 200 {
		p := Loopback(t)
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		if p < lo || p >= hi {
			t.Fatalf("port %d outside %d-%d", p, lo, hi-1)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
}

func TestLoopbackSkipsPortsInUse(t *testing.T) {
	p := Loopback(t)
	// Hold the port that comes next: Loopback must step over it.
	mu.Lock()
	held := next
	mu.Unlock()
	// (If another process holds it already, all the better.)
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(held))); err == nil {
		defer l.Close()
	}
	if q := Loopback(t); q == held || q == p {
		t.Fatalf("got port %d; %d is held and %d was given", q, held, p)
	}
}
