package integration

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// byokSearch is a BYOK request whose gateway-side search (4 results at the
// searxng price 0.004) the platform pays in credits.
const byokSearch = `{"model":"ws/plain","max_tokens":20,"messages":[{"role":"user","content":"own key, platform's search"}],"plugins":[{"id":"web","engine":"searxng","max_results":4}]}`

const byokSearchCredits money.Amount = 16_000_000

// The credits a BYOK request spends on a gateway-side search are credits
// like any other: the key's cap, a workspace budget and a guardrail budget
// that do not count BYOK spending still cap them, hold them at admission
// (402 with the level's limit_source, no search) and count them once
// charged.
func TestBYOKSearchCreditsUnderLimits(t *testing.T) {
	e := startWebSearch(t)
	c := e.c
	c.api("POST", "/byok", e.org.MgmtKey, `{"provider":"p","key":"sk-own-key-for-seams-0123"}`).expect(t, 201)
	refused := func(key, source string) {
		t.Helper()
		e.search.Reset()
		expect402(t, c.mustPost("/chat/completions", key, byokSearch, nil), source, "", false)
		if n := len(e.search.Requests()); n != 0 {
			t.Fatalf("a refused request ran %d searches", n)
		}
	}
	admitted := func(key string) {
		t.Helper()
		r := c.mustPost("/chat/completions", key, byokSearch, nil).expect(t, 200)
		if r.JSON.Get("usage.server_tool_use_details.web_search_results").Int() != 4 {
			t.Fatalf("search results: %s", r.JSON.Get("usage").Raw)
		}
	}

	// BYOK credentials belong to the default workspace (storage.CreateBYOK):
	// the budgets are the default workspace's, spent by nothing else yet.
	t.Run("workspace budget", func(t *testing.T) {
		key, _ := c.newKey(e.org.MgmtKey, `{"name":"in workspace"}`)
		c.api("PUT", "/workspaces/default/budgets/daily", e.org.MgmtKey, `{"limit_usd":0.01}`).expect(t, 200)
		refused(key, "service_workspace_budget")
		c.api("PUT", "/workspaces/default/budgets/daily", e.org.MgmtKey, `{"limit_usd":0.02}`).expect(t, 200)
		admitted(key)
		// The workspace counted the search's credits.
		refused(key, "service_workspace_budget")
		c.api("DELETE", "/workspaces/default/budgets/daily", e.org.MgmtKey, nil).expect(t, 200)
	})
	t.Run("concurrent", func(t *testing.T) {
		key, _ := c.newKey(e.org.MgmtKey, `{"name":"burst","limit":1}`)
		const fit = 6
		// One search was spent in the workspace budget subtest.
		budget := byokSearchCredits*(fit+1) + byokSearchCredits/2
		c.api("PUT", "/workspaces/default/budgets/weekly", e.org.MgmtKey, fmt.Sprintf(`{"limit_usd":%s}`, budget)).expect(t, 200)
		defer func() { c.api("DELETE", "/workspaces/default/budgets/weekly", e.org.MgmtKey, nil).expect(t, 200) }()
		before := c.snapshot(key, e.org.MgmtKey)
		e.search.Reset()
		hc := &client{t: t, gateway: c.gateway, admin: c.admin,
			http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 40}}}
		const n = 40
		results := make([]response, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				results[i], errs[i] = hc.post("/chat/completions", key, byokSearch, map[string]string{"X-Mock-Latency": "1s"})
			})
		}
		wg.Wait()
		ok := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			switch r.Status {
			case 200:
				ok++
			case 402:
				expect402(t, r, "service_workspace_budget", "", false)
			default:
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
		}
		if ok != fit {
			t.Fatalf("%d admitted, want exactly %d", ok, fit)
		}
		if got := len(e.search.Requests()); got != ok {
			t.Fatalf("%d searches for %d admitted requests", got, ok)
		}
		expectCharged(t, before, c.snapshot(key, e.org.MgmtKey), byokSearchCredits*fit, "BYOK searches")
	})
	t.Run("key cap", func(t *testing.T) {
		key, _ := c.newKey(e.org.MgmtKey, `{"name":"capped","limit":0.02}`)
		admitted(key)
		// 0.016 spent of 0.02: another search does not fit.
		refused(key, "service_key_limit")
		s := c.snapshot(key, e.org.MgmtKey)
		if s.usage != byokSearchCredits || s.usage > *s.limit {
			t.Fatalf("key usage %s (limit %s), want %s", s.usage, *s.limit, byokSearchCredits)
		}
	})
	t.Run("guardrail budget", func(t *testing.T) {
		key, hash := c.newKey(e.org.MgmtKey, `{"name":"guarded"}`)
		g := c.api("POST", "/guardrails", e.org.MgmtKey, `{"name":"Search budget","limit_usd":0.02,"reset_interval":"daily"}`).
			expect(t, 201).JSON.Get("data.id").Str
		c.api("POST", "/guardrails/"+g+"/assignments/keys", e.org.MgmtKey, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)
		admitted(key)
		refused(key, "service_guardrail_budget")
	})
}

