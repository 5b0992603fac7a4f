package integration

// Rate limits operators set on keys, workspaces and accounts, through a
// real Caddy: on Badger, and over three replicas on one redis-server or on
// a Redis Cluster.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// clearOfMinuteEnd waits, when fewer than need are left of the current UTC
// minute, for the next one: a burst then stays within one window.
func clearOfMinuteEnd(need time.Duration) {
	now := time.Now().UTC()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < need {
		time.Sleep(left + 50*time.Millisecond)
	}
}

// expectRate429 checks a platform rate-limit refusal: the public body with
// limitType, and X-RateLimit-* and Retry-After.
func expectRate429(t *testing.T, r response, limitType string, limit int64) {
	t.Helper()
	if r.Status != http.StatusTooManyRequests || r.JSON.Get("error.code").Int() != 429 ||
		r.JSON.Get("error.message").String() != "Rate limit exceeded" ||
		r.JSON.Get("error.metadata.error_type").String() != "rate_limit_exceeded" ||
		r.JSON.Get("error.metadata.limit_type").String() != limitType {
		t.Fatalf("want a 429 of %s, got %d %s", limitType, r.Status, r.Body)
	}
	if got := r.Header.Get("X-RateLimit-Limit"); got != strconv.FormatInt(limit, 10) {
		t.Fatalf("X-RateLimit-Limit %q, want %d", got, limit)
	}
	rem, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Remaining"), 10, 64)
	if err != nil || rem < 0 || rem > limit {
		t.Fatalf("X-RateLimit-Remaining %q", r.Header.Get("X-RateLimit-Remaining"))
	}
	reset, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || reset < time.Now().Add(-time.Second).UnixMilli() {
		t.Fatalf("X-RateLimit-Reset %q", r.Header.Get("X-RateLimit-Reset"))
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
}

// noRateHeaders fails when a successful answer carries X-RateLimit-*.
func noRateHeaders(t *testing.T, r response) {
	t.Helper()
	for k := range r.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-ratelimit-") {
			t.Fatalf("a successful answer carries %s", k)
		}
	}
}

