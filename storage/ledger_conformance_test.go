package storage_test

import (
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledgertest"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// Every backend's ledger passes the ledger's conformance suite.
func TestLedgerConformance(t *testing.T) {
	for _, b := range []ledgertest.Backend{
		{Name: "badger", Open: openBadgerReplicas},
		{Name: "redis", Open: func(t *testing.T, n int) ([]*storage.Store, func(*storage.Store) *storage.Store) {
			srv := redistest.Start(t)
			return openRedisReplicas(t, n, kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "conf:", HoldLease: ledgertest.Lease})
		}},
		{Name: "redis-cluster", Open: func(t *testing.T, n int) ([]*storage.Store, func(*storage.Store) *storage.Store) {
			c := redistest.StartCluster(t, 3, 0)
			return openRedisReplicas(t, n, kernel.RedisOptions{Cluster: c.Addrs()[:1], KeyPrefix: "conf:", HoldLease: ledgertest.Lease})
		}},
	} {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, b)
		})
	}
}

// openBadgerReplicas opens one store n times: only this process writes
// Badger. A replica dies as the store closes and opens again.
func openBadgerReplicas(t *testing.T, n int) ([]*storage.Store, func(*storage.Store) *storage.Store) {
	dir := t.TempDir()
	open := func() *storage.Store {
		s, err := storage.Open(storage.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cur := open()
	t.Cleanup(func() { _ = cur.Close() })
	out := make([]*storage.Store, n)
	for i := range out {
		out[i] = cur
	}
	return out, func(s *storage.Store) *storage.Store {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		cur = open()
		return cur
	}
}

// openRedisReplicas opens n replicas on one Redis. A replica dies as it
// stops renewing its holds' leases; another one lives on.
func openRedisReplicas(t *testing.T, n int, o kernel.RedisOptions) ([]*storage.Store, func(*storage.Store) *storage.Store) {
	out := make([]*storage.Store, n)
	for i := range out {
		s, err := storage.Open(storage.Options{Redis: &o})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out[i] = s
	}
	return out, func(s *storage.Store) *storage.Store {
		storage.StopFollowing(s) // no more lease renewals
		for _, o := range out {
			if o != s {
				return o
			}
		}
		t.Fatal("no other replica")
		return nil
	}
}