// startSeams is the web search gateway plus chat-only models for the
// Responses translation and a model whose streams break.
func startSeams(t *testing.T, edits ...func(string) string) *webSearchEnv {
	t.Helper()
	return startWebSearchWith(t, func(via string) string {
		m := func(id, upstream, api string) string {
			return fmt.Sprintf("\t\tmodel %s {\n\t\t\tcontext_length 8192\n\t\t\tpricing {\n\t\t\t\tprompt 0.000001\n\t\t\t\tcompletion 0.000002\n\t\t\t}\n"+
				"\t\t\tprovider p %s {\n\t\t\t\tmodel %s\n\t\t\t\tapi_key k\n%s\t\t\t}\n\t\t}\n", id, via, upstream, api)
		}
		return m("ws/chat", "tollgate-mock", "\t\t\t\tapi chat\n") + m("ws/broken", "tollgate-mock-stream-break", "") +
			m("ws/down", "tollgate-mock-error-500", "")
	}, edits...)
}

// seamsBodies are requests with a gateway-side search (exa, 2 results) of
// every kind: chat plain and streamed, Responses translated for a
// chat-only provider plain and streamed, a fallback over a dead and a
// failing provider, and a stream that breaks after some text.
var seamsBodies = []string{
	`{"model":"ws/plain","max_tokens":20,"messages":[{"role":"user","content":"seams chat"}],"plugins":[{"id":"web","max_results":2}]}`,
	`{"model":"ws/plain","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"seams chat stream"}],"plugins":[{"id":"web","max_results":2}]}`,
	`{"model":"ws/chat","max_output_tokens":20,"input":"seams responses","tools":[{"type":"service:web_search","parameters":{"max_results":2}}]}`,
	`{"model":"ws/chat","stream":true,"max_output_tokens":20,"input":"seams responses stream","tools":[{"type":"service:web_search","parameters":{"max_results":2}}]}`,
	`{"model":"ws/fallback","max_tokens":20,"messages":[{"role":"user","content":"seams fallback"}],"plugins":[{"id":"web","max_results":2}]}`,
	`{"model":"ws/broken","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"seams broken stream"}],"plugins":[{"id":"web","max_results":2}]}`,
}

// seamsPost sends one of seamsBodies and returns the status, the charged
// cost of an admitted request and the error body of a refused one.
func seamsPost(t *testing.T, hc *client, key string, i int) (int, money.Amount, response) {
	body := seamsBodies[i%len(seamsBodies)]
	path := "/chat/completions"
	if strings.Contains(body, `"input"`) {
		path = "/responses"
	}
	hdr := map[string]string{"X-Mock-Latency": "1s"}
	if !strings.Contains(body, `"stream":true`) {
		r, err := hc.post(path, key, body, hdr)
		if err != nil {
			t.Errorf("request %d: %v", i, err)
			return 0, 0, r
		}
		if r.Status != 200 {
			return r.Status, 0, r
		}
		return 200, creditAmount(t, r.JSON.Get("usage.cost")), r
	}
	res, err := hc.send(path, key, body, hdr)
	if err != nil {
		t.Errorf("request %d: %v", i, err)
		return 0, 0, response{}
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, 0, response{Status: res.StatusCode, Header: res.Header, Body: b, JSON: gjson.ParseBytes(b)}
	}
	evs, err := readStream(res.Body)
	if err != nil {
		t.Errorf("request %d: %v", i, err)
		return 0, 0, response{}
	}
	if strings.Contains(body, "ws/broken") {
		// The error event, then [DONE]; the cost of a stream without usage
		// is not sent (the caller knows it from a lone request).
		if len(evs) < 2 || evs[len(evs)-1].Data != "[DONE]" || gjson.Get(evs[len(evs)-2].Data, "error.code").Int() != 502 {
			t.Errorf("request %d: broken stream without its error event: %q", i, evs)
		}
		return 200, -1, response{}
	}
	var u gjson.Result
	for _, ev := range evs {
		d := gjson.Parse(ev.Data)
		if x := d.Get("usage"); x.IsObject() {
			u = x
		}
		if x := d.Get("response.usage"); x.IsObject() {
			u = x
		}
	}
	if evs[len(evs)-1].Data != "[DONE]" && !strings.Contains(path, "responses") || !u.Get("cost").Exists() {
		t.Errorf("request %d (%s): stream without usage.cost or [DONE]", i, body)
		return 200, 0, response{}
	}
	return 200, creditAmount(t, u.Get("cost")), response{}
}