// 200 requests released at once over three replicas on one redis-server,
// against a key allowing 20 requests a minute, then 300 completion tokens
// a minute, then 2,000 prompt tokens a minute: no limit is ever passed,
// the refusals are the spec's 429.
func TestReplicasKeyRateLimitsAreExact(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv), startReplica(t, srv)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "1000")
	for _, tc := range []struct {
		limits, limitType string
		limit             int64
	}{
		{`{"requests_per_minute":20}`, "key_requests_per_minute", 20},
		{`{"completion_tokens_per_minute":300}`, "key_completion_tokens_per_minute", 300},
		{`{"prompt_tokens_per_minute":2000}`, "key_prompt_tokens_per_minute", 2000},
	} {
		const n = 200
		body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"one of many concurrent requests"}]}`
		key, _ := cs[0].newKey(org.MgmtKey, `{"name":"limited","rate_limits":`+tc.limits+`}`)
		for _, c := range cs[1:] {
			within(t, feedBound, "the key reaches every replica", func() bool {
				r, _ := c.try("GET", c.gateway+"/api/v1/key", key, nil)
				return r.Status == 200
			})
		}
		clearOfMinuteEnd(10 * time.Second)
		results, errs, _ := postAtOnceVia(t, cs, n, func(int) string { return key }, body)
		var ok, refused int
		var completion, prompt int64
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			switch r.Status {
			case 200:
				ok++
				noRateHeaders(t, r)
				completion += r.JSON.Get("usage.completion_tokens").Int()
				prompt += r.JSON.Get("usage.prompt_tokens").Int()
			default:
				refused++
				expectRate429(t, r, tc.limitType, tc.limit)
			}
		}
		t.Logf("%s: %d passed, %d refused, %d completion tokens", tc.limitType, ok, refused, completion)
		switch tc.limitType {
		case "key_requests_per_minute":
			if ok != 20 {
				t.Fatalf("%d requests passed a limit of 20 a minute over three replicas", ok)
			}
		case "key_prompt_tokens_per_minute":
			// Each request holds its prompt's bound until it settles.
			if ok == 0 || prompt > tc.limit {
				t.Fatalf("%d passed using %d prompt tokens; the limit is %d a minute", ok, prompt, tc.limit)
			}
		default:
			// Each request holds its max_tokens (20) until it settles
			// with what it used.
			if ok < 15 || completion > tc.limit {
				t.Fatalf("%d passed using %d completion tokens; the limit is %d a minute", ok, completion, tc.limit)
			}
		}
	}
}

// A workspace's limits pool its keys; the account's defaults come from
// the Caddyfile; a limit lowered below its use refuses at once; GET /key
// reports the key's limits and what is left; bad limits are 400s naming
// the field.
func TestRateLimitsWorkspaceKeyAndInput(t *testing.T) {
	p := startProcessWith(t, t.TempDir(), func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tbrand service\n", "\t\tbrand service\n\t\trate_limits {\n\t\t\trequests_per_day 1000\n\t\t}\n")
	})
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "100")
	body := `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

	for _, bad := range []struct{ body, field string }{
		{`{"name":"k","rate_limits":{"requests_per_minute":-1}}`, "rate_limits.requests_per_minute"},
		{`{"name":"k","rate_limits":{"requests_per_day":1.5}}`, "rate_limits.requests_per_day"},
		{`{"name":"k","rate_limits":{"concurrent_requests":1e13}}`, "rate_limits.concurrent_requests"},
		{`{"name":"k","rate_limits":{"requests_per_hour":5}}`, "rate_limits.requests_per_hour"},
		{`{"name":"k","rate_limits":[1]}`, "rate_limits"},
	} {
		r := c.api("POST", "/keys", org.MgmtKey, bad.body).expect(t, 400)
		if !strings.HasPrefix(r.JSON.Get("error.message").String(), bad.field+":") {
			t.Fatalf("%s: %s", bad.body, r.Body)
		}
	}
	c.operator("PATCH", "/accounts/"+org.AccountID, `{"rate_limits":{"requests_per_minute":0}}`).expect(t, 400)

	ws := c.api("POST", "/workspaces", org.MgmtKey, `{"name":"team","slug":"team","rate_limits":{"requests_per_minute":3}}`).expect(t, 201)
	if ws.JSON.Get("data.rate_limits.requests_per_minute").Int() != 3 || ws.JSON.Get("data.rate_limits.requests_per_day").Exists() && ws.JSON.Get("data.rate_limits.requests_per_day").Type.String() != "Null" {
		t.Fatalf("workspace view: %s", ws.Body)
	}
	k1, _ := c.newKey(org.MgmtKey, `{"name":"a","workspace_id":"team"}`)
	k2, h2 := c.newKey(org.MgmtKey, `{"name":"b","workspace_id":"team","rate_limits":{"requests_per_minute":10,"prompt_tokens_per_minute":100000}}`)
	clearOfMinuteEnd(10 * time.Second)
	for _, k := range []string{k1, k2, k1} {
		r, err := c.post("/chat/completions", k, body, nil)
		if err != nil || r.Status != 200 {
			t.Fatalf("%v %d %s", err, r.Status, r.Body)
		}
		noRateHeaders(t, r)
	}
	r, _ := c.post("/chat/completions", k2, body, nil)
	expectRate429(t, r, "workspace_requests_per_minute", 3)

	kv := c.api("GET", "/key", k2, nil).expect(t, 200).JSON.Get("data.rate_limits")
	if kv.Get("requests_per_minute.limit").Int() != 10 || kv.Get("requests_per_minute.remaining").Int() != 9 ||
		kv.Get("requests_per_minute.reset").Int() <= time.Now().UnixMilli() || kv.Get("prompt_tokens_per_minute.remaining").Int() >= 100000 {
		t.Fatalf("GET /key rate_limits: %s", kv.Raw)
	}
	// Lowered below its use: refused at once, nothing negative.
	c.api("PATCH", "/keys/"+h2, org.MgmtKey, `{"rate_limits":{"requests_per_minute":1}}`).expect(t, 200)
	c.api("PATCH", "/workspaces/team", org.MgmtKey, `{"rate_limits":null}`).expect(t, 200)
	r, _ = c.post("/chat/completions", k2, body, nil)
	expectRate429(t, r, "key_requests_per_minute", 1)
	if rem := r.Header.Get("X-RateLimit-Remaining"); rem != "0" {
		t.Fatalf("remaining %q", rem)
	}
	if got := c.api("GET", "/key", k2, nil).JSON.Get("data.rate_limits.requests_per_minute.remaining").Int(); got != 0 {
		t.Fatalf("GET /key remaining %d", got)
	}
	// The account's defaults (1000 a day) apply; its own limits replace them.
	c.operator("PATCH", "/accounts/"+org.AccountID, `{"rate_limits":{"requests_per_day":3}}`).expect(t, 200)
	r, _ = c.post("/chat/completions", k1, body, nil)
	expectRate429(t, r, "account_requests_per_day", 3)
	c.operator("PATCH", "/accounts/"+org.AccountID, `{"rate_limits":null}`).expect(t, 200)
	if r, _ := c.post("/chat/completions", k1, body, nil); r.Status != 200 {
		t.Fatalf("back on the defaults: %d %s", r.Status, r.Body)
	}
}

