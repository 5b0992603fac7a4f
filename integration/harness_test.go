// Package integration runs the gateway in a real Caddy: in-process through
// caddytest (one Caddy per test binary, so every caddytest test lives in this
// package), or the built binary as a subprocess where a test must kill or
// restart it. Everything listens on loopback only.
package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/tidwall/gjson"

	_ "github.com/tollgate-dev/caddy-tollgate"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
	// The tests' Caddyfiles call the demo provider.
	_ "github.com/tollgate-dev/caddy-tollgate/standin"
)

// Ports of the in-process Caddy: the gateway on 9480, the mock provider on
// 9481 and caddytest's admin on 2999 by default. TOLLGATE_TEST_PORT_BASE
// moves all three (gateway at the base, mock at base+1, admin at base+2) so
// that two checkouts can run their tests on one machine at the same time.
var (
	gatewayAddr = "127.0.0.1:9480"
	mockAddr    = "127.0.0.1:9481"
	adminAddr   = "localhost:2999"
	adminPort   = 2999
)

func init() {
	v := os.Getenv("TOLLGATE_TEST_PORT_BASE")
	if v == "" {
		return
	}
	base, err := strconv.Atoi(v)
	if err != nil || base < 1024 || base > 65000 {
		panic("TOLLGATE_TEST_PORT_BASE: want a port number between 1024 and 65000, got " + v)
	}
	gatewayAddr = fmt.Sprintf("127.0.0.1:%d", base)
	mockAddr = fmt.Sprintf("127.0.0.1:%d", base+1)
	adminPort = base + 2
	adminAddr = fmt.Sprintf("localhost:%d", adminPort)
}

// newTester is caddytest.NewTester on this package's admin port.
func newTester(t *testing.T) *caddytest.Tester {
	return caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: adminPort})
}

// caddyBinary is the gateway built from cmd/caddy, for subprocess tests.
var caddyBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tollgate-bin")
	if err != nil {
		panic(err)
	}
	caddyBinary = filepath.Join(dir, "caddy")
	build := exec.Command("go", "build", "-o", caddyBinary, "../cmd/caddy")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cmd/caddy:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// gatewayCaddyfile is the test gateway: the example's shape on test ports.
// Its catalog serves tollgate-mock (paid), tollgate-mock:free and
// mock/echo (paid, the same prices) from the mock provider. The gateway
// tries a model's providers in catalog order (load_balancing ordered), as
// the tests of fallbacks expect; load balancing by price is tested where
// prices decide it.
func gatewayCaddyfile(admin, dataDir, gateway, mock, mockLatency string) string {
	return fmt.Sprintf(`{
	admin %s
	skip_install_trust
	tollgate {
		data_dir %s
		brand service
		byok_encryption_key dG9sbGdhdGUtaW50ZWdyYXRpb24tdGVzdC1rZXktMzI=
		# Private endpoints and destinations of the tests are on loopback.
		customer_egress {
			allow 127.0.0.1/32
		}
		model tollgate-mock {
			context_length 8192
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider mock http://%[4]s/v1 {
				api_key mock
			}
		}
		model tollgate-mock:free {
			pricing {
				prompt 0
				completion 0
			}
			provider mock http://%[4]s/v1 {
				model tollgate-mock
				api_key mock
			}
		}
		model mock/echo {
			pricing {
				prompt 0.000001
				completion 0.000002
			}
			provider mock http://%[4]s/v1 {
				api_key mock
			}
		}
	}
}

http://%[3]s {
	bind 127.0.0.1
	tollgate {
		# the gateway's options
		load_balancing ordered
	}
}

http://%[5]s {
	bind 127.0.0.1
	tollgate_mock_provider {
		latency %[6]s
		# As strict as OpenAI: unknown parameters refused, usage only
		# when asked, its own ids and dated model names.
		strict
	}
}
`, admin, dataDir, portOnly(gateway), mock, portOnly(mock), mockLatency)
}

// portOnly turns 127.0.0.1:9480 into :9480, so that the site matches any
// Host (reverse_proxy passes the client's Host through).
func portOnly(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return ":" + port
}

// startInProcess loads a fresh gateway config with its own data directory
// into the test binary's Caddy and returns the data directory.
func startInProcess(t *testing.T) string {
	t.Helper()
	return startInProcessWith(t, func(cfg string) string { return cfg })
}

// client talks to a gateway and its admin endpoint.
type client struct {
	t       *testing.T
	gateway string // http://host:port
	admin   string // http://host:port
	http    *http.Client
}