// seamsBrokenCost sends a broken stream alone and returns the snapshot
// after it and what it cost (its answer cannot say).
func seamsBrokenCost(t *testing.T, c *client, key, mgmt string) (usageSnapshot, money.Amount) {
	t.Helper()
	pre := c.snapshot(key, mgmt)
	if st, cost, _ := seamsPost(t, c, key, 5); st != 200 || cost != -1 {
		t.Fatalf("broken stream: %d", st)
	}
	after := c.snapshot(key, mgmt)
	brokenCost := after.usage - pre.usage
	if brokenCost <= 0 {
		t.Fatalf("broken stream charged %s", brokenCost)
	}
	return after, brokenCost
}

// seamsBurst sends n of seamsBodies at once on a pool of n connections
// and returns what the admitted ones were charged (a broken stream costs
// brokenCost). Each is admitted with a cost or refused with a 402 of
// code; limit (what binds, for messages) admits some but not all; every
// admitted request searched once and no refused one did.
func seamsBurst(t *testing.T, e *webSearchEnv, key string, n int, brokenCost money.Amount, code, limit string) money.Amount {
	t.Helper()
	c := e.c
	e.search.Reset()
	hc := &client{t: t, gateway: c.gateway, admin: c.admin,
		http: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}}
	status := make([]int, n)
	costs := make([]money.Amount, n)
	refusals := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			status[i], costs[i], refusals[i] = seamsPost(t, hc, key, i)
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ok := 0
	var charged money.Amount
	for i := range n {
		switch status[i] {
		case 200:
			ok++
			if costs[i] == -1 {
				costs[i] = brokenCost
			}
			if costs[i] <= 0 {
				t.Fatalf("request %d admitted but charged %s", i, costs[i])
			}
			charged += costs[i]
		case 402:
			expect402(t, refusals[i], code, "", false)
		default:
			t.Fatalf("request %d: status %d: %s", i, status[i], refusals[i].Body)
		}
	}
	t.Logf("%d admitted, %s charged", ok, charged)
	if ok == 0 || ok == n {
		t.Fatalf("%d of %d admitted: %s should bind", ok, n, limit)
	}
	if got := len(e.search.Requests()); got != ok {
		t.Fatalf("%d searches for %d admitted requests", got, ok)
	}
	return charged
}

