package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// Several replicas of the gateway (the built binary) on one redis-server
// (storage redis): one set of keys, counters and caps.

// startReplica runs the gateway binary on fresh ports with storage redis
// on srv under the test's key prefix.
func startReplica(t *testing.T, srv *redistest.Server, directive ...string) *process {
	t.Helper()
	return startReplicaOn(t, "address "+srv.Addr, directive...)
}

// startClusterReplica starts a replica on a Redis Cluster.
func startClusterReplica(t *testing.T, c *redistest.Cluster, directive ...string) *process {
	t.Helper()
	return startReplicaOn(t, "cluster "+strings.Join(c.Addrs()[:2], " "), directive...)
}

// startReplicaOn starts a replica whose storage redis block has server
// (its address or cluster line).
func startReplicaOn(t *testing.T, server string, directive ...string) *process {
	t.Helper()
	return startReplicaEdited(t, server, nil, directive...)
}

// startReplicaEdited is startReplicaOn with the config changed by edit
// (nil: none) before the directive lines are added.
func startReplicaEdited(t *testing.T, server string, edit func(cfg, mock string) string, directive ...string) *process {
	t.Helper()
	p := &process{gateway: freeport.Addr(t), admin: freeport.Addr(t), mock: freeport.Addr(t), log: new(lockedBuffer)}
	p.config = filepath.Join(t.TempDir(), "Caddyfile")
	dir := t.TempDir()
	cfg := gatewayCaddyfile(p.admin, dir, p.gateway, p.mock, "1ms")
	cfg = strings.Replace(cfg, "data_dir "+dir, fmt.Sprintf(`storage redis {
			%s
			password {env.TOLLGATE_TEST_REDIS_PASSWORD}
			key_prefix replicas:
			hold_lease 2s
		}`, server), 1)
	if edit != nil {
		cfg = edit(cfg, p.mock)
	}
	if len(directive) > 0 {
		cfg = withTollgateOptions(t, directive...)(cfg)
	}
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t)
	return p
}

// replicaClients are one client per replica.
func replicaClients(t *testing.T, ps []*process) []*client {
	cs := make([]*client, len(ps))
	for i, p := range ps {
		cs[i] = newClient(t, p.gateway, p.admin)
	}
	return cs
}

// feedBound is how long a test waits for a change made at one replica to
// reach another. The tests check that it arrives, not how fast: the change
// feed's delay (a few milliseconds) is measured by the storage's
// BenchmarkFeedPropagation, and a loaded machine can stretch it past any
// tight bound.
const feedBound = 5 * time.Second

// within polls cond every millisecond until it holds, failing the test
// after bound; it returns how long it took.
func within(t *testing.T, bound time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > bound {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

func TestReplicasShareKeyChanges(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv), startReplica(t, srv)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "100")
	key, hash := cs[0].newKey(org.MgmtKey, `{"name":"shared"}`)
	status := func(c *client) int {
		r, err := c.try("GET", c.gateway+"/api/v1/key", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	for i, c := range cs[1:] {
		d := within(t, feedBound, fmt.Sprintf("a key created at replica 0 authenticates at replica %d", i+1),
			func() bool { return status(c) == 200 })
		t.Logf("replica %d: key usable after %v", i+1, d)
	}
	// An inference request at replica 2 on the key made at replica 0.
	body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"hello from another replica"}]}`
	cs[2].api("POST", "/chat/completions", key, body).expect(t, 200)

	cs[0].api("PATCH", "/keys/"+hash, org.MgmtKey, `{"disabled":true}`).expect(t, 200)
	for i, c := range cs[1:] {
		d := within(t, feedBound, fmt.Sprintf("a key disabled at replica 0 is refused at replica %d", i+1),
			func() bool { return status(c) == 401 })
		t.Logf("replica %d: key refused after %v", i+1, d)
	}
	cs[1].api("POST", "/chat/completions", key, body).expectError(t, 401, "disabled")

	cs[0].api("DELETE", "/keys/"+hash, org.MgmtKey, nil).expect(t, 200)
	within(t, feedBound, "a key deleted at replica 0 is unknown at replica 2", func() bool {
		r, _ := cs[2].try("GET", cs[2].gateway+"/api/v1/keys/"+hash, org.MgmtKey, nil)
		return r.Status == 404
	})
}

// 300 requests released at once, spread over three replicas, against a
// key whose cap fits 10 of them: at most 10 pass and the key never spends
// past its cap, as in one process (TestConcurrencyKeyLimit).
func TestReplicasKeyCapIsExact(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv), startReplica(t, srv)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "1000")
	const n, fit = 300, 10
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"one of many concurrent requests"}]}`
	hold := holdOf(body, 20)
	limit := hold*fit + hold/2
	key, _ := cs[0].newKey(org.MgmtKey, fmt.Sprintf(`{"name":"crowded","limit":%s}`, limit))
	for _, c := range cs[1:] {
		within(t, time.Second, "the key reaches every replica", func() bool {
			r, _ := c.try("GET", c.gateway+"/api/v1/key", key, nil)
			return r.Status == 200
		})
	}

	results, errs, _ := postAtOnceVia(t, cs, n, func(int) string { return key }, body)
	ok, limited, charged := tallyCharges(t, results, errs, "service_key_limit")
	t.Logf("%d passed, %d refused", ok, limited)
	if ok > fit || ok == 0 {
		t.Fatalf("%d requests passed over three replicas; the cap holds %d", ok, fit)
	}
	for i, c := range cs {
		var s usageSnapshot
		within(t, time.Second, fmt.Sprintf("replica %d reads every charge", i), func() bool {
			s = c.snapshot(key, org.MgmtKey)
			return s.usage == charged
		})
		if s.totalUsage != charged || s.usage > limit {
			t.Fatalf("replica %d: key usage %s, account usage %s, answers %s, cap %s", i, s.usage, s.totalUsage, charged, limit)
		}
	}
}

