package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// Cluster is a real Redis Cluster started by a test: masters, each with
// its replicas, on loopback.
type Cluster struct {
	Nodes []*Server // the masters first, then the replicas
	t     testing.TB
}

// StartCluster runs masters redis-servers in cluster mode, each with
// replicas replicas, creates the cluster with redis-cli --cluster create
// (the slots split evenly between the masters) and waits until every node
// reports it healthy. A node that stops answering is failed over after
// one second (cluster-node-timeout). The servers stop when the test ends.
func StartCluster(t testing.TB, masters, replicas int, extra ...string) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli is not installed (apt-get install redis-tools): %v", err)
	}
	c := &Cluster{t: t}
	for range masters * (1 + replicas) {
		bus := strconv.Itoa(freeport.Loopback(t))
		c.Nodes = append(c.Nodes, Start(t, append([]string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000", "--cluster-port", bus,
			// A lost master's replica takes over without waiting for
			// a vote window tuned for slow networks.
			"--cluster-replica-validity-factor", "0",
		}, extra...)...))
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(20 * time.Second)
	return c
}

// Addrs are every node's host:port, masters first.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// WaitHealthy waits until every running node reports cluster_state:ok
// and agrees that every slot has a master.
func (c *Cluster) WaitHealthy(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := c.healthy()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("redis cluster not healthy within %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) healthy() error {
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue // stopped by the test
		}
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			return err
		}
		s := fmt.Sprint(info)
		if !strings.Contains(s, "cluster_state:ok") || !strings.Contains(s, "cluster_slots_ok:16384") {
			return fmt.Errorf("%s: %s", n.Addr, strings.Fields(s)[0])
		}
	}
	return nil
}

// MasterOf is the running node that serves slot as master.
func (c *Cluster) MasterOf(slot int) *Server {
	c.t.Helper()
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		v, err := n.Do("CLUSTER", "SLOTS")
		if err != nil {
			continue
		}
		ranges, _ := v.([]any)
		for _, r := range ranges {
			rr, _ := r.([]any)
			if len(rr) < 3 {
				continue
			}
			lo, _ := rr[0].(int64)
			hi, _ := rr[1].(int64)
			if int64(slot) < lo || int64(slot) > hi {
				continue
			}
			m, _ := rr[2].([]any)
			if len(m) < 2 {
				continue
			}
			port, _ := m[1].(int64)
			addr := net.JoinHostPort("127.0.0.1", strconv.FormatInt(port, 10))
			for _, o := range c.Nodes {
				if o.Addr == addr && o.cmd != nil {
					return o
				}
			}
		}
	}
	c.t.Fatalf("no running master serves slot %d", slot)
	return nil
}

// Do sends one command to this server alone.
func (s *Server) Do(args ...any) (any, error) {
	rc := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 5 * time.Second})
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rc.Do(ctx, args...).Result()
}

// MoveSlot moves a slot, with its keys, from the master serving it to
// another master (CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT
// NODE): the reshard redis-cli --cluster reshard does, for one slot.
// Clients meanwhile get ASK, then MOVED, redirections.
func (c *Cluster) MoveSlot(slot int, to *Server) {
	c.t.Helper()
	from := c.MasterOf(slot)
	if from == to {
		return
	}
	id := func(s *Server) string {
		v, err := s.Do("CLUSTER", "MYID")
		if err != nil {
			c.t.Fatal(err)
		}
		return fmt.Sprint(v)
	}
	fromID, toID := id(from), id(to)
	must := func(s *Server, args ...any) any {
		v, err := s.Do(args...)
		if err != nil {
			c.t.Fatalf("%s %v: %v", s.Addr, args, err)
		}
		return v
	}
	must(to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	must(from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	host, port, _ := net.SplitHostPort(to.Addr)
	for {
		// Every key in one MIGRATE: a script never finds its keys
		// split between the two nodes (TRYAGAIN).
		v := must(from, "CLUSTER", "GETKEYSINSLOT", slot, 1000000)
		keys, _ := v.([]any)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		args = append(args, keys...)
		must(from, args...)
	}
	// The new owner first, then the old one, then the rest (replicas
	// refuse: they learn it from their master).
	must(to, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	must(from, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	for _, n := range c.Nodes {
		if n.cmd != nil && n != to && n != from {
			_, _ = n.Do("CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
}