// A key allowing one request at a time: a second one is refused while the
// first runs, and the first's slot is released when its client aborts.
func TestRateLimitConcurrencyReleasedOnAbort(t *testing.T) {
	p := startProcess(t, t.TempDir())
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "100")
	key, _ := c.newKey(org.MgmtKey, `{"name":"one at a time","rate_limits":{"concurrent_requests":1}}`)
	body := `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", c.gateway+"/api/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Mock-Latency", "5s")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			t.Logf("first: %d %s", res.StatusCode, b)
		}
		done <- err
	}()
	left := func() int64 {
		return c.api("GET", "/key", key, nil).expect(t, 200).JSON.Get("data.rate_limits.concurrent_requests.remaining").Int()
	}
	within(t, 5*time.Second, "GET /key shows the running request", func() bool { return left() == 0 })
	r, err := c.post("/chat/completions", key, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectRate429(t, r, "key_concurrent_requests", 1)
	cancel()
	<-done
	within(t, 5*time.Second, "the aborted request's slot is released", func() bool {
		r, err := c.post("/chat/completions", key, body, nil)
		return err == nil && r.Status == 200
	})
}

// Three replicas on a 3-master Redis Cluster, one organization per master:
// a burst of requests at once over the three replicas, against a key's
// requests per minute (on one shard), a workspace's pooled over two keys
// (on another) and an account's (on the third), then a key's concurrent
// requests: exactly the limit passes, each refusal is the spec's 429 naming
// the limit, and every replica's GET /key reads the same count.
func TestReplicasOnClusterRateLimitsAreExact(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	ps := []*process{startClusterReplica(t, c), startClusterReplica(t, c), startClusterReplica(t, c)}
	cs := replicaClients(t, ps)
	var orgs []tenant
	seen := map[*redistest.Server]bool{}
	for range 60 {
		org := cs[0].newTenant("organization", "1000")
		if m := c.MasterOf(kernel.ClusterAccountSlot(org.AccountID)); !seen[m] {
			seen[m] = true
			orgs = append(orgs, org)
		}
		if len(orgs) == 3 {
			break
		}
	}
	if len(orgs) != 3 {
		t.Fatalf("organizations on %d masters, want 3", len(orgs))
	}
	reaches := func(key string) {
		for _, c := range cs[1:] {
			within(t, feedBound, "the key reaches every replica", func() bool {
				r, _ := c.try("GET", c.gateway+"/api/v1/key", key, nil)
				return r.Status == 200
			})
		}
	}
	const n, limit = 60, 12
	body := `{"model":"tollgate-mock","max_tokens":5,"messages":[{"role":"user","content":"one of many concurrent requests"}]}`

	// The key's own limit, on the first shard.
	keyLimited, _ := cs[0].newKey(orgs[0].MgmtKey, fmt.Sprintf(`{"name":"key","rate_limits":{"requests_per_minute":%d}}`, limit))
	reaches(keyLimited)
	// Two keys of a workspace limited as a whole, on the second.
	cs[0].api("POST", "/workspaces", orgs[1].MgmtKey, fmt.Sprintf(`{"name":"team","slug":"team","rate_limits":{"requests_per_minute":%d}}`, limit)).expect(t, 201)
	w1, _ := cs[0].newKey(orgs[1].MgmtKey, `{"name":"a","workspace_id":"team"}`)
	w2, _ := cs[0].newKey(orgs[1].MgmtKey, `{"name":"b","workspace_id":"team"}`)
	reaches(w1)
	reaches(w2)
	// The account's, on the third.
	cs[0].operator("PATCH", "/accounts/"+orgs[2].AccountID, fmt.Sprintf(`{"rate_limits":{"requests_per_minute":%d}}`, limit)).expect(t, 200)
	acctKey, _ := cs[0].newKey(orgs[2].MgmtKey, `{"name":"account"}`)
	reaches(acctKey)
	for i, c := range cs {
		within(t, feedBound, fmt.Sprintf("the account's limits reach replica %d", i), func() bool {
			return c.operator("GET", "/accounts/"+orgs[2].AccountID, nil).JSON.Get("data.rate_limits.requests_per_minute").Int() == limit
		})
	}

	for _, tc := range []struct {
		limitType string
		keyOf     func(i int) string
	}{
		{"key_requests_per_minute", func(int) string { return keyLimited }},
		{"workspace_requests_per_minute", func(i int) string { return []string{w1, w2}[i%2] }},
		{"account_requests_per_minute", func(int) string { return acctKey }},
	} {
		clearOfMinuteEnd(15 * time.Second)
		results, errs, _ := postAtOnceVia(t, cs, n, tc.keyOf, body)
		ok := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Fatalf("request %d: %v", i, errs[i])
			}
			if r.Status == 200 {
				ok++
				noRateHeaders(t, r)
				continue
			}
			expectRate429(t, r, tc.limitType, limit)
		}
		t.Logf("%s: %d of %d passed", tc.limitType, ok, n)
		if ok != limit {
			t.Fatalf("%s: %d requests passed a limit of %d a minute over three replicas on a cluster", tc.limitType, ok, limit)
		}
	}
	for i, c := range cs {
		within(t, feedBound, fmt.Sprintf("replica %d reads the key's count", i), func() bool {
			r, _ := c.try("GET", c.gateway+"/api/v1/key", keyLimited, nil)
			return r.Status == 200 && r.JSON.Get("data.rate_limits.requests_per_minute.remaining").Exists() &&
				r.JSON.Get("data.rate_limits.requests_per_minute.remaining").Int() == 0
		})
	}

	// Concurrent requests: every admission is decided before any passed
	// request ends (checkFit), so exactly the limit runs at once.
	const running = 5
	conc, _ := cs[0].newKey(orgs[0].MgmtKey, fmt.Sprintf(`{"name":"concurrent","rate_limits":{"concurrent_requests":%d}}`, running))
	reaches(conc)
	results, errs, _ := postAtOnceVia(t, cs, n, func(int) string { return conc }, body)
	ok := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if r.Status == 200 {
			ok++
			continue
		}
		expectRate429(t, r, "key_concurrent_requests", running)
	}
	checkFit(t, results, ok, running)
	for i, c := range cs {
		within(t, feedBound, fmt.Sprintf("replica %d reads every slot free again", i), func() bool {
			r, _ := c.try("GET", c.gateway+"/api/v1/key", conc, nil)
			return r.Status == 200 && r.JSON.Get("data.rate_limits.concurrent_requests.remaining").Int() == running
		})
	}
}