// kill -9 of one replica under load: every charge whose answer a client
// received is recorded, none twice, and the dead replica's holds are
// released when their lease (2s here) lapses.
func TestReplicaKilledUnderLoadLosesNoCharge(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	replicaKilledUnderLoad(t, func() *process { return startReplica(t, srv) }, rc, func(accountID string) (leases, money string) {
		return "replicas:{tg}~leases", "replicas:{tg}~m/" + accountID
	})
}

// replicaKilledUnderLoad is TestReplicaKilledUnderLoadLosesNoCharge on
// replicas start starts, rc reading the keys keys names (the account's
// lease set and money hash).
func replicaKilledUnderLoad(t *testing.T, start func() *process, rc redis.UniversalClient, keys func(accountID string) (leases, money string)) {
	ps := []*process{start(), start()}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "1000")
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"a request under load before the crash"}]}`
	hold := holdOf(body, 20)
	limit := hold * 1000
	key, keyHash := cs[0].newKey(org.MgmtKey, fmt.Sprintf(`{"name":"loaded","limit":%s}`, limit))
	within(t, time.Second, "the key reaches replica 1", func() bool {
		r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})

	var mu sync.Mutex
	var received money.Amount
	var complete, cut int
	stopLoad := loadReplicas(cs, 8, func(wc *client) bool {
		r, err := wc.post("/chat/completions", key, body, map[string]string{"X-Mock-Latency": "20ms"})
		mu.Lock()
		if err == nil && r.Status == 200 {
			received += creditAmount(t, r.JSON.Get("usage.cost"))
			complete++
		} else {
			cut++
		}
		mu.Unlock()
		return err == nil // else the replica is gone
	})
	time.Sleep(1500 * time.Millisecond)
	ps[0].kill()
	time.Sleep(300 * time.Millisecond)
	stopLoad()
	if complete < 20 {
		t.Fatalf("only %d complete answers", complete)
	}
	// Once the lease lapses, nothing is held: no lease is left and the
	// key's holds are back to zero.
	leases, moneyHash := keys(org.AccountID)
	within(t, 5*time.Second, "the killed replica's holds are released", func() bool {
		n, err := rc.ZCard(t.Context(), leases).Result()
		if err != nil {
			t.Fatal(err)
		}
		f, _ := rc.HGet(t.Context(), moneyHash, "k:"+keyHash).Result()
		return n == 0 && gjson.Get(f, "h").Int() == 0
	})
	s := cs[1].snapshot(key, org.MgmtKey)
	defer cs[1].api("POST", "/chat/completions", key, body).expect(t, 200)
	t.Logf("%d complete answers (%s), %d cut; recorded %s", complete, received, cut, s.usage)
	if s.usage < received {
		t.Fatalf("charges lost in the crash: recorded %s, clients received answers costing %s", s.usage, received)
	}
	if upper := received + money.Amount(cut)*hold; s.usage > upper {
		t.Fatalf("charges doubled: recorded %s, more than %s", s.usage, upper)
	}
	if s.totalUsage != s.usage {
		t.Fatalf("account usage %s, key usage %s", s.totalUsage, s.usage)
	}
}

// A Redis restart (appendfsync always) loses no acknowledged charge; while
// Redis is down inference and administrative writes answer 503 in the
// public API's error shape, and once it is back the replicas serve again without a
// restart.
func TestReplicasRedisDownThenBack(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "100")
	key, _ := cs[0].newKey(org.MgmtKey, `{"name":"k"}`)
	within(t, time.Second, "the key reaches replica 1", func() bool {
		r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})
	body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"charged before the restart"}]}`
	var acked money.Amount
	for i := range 6 {
		r := cs[i%2].api("POST", "/chat/completions", key, body).expect(t, 200)
		acked += creditAmount(t, r.JSON.Get("usage.cost"))
	}

	srv.Kill() // no shutdown save: only what appendfsync always wrote
	for i, c := range cs {
		within(t, 2*time.Second, fmt.Sprintf("replica %d refuses inference while redis is down", i), func() bool {
			r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
			return err == nil && r.Status == 503
		})
		c.api("POST", "/chat/completions", key, body).expectError(t, 503, "database is unavailable")
		c.api("POST", "/keys", org.MgmtKey, `{"name":"not now"}`).expectError(t, 503, "database is unavailable")
		c.operator("POST", "/accounts", `{"name":"not now","type":"organization"}`).expectError(t, 503, "database is unavailable")
	}

	srv.Restart()
	for i, c := range cs {
		within(t, 5*time.Second, fmt.Sprintf("replica %d serves again", i), func() bool {
			r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
			if err == nil && r.Status == 200 {
				acked += creditAmount(t, r.JSON.Get("usage.cost"))
				return true
			}
			return false
		})
	}
	for i, c := range cs {
		within(t, time.Second, fmt.Sprintf("replica %d reads every acknowledged charge", i), func() bool {
			return c.snapshot(key, org.MgmtKey).usage == acked
		})
	}
	// Nothing was created by the refused writes.
	list := cs[0].api("GET", "/keys", org.MgmtKey, nil).expect(t, 200)
	if n := len(list.JSON.Get("data").Array()); n != 1 {
		t.Fatalf("%d keys after a refused creation, want 1", n)
	}
	accounts := cs[1].operator("GET", "/accounts", nil).expect(t, 200)
	if n := len(accounts.JSON.Get("data").Array()); n != 1 {
		t.Fatalf("%d accounts after a refused creation, want 1", n)
	}
}

