package integration

import (
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

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

// cliText runs `caddy tollgate ...` of the built binary and returns its
// standard output, standard error and exit code.
func cliText(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(caddyBinary, append([]string{"tollgate"}, args...)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Errorf("caddy tollgate %s: %v", strings.Join(args, " "), err) // Errorf: it runs in goroutines too
		return "", "", -1
	}
	return out.String(), errOut.String(), code
}

// The operator's daily commands through the built binary: an account's
// API keys, its usage and activity, a generation, the accounts' balances;
// then each command's bad input: one line on stderr and exit code 1.
func TestOperatorCLIDaily(t *testing.T) {
	p := startProcess(t, t.TempDir())
	addr := "--address=" + p.admin
	acct := cli(t, p, "account", "create", "--name", "Acme", "--type", "organization").Get("data.id").String()
	cli(t, p, "credits", "add", "--account", acct, "--amount", "25")

	created := cli(t, p, "keys", "create", "--account", acct, "--name", "ci", "--limit", "10", "--limit-reset", "monthly")
	key, hash := created.Get("key").String(), created.Get("data.hash").String()
	if !strings.HasPrefix(key, "sk-tg-v1-") || created.Get("data.limit").Float() != 10 || created.Get("data.limit_reset").String() != "monthly" {
		t.Fatalf("keys create: %s", created.Raw)
	}
	table, _, code := cliText(t, "keys", "list", "--account", acct, addr)
	if code != 0 || !strings.Contains(table, "HASH") || !strings.Contains(table, hash) || strings.Contains(table, key) {
		t.Fatalf("keys list (%d):\n%s", code, table)
	}

	c := newClient(t, p.gateway, p.admin)
	chat := c.api("POST", "/chat/completions", key, `{"model":"tollgate-mock","messages":[{"role":"user","content":"Hello"}]}`).expect(t, 200)
	gen := chat.Header.Get("X-Generation-Id")

	if got := cli(t, p, "generation", gen, "--json").Get("data.id").String(); got != gen {
		t.Errorf("generation --json: id %q, want %q", got, gen)
	}
	if out, _, code := cliText(t, "generation", gen, addr); code != 0 || !strings.Contains(out, "tollgate-mock") || !strings.Contains(out, "total_cost") {
		t.Errorf("generation (%d):\n%s", code, out)
	}
	usage := cli(t, p, "usage", "--account", acct, "--key", hash, "--json").Get("data.data")
	if usage.Get("#").Int() != 1 || usage.Get("0.request_count").Int() != 1 || usage.Get("0.model").String() != "tollgate-mock" {
		t.Errorf("usage --json: %s", usage.Raw)
	}
	if out, _, code := cliText(t, "usage", "--account", acct, "--from", "2020-01-01", "--by", "month", addr); code != 0 || !strings.Contains(out, "MONTH") || !strings.Contains(out, "tollgate-mock") {
		t.Errorf("usage (%d):\n%s", code, out)
	}
	if out, _, _ := cliText(t, "usage", "--account", acct, "--key", "0000", addr); strings.Contains(out, "tollgate-mock") {
		t.Errorf("usage of another key shows the call:\n%s", out)
	}
	activity := cli(t, p, "activity", "--account", acct, "--key", hash, "--json").Get("data")
	if activity.Get("#").Int() != 1 || activity.Get("0.requests").Int() != 1 {
		t.Errorf("activity --json: %s", activity.Raw)
	}
	if out, _, code := cliText(t, "activity", "--account", acct, addr); code != 0 || !strings.Contains(out, "PROVIDER") || !strings.Contains(out, "mock") {
		t.Errorf("activity (%d):\n%s", code, out)
	}
	accounts, _, code := cliText(t, "account", "list", addr)
	if code != 0 || !strings.Contains(accounts, "BALANCE") || !strings.Contains(accounts, acct) || !strings.Contains(accounts, "25") {
		t.Errorf("account list (%d):\n%s", code, accounts)
	}

	if got := cli(t, p, "keys", "update", hash, "--account", acct, "--limit", "none", "--name", "ci-2"); got.Get("data.limit").Type != gjson.Null || got.Get("data.name").String() != "ci-2" {
		t.Errorf("keys update: %s", got.Raw)
	}
	// Rate limits: an update changes the limits it names and keeps the
	// others; the key's calls are then counted against them.
	limited := cli(t, p, "keys", "create", "--account", acct, "--name", "limited", "--rate-limits", `{"requests_per_minute":2}`)
	if limited.Get("data.rate_limits.requests_per_minute").Int() != 2 {
		t.Errorf("keys create --rate-limits: %s", limited.Raw)
	}
	lhash := limited.Get("data.hash").String()
	got := cli(t, p, "keys", "update", lhash, "--account", acct, "--rate-limits", `{"concurrent_requests":3}`).Get("data.rate_limits")
	if got.Get("requests_per_minute").Int() != 2 || got.Get("concurrent_requests").Int() != 3 {
		t.Errorf("keys update --rate-limits: %s", got.Raw)
	}
	clearOfMinuteEnd(5 * time.Second)
	for range 2 {
		c.api("POST", "/chat/completions", limited.Get("key").String(), `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`).expect(t, 200)
	}
	r, _ := c.post("/chat/completions", limited.Get("key").String(), `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"Hi"}]}`, nil)
	expectRate429(t, r, "key_requests_per_minute", 2)
	if got := cli(t, p, "keys", "update", lhash, "--account", acct, "--rate-limits", "null"); got.Get("data.rate_limits").Type != gjson.Null {
		t.Errorf("keys update --rate-limits null: %s", got.Raw)
	}
	if !cli(t, p, "keys", "disable", hash, "--account", acct).Get("data.disabled").Bool() {
		t.Error("keys disable")
	}
	c.api("POST", "/chat/completions", key, `{"model":"tollgate-mock","messages":[{"role":"user","content":"Hi"}]}`).expectError(t, 401, "")
	if !cli(t, p, "keys", "delete", hash, "--account", acct).Get("deleted").Bool() {
		t.Error("keys delete")
	}

	var wg sync.WaitGroup
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"keys", "list", "--acount", acct, addr}, "unknown flag: --acount"},
		{[]string{"keys", "list", addr}, `required flag(s) "account" not set`},
		{[]string{"keys", "list", "--account", "org_nope", addr}, "HTTP 404: account org_nope not found"},
		{[]string{"keys", "create", "--account", acct, "--name", "x", "--limit", "ten", addr}, `--limit: expected a number of credits or none, got "ten"`},
		{[]string{"keys", "create", "--account", acct, "--name", "x", "--limit-reset", "hourly", addr}, "HTTP 400: limit_reset: expected daily, weekly, monthly or null"},
		{[]string{"keys", "update", hash, "--account", acct, addr}, "nothing to update"},
		{[]string{"keys", "create", "--account", acct, "--name", "x", "--rate-limits", `{"requests_per_minute":-1}`, addr}, "HTTP 400: rate_limits.requests_per_minute: expected an integer from 1 to 1000000000000, or null"},
		{[]string{"keys", "create", "--account", acct, "--name", "x", "--rate-limits", "rpm=5", addr}, `--rate-limits: expected a JSON object such as {"requests_per_minute":60}, or null, got "rpm=5"`},
		{[]string{"account", "update", acct, "--rate-limits", "{", addr}, `--rate-limits: expected a JSON object`},
		{[]string{"keys", "delete", hash, "--account", acct, addr}, "HTTP 404: API key not found"},
		{[]string{"usage", "--account", "org_nope", addr}, "HTTP 404: account org_nope not found"},
		{[]string{"usage", "--account", acct, "--from", "yesterday", addr}, `--from: expected YYYY-MM-DD or an RFC 3339 time, got "yesterday"`},
		{[]string{"usage", "--account", acct, "--by", "year", addr}, "HTTP 400: granularity: expected one of hour, day, week, month"},
		{[]string{"activity", "--account", acct, "--date", "24/11", addr}, "HTTP 400: date: expected a UTC date as YYYY-MM-DD"},
		{[]string{"generation", "gen-nope", addr}, "HTTP 404: generation gen-nope not found"},
		{[]string{"generation", addr}, "accepts 1 arg(s), received 0"},
		{[]string{"account", "list", "--address", "127.0.0.1:1"}, "cannot reach Caddy's admin API at 127.0.0.1:1"},
		{[]string{"keys", "list", "--account", acct, "--address", "127.0.0.1:1"}, "cannot reach Caddy's admin API at 127.0.0.1:1"},
	} {
		// Each run starts the binary: run them at once.
		wg.Go(func() {
			out, stderr, code := cliText(t, tc.args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if code != 1 || out != "" || len(lines) != 1 || !strings.Contains(lines[0], tc.msg) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", tc.args, code, out, stderr, tc.msg)
			}
		})
	}
	wg.Wait()
}