// seamsTeam makes an organization with 10 credits whose member is in a
// workspace "team" and under a guardrail "Member cap" (3 a day), and a key
// of that member in that workspace with a limit of 5. It returns the key,
// its hash and the guardrail's id.
func seamsTeam(t *testing.T, c *client) (org orgFixture, key, hash, guardrail string) {
	t.Helper()
	org = c.newOrg("10")
	c.api("POST", "/workspaces", org.Mgmt, `{"name":"Team","slug":"team"}`).expect(t, 201)
	c.api("POST", "/workspaces/team/members/add", org.Mgmt, `{"user_ids":["`+org.Member+`"]}`).expect(t, 200)
	key, hash = c.newKey(org.Mgmt, `{"name":"k","workspace_id":"team","creator_user_id":"`+org.Member+`","limit":5}`)
	guardrail = c.api("POST", "/guardrails", org.Mgmt, `{"name":"Member cap","limit_usd":3,"reset_interval":"daily"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+guardrail+"/assignments/members", org.Mgmt, `{"member_user_ids":["`+org.Member+`"]}`).expect(t, 200)
	return org, key, hash, guardrail
}

// Everything at once: a key in a non-default workspace with a daily
// workspace budget, its member under a guardrail with a spending limit, a
// key cap, and gateway-side web search on every kind of request (chat and
// translated Responses, streamed and not, a fallback, a broken stream), 96
// at once. The workspace budget binds: it is never passed; every admitted
// request is charged exactly once (the sum of the answers' costs is the
// key's usage, the account's usage, the workspace's and the member's);
// refused requests are 402 service_workspace_budget and search nothing.
func TestMoneyAllLimitsAtOnce(t *testing.T) {
	e := startSeams(t)
	c := e.c
	org, key, _, g := seamsTeam(t, c)
	const budget money.Amount = 150_000_000 // 0.15
	c.api("PUT", "/workspaces/team/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, budget)).expect(t, 200)

	before, brokenCost := seamsBrokenCost(t, c, key, org.Mgmt)
	charged := seamsBurst(t, e, key, 96, brokenCost, "service_workspace_budget", "the budget")
	after := c.snapshot(key, org.Mgmt)
	expectCharged(t, before, after, charged, "all limits at once")
	// The workspace's and the member's only key.
	charged = after.usage
	if charged > budget {
		t.Fatalf("workspace spent %s over its budget %s", charged, budget)
	}

	// The workspace's and the member's counters are exactly what was
	// charged: a probe fits only when the limit leaves exactly its hold.
	probe := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"probe"}]}`
	hold := holdOf(probe, 20)
	setWS := func(limit money.Amount) {
		c.api("PUT", "/workspaces/team/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, limit)).expect(t, 200)
	}
	setWS(charged + hold - 1)
	expect402(t, c.mustPost("/chat/completions", key, probe, nil), "service_workspace_budget", "", false)
	setWS(charged + hold)
	charged += creditAmount(t, c.mustPost("/chat/completions", key, probe, nil).expect(t, 200).JSON.Get("usage.cost"))
	c.api("DELETE", "/workspaces/team/budgets/daily", org.Mgmt, nil).expect(t, 200)
	setG := func(limit money.Amount) {
		c.api("PATCH", "/guardrails/"+g, org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, limit)).expect(t, 200)
	}
	setG(charged + hold - 1)
	expect402(t, c.mustPost("/chat/completions", key, probe, nil), "service_guardrail_budget", "", false)
	setG(charged + hold)
	c.mustPost("/chat/completions", key, probe, nil).expect(t, 200)
}

// Every failure path releases its holds at every level: after an engine
// failure, an upstream error, a client that leaves mid-stream, a
// guardrail's 403, a deactivated end user's 403 and the Responses
// translation's 400, a request still fits when the key's limit, the
// workspace budget and the member guardrail's limit leave exactly its hold.
func TestFailuresReleaseEveryHold(t *testing.T) {
	e := startSeams(t, withChunkDelay(t, "30ms"))
	c := e.c
	org, key, hash, g := seamsTeam(t, c)
	kg := c.api("POST", "/guardrails", org.Mgmt, `{"name":"No fallback","ignored_models":["ws/fallback"]}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+kg+"/assignments/keys", org.Mgmt, `{"key_hashes":["`+hash+`"]}`).expect(t, 200)

	probe := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"probe"}]}`
	hold := holdOf(probe, 20)
	// limits puts every limit at the key's usage (the workspace's and the
	// member's: their only key) plus room.
	limits := func(room money.Amount) {
		t.Helper()
		l := c.snapshot(key, org.Mgmt).usage + room
		c.api("PATCH", "/keys/"+hash, org.Mgmt, fmt.Sprintf(`{"limit":%s}`, l)).expect(t, 200)
		c.api("PUT", "/workspaces/team/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, l)).expect(t, 200)
		c.api("PATCH", "/guardrails/"+g, org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, l)).expect(t, 200)
	}
	fits := func(what string) {
		t.Helper()
		limits(hold - 1)
		if r := c.mustPost("/chat/completions", key, probe, nil); r.Status != 402 {
			t.Fatalf("after %s: a probe passed limits one short of its hold: %d %s", what, r.Status, r.Body)
		}
		limits(hold)
		if r := c.mustPost("/chat/completions", key, probe, nil); r.Status != 200 {
			t.Fatalf("after %s: a hold was left behind: %d %s", what, r.Status, r.Body)
		}
		c.api("PATCH", "/keys/"+hash, org.Mgmt, `{"limit":5}`).expect(t, 200)
		c.api("PUT", "/workspaces/team/budgets/daily", org.Mgmt, `{"limit_usd":5}`).expect(t, 200)
		c.api("PATCH", "/guardrails/"+g, org.Mgmt, `{"limit_usd":5}`).expect(t, 200)
	}
	fits("nothing")

	search := `,"plugins":[{"id":"web","max_results":2}]`
	e.search.ForceStatus("exa", http.StatusInternalServerError)
	c.mustPost("/chat/completions", key, `{"model":"ws/plain","max_tokens":20,"messages":[{"role":"user","content":"engine down"}]`+search+`}`, nil).
		expectError(t, 502, "exa")
	e.search.ForceStatus("exa", 0)
	fits("an engine failure")

	if r := c.mustPost("/chat/completions", key, `{"model":"ws/down","max_tokens":20,"messages":[{"role":"user","content":"provider down"}]`+search+`}`, nil); r.Status < 500 || !r.JSON.Get("error.message").Exists() {
		t.Fatalf("upstream error: %d %s", r.Status, r.Body)
	}
	fits("an upstream error")

	for _, abort := range []struct{ path, body string }{
		{"/chat/completions", `{"model":"ws/plain","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"leaving early"}]` + search + `}`},
		{"/responses", `{"model":"ws/chat","stream":true,"max_output_tokens":20,"input":"leaving early","tools":[{"type":"service:web_search"}]}`},
	} {
		before := c.snapshot(key, org.Mgmt)
		res, err := c.send(abort.path, key, abort.body, nil)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(res.Body)
		for range 3 {
			if _, err := readEvent(br); err != nil {
				t.Fatal(err)
			}
		}
		res.Body.Close()
		c.waitUsage(key, org.Mgmt, before, 10*time.Second, 200*time.Millisecond)
		fits("a client abort mid-stream on " + abort.path)
	}

	// The client leaves while the engine searches: nothing is charged.
	e.search.SetDelay(500 * time.Millisecond)
	before := c.snapshot(key, org.Mgmt)
	short := &client{t: t, gateway: c.gateway, admin: c.admin, http: &http.Client{Timeout: 150 * time.Millisecond}}
	if _, err := short.post("/chat/completions", key, `{"model":"ws/plain","max_tokens":20,"messages":[{"role":"user","content":"searching"}]`+search+`}`, nil); err == nil {
		t.Fatal("the request did not time out")
	}
	time.Sleep(700 * time.Millisecond)
	e.search.SetDelay(0)
	expectCharged(t, before, c.snapshot(key, org.Mgmt), 0, "abort during the search")
	fits("a client abort during the search")

	c.mustPost("/chat/completions", key, `{"model":"ws/fallback","max_tokens":20,"messages":[{"role":"user","content":"blocked"}]`+search+`}`, nil).
		expectError(t, 403, "guardrail")
	fits("a guardrail's 403")

	c.mustPost("/chat/completions", key, `{"model":"tollgate-mock","max_tokens":5,"user":"bob","messages":[{"role":"user","content":"hi"}]}`, nil).expect(t, 200)
	c.api("DELETE", "/end-users/bob", org.Mgmt, nil).expect(t, 200)
	c.mustPost("/chat/completions", key, `{"model":"ws/plain","max_tokens":20,"user":"bob","messages":[{"role":"user","content":"gone"}]`+search+`}`, nil).
		expectError(t, 403, "deactivated")
	fits("an end user's 403")

	c.mustPost("/responses", key, `{"model":"ws/chat","max_output_tokens":20,"input":"x","previous_response_id":"resp_1","tools":[{"type":"service:web_search"}]}`, nil).
		expectError(t, 400, "previous_response_id")
	fits("the translation's 400")
}

// A SIGKILL right after concurrent charges keeps the workspace's and the
// member's counters: after the restart the workspace budget and the
// member guardrail refuse a request one nano-credit short of its hold and
// admit it with exactly its hold.
func TestRestartKeepsScopeCounters(t *testing.T) {
	p := startProcess(t, t.TempDir())
	c := newClient(t, p.gateway, p.admin)
	org := c.newOrg("10")
	c.api("POST", "/workspaces", org.Mgmt, `{"name":"Team","slug":"team"}`).expect(t, 201)
	c.api("POST", "/workspaces/team/members/add", org.Mgmt, `{"user_ids":["`+org.Member+`"]}`).expect(t, 200)
	key, _ := c.newKey(org.Mgmt, `{"name":"k","workspace_id":"team","creator_user_id":"`+org.Member+`"}`)
	g := c.api("POST", "/guardrails", org.Mgmt, `{"name":"Member cap","limit_usd":5,"reset_interval":"daily"}`).expect(t, 201).JSON.Get("data.id").Str
	c.api("POST", "/guardrails/"+g+"/assignments/members", org.Mgmt, `{"member_user_ids":["`+org.Member+`"]}`).expect(t, 200)
	c.api("PUT", "/workspaces/team/budgets/daily", org.Mgmt, `{"limit_usd":5}`).expect(t, 200)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"tollgate-mock","max_tokens":%d,"messages":[{"role":"user","content":"before the crash"}]}`, 5+i)
			if r, err := c.post("/chat/completions", key, body, nil); err != nil || r.Status != 200 {
				t.Errorf("request %d: %v %d %s", i, err, r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	spent := c.snapshot(key, org.Mgmt).usage
	p.kill()
	p.start(t)
	c = newClient(t, p.gateway, p.admin)
	if got := c.snapshot(key, org.Mgmt).usage; got != spent || spent == 0 {
		t.Fatalf("key usage %s after the restart, %s before", got, spent)
	}
	probe := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"probe"}]}`
	hold := holdOf(probe, 20)
	setWS := func(l money.Amount) {
		c.api("PUT", "/workspaces/team/budgets/daily", org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, l)).expect(t, 200)
	}
	setG := func(l money.Amount) {
		c.api("PATCH", "/guardrails/"+g, org.Mgmt, fmt.Sprintf(`{"limit_usd":%s}`, l)).expect(t, 200)
	}
	setWS(spent + hold - 1)
	expect402(t, c.mustPost("/chat/completions", key, probe, nil), "service_workspace_budget", "", false)
	setWS(5 * money.AmountScale) // 5 credits: the workspace does not bind the probe
	setG(spent + hold - 1)
	expect402(t, c.mustPost("/chat/completions", key, probe, nil), "service_guardrail_budget", "", false)
	setG(spent + hold)
	setWS(spent + hold)
	c.mustPost("/chat/completions", key, probe, nil).expect(t, 200)
}

