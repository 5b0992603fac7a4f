package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// Two Caddy processes on a real 3-master Redis Cluster: a key created at
// one authenticates at the other, and the key caps of accounts whose
// slots are on three different shards are exact under concurrent
// requests through both.
func TestReplicasOnClusterCapsExactAcrossShards(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	ps := []*process{startClusterReplica(t, c), startClusterReplica(t, c)}
	cs := replicaClients(t, ps)
	// One organization per master.
	byMaster := map[*redistest.Server]tenant{}
	for range 60 {
		org := cs[0].newTenant("organization", "1000")
		m := c.MasterOf(kernel.ClusterAccountSlot(org.AccountID))
		if _, ok := byMaster[m]; !ok {
			byMaster[m] = org
		}
		if len(byMaster) == 3 {
			break
		}
	}
	if len(byMaster) != 3 {
		t.Fatalf("organizations on %d masters, want 3", len(byMaster))
	}
	const n, fit = 60, 5
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"one of many concurrent requests"}]}`
	hold := holdOf(body, 20)
	limit := hold*fit + hold/2
	for _, org := range byMaster {
		key, _ := cs[0].newKey(org.MgmtKey, fmt.Sprintf(`{"name":"crowded","limit":%s}`, limit))
		within(t, time.Second, "the key reaches the other replica", func() bool {
			r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
			return r.Status == 200
		})
		results, errs, _ := postAtOnceVia(t, cs, n, func(int) string { return key }, body)
		ok, limited, charged := tallyCharges(t, results, errs, "service_key_limit")
		t.Logf("account %s: %d passed, %d refused", org.AccountID, ok, limited)
		if ok > fit || ok == 0 {
			t.Fatalf("%d requests passed over two replicas; the cap holds %d", ok, fit)
		}
		for i, c := range cs {
			var s usageSnapshot
			within(t, 2*time.Second, fmt.Sprintf("replica %d reads every charge", i), func() bool {
				s = c.snapshot(key, org.MgmtKey)
				return s.usage == charged
			})
			if s.totalUsage != charged || s.usage > limit {
				t.Fatalf("replica %d: key usage %s, account usage %s, answers %s, cap %s", i, s.usage, s.totalUsage, charged, limit)
			}
		}
	}
}

// kill -9 of the master serving an account's slot (no replica to take
// over): both Caddy processes answer that account's inference with 503 in
// the public API's error shape, before serving anything; once the master is back
// (appendfsync always) they serve again and every acknowledged charge is
// there.
func TestReplicasOnClusterShardDownThenBack(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	ps := []*process{startClusterReplica(t, c), startClusterReplica(t, c)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "100")
	key, _ := cs[0].newKey(org.MgmtKey, `{"name":"k"}`)
	within(t, time.Second, "the key reaches replica 1", func() bool {
		r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})
	body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"charged before the shard went away"}]}`
	var acked money.Amount
	for i := range 6 {
		r := cs[i%2].api("POST", "/chat/completions", key, body).expect(t, 200)
		acked += creditAmount(t, r.JSON.Get("usage.cost"))
	}

	victim := c.MasterOf(kernel.ClusterAccountSlot(org.AccountID))
	victim.Kill()
	for i, c := range cs {
		within(t, 5*time.Second, fmt.Sprintf("replica %d refuses the account's inference while its shard is down", i), func() bool {
			r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
			return err == nil && r.Status == 503
		})
		r := c.api("POST", "/chat/completions", key, body)
		if r.Status != 503 || r.JSON.Get("error.code").Int() != 503 || r.JSON.Get("error.message").Str == "" {
			t.Fatalf("replica %d with the shard down: %d %s", i, r.Status, r.Body)
		}
	}

	victim.Restart()
	c.WaitHealthy(20 * time.Second)
	for i, c := range cs {
		within(t, 10*time.Second, fmt.Sprintf("replica %d serves again", i), func() bool {
			r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
			if err == nil && r.Status == 200 {
				acked += creditAmount(t, r.JSON.Get("usage.cost"))
				return true
			}
			return false
		})
	}
	for i, c := range cs {
		within(t, 2*time.Second, fmt.Sprintf("replica %d reads every acknowledged charge", i), func() bool {
			return c.snapshot(key, org.MgmtKey).usage == acked
		})
	}
}

// TestReplicaKilledUnderLoadLosesNoCharge on a 3-master cluster: the dead
// replica's holds are released from its account's bucket's lease set.
func TestReplicaOnClusterKilledUnderLoadLosesNoCharge(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer rc.Close()
	replicaKilledUnderLoad(t, func() *process { return startClusterReplica(t, c) }, rc, func(accountID string) (leases, money string) {
		return kernel.ClusterAccountKey("replicas:", accountID, "~leases"), kernel.ClusterAccountKey("replicas:", accountID, "~m/"+accountID)
	})
}
