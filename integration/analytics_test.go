package integration

import (
	"fmt"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// charged is what the gateway reported for one metered request.
type charged struct {
	id                 string
	cost               money.Amount
	prompt, completion int64
}

type figures struct {
	requests, prompt, completion int64
	cost                         money.Amount
}

func (f *figures) add(c charged) {
	f.requests++
	f.prompt += c.prompt
	f.completion += c.completion
	f.cost += c.cost
}

func chatAs(c *client, key, model, user, text string) (charged, response, error) {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]`, model, text)
	if user != "" {
		body += fmt.Sprintf(`,"user":%q`, user)
	}
	r, err := c.try("POST", c.gateway+"/api/v1/chat/completions", key, body+"}")
	if err != nil || r.Status != 200 {
		return charged{}, r, err
	}
	a, err := money.ParseAmount(r.JSON.Get("usage.cost").Raw)
	return charged{
		id: r.Header.Get("X-Generation-Id"), cost: a,
		prompt: r.JSON.Get("usage.prompt_tokens").Int(), completion: r.JSON.Get("usage.completion_tokens").Int(),
	}, r, err
}

// sumRows adds up the figures of analytics rows.
func sumRows(t *testing.T, rows []gjson.Result, usageField string) figures {
	t.Helper()
	var f figures
	for _, r := range rows {
		reqField := "requests"
		if !r.Get(reqField).Exists() {
			reqField = "request_count"
		}
		f.requests += r.Get(reqField).Int()
		f.prompt += r.Get("prompt_tokens").Int()
		f.completion += r.Get("completion_tokens").Int()
		f.cost += creditAmount(t, r.Get(usageField))
	}
	return f
}

// TestAnalyticsEqualChargedGenerations sends metered requests (some at once)
// through Caddy and checks that /activity, /analytics/query, the end users'
// usage and /credits all equal the sums of the charged generations; then
// feedback, and a deactivated end user's refusal without a charge.
func TestAnalyticsEqualChargedGenerations(t *testing.T) {
	dir := startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	// Balances above the in-flight budget's threshold: concurrent requests
	// are then held only against the balance.
	org := c.newTenant("organization", "200")
	other := c.newTenant("organization", "200")
	k1, h1 := c.newKey(org.MgmtKey, `{"name":"one"}`)
	// A key created for a member of the organization.
	two := c.operator("POST", "/accounts/"+org.AccountID+"/members", `{"email":"two@example.com"}`).expect(t, 201).JSON.Get("data.id").Str
	k2, h2 := c.newKey(org.MgmtKey, `{"name":"two","creator_user_id":"`+two+`"}`)
	ok, _ := c.newKey(other.MgmtKey, `{"name":"other"}`)

	var (
		mu      sync.Mutex
		total   figures
		byUser  = map[string]*figures{}
		byKey   = map[string]*figures{}
		byModel = map[string]*figures{}
		gens    = map[string][]charged{}
	)
	record := func(user, hash, model string, ch charged) {
		mu.Lock()
		defer mu.Unlock()
		total.add(ch)
		for m, k := range map[*map[string]*figures]string{&byUser: user, &byKey: hash, &byModel: model} {
			if (*m)[k] == nil {
				(*m)[k] = &figures{}
			}
			(*m)[k].add(ch)
		}
		gens[user] = append(gens[user], ch)
	}
	users := []string{"alice", "bob", ""}
	models := []string{"tollgate-mock", "mock/echo"}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key, hash := k1, h1
			if i%3 == 0 {
				key, hash = k2, h2
			}
			user, model := users[i%len(users)], models[i%len(models)]
			ch, r, err := chatAs(c, key, model, user, fmt.Sprintf("request number %d %s", i, "with some words"))
			if err == nil && r.Status != 200 {
				err = fmt.Errorf("status %d: %s", r.Status, r.Body)
			}
			if err != nil {
				errs <- err
				return
			}
			record(user, hash, model, ch)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Another account's traffic, with the same end-user name, stays out.
	if _, r, err := chatAs(c, ok, "tollgate-mock", "alice", "someone else's alice"); err != nil || r.Status != 200 {
		t.Fatalf("other account: %v %d %s", err, r.Status, r.Body)
	}

	credits := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON
	if got := creditAmount(t, credits.Get("data.total_usage")); got != total.cost || total.cost <= 0 {
		t.Fatalf("total_usage %s, charged generations sum to %s", got, total.cost)
	}

	// GET /activity: per day, model and provider.
	act := c.api("GET", "/activity", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
	if got := sumRows(t, act, "usage"); got != total {
		t.Fatalf("activity sums %+v, want %+v", got, total)
	}
	for _, row := range act {
		want := byModel[row.Get("model").String()]
		if want == nil || row.Get("requests").Int() != want.requests || creditAmount(t, row.Get("usage")) != want.cost ||
			row.Get("provider_name").String() != "mock" || row.Get("endpoint_id").String() == "" || row.Get("workspace_id").Exists() {
			t.Fatalf("activity row %s, want %+v", row.Raw, want)
		}
	}
	if len(act) != 2 {
		t.Fatalf("activity has %d rows, want 2 (one per model): %v", len(act), act)
	}
	keyAct := c.api("GET", "/activity?api_key_hash="+h2, org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
	if got := sumRows(t, keyAct, "usage"); got != *byKey[h2] {
		t.Fatalf("activity of key two %+v, want %+v", got, *byKey[h2])
	}
	memberAct := c.api("GET", "/activity?user_id="+two, org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
	if got := sumRows(t, memberAct, "usage"); got != *byKey[h2] {
		t.Fatalf("activity of the member who created key two %+v, want %+v", got, *byKey[h2])
	}
	byMember := c.api("POST", "/analytics/query", org.MgmtKey, `{"metrics":["usage","request_count","prompt_tokens","completion_tokens"],"dimensions":["user"],
		"filters":[{"field":"user","operator":"eq","value":"`+two+`"}]}`).expect(t, 200).JSON.Get("data.data").Array()
	if len(byMember) != 1 || byMember[0].Get("user").String() != two || sumRows(t, byMember, "usage") != *byKey[h2] {
		t.Fatalf("analytics by member %v, want %+v", byMember, *byKey[h2])
	}
	ws := c.api("GET", "/activity?group_by=workspace", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array()
	if len(ws) != 2 || ws[0].Get("workspace_id").String() == "" {
		t.Fatalf("activity by workspace: %v", ws)
	}
	c.api("GET", "/activity?date=1999-01-01", org.MgmtKey, nil).expectError(t, 400, "date")
	c.api("GET", "/activity?group_by=model", org.MgmtKey, nil).expectError(t, 400, "group_by")
	c.api("GET", "/activity", k1, nil).expectError(t, 403, "")

	// POST /analytics/query by end user, and by key over daily buckets.
	q := c.api("POST", "/analytics/query", org.MgmtKey,
		`{"metrics":["request_count","usage","prompt_tokens","completion_tokens"],"dimensions":["end_user"]}`).expect(t, 200).JSON
	rows := q.Get("data.data").Array()
	if got := sumRows(t, rows, "usage"); got != total {
		t.Fatalf("analytics sums %+v, want %+v", got, total)
	}
	for _, row := range rows {
		if got, want := sumRows(t, []gjson.Result{row}, "usage"), byUser[row.Get("end_user").String()]; want == nil || got != *want {
			t.Fatalf("end user row %s, want %+v", row.Raw, want)
		}
	}
	if q.Get("data.metadata.row_count").Int() != 3 || q.Get("data.metadata.truncated").Bool() {
		t.Fatalf("metadata %s", q.Get("data.metadata").Raw)
	}
	daily := c.api("POST", "/analytics/query", org.MgmtKey, `{"metrics":["usage","request_count"],"dimensions":["api_key_id"],"granularity":"day",
		"filters":[{"field":"api_key_id","operator":"eq","value":"`+h1+`"}]}`).expect(t, 200).JSON.Get("data.data").Array()
	if got := sumRows(t, daily, "usage"); got.cost != byKey[h1].cost || got.requests != byKey[h1].requests || daily[0].Get("date__day").String() == "" {
		t.Fatalf("daily rows of key one %v, want %+v", daily, byKey[h1])
	}
	c.api("POST", "/analytics/query", org.MgmtKey, `{"metrics":["nope"]}`).expectError(t, 400, "metrics[0]")
	c.api("POST", "/analytics/query", org.MgmtKey, `{"metrics":["usage"],"granularity":"minute"}`).expectError(t, 400, "granularity")
	c.api("POST", "/analytics/query", org.MgmtKey, `{"metrics":["usage"],"filters":[{"field":"model","operator":"gt","value":"a"}]}`).
		expectError(t, 400, "filters[0].operator")

	// Feedback on one of the account's generations; not on another's.
	target := gens["alice"][0]
	c.api("POST", "/generation/feedback", org.MgmtKey, `{"generation_id":"`+target.id+`","category":"latency","comment":"slow"}`).
		expect(t, 200).JSON.Get("data.success").Bool()
	c.api("POST", "/generation/feedback", other.MgmtKey, `{"generation_id":"`+target.id+`","category":"latency"}`).
		expectError(t, 404, "Generation not found")
	c.api("POST", "/generation/feedback", org.MgmtKey, `{"generation_id":"gen-0000000000000-000000000000","category":"latency"}`).
		expectError(t, 404, "Generation not found")
	c.api("POST", "/generation/feedback", org.MgmtKey, `{"generation_id":"`+target.id+`","category":"awful"}`).expectError(t, 400, "category")
	c.api("POST", "/generation/feedback", org.MgmtKey, `{"category":"other"}`).expectError(t, 400, "generation_id")
	fb := c.api("POST", "/analytics/query", org.MgmtKey, `{"metrics":["feedback_count"],"dimensions":["end_user"],
		"filters":[{"field":"end_user","operator":"in","value":["alice"]}]}`).expect(t, 200).JSON.Get("data.data").Array()
	if len(fb) != 1 || fb[0].Get("feedback_count").Int() != 1 {
		t.Fatalf("feedback in analytics: %v", fb)
	}

	// End users: auto-created on first use with their usage.
	list := c.api("GET", "/end-users", org.MgmtKey, nil).expect(t, 200).JSON
	if list.Get("total_count").Int() != 2 {
		t.Fatalf("end users %s", list.Raw)
	}
	for _, u := range list.Get("data").Array() {
		want := byUser[u.Get("user").String()]
		if want == nil || creditAmount(t, u.Get("usage")) != want.cost || u.Get("requests").Int() != want.requests || !u.Get("is_active").Bool() {
			t.Fatalf("end user %s, want %+v", u.Raw, want)
		}
	}
	c.api("DELETE", "/end-users/alice", org.MgmtKey, nil).expect(t, 200)
	before := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.total_usage").Raw
	_, r, err := chatAs(c, k1, "tollgate-mock", "alice", "am I still allowed")
	if err != nil {
		t.Fatal(err)
	}
	r.expectError(t, 403, "deactivated")
	if after := c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.total_usage").Raw; after != before {
		t.Fatalf("a refused request was charged: %s -> %s", before, after)
	}
	if got := sumRows(t, c.api("GET", "/activity", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array(), "usage"); got != total {
		t.Fatalf("a refused request was counted: %+v, want %+v", got, total)
	}
	// Another account's "alice" is a different end user.
	if _, r, err := chatAs(c, ok, "tollgate-mock", "alice", "still fine"); err != nil || r.Status != 200 {
		t.Fatalf("other account's alice: %v %d %s", err, r.Status, r.Body)
	}
	c.api("PATCH", "/end-users/alice", org.MgmtKey, `{"is_active":true,"name":"Alice"}`).expect(t, 200)
	back, r, err := chatAs(c, k1, "tollgate-mock", "alice", "back again")
	if err != nil || r.Status != 200 {
		t.Fatalf("reactivated alice: %v %d %s", err, r.Status, r.Body)
	}
	record("alice", h1, "tollgate-mock", back)
	a := c.api("GET", "/end-users/alice", org.MgmtKey, nil).expect(t, 200).JSON.Get("data")
	if a.Get("name").String() != "Alice" || a.Get("requests").Int() != byUser["alice"].requests {
		t.Fatalf("alice %s", a.Raw)
	}

	// The rollup belongs to the store, which config reloads share: nothing
	// is counted twice or lost.
	cfg := gatewayCaddyfile(adminAddr, dir, gatewayAddr, mockAddr, "2ms")
	for range 2 {
		c.doWithType("POST", c.admin+"/load", "text/caddyfile", cfg).expect(t, 200)
	}
	if got := sumRows(t, c.api("GET", "/activity", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array(), "usage"); got != total {
		t.Fatalf("activity after reloads %+v, want %+v", got, total)
	}
	for i := range 2 {
		ch, r, err := chatAs(c, k1, "tollgate-mock", "", fmt.Sprint("after the reloads ", i))
		if err != nil || r.Status != 200 {
			t.Fatalf("after the reloads: %v %d %s", err, r.Status, r.Body)
		}
		record("", h1, "tollgate-mock", ch)
	}
	if got := sumRows(t, c.api("GET", "/activity", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array(), "usage"); got != total {
		t.Fatalf("activity after reloads and requests %+v, want %+v", got, total)
	}

	c.api("POST", "/end-users", org.MgmtKey, `{"user":"carol"}`).expect(t, 201)
	c.api("POST", "/end-users", org.MgmtKey, `{"user":"carol"}`).expectError(t, 409, "exists")
	c.api("POST", "/end-users", org.MgmtKey, `{"user":""}`).expectError(t, 400, "user")
	c.api("GET", "/end-users/nobody", org.MgmtKey, nil).expectError(t, 404, "End user not found")
	c.api("GET", "/end-users/carol", other.MgmtKey, nil).expectError(t, 404, "End user not found")
}

// TestOpenRouterSDKAnalytics runs every analytics.* method and
// generations.submitFeedback of the public SDK.
func TestOpenRouterSDKAnalytics(t *testing.T) {
	node := requireNode(t)

	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	org := c.newTenant("organization", "10")
	key, hash := c.newKey(org.MgmtKey, `{"name":"sdk-analytics"}`)
	var total figures
	var genID string
	for i, user := range []string{"alice", "bob", ""} {
		ch, r, err := chatAs(c, key, "tollgate-mock", user, fmt.Sprintf("sdk analytics request %d", i))
		if err != nil || r.Status != 200 {
			t.Fatalf("request %d: %v %d %s", i, err, r.Status, r.Body)
		}
		total.add(ch)
		genID = ch.id
	}

	runSDKScript(t, node, "analytics.mjs",
		"TOLLGATE_MGMT_KEY="+org.MgmtKey,
		"TOLLGATE_API_KEY="+key,
		"TOLLGATE_KEY_HASH="+hash,
		"TOLLGATE_GENERATION_ID="+genID,
		"TOLLGATE_REQUESTS="+fmt.Sprint(total.requests),
		"TOLLGATE_USAGE="+total.cost.String(),
	)
}

// Killing the process and starting it again rebuilds the analytics from
// the stored generations: the same figures, feedback counted once, end
// users (auto-created ones too) and their deactivation kept.
func TestRestartRebuildsAnalytics(t *testing.T) {
	dir := t.TempDir()
	p := startProcess(t, dir)
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "200")
	key, _ := c.newKey(org.MgmtKey, `{"name":"restart"}`)
	var (
		mu    sync.Mutex
		total figures
		last  charged
		wg    sync.WaitGroup
	)
	errs := make(chan error, 12)
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, r, err := chatAs(c, key, "tollgate-mock", []string{"alice", "bob"}[i%2], fmt.Sprint("before the crash ", i))
			if err == nil && r.Status != 200 {
				err = fmt.Errorf("status %d: %s", r.Status, r.Body)
			}
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			total.add(ch)
			last = ch
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.api("POST", "/generation/feedback", org.MgmtKey, `{"generation_id":"`+last.id+`","category":"formatting"}`).expect(t, 200)
	c.api("DELETE", "/end-users/bob", org.MgmtKey, nil).expect(t, 200)

	check := func(when string) {
		t.Helper()
		if got := sumRows(t, c.api("GET", "/activity", org.MgmtKey, nil).expect(t, 200).JSON.Get("data").Array(), "usage"); got != total {
			t.Fatalf("%s: activity %+v, want %+v", when, got, total)
		}
		if got := creditAmount(t, c.api("GET", "/credits", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.total_usage")); got != total.cost {
			t.Fatalf("%s: total_usage %s, want %s", when, got, total.cost)
		}
		fb := c.api("POST", "/analytics/query", org.MgmtKey, `{"metrics":["feedback_count","request_count"]}`).expect(t, 200).JSON.Get("data.data.0")
		if fb.Get("feedback_count").Int() != 1 || fb.Get("request_count").Int() != total.requests {
			t.Fatalf("%s: analytics %s", when, fb.Raw)
		}
		c.api("GET", "/end-users/alice", org.MgmtKey, nil).expect(t, 200)
		if c.api("GET", "/end-users/bob", org.MgmtKey, nil).expect(t, 200).JSON.Get("data.is_active").Bool() {
			t.Fatalf("%s: bob is active again", when)
		}
		_, r, err := chatAs(c, key, "tollgate-mock", "bob", "refused")
		if err != nil {
			t.Fatal(err)
		}
		r.expectError(t, 403, "deactivated")
	}
	check("before the crash")
	p.kill()
	p.start(t)
	c = newClient(t, p.gateway, p.admin)
	check("after the restart")
}
