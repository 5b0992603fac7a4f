package integration

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// sdkDir holds the Node project that runs the public @openrouter/sdk.
const sdkDir = "sdk"

// TestOpenRouterSDK drives the key-management API through the public
// @openrouter/sdk, whose zod schemas validate every response strictly.
func TestOpenRouterSDK(t *testing.T) {
	node := requireNode(t)

	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")

	runSDKScript(t, node, "keys.mjs", "TOLLGATE_MGMT_KEY="+org.MgmtKey)
}

// requireNode returns the node binary, with the SDK modules installed; a
// test that runs an SDK script fails (it is not skipped) without Node.js.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: " + t.Name() + " needs Node.js (18+; 20+ for the Responses scripts) and npm to run the SDK compatibility script")
	}
	ensureSDKModules(t)
	return node
}

// runSDKScript runs a script of integration/sdk against the in-process
// gateway (TOLLGATE_BASE_URL) with env (NAME=value) added, logging its
// output, and fails the test when the script fails or takes more than 3
// minutes.
func runSDKScript(t *testing.T, node, script string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = sdkDir
	cmd.Env = append(append(os.Environ(), "TOLLGATE_BASE_URL=http://"+gatewayAddr+"/api/v1"), env...)
	if err := runLogged(t, cmd); err != nil {
		t.Fatalf("node %s: %v", script, err)
	}
}

// ensureSDKModules installs the locked SDKs when node_modules lacks one.
func ensureSDKModules(t *testing.T) {
	t.Helper()
	installed := true
	for _, pkg := range []string{"@openrouter/sdk", "openai", "@anthropic-ai/sdk", "@anthropic-ai/claude-code"} {
		if _, err := os.Stat(filepath.Join(sdkDir, "node_modules", filepath.FromSlash(pkg))); err != nil {
			installed = false
		}
	}
	if installed {
		return
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is not on PATH: needed to install integration/sdk/node_modules (npm ci)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = sdkDir
	if err := runLogged(t, cmd); err != nil {
		t.Fatalf("npm ci in integration/sdk: %v", err)
	}
}

// runLogged runs cmd, passing each line of its stdout and stderr to t.Log
// as it comes.
func runLogged(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	name := filepath.Base(cmd.Path)
	var wg sync.WaitGroup
	var mu sync.Mutex
	pipe := func(r io.Reader) {
		defer wg.Done()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			mu.Lock()
			t.Log(name + ": " + strings.TrimRight(sc.Text(), "\r"))
			mu.Unlock()
		}
	}
	wg.Add(2)
	go pipe(stdout)
	go pipe(stderr)
	wg.Wait() // all output read before Wait closes the pipes
	return cmd.Wait()
}
