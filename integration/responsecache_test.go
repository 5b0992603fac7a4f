package integration

// The response cache through a real Caddy: tenants' isolation, what a hit
// is charged and recorded, Cache-Control, streams, and a hit at one
// replica of a miss stored at another over redis-server.

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// cachePrice is what the tests' operator charges a hit.
const cachePrice = "0.0001"

// withResponseCache turns the response cache on for tollgate-mock.
func withResponseCache(t *testing.T) func(string) string {
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tload_balancing ordered\n",
			"\t\tload_balancing ordered\n\t\tresponse_cache {\n\t\t\tmodels tollgate-mock\n\t\t\tttl 10m\n\t\t\tprice "+cachePrice+"\n\t\t}\n")
	}
}

// xCache is the answer's X-Cache.
func xCache(r response) string { return r.Header.Get("X-Cache") }

func TestResponseCache(t *testing.T) {
	p := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string { return withResponseCache(t)(withCountingProxy(p)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	k1, _ := c.newKey(org.MgmtKey, `{"name":"one"}`)
	k2, h2 := c.newKey(org.MgmtKey, `{"name":"two"}`)
	other := c.newTenant("organization", "10")
	kOther, _ := c.newKey(other.MgmtKey, `{"name":"theirs"}`)

	body := `{"model":"tollgate-mock","max_tokens":16,"messages":[{"role":"user","content":"what is cached?"}]}`
	first := c.mustPost("/chat/completions", k1, body, nil).expect(t, 200)
	if xCache(first) != "MISS" || p.calls.Load() != 1 {
		t.Fatalf("first request: X-Cache %q, %d provider calls; want MISS, 1", xCache(first), p.calls.Load())
	}
	text := first.JSON.Get("choices.0.message.content").String()

	// Another key of the account, the members in another order, a user
	// and the defaults spelled out: the same request, a hit.
	before := c.snapshot(k2, org.MgmtKey)
	same := `{"messages":[{"content":"what is cached?","role":"user"}],"n":1,"user":"someone","max_tokens":16,"model":"tollgate-mock"}`
	hit := c.mustPost("/chat/completions", k2, same, nil).expect(t, 200)
	if xCache(hit) != "HIT" || p.calls.Load() != 1 {
		t.Fatalf("same request from another key: X-Cache %q, %d provider calls; want HIT, 1", xCache(hit), p.calls.Load())
	}
	if got := hit.JSON.Get("choices.0.message.content").String(); got != text {
		t.Fatalf("hit's text %q, want %q", got, text)
	}
	u := hit.JSON.Get("usage")
	price, _ := money.ParseAmount(cachePrice)
	if creditAmount(t, u.Get("cost")) != price || u.Get("response_cache_source_id").Str != first.JSON.Get("id").Str ||
		u.Get("prompt_tokens").Int() != first.JSON.Get("usage.prompt_tokens").Int() ||
		u.Get("completion_tokens").Int() != first.JSON.Get("usage.completion_tokens").Int() {
		t.Fatalf("hit's usage %s; want the provider's tokens (%s), cost %s and the source generation", u.Raw, first.JSON.Get("usage").Raw, cachePrice)
	}
	after := c.waitUsage(k2, org.MgmtKey, before, 5*time.Second, 100*time.Millisecond)
	expectCharged(t, before, after, price, "a hit")
	g := c.api("GET", "/generation?id="+hit.JSON.Get("id").Str, k2, nil).expect(t, 200).JSON.Get("data")
	if g.Get("response_cache_source_id").Str != first.JSON.Get("id").Str || creditAmount(t, g.Get("total_cost")) != price {
		t.Fatalf("hit's generation: %s", g.Raw)
	}

	// Another account never reads it.
	theirs := c.mustPost("/chat/completions", kOther, body, nil).expect(t, 200)
	if xCache(theirs) != "MISS" || p.calls.Load() != 2 {
		t.Fatalf("another account: X-Cache %q, %d provider calls; want MISS, 2", xCache(theirs), p.calls.Load())
	}

	// Cache-Control: no-cache goes to the provider; a bad max-age is a
	// 400; max-age within the entry's age hits.
	fresh := c.mustPost("/chat/completions", k1, body, map[string]string{"Cache-Control": "no-cache"}).expect(t, 200)
	if xCache(fresh) != "MISS" || p.calls.Load() != 3 {
		t.Fatalf("no-cache: X-Cache %q, %d provider calls; want MISS, 3", xCache(fresh), p.calls.Load())
	}
	c.mustPost("/chat/completions", k1, body, map[string]string{"Cache-Control": "max-age=soon"}).
		expectError(t, 400, `Cache-Control: max-age must be a whole number of seconds, got "soon"`)
	if r := c.mustPost("/chat/completions", k1, body, map[string]string{"Cache-Control": "max-age=600"}).expect(t, 200); xCache(r) != "HIT" {
		t.Fatalf("max-age=600: X-Cache %q, want HIT", xCache(r))
	}
	// A purge by the account's management key removes its entries, not
	// another account's.
	if r := c.api("DELETE", "/response-cache?model=tollgate-mock", org.MgmtKey, nil).expect(t, 200); r.JSON.Get("data.deleted").Int() != 1 {
		t.Fatalf("purge: %s, want one entry deleted", r.Body)
	}
	if r := c.mustPost("/chat/completions", k1, body, nil).expect(t, 200); xCache(r) != "MISS" {
		t.Fatalf("after a purge: X-Cache %q, want MISS", xCache(r))
	}
	if r := c.mustPost("/chat/completions", kOther, body, nil).expect(t, 200); xCache(r) != "HIT" {
		t.Fatalf("another account's entry after the purge: X-Cache %q, want HIT", xCache(r))
	}
	// Sampling without a seed is not cached; with one it is.
	sampled := `{"model":"tollgate-mock","max_tokens":16,"temperature":0.8,"messages":[{"role":"user","content":"what is cached?"}]}`
	if r := c.mustPost("/chat/completions", k1, sampled, nil).expect(t, 200); xCache(r) != "" {
		t.Fatalf("unseeded sampling: X-Cache %q, want none", xCache(r))
	}
	// A model the operator does not cache answers without the header.
	if r := c.mustPost("/chat/completions", k1, strings.Replace(body, `"tollgate-mock"`, `"mock/echo"`, 1), nil).expect(t, 200); xCache(r) != "" {
		t.Fatalf("an uncached model: X-Cache %q, want none", xCache(r))
	}

	// A disabled key is refused before any lookup.
	c.api("PATCH", "/keys/"+h2, org.MgmtKey, `{"disabled":true}`).expect(t, 200)
	calls := p.calls.Load()
	if r := c.mustPost("/chat/completions", k2, body, nil); r.Status != 401 || xCache(r) != "" || strings.Contains(string(r.Body), text) {
		t.Fatalf("a disabled key: %d %s (X-Cache %q), want a 401", r.Status, r.Body, xCache(r))
	}
	if p.calls.Load() != calls {
		t.Fatal("a disabled key's request reached the provider")
	}
}

// A streamed miss is replayed as a stream: the same text, usage last.
func TestResponseCacheStream(t *testing.T) {
	p := newCountingProxy(t, mockAddr)
	startInProcessWith(t, func(cfg string) string { return withResponseCache(t)(withCountingProxy(p)(cfg)) })
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"stream"}`)
	body := `{"model":"tollgate-mock","max_tokens":32,"stream":true,"messages":[{"role":"user","content":"stream me"}]}`
	miss := parseStream(t, c.streamOf(t, "/chat/completions", key, body))
	hit := parseStream(t, c.streamOf(t, "/chat/completions", key, body))
	if p.calls.Load() != 1 {
		t.Fatalf("%d provider calls for a streamed miss and its hit, want 1", p.calls.Load())
	}
	if !hit.done || hit.text == "" || hit.text != miss.text {
		t.Fatalf("hit's stream %q (done %v), want %q", hit.text, hit.done, miss.text)
	}
	price, _ := money.ParseAmount(cachePrice)
	if creditAmount(t, hit.usage.Get("cost")) != price || hit.usage.Get("response_cache_source_id").Str == "" ||
		hit.usage.Get("completion_tokens").Int() != miss.usage.Get("completion_tokens").Int() {
		t.Fatalf("hit's usage %s, miss's %s", hit.usage.Raw, miss.usage.Raw)
	}
}

// A miss stored at one replica is a hit at the other, over one
// redis-server; the entry is sealed at rest, a corrupt one is a miss, and
// a purge at either replica removes it for both.
func TestResponseCacheAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	edit := func(cfg, mock string) string {
		return replaceOnce(t, cfg, "\t\tload_balancing ordered\n",
			"\t\tload_balancing ordered\n\t\tresponse_cache {\n\t\t\tmodels tollgate-mock\n\t\t}\n")
	}
	ps := []*process{startReplicaEdited(t, "address "+srv.Addr, edit), startReplicaEdited(t, "address "+srv.Addr, edit)}
	cs := replicaClients(t, ps)
	org := cs[0].newTenant("organization", "10")
	key, _ := cs[0].newKey(org.MgmtKey, `{"name":"replicas"}`)
	within(t, feedBound, "the key authenticates at replica 1", func() bool {
		r, _ := cs[1].try("GET", cs[1].gateway+"/api/v1/key", key, nil)
		return r.Status == 200
	})
	body := `{"model":"tollgate-mock","max_tokens":16,"messages":[{"role":"user","content":"shared secret answer"}]}`
	miss := cs[0].mustPost("/chat/completions", key, body, nil).expect(t, 200)
	if xCache(miss) != "MISS" {
		t.Fatalf("replica A: X-Cache %q, want MISS", xCache(miss))
	}
	var hit response
	within(t, 5*time.Second, "replica B answers from the cache", func() bool {
		hit = cs[1].mustPost("/chat/completions", key, body, nil).expect(t, 200)
		return xCache(hit) == "HIT"
	})
	if hit.JSON.Get("choices.0.message.content").Str != miss.JSON.Get("choices.0.message.content").Str ||
		hit.JSON.Get("usage.response_cache_source_id").Str != miss.JSON.Get("id").Str {
		t.Fatalf("replica B's hit %s, A's miss %s", hit.Body, miss.Body)
	}
	// Sealed at rest: the answer's text is nowhere in Redis's values.
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	keys, err := rc.Keys(t.Context(), "*~rc/*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("cache entries in Redis: %v, %v; want one", keys, err)
	}
	v, err := rc.Get(t.Context(), keys[0]).Bytes()
	if err != nil || strings.Contains(string(v), miss.JSON.Get("choices.0.message.content").Str) || strings.Contains(string(v), "shared secret") {
		t.Fatalf("entry %s is not sealed (%v)", keys[0], err)
	}
	// A corrupt entry is a miss, then stored anew.
	v[len(v)-1] ^= 1
	if err := rc.Set(t.Context(), keys[0], v, redis.KeepTTL).Err(); err != nil {
		t.Fatal(err)
	}
	if r := cs[1].mustPost("/chat/completions", key, body, nil).expect(t, 200); xCache(r) != "MISS" {
		t.Fatalf("a corrupt entry: X-Cache %q, want MISS", xCache(r))
	}
	within(t, 5*time.Second, "the entry is stored anew", func() bool {
		return xCache(cs[0].mustPost("/chat/completions", key, body, nil).expect(t, 200)) == "HIT"
	})
	// A purge at replica B removes the entry.
	if r := cs[1].api("DELETE", "/response-cache", org.MgmtKey, nil).expect(t, 200); r.JSON.Get("data.deleted").Int() != 1 {
		t.Fatalf("purge at replica B: %s", r.Body)
	}
	if r := cs[0].mustPost("/chat/completions", key, body, nil).expect(t, 200); xCache(r) != "MISS" {
		t.Fatalf("replica A after the purge: X-Cache %q, want MISS", xCache(r))
	}
}

// The openai SDK reads a streamed hit as the stream of its miss
// (sdk/responsecache.mjs).
func TestResponseCacheSDK(t *testing.T) {
	node := requireNode(t)
	startInProcessWith(t, withResponseCache(t))
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, _ := c.newKey(org.MgmtKey, `{"name":"sdk-cache"}`)
	runSDKScript(t, node, "responsecache.mjs", "TOLLGATE_API_KEY="+key, "TOLLGATE_CACHE_PRICE="+cachePrice)
}