// Analytics split a BYOK generation's cost as the counters do: its
// gateway-side search, paid in credits, is usage; the tokens, paid with
// the caller's own provider key, are byok_usage.
func TestAnalyticsSplitBYOKSearchCredits(t *testing.T) {
	e := startWebSearch(t)
	c := e.c
	c.api("POST", "/byok", e.org.MgmtKey, `{"provider":"p","key":"sk-own-key-for-analytics-0123"}`).expect(t, 201)
	before := c.snapshot(e.key, e.org.MgmtKey)
	r := c.mustPost("/chat/completions", e.key, byokSearch, nil).expect(t, 200)
	cost := creditAmount(t, r.JSON.Get("usage.cost"))
	expectCharged(t, before, c.snapshot(e.key, e.org.MgmtKey), byokSearchCredits, "BYOK search")
	var row gjson.Result
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows := c.api("POST", "/analytics/query", e.org.MgmtKey, `{"metrics":["usage","byok_usage","request_count"]}`).expect(t, 200).JSON.Get("data.data").Array()
		if len(rows) == 1 && rows[0].Get("request_count").Int() == 1 {
			row = rows[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("analytics rows %v", rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if u, b := creditAmount(t, row.Get("usage")), creditAmount(t, row.Get("byok_usage")); u != byokSearchCredits || b != cost-byokSearchCredits {
		t.Fatalf("analytics usage %s byok_usage %s, want %s and %s", u, b, byokSearchCredits, cost-byokSearchCredits)
	}
}

// The same mix of requests against a small prepaid balance: the balance
// binds, is never overspent, and every admitted request is charged once.
func TestMoneyBalanceBindsAllKinds(t *testing.T) {
	e := startSeams(t)
	c := e.c
	org := c.newTenant("organization", "0.1")
	key, _ := c.newKey(org.MgmtKey, `{"name":"k"}`)
	before, brokenCost := seamsBrokenCost(t, c, key, org.MgmtKey)
	charged := seamsBurst(t, e, key, 60, brokenCost, "service_credits", "the balance")
	after := c.snapshot(key, org.MgmtKey)
	expectCharged(t, before, after, charged, "balance burst")
	if after.totalUsage > after.totalCredits {
		t.Fatalf("balance overspent: usage %s of credits %s", after.totalUsage, after.totalCredits)
	}
}
