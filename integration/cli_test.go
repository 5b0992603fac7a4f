package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// cli runs `caddy tollgate ...` of the built binary against a process's
// admin endpoint and returns its JSON output.
func cli(t *testing.T, p *process, args ...string) gjson.Result {
	t.Helper()
	cmd := exec.Command(caddyBinary, append([]string{"tollgate"}, append(args, "--address", p.admin)...)...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("caddy tollgate %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return gjson.ParseBytes(out)
}

// The README quickstart's operator steps, through the CLI: an account,
// credits, a management key, then the customer's own key and a call.
func TestOperatorCLI(t *testing.T) {
	p := startProcess(t, t.TempDir())
	acct := cli(t, p, "account", "create", "--name", "Acme", "--type", "organization").Get("data.id").String()
	if !strings.HasPrefix(acct, "org_") {
		t.Fatalf("account id %q", acct)
	}
	if got := cli(t, p, "credits", "add", "--account", acct, "--amount", "25.5").Get("account.total_credits").String(); got != "25.5" {
		t.Fatalf("total_credits %s", got)
	}
	mgmt := cli(t, p, "mgmt-key", "create", "--account", acct, "--name", "ops", "--expires-in", "720h")
	key := mgmt.Get("key").String()
	if !strings.HasPrefix(key, "sk-tg-mgmt-v1-") || mgmt.Get("data.expires_at").Type == gjson.Null {
		t.Fatalf("management key: %s", mgmt.Raw)
	}
	listed := cli(t, p, "mgmt-key", "list", "--account", acct)
	if strings.Contains(listed.Raw, key) || len(listed.Get("data").Array()) != 1 {
		t.Fatalf("list shows %s", listed.Raw)
	}

	c := newClient(t, p.gateway, p.admin)
	regular, _ := c.newKey(key, `{"name":"customer-1","limit":10}`)
	c.api("POST", "/chat/completions", regular, `{"model":"tollgate-mock","messages":[{"role":"user","content":"Hello"}]}`).expect(t, 200)
	if c.api("GET", "/credits", key, nil).expect(t, 200).JSON.Get("data.total_usage").Float() <= 0 {
		t.Fatal("the call was not charged")
	}

	// A refused command exits non-zero with the API's message.
	cmd := exec.Command(caddyBinary, "tollgate", "credits", "add", "--account", acct, "--amount", "-1", "--address", p.admin)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "amount") {
		t.Fatalf("negative amount: err %v, output %s", err, out)
	}
	cli(t, p, "mgmt-key", "revoke", mgmt.Get("data.hash").String())
	c.api("GET", "/keys", key, nil).expectError(t, 401, "")
}
