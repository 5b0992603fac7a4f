package integration

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestOpenRouterSDKModels lists the model catalog through the public
// @openrouter/sdk (models.list, models.listForUser), whose zod schemas
// validate every model strictly.
func TestOpenRouterSDKModels(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not on PATH: TestOpenRouterSDKModels needs Node.js (18+) and npm to run the @openrouter/sdk compatibility script")
	}
	ensureSDKModules(t)

	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	// A GET first: the client retries it on a keep-alive connection the
	// previous test's server closed.
	c.api("GET", "/models", "", nil).expect(t, 200)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-models"}`)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "models.mjs")
	cmd.Dir = sdkDir
	cmd.Env = append(os.Environ(),
		"TOLLGATE_BASE_URL=http://"+gatewayAddr+"/api/v1",
		"TOLLGATE_API_KEY="+key,
		"TOLLGATE_MGMT_KEY="+org.MgmtKey,
	)
	if err := runLogged(t, cmd); err != nil {
		t.Fatalf("node models.mjs: %v", err)
	}
}