func newClient(t *testing.T, gateway, admin string) *client {
	// A transport of its own: idle connections of an earlier test's server
	// would fail the first POST after a config reload.
	return &client{t: t, gateway: "http://" + gateway, admin: "http://" + admin,
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// response is a decoded answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   gjson.Result
	// At is when the answer came, counted from a burst's release
	// (postAtOnce); zero otherwise.
	At time.Duration
}

func (c *client) do(method, url, key string, body any) response {
	c.t.Helper()
	r, err := c.try(method, url, key, body)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// try is do without failing the test, for use off the test goroutine.
func (c *client) try(method, url, key string, body any) (response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		return response{}, fmt.Errorf("unsupported body type %T", body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return response{}, err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading body: %w", method, url, err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b, JSON: gjson.ParseBytes(b)}, nil
}

// api calls a gateway route under /api/v1.
func (c *client) api(method, path, key string, body any) response {
	c.t.Helper()
	return c.do(method, c.gateway+"/api/v1"+path, key, body)
}

// operator calls the operator API on Caddy's admin endpoint.
func (c *client) operator(method, path string, body any) response {
	c.t.Helper()
	return c.do(method, c.admin+"/tollgate"+path, "", body)
}

// expect fails the test unless the response has the status.
func (r response) expect(t *testing.T, status int) response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body: %s", r.Status, status, r.Body)
	}
	return r
}

// expectError checks the public API's error shape, status and message.
func (r response) expectError(t *testing.T, status int, message string) response {
	t.Helper()
	r.expect(t, status)
	if got := r.JSON.Get("error.code").Int(); got != int64(status) {
		t.Fatalf("error.code %d, want %d; body: %s", got, status, r.Body)
	}
	if message != "" && !strings.Contains(r.JSON.Get("error.message").String(), message) {
		t.Fatalf("error.message %q does not contain %q", r.JSON.Get("error.message").String(), message)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q", ct)
	}
	return r
}

// tenant is an account with credits and a management key.
type tenant struct {
	AccountID string
	MgmtKey   string
	// Account is the account record as the operator API created it.
	Account gjson.Result
}

// newTenant creates a prepaid account of the kind (user or organization)
// through the operator API, with credits bought when not "".
func (c *client) newTenant(kind string, credits string) tenant {
	c.t.Helper()
	return c.newAccount(fmt.Sprintf(`{"name":"test %s","type":%q}`, kind, kind), credits)
}

// newInvoicedTenant creates an invoiced organization (billed after use,
// no credits bought).
func (c *client) newInvoicedTenant() tenant {
	c.t.Helper()
	return c.newAccount(`{"name":"invoiced","type":"organization","billing":"invoiced"}`, "")
}

// newAccount creates the account body describes through the operator API,
// buys credits when not "" and gives it a management key.
func (c *client) newAccount(body, credits string) tenant {
	c.t.Helper()
	acct := c.operator("POST", "/accounts", body).expect(c.t, 201)
	id := acct.JSON.Get("data.id").String()
	if credits != "" {
		c.operator("POST", "/accounts/"+id+"/credits", fmt.Sprintf(`{"amount":%q}`, credits)).expect(c.t, 201)
	}
	mk := c.operator("POST", "/accounts/"+id+"/management-keys", `{"name":"ops"}`).expect(c.t, 201)
	return tenant{AccountID: id, MgmtKey: mk.JSON.Get("key").String(), Account: acct.JSON.Get("data")}
}

// newKey creates a regular key and returns its string and hash.
func (c *client) newKey(mgmt, body string) (key, hash string) {
	c.t.Helper()
	r := c.api("POST", "/keys", mgmt, body).expect(c.t, 201)
	return r.JSON.Get("key").String(), r.JSON.Get("data.hash").String()
}

// process is the gateway binary running as a subprocess.
type process struct {
	cmd                  *exec.Cmd
	gateway, admin, mock string
	dataDir, config      string
	log                  *lockedBuffer
}

// lockedBuffer is the process's output: written by exec's copying
// goroutine while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startProcess runs the built gateway on fresh loopback ports over dataDir
// and waits until it serves.
func startProcess(t *testing.T, dataDir string) *process {
	t.Helper()
	p := &process{gateway: freeport.Addr(t), admin: freeport.Addr(t), mock: freeport.Addr(t), dataDir: dataDir, log: new(lockedBuffer)}
	p.config = filepath.Join(t.TempDir(), "Caddyfile")
	cfg := gatewayCaddyfile(p.admin, dataDir, p.gateway, p.mock, "1ms")
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t)
	return p
}

