package integration

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// crashLoad is what the load's workers saw.
type crashLoad struct {
	mu         sync.Mutex
	received   money.Amount // sum of usage.cost of complete answers
	complete   int
	generation map[string]money.Amount // complete answers' generation ids and costs
	incomplete int                     // requests that ended without a complete answer
	unexpected []string                // complete answers that are not 200
}

// oneRequest sends a request and reports the cost of its complete answer
// and its generation id; ok is false when the answer did not arrive whole.
func oneRequest(c *client, key, path, body string, stream bool) (cost money.Amount, genID string, ok bool, unexpected string) {
	res, err := c.send(path, key, body, nil)
	if err != nil {
		return 0, "", false, ""
	}
	defer res.Body.Close()
	cost, ok, unexpected = readAnswerCost(res, stream)
	return cost, res.Header.Get("X-Generation-Id"), ok, unexpected
}

// readAnswerCost reads an answer's usage.cost.
func readAnswerCost(res *http.Response, stream bool) (cost money.Amount, ok bool, unexpected string) {
	if res.StatusCode != 200 {
		b, err := io.ReadAll(res.Body)
		if err != nil {
			return 0, false, ""
		}
		return 0, false, fmt.Sprintf("%d %s", res.StatusCode, b)
	}
	var usage gjson.Result
	if stream {
		evs, err := readStream(res.Body)
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Data != "[DONE]" {
			return 0, false, ""
		}
		for _, ev := range evs {
			d := gjson.Parse(ev.Data)
			if u := d.Get("usage"); u.IsObject() {
				usage = u
			}
			if u := d.Get("response.usage"); u.IsObject() {
				usage = u
			}
		}
	} else {
		b, err := io.ReadAll(res.Body)
		if err != nil || !gjson.ValidBytes(b) {
			return 0, false, ""
		}
		usage = gjson.GetBytes(b, "usage")
	}
	v := usage.Get("cost")
	if v.Type != gjson.Number {
		return 0, false, "complete answer without usage.cost"
	}
	a, err := money.ParseAmount(v.Raw)
	if err != nil {
		return 0, false, "usage.cost " + v.Raw
	}
	return a, true, ""
}

// Killing the gateway (SIGKILL) under load loses no charge whose answer a
// client received, and doubles none: after a restart on the same data
// directory the recorded usage is at least the sum of the costs clients
// received and at most that plus, for every request that ended without a
// complete answer, the most one request can cost (its charge may have been
// made durable before the kill cut the answer).
func TestCrashUnderLoadKeepsCharges(t *testing.T) {
	p := startProcess(t, t.TempDir())
	c := newClient(t, p.gateway, p.admin)
	org := c.newTenant("organization", "1000")
	key, _ := c.newKey(org.MgmtKey, `{"name":"loaded"}`)

	type kind struct {
		path, model string
		stream      bool
	}
	const prompt = "a request under load before the crash"
	kinds := []kind{
		{"/chat/completions", "tollgate-mock", false},
		{"/chat/completions", "tollgate-mock", true},
		{"/responses", "tollgate-mock", true},
		{"/responses", "mock/echo", false},
	}
	bodyOf := func(k kind) string {
		if k.path == "/responses" {
			return fmt.Sprintf(`{"model":%q,"stream":%t,"input":%q}`, k.model, k.stream, prompt)
		}
		return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":%q}]}`, k.model, k.stream, prompt)
	}
	// The most one request can be charged: its reported usage when it
	// completes (the mock's rule: words + 4 prompt tokens, the answer's
	// words), or the abort rule (the prompt estimate, the whole answer's
	// text estimate) when it is cut.
	var maxCost money.Amount
	for _, k := range kinds {
		text := "Mock answer from " + k.model + ": " + prompt
		full := tokenCost(words(prompt)+4, words(text))
		cut := tokenCost(promptEstimate(bodyOf(k)), textEstimate(len(text)))
		maxCost = max(maxCost, full, cut)
		cost, _, ok, bad := oneRequest(c, key, k.path, bodyOf(k), k.stream)
		if !ok || cost != full {
			t.Fatalf("%s %s stream=%t: complete %t, cost %s (want %s) %s", k.path, k.model, k.stream, ok, cost, full, bad)
		}
	}
	base := c.snapshot(key, org.MgmtKey)

	load := &crashLoad{generation: map[string]money.Amount{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wc := &client{t: t, gateway: c.gateway, admin: c.admin,
			http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := kinds[(w+i)%len(kinds)]
				cost, genID, ok, bad := oneRequest(wc, key, k.path, bodyOf(k), k.stream)
				load.mu.Lock()
				switch {
				case ok:
					load.received += cost
					load.complete++
					load.generation[genID] = cost
				case bad != "":
					load.unexpected = append(load.unexpected, bad)
				default:
					load.incomplete++
				}
				load.mu.Unlock()
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	p.kill()
	close(stop)
	wg.Wait()
	if len(load.unexpected) > 0 {
		t.Fatalf("%d unexpected answers under load, first: %s", len(load.unexpected), load.unexpected[0])
	}
	if load.complete < 20 {
		t.Fatalf("only %d complete answers before the kill", load.complete)
	}

	p.start(t)
	c = newClient(t, p.gateway, p.admin)
	after := c.snapshot(key, org.MgmtKey)
	recorded := after.usage - base.usage
	if after.totalUsage-base.totalUsage != recorded {
		t.Fatalf("account usage rose by %s, key usage by %s", after.totalUsage-base.totalUsage, recorded)
	}
	upper := load.received + money.Amount(load.incomplete)*maxCost
	t.Logf("%d complete answers (%s), %d without a complete answer (max %s each); recorded %s",
		load.complete, load.received, load.incomplete, maxCost, recorded)
	if recorded < load.received {
		t.Fatalf("charges lost in the crash: recorded %s, clients received answers costing %s", recorded, load.received)
	}
	if recorded > upper {
		t.Fatalf("charges doubled: recorded %s, more than %s received + %d cut requests × %s", recorded, load.received, load.incomplete, maxCost)
	}
	if after.totalCredits != base.totalCredits {
		t.Fatalf("credits changed: %s -> %s", base.totalCredits, after.totalCredits)
	}
	// Every complete answer's generation record survived, with its cost
	// (the journal read back at the restart).
	for id, cost := range load.generation {
		g := c.api("GET", "/generation?id="+id, key, nil).expect(t, 200).JSON.Get("data")
		if got, err := money.ParseAmount(g.Get("total_cost").Raw); err != nil || got != cost {
			t.Fatalf("generation %s after the restart: total_cost %s, the answer said %s", id, g.Get("total_cost").Raw, cost)
		}
	}

	// After the restart, requests are charged normally.
	for _, k := range kinds {
		before := c.snapshot(key, org.MgmtKey)
		cost, _, ok, bad := oneRequest(c, key, k.path, bodyOf(k), k.stream)
		if !ok || cost == 0 {
			t.Fatalf("%s after restart: complete %t, cost %s %s", k.path, ok, cost, bad)
		}
		expectCharged(t, before, c.snapshot(key, org.MgmtKey), cost, "after restart "+k.path)
	}
}
