package storage

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/affinity"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// TestAffinityInMemoryOnOneNode: the embedded backend keeps sticky
// routing's table in memory.
func TestAffinityInMemoryOnOneNode(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.Affinity().(*affinity.Memory); !ok {
		t.Fatalf("Affinity() = %T, want *affinity.Memory", s.Affinity())
	}
}

// TestAffinitySharedByReplicas: on Redis, what one replica sets the other
// reads, and a reload of the records never reads the table's keys.
func TestAffinitySharedByReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openSharedReplica(t, srv, "aff:"), openSharedReplica(t, srv, "aff:")
	a.Affinity().Set(affinity.Key{7}, "acme", time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, ok := b.Affinity().Get(context.Background(), affinity.Key{7}, time.Minute); ok && got == "acme" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other replica never read the sticky endpoint")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := openSharedReplica(t, srv, "aff:") // loads every record: the table's key is none
	if got, ok := c.Affinity().Get(context.Background(), affinity.Key{7}, time.Minute); !ok || got != "acme" {
		t.Fatalf("a third replica reads %q, %v", got, ok)
	}
}
