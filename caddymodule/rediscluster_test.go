package caddymodule

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// A cluster the gateway could not use is refused when the config loads,
// naming the field: a node that does not answer, a node whose cluster
// leaves slots without a master.
func TestRedisClusterRefusedAtLoad(t *testing.T) {
	load := func(nodes ...string) error {
		cfg := `{"admin": {"disabled": true}, "apps": {"tollgate": {"storage": {"redis": {"cluster": ["` + strings.Join(nodes, `","`) + `"]}}}}}`
		err := caddy.Load([]byte(cfg), true)
		if err == nil {
			_ = caddy.Stop()
		}
		return err
	}
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.Loopback(t)))
	if err := load(dead); err == nil || !strings.Contains(err.Error(), "storage: redis: cluster: node "+dead+" does not answer") {
		t.Errorf("a cluster node that does not answer: %v", err)
	}

	// A node in cluster mode serving slots 0-99 only.
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", strconv.Itoa(freeport.Loopback(t)))
	if _, err := srv.Do("CLUSTER", "ADDSLOTSRANGE", 0, 99); err != nil {
		t.Fatal(err)
	}
	if err := load(srv.Addr); err == nil || !strings.Contains(err.Error(), "storage: redis: cluster: node "+srv.Addr+": only 100 of the 16384 slots have a master") {
		t.Errorf("a cluster without every slot served: %v", err)
	}
	// One server that is not a cluster node.
	plain := redistest.Start(t)
	if err := load(plain.Addr); err == nil || !strings.Contains(err.Error(), "storage: redis: cluster: node "+plain.Addr+" does not answer as a cluster node") {
		t.Errorf("a server that is not in cluster mode: %v", err)
	}
}
