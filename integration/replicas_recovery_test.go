package integration

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// kill -9 of redis-server under load at two replicas, restarted on the
// same directory and port: afterwards every kind of record created at one
// replica (a workspace budget, a guardrail, an end user's deactivation, a
// key's limit) is enforced at the other within a second, without a
// restart of either.
func TestReplicasEnforceEveryRecordAfterRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	ps := []*process{startReplica(t, srv), startReplica(t, srv)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "1000")
	loadKey, _ := cs[0].newKey(org.MgmtKey, `{"name":"load"}`)
	key, hash := cs[0].newKey(org.MgmtKey, `{"name":"limited later"}`)
	for _, k := range []string{loadKey, key} {
		within(t, time.Second, "the keys reach replica 1", func() bool {
			r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", k, nil)
			return r.Status == 200
		})
	}

	// Load at both replicas from before the kill until the end.
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"load across the redis restart"}]}`
	var served atomic.Int64
	var mu sync.Mutex
	var odd []string // answers other than 200 and the public API's 503
	stopLoad := loadReplicas(cs, 6, func(wc *client) bool {
		r, err := wc.post("/chat/completions", loadKey, body, map[string]string{"X-Mock-Latency": "10ms"})
		switch {
		case err == nil && r.Status == 200:
			served.Add(1)
			return true
		case err == nil && (r.Status != 503 || r.JSON.Get("error.code").Int() != 503 || r.JSON.Get("error.message").Str == ""):
			mu.Lock()
			odd = append(odd, fmt.Sprintf("%d %s", r.Status, r.Body))
			mu.Unlock()
		}
		time.Sleep(5 * time.Millisecond)
		return true
	})
	defer func() {
		stopLoad()
		if len(odd) > 0 {
			t.Errorf("%d answers under load were neither 200 nor a 503 in the spec's shape, e.g. %s", len(odd), odd[0])
		}
	}()
	within(t, 5*time.Second, "load is served", func() bool { return served.Load() > 20 })

	srv.Kill() // no shutdown save: only what appendfsync always wrote
	srv.Restart()
	for i, c := range cs {
		within(t, 10*time.Second, fmt.Sprintf("replica %d serves again", i), func() bool {
			r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
			return err == nil && r.Status == 200
		})
	}

	// refused polls replica 1 until the request is refused with status and
	// a body containing what, at most five seconds after the rule was made
	// at replica 0: milliseconds on an idle machine (logged), seconds on
	// a loaded one, whose scheduler then decides the delay.
	refused := func(what string, status int, want, k, body string) {
		t.Helper()
		start := time.Now()
		for {
			r, err := cs[1].try("POST", cs[1].gateway+"/api/v1/chat/completions", k, body)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status == status && strings.Contains(string(r.Body), want) {
				t.Logf("%s: enforced at replica 1 after %v", what, time.Since(start))
				return
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s is not enforced at replica 1 within 5s: the last answer was %d %s", what, r.Status, r.Body)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// A workspace budget.
	cs[0].api("POST", "/workspaces", org.MgmtKey, `{"name":"Capped","slug":"capped"}`).expect(t, 201)
	wsKey, _ := cs[0].newKey(org.MgmtKey, `{"name":"in capped","workspace_id":"capped"}`)
	cs[0].api("PUT", "/workspaces/capped/budgets/daily", org.MgmtKey, `{"limit_usd":0.000001}`).expect(t, 200)
	refused("a workspace budget", 402, "service_workspace_budget", wsKey, body)

	// A guardrail.
	gKey, gHash := cs[0].newKey(org.MgmtKey, `{"name":"guarded"}`)
	g := cs[0].api("POST", "/guardrails", org.MgmtKey, `{"name":"no mock","allowed_models":["tollgate-other"]}`).expect(t, 201).JSON.Get("data.id").Str
	cs[0].api("POST", "/guardrails/"+g+"/assignments/keys", org.MgmtKey, `{"key_hashes":["`+gHash+`"]}`).expect(t, 200)
	refused("a guardrail", 403, "not allowed by guardrail", gKey, body)

	// An end user, deactivated.
	cs[0].api("POST", "/end-users", org.MgmtKey, `{"user":"mallory"}`).expect(t, 201)
	cs[0].api("PATCH", "/end-users/mallory", org.MgmtKey, `{"is_active":false}`).expect(t, 200)
	refused("a deactivated end user", 403, "is deactivated", key,
		`{"model":"tollgate-mock","max_tokens":20,"user":"mallory","messages":[{"role":"user","content":"hi"}]}`)

	// A key limit.
	cs[0].api("PATCH", "/keys/"+hash, org.MgmtKey, `{"limit":0.000001}`).expect(t, 200)
	refused("a key limit", 402, "service_key_limit", key, body)
}

// A replica that cannot prove it saw every change (the feed was trimmed
// past its last entry) and cannot reload yet (a record it cannot decode)
// refuses inference and writes with 503 in the public API's error shape instead of
// deciding on rules that may be stale; reads are still served; it serves
// again once the reload succeeds.
func TestReplicaNotSyncedRefusesWith503(t *testing.T) {
	srv := redistest.Start(t)
	p := startReplica(t, srv)
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"k"}`)
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"hello"}]}`
	c.api("POST", "/chat/completions", key, body).expect(t, 200)

	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	broken := "replicas:{tg}r/" + org.AccountID + "/undecodable"
	if err := rc.Set(t.Context(), broken, "{not json", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.XTrimMaxLen(t.Context(), "replicas:{tg}~feed", 0).Err(); err != nil {
		t.Fatal(err)
	}
	const msg = "reloading its records from the shared database"
	within(t, time.Second, "the replica refuses inference while it cannot reload", func() bool {
		r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
		return err == nil && r.Status == 503
	})
	c.api("POST", "/chat/completions", key, body).expectError(t, 503, msg)
	c.api("POST", "/keys", org.MgmtKey, `{"name":"not now"}`).expectError(t, 503, msg)
	c.operator("POST", "/accounts", `{"name":"not now","type":"organization"}`).expectError(t, 503, msg)
	c.api("GET", "/key", key, nil).expect(t, 200)

	if err := rc.Del(t.Context(), broken).Err(); err != nil {
		t.Fatal(err)
	}
	within(t, time.Second, "the replica serves again once it reloaded", func() bool {
		r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body)
		return err == nil && r.Status == 200
	})
}