func (p *process) start(t *testing.T) {
	t.Helper()
	p.cmd = exec.Command(caddyBinary, "run", "--config", p.config, "--adapter", "caddyfile")
	p.cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + p.gateway + "/api/v1/key")
		if err == nil {
			res.Body.Close()
			// Caddy starts its apps in map order: the gateway may serve
			// before the tollgate app (and its operator API) is up.
			if res.StatusCode == http.StatusUnauthorized && operatorUp(p.admin) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gateway did not start; log:\n%s", p.log)
}

// operatorUp reports whether the operator API on admin answers.
func operatorUp(admin string) bool {
	res, err := http.Get("http://" + admin + "/tollgate/accounts")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// stop ends the process as an operator does (SIGTERM): Caddy cleans up.
func (p *process) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("the gateway did not exit cleanly: %v; log:\n%s", err, p.log)
	}
}

// kill stops the process at once, as a crash would (SIGKILL).
func (p *process) kill() {
	if p.cmd != nil && p.cmd.Process != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// doWithType sends a raw body with the given Content-Type.
func (c *client) doWithType(method, url, contentType, body string) response {
	c.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, Header: res.Header, Body: b, JSON: gjson.ParseBytes(b)}
}

// postAtOnce sends n chat completions with body, request i with the key
// keyOf(i), from a client of its own with a connection per request, all
// released at the same instant and each held 1.5 s by the mock (so none
// finishes before all are admitted). It returns each response or error and
// how long the burst took from the release.
func postAtOnce(t *testing.T, c *client, n int, keyOf func(i int) string, body string) ([]response, []error, time.Duration) {
	t.Helper()
	return postAtOnceVia(t, []*client{c}, n, keyOf, body)
}

// postAtOnceVia is postAtOnce spread over several gateways: request i goes
// to cs[i%len(cs)].
func postAtOnceVia(t *testing.T, cs []*client, n int, keyOf func(i int) string, body string) ([]response, []error, time.Duration) {
	t.Helper()
	hcs := make([]*client, len(cs))
	for i, c := range cs {
		hcs[i] = &client{t: t, gateway: c.gateway, admin: c.admin,
			http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}}
	}
	slow := map[string]string{"X-Mock-Latency": burstLatency.String()}
	results := make([]response, n)
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	var start time.Time // set before release is closed
	release := make(chan struct{})
	for i := range n {
		key, hc := keyOf(i), hcs[i%len(hcs)]
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-release
			results[i], errs[i] = hc.post("/chat/completions", key, body, slow)
			results[i].At = time.Since(start)
		})
	}
	ready.Wait()
	start = time.Now()
	close(release)
	done.Wait()
	return results, errs, time.Since(start)
}

// burstLatency is how long the mock holds each request of a burst.
const burstLatency = 1500 * time.Millisecond

// checkFit fails unless exactly fit requests of a burst passed. That
// holds while every admission is decided before any passed request ends
// (each ends burstLatency after its admission at the earliest): an ended
// request gives back the part of its hold it did not spend, room another
// request may take. When the machine was so slow that the last refusal
// came after burstLatency, more may pass; the money checks that follow
// (nothing spent beyond the limit) still hold them.
func checkFit(t *testing.T, results []response, ok, fit int) {
	t.Helper()
	var lastRefusal time.Duration
	for _, r := range results {
		if r.Status != 200 {
			lastRefusal = max(lastRefusal, r.At)
		}
	}
	switch {
	case ok < fit:
		t.Fatalf("%d requests passed, want %d", ok, fit)
	case ok > fit && lastRefusal < burstLatency:
		t.Fatalf("%d requests passed, want exactly %d (the last refusal came %v after the release)", ok, fit, lastRefusal)
	case ok > fit:
		t.Logf("%d requests passed for %d that fit: the last refusal came %v after the release, when passed requests may have ended", ok, fit, lastRefusal)
	}
}

// tallyCharges counts a burst's answers: the 200s and what they charged,
// and the 402s, each of which must name limit source; an error or any
// other status fails the test.
func tallyCharges(t *testing.T, results []response, errs []error, source string) (ok, refused int, charged money.Amount) {
	t.Helper()
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch r.Status {
		case 200:
			ok++
			charged += creditAmount(t, r.JSON.Get("usage.cost"))
		case 402:
			refused++
			expect402(t, r, source, "", false)
		default:
			t.Fatalf("request %d: status %d: %s", i, r.Status, r.Body)
		}
	}
	return ok, refused, charged
}

// startTap starts a reverse proxy in front of the upstream at target
// (host:port) that passes each POST's path and body to onPost before
// forwarding it; modify, when not nil, edits the upstream's responses.
// Streams pass through unbuffered.
func startTap(t *testing.T, target string, onPost func(path string, body []byte), modify func(*http.Response) error) *httptest.Server {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = modify
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			onPost(r.URL.Path, b)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}