// `caddy tollgate migrate` copies a gateway's Badger database into Redis:
// replicas on it then know the same keys, with the same usage, and go on
// charging from there; a second migration into the now non-empty Redis is
// refused unless --force.
func TestMigrateBadgerToRedis(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "100")
	limit := money.Amount(5 * money.AmountScale)
	key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"migrated","limit":%s}`, limit))
	body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"charged in badger"}]}`
	// One generation checkpointed into Badger at a clean stop, one only
	// in the journal when the process is killed: the migration copies both.
	genIDs := []string{c.api("POST", "/chat/completions", key, body).expect(t, 200).Header.Get("X-Generation-Id")}
	p.stop(t)
	p.start(t)
	genIDs = append(genIDs, c.api("POST", "/chat/completions", key, body).expect(t, 200).Header.Get("X-Generation-Id"))
	before := c.snapshot(key, org.MgmtKey)
	p.kill() // Badger's directory lock goes with the process

	srv := redistest.Start(t)
	migrate := func(extra ...string) (string, error) {
		args := append([]string{"tollgate", "migrate", "--from", dir, "--to", "redis://" + srv.Addr + "/0", "--key-prefix", "replicas:"}, extra...)
		out, err := exec.Command(caddyBinary, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := migrate(); err != nil || !strings.Contains(out, "copied") {
		t.Fatalf("migrate: %v: %s", err, out)
	}
	r := startReplica(t, srv)
	rc := newClient(t, r.gateway, r.admin)
	after := rc.snapshot(key, org.MgmtKey)
	if after.usage != before.usage || after.totalUsage != before.totalUsage || after.totalCredits != before.totalCredits || *after.limit != limit {
		t.Fatalf("after migration: %+v, before: %+v", after, before)
	}
	for _, id := range genIDs {
		if g := rc.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON; g.Get("data.id").Str != id {
			t.Fatalf("generation %s after the migration: %s", id, g.Raw)
		}
	}
	cost := creditAmount(t, rc.api("POST", "/chat/completions", key, body).expect(t, 200).JSON.Get("usage.cost"))
	expectCharged(t, after, rc.snapshot(key, org.MgmtKey), cost, "charged on redis after the migration")

	if out, err := migrate(); err == nil || !strings.Contains(out, "--force") {
		t.Fatalf("a second migration into a non-empty redis was not refused: %v: %s", err, out)
	}
	r.kill()
	if out, err := migrate("--force"); err != nil {
		t.Fatalf("migrate --force: %v: %s", err, out)
	}
	r = startReplica(t, srv)
	if got := newClient(t, r.gateway, r.admin).snapshot(key, org.MgmtKey); got.usage != before.usage {
		t.Fatalf("after migrate --force: usage %s, want the Badger figure %s", got.usage, before.usage)
	}
}

// The in-process gateway (under -race when the tests run with it) as one
// replica, the built binary as the other: requests at both while the other
// creates and disables keys of the same account; both read every charge,
// and a config reload of the in-process replica keeps its shared store.
func TestReplicaInProcessWithAnother(t *testing.T) {
	srv := redistest.Start(t)
	toRedis := func(cfg string) string {
		return regexp.MustCompile(`data_dir \S+`).ReplaceAllString(cfg, fmt.Sprintf("storage redis {\n\t\t\taddress %s\n\t\t\tkey_prefix replicas:\n\t\t}", srv.Addr))
	}
	startInProcessWith(t, toRedis)
	local := newClient(t, gatewayAddr, adminAddr)
	other := startReplica(t, srv)
	remote := newClient(t, other.gateway, other.admin)

	org := remote.newTenant("organization", "100")
	key, _ := remote.newKey(org.MgmtKey, `{"name":"shared"}`)
	within(t, time.Second, "the key reaches the in-process replica", func() bool {
		r, _ := local.try("GET", local.gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})
	body := `{"model":"tollgate-mock","messages":[{"role":"user","content":"both replicas at once"}]}`
	var wg sync.WaitGroup
	var mu sync.Mutex
	var charged money.Amount
	for w := range 4 {
		c := []*client{local, remote}[w%2]
		wg.Go(func() {
			for range 15 {
				r, err := c.post("/chat/completions", key, body, nil)
				if err != nil || r.Status != 200 {
					t.Errorf("inference: %v %d %s", err, r.Status, r.Body)
					return
				}
				mu.Lock()
				charged += creditAmount(t, r.JSON.Get("usage.cost"))
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		for i := range 10 {
			_, hash := remote.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"churn %d"}`, i))
			remote.api("PATCH", "/keys/"+hash, org.MgmtKey, `{"disabled":true}`).expect(t, 200)
		}
	})
	wg.Wait()
	for _, c := range []*client{local, remote} {
		within(t, time.Second, "both replicas read every charge", func() bool {
			return c.snapshot(key, org.MgmtKey).usage == charged
		})
	}
	if n := len(local.api("GET", "/keys?include_disabled=true", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()); n != 11 {
		t.Fatalf("the in-process replica lists %d keys, want 11", n)
	}

	// A config reload (a changed config) keeps the shared store: the same
	// keys and counters, still following the other replica.
	cfg := toRedis(gatewayCaddyfile(adminAddr, t.TempDir(), gatewayAddr, mockAddr, "2ms"))
	local.doWithType("POST", local.admin+"/load", "text/caddyfile", cfg).expect(t, 200)
	local = newClient(t, gatewayAddr, adminAddr)
	if got := local.snapshot(key, org.MgmtKey).usage; got != charged {
		t.Fatalf("after a reload: usage %s, want %s", got, charged)
	}
	later, _ := remote.newKey(org.MgmtKey, `{"name":"after the reload"}`)
	within(t, time.Second, "a key created at the other replica after the reload", func() bool {
		r, _ := local.try("GET", local.gateway+"/api/v1/key", later, nil)
		return r.Status == 200
	})
}

// The per-key abuse ceiling counts the key's inference requests at every
// replica together (in the admission script), not per replica.
func TestReplicasShareThePerKeyCeiling(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv, "per_key 4 1m"), startReplica(t, srv, "per_key 4 1m")}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "10")
	key, _ := cs[0].newKey(org.MgmtKey, `{"name":"busy"}`)
	within(t, time.Second, "the key reaches replica 1", func() bool {
		r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})
	body := `{"model":"tollgate-mock","max_tokens":10,"messages":[{"role":"user","content":"counted everywhere"}]}`
	for range 3 {
		cs[0].api("POST", "/chat/completions", key, body).expect(t, 200)
	}
	// Replica 1's own bucket still has 4 tokens, the shared one 1.
	cs[1].api("POST", "/chat/completions", key, body).expect(t, 200)
	sent := time.Now()
	// Four requests a minute: a token every 15s.
	expectPlatform429(t, cs[1].api("POST", "/chat/completions", key, body), "abuse_per_key", 4, sent, 15*time.Second)
}

// loadReplicas runs n workers, worker w sending through replica w%len(cs)
// with an HTTP client of its own, each calling send until it returns false
// or until the returned stop, which waits for them.
func loadReplicas(cs []*client, n int, send func(wc *client) bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range n {
		c := cs[w%len(cs)]
		wc := &client{t: c.t, gateway: c.gateway, admin: c.admin,
			http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if !send(wc) {
					return
				}
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
	}
}
