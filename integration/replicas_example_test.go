package integration

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// The documented two-replica example (examples/replicas) runs as
// committed: its script starts Redis, the load balancer and both
// replicas from the example's Caddyfiles, and its --check finds one key
// working at both replicas and through the load balancer, with every
// charge at both.
func TestReplicasExampleRuns(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		// As the redistest fixture: CI installs the Debian package.
		t.Fatalf("redis-server is not installed (apt-get install redis-server): %v", err)
	}
	env := []string{"CADDY=" + caddyBinary, "TMPDIR=" + t.TempDir()}
	for _, name := range []string{"TOLLGATE_HTTP_PORT", "REPLICA_1_PORT", "REPLICA_2_PORT", "ADMIN_1_PORT",
		"ADMIN_2_PORT", "LB_ADMIN_PORT", "TOLLGATE_MOCK_PORT", "REDIS_PORT"} {
		env = append(env, name+"="+strconv.Itoa(freeport.Loopback(t)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../examples/replicas/run.sh", "--check")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh --check: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "check passed") {
		t.Fatalf("run.sh --check did not pass:\n%s", out)
	}
}
