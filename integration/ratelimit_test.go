package integration

// Platform rate limits: the free-model caps per account
// and the abuse ceilings of the tollgate directive, through a real Caddy.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate-dev/caddy-tollgate/testkit/freeport"
)

// withFreeModel sets the tollgate app's free_model caps.
func withFreeModel(t *testing.T, perMinute, perDay, perDayPaid int, threshold string) func(string) string {
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\tbrand service\n", fmt.Sprintf(
			"\t\tbrand service\n\t\tfree_model {\n\t\t\tper_minute %d\n\t\t\tper_day %d\n\t\t\tper_day_paid %d\n\t\t\tpaid_threshold %s\n\t\t}\n",
			perMinute, perDay, perDayPaid, threshold))
	}
}

// withAuthCeilings gives the gateway abuse ceilings, e.g. "per_key 3 1m".
func withAuthCeilings(t *testing.T, lines ...string) func(string) string {
	return withTollgateOptions(t, lines...)
}

// withTollgateOptions adds lines to the gateway's tollgate directive.
func withTollgateOptions(t *testing.T, lines ...string) func(string) string {
	return func(cfg string) string {
		return replaceOnce(t, cfg, "\t\t# the gateway's options\n", "\t\t"+strings.Join(lines, "\n\t\t")+"\n\t\t# the gateway's options\n")
	}
}

// withProxyAt sends the harness's catalog models (provider mock) through
// the proxy at addr.
func withProxyAt(addr string) func(string) string {
	return func(cfg string) string {
		return strings.ReplaceAll(cfg, "provider mock http://"+mockAddr+"/v1", "provider mock http://"+addr+"/v1")
	}
}

// freeDaily is GET /key's free_model_daily_requests and is_free_tier.
type freeDaily struct {
	used, limit, remaining int64
	freeTier               bool
}

func (c *client) freeDaily(key string) freeDaily {
	c.t.Helper()
	d := c.api("GET", "/key", key, nil).expect(c.t, 200).JSON.Get("data")
	f := d.Get("free_model_daily_requests")
	for _, n := range []string{"used", "limit", "remaining"} {
		if f.Get(n).Type != gjson.Number {
			c.t.Fatalf("free_model_daily_requests.%s is not a number: %s", n, d.Raw)
		}
	}
	if d.Get("is_free_tier").Type != gjson.True && d.Get("is_free_tier").Type != gjson.False {
		c.t.Fatalf("is_free_tier is not a boolean: %s", d.Raw)
	}
	return freeDaily{used: f.Get("used").Int(), limit: f.Get("limit").Int(), remaining: f.Get("remaining").Int(), freeTier: d.Get("is_free_tier").Bool()}
}

func expectDaily(t *testing.T, got freeDaily, used, limit int64, freeTier bool, what string) {
	t.Helper()
	want := freeDaily{used: used, limit: limit, remaining: max(limit-used, 0), freeTier: freeTier}
	if got != want {
		t.Fatalf("%s: free_model_daily_requests/is_free_tier %+v, want %+v", what, got, want)
	}
}

// expectPlatform429 checks a refusal by the platform exactly: the body, and
// X-RateLimit-Limit, -Remaining 0, -Reset (epoch ms, after sent and at most
// resetWithin later) and Retry-After in whole seconds up to the reset.
func expectPlatform429(t *testing.T, r response, limitType string, limit int64, sent time.Time, resetWithin time.Duration) time.Time {
	t.Helper()
	want := `{"error":{"code":429,"message":"Rate limit exceeded","metadata":{"error_type":"rate_limit_exceeded","limit_type":"` + limitType + `"}}}`
	if r.Status != 429 || strings.TrimSpace(string(r.Body)) != want {
		t.Fatalf("status %d body %s, want 429 %s", r.Status, r.Body, want)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	if got := r.Header.Get("X-RateLimit-Limit"); got != strconv.FormatInt(limit, 10) {
		t.Fatalf("X-RateLimit-Limit %q, want %d", got, limit)
	}
	if got := r.Header.Get("X-RateLimit-Remaining"); got != "0" {
		t.Fatalf("X-RateLimit-Remaining %q, want 0", got)
	}
	ms, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		t.Fatalf("X-RateLimit-Reset %q: %v", r.Header.Get("X-RateLimit-Reset"), err)
	}
	reset := time.UnixMilli(ms)
	if !reset.After(sent) || reset.Sub(sent) > resetWithin {
		t.Fatalf("X-RateLimit-Reset %v is not within %v after the request (%v)", reset.UTC(), resetWithin, sent.UTC())
	}
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || time.Duration(ra-1)*time.Second > reset.Sub(sent) {
		t.Fatalf("Retry-After %q, want whole seconds up to the reset %v away", r.Header.Get("Retry-After"), reset.Sub(sent))
	}
	if g := r.Header.Get("X-Generation-Id"); g != "" {
		t.Fatalf("a refused request has a generation %q", g)
	}
	return reset
}

func utcMinute() time.Time { return time.Now().UTC().Truncate(time.Minute) }

func nextUTCMidnight(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
}

var freeChat = chatBody("tollgate-mock:free", "")

// TestFreeModelPerMinute: per_minute 3 (per_day 5): the fourth request in a
// UTC minute is refused before any provider call; exempt accounts and BYOK
// requests are neither counted nor capped.
func TestFreeModelPerMinute(t *testing.T) {
	// The provider's own rate-limit headers must never reach the client.
	rec := newRecordingProxy(t, mockAddr, http.Header{"X-Ratelimit-Limit": {"999"}, "X-Ratelimit-Reset": {"1"}})
	startInProcessWith(t, chain(withFreeModel(t, 3, 5, 8, "9"), withProxyAt(rec.addr())))
	c := newClient(t, gatewayAddr, adminAddr)

	t.Run("cap", func(t *testing.T) {
		// A UTC minute boundary inside the sequence resets the counter:
		// run it again on a fresh account then.
		for range 3 {
			tn := c.newTenant("organization", "1")
			key, _ := c.newKey(tn.MgmtKey, `{"name":"free"}`)
			start := utcMinute()
			rec.take()
			var rs []response
			var sent []time.Time
			var daily []freeDaily
			for range 4 {
				sent = append(sent, time.Now())
				rs = append(rs, c.mustPost("/chat/completions", key, freeChat, nil))
				daily = append(daily, c.freeDaily(key))
			}
			calls := len(rec.take())
			if utcMinute() != start {
				t.Log("a UTC minute ended during the sequence; again")
				continue
			}
			for i := range 3 {
				rs[i].expect(t, 200)
				expectNoRateLimitHeaders(t, rs[i], "a free answer")
				expectDaily(t, daily[i], int64(i+1), 5, false, fmt.Sprintf("after request %d", i+1))
			}
			reset := expectPlatform429(t, rs[3], "free_model_per_minute", 3, sent[3], time.Minute)
			if reset.UnixMilli()%60_000 != 0 || !reset.Equal(start.Add(time.Minute)) {
				t.Fatalf("X-RateLimit-Reset %v, want the end of the UTC minute %v", reset.UTC(), start.Add(time.Minute))
			}
			// The refusal was not counted and reached no provider.
			expectDaily(t, daily[3], 3, 5, false, "after the refusal")
			if calls != 3 {
				t.Fatalf("%d provider calls, want 3", calls)
			}
			// The paid variant has no platform cap; paid requests are not
			// counted.
			r := c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":10`), nil).expect(t, 200)
			expectNoRateLimitHeaders(t, r, "a paid answer")
			s := c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"stream":true`), nil).expect(t, 200)
			expectNoRateLimitHeaders(t, s, "a paid stream")
			expectDaily(t, c.freeDaily(key), 3, 5, false, "after paid requests")
			return
		}
		t.Fatal("three UTC minute boundaries in a row")
	})

	t.Run("exempt account", func(t *testing.T) {
		tn := c.newTenant("organization", "1")
		key, _ := c.newKey(tn.MgmtKey, `{"name":"exempt"}`)
		acct := c.operator("PATCH", "/accounts/"+tn.AccountID, `{"rate_limit_exempt":true}`).expect(t, 200)
		if !acct.JSON.Get("data.rate_limit_exempt").Bool() {
			t.Fatalf("PATCH: %s", acct.Body)
		}
		// Past both the minute's (3) and the day's (5) caps.
		for i := range 7 {
			r := c.mustPost("/chat/completions", key, freeChat, nil)
			if r.Status != 200 {
				t.Fatalf("exempt request %d: %d %s", i+1, r.Status, r.Body)
			}
			expectNoRateLimitHeaders(t, r, "an exempt answer")
		}
		expectDaily(t, c.freeDaily(key), 0, 5, false, "exempt account")
		// No longer exempt: counted again.
		c.operator("PATCH", "/accounts/"+tn.AccountID, `{"rate_limit_exempt":false}`).expect(t, 200)
		c.mustPost("/chat/completions", key, freeChat, nil).expect(t, 200)
		expectDaily(t, c.freeDaily(key), 1, 5, false, "exemption lifted")
	})

	t.Run("BYOK", func(t *testing.T) {
		tn := c.newTenant("organization", "1")
		key, hash := c.newKey(tn.MgmtKey, `{"name":"own key"}`)
		cred := c.api("POST", "/byok", tn.MgmtKey, `{"provider":"mock","key":"sk-own-free-model-key-1234"}`).expect(t, 201)
		for i := range 7 {
			r := c.mustPost("/chat/completions", key, freeChat, nil)
			if r.Status != 200 {
				t.Fatalf("BYOK request %d: %d %s", i+1, r.Status, r.Body)
			}
		}
		expectDaily(t, c.freeDaily(key), 0, 5, false, "BYOK requests")
		// Served through the account's key, and free: nothing charged.
		if k := c.api("GET", "/keys/"+hash, tn.MgmtKey, nil).expect(t, 200).JSON.Get("data"); creditAmount(t, k.Get("usage")) != 0 {
			t.Fatalf("BYOK free requests charged usage: %s", k.Raw)
		}
		c.api("DELETE", "/byok/"+cred.JSON.Get("data.id").Str, tn.MgmtKey, nil).expect(t, 200)
		c.mustPost("/chat/completions", key, freeChat, nil).expect(t, 200)
		expectDaily(t, c.freeDaily(key), 1, 5, false, "after deleting the credential")
	})
}

// TestFreeModelPerDay: per_day 5 below 9 credits purchased, per_day_paid 8
// from 9; GET /key reports the day's counter exactly.
func TestFreeModelPerDay(t *testing.T) {
	rec := newRecordingProxy(t, mockAddr, nil)
	startInProcessWith(t, chain(withFreeModel(t, 100, 5, 8, "9"), withProxyAt(rec.addr())))
	c := newClient(t, gatewayAddr, adminAddr)
	day := time.Now().UTC().YearDay()
	defer func() {
		if time.Now().UTC().YearDay() != day {
			t.Skip("a UTC day ended during the test")
		}
	}()

	// use makes n free requests that must pass, checking the counter after
	// each.
	use := func(t *testing.T, key string, n int, used, limit int64, freeTier bool) {
		t.Helper()
		for range n {
			r := c.mustPost("/chat/completions", key, freeChat, nil).expect(t, 200)
			expectNoRateLimitHeaders(t, r, "a free answer")
			used++
			expectDaily(t, c.freeDaily(key), used, limit, freeTier, fmt.Sprintf("after free request %d", used))
		}
	}
	refused := func(t *testing.T, key string, limit int64) {
		t.Helper()
		rec.take()
		sent := time.Now()
		r := c.mustPost("/chat/completions", key, freeChat, nil)
		reset := expectPlatform429(t, r, "free_model_per_day", limit, sent, 24*time.Hour)
		if want := nextUTCMidnight(sent); !reset.Equal(want) {
			t.Fatalf("X-RateLimit-Reset %v, want the next UTC midnight %v", reset.UTC(), want)
		}
		if n := len(rec.take()); n != 0 {
			t.Fatalf("a refused request reached the provider (%d calls)", n)
		}
		expectDaily(t, c.freeDaily(key), limit, limit, false, "after the refusal")
	}

	t.Run("below the threshold", func(t *testing.T) {
		tn := c.newTenant("organization", "8.99")
		key, _ := c.newKey(tn.MgmtKey, `{"name":"8.99"}`)
		expectDaily(t, c.freeDaily(key), 0, 5, false, "new account")
		use(t, key, 5, 0, 5, false)
		refused(t, key, 5)
		// Other keys of the account share its counter.
		other, _ := c.newKey(tn.MgmtKey, `{"name":"second"}`)
		expectDaily(t, c.freeDaily(other), 5, 5, false, "second key")
		expectPlatform429(t, c.mustPost("/responses", other, `{"model":"tollgate-mock:free","input":"again?"}`, nil),
			"free_model_per_day", 5, time.Now(), 24*time.Hour)
		// The paid variant is not capped.
		c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":10`), nil).expect(t, 200)

		// 0.01 more makes 9 purchased: the paid tier's ceiling at once.
		c.operator("POST", "/accounts/"+tn.AccountID+"/credits", `{"amount":"0.01"}`).expect(t, 201)
		expectDaily(t, c.freeDaily(key), 5, 8, false, "at the threshold")
		use(t, key, 3, 5, 8, false)
		refused(t, key, 8)
	})

	t.Run("at the threshold", func(t *testing.T) {
		tn := c.newTenant("personal", "9")
		key, _ := c.newKey(tn.MgmtKey, `{"name":"9"}`)
		expectDaily(t, c.freeDaily(key), 0, 8, false, "new account")
		use(t, key, 8, 0, 8, false)
		refused(t, key, 8)
	})

	t.Run("no purchase", func(t *testing.T) {
		// An invoiced account buys nothing but may spend: the free tier.
		mk := c.newInvoicedTenant().MgmtKey
		key, _ := c.newKey(mk, `{"name":"invoiced"}`)
		expectDaily(t, c.freeDaily(key), 0, 5, true, "no purchase")
		use(t, key, 2, 0, 5, true)
		// A prepaid account without credits is on the free tier too (and
		// refused free models for its zero balance).
		broke := c.newTenant("organization", "")
		bkey, _ := c.newKey(broke.MgmtKey, `{"name":"broke"}`)
		expectDaily(t, c.freeDaily(bkey), 0, 5, true, "prepaid, no purchase")
		c.mustPost("/chat/completions", bkey, freeChat, nil).expectError(t, 402, "")
		expectDaily(t, c.freeDaily(bkey), 0, 5, true, "after the 402")
	})
}

// startProcessWith is startProcess with the Caddyfile changed by edit.
func startProcessWith(t *testing.T, dataDir string, edit func(string) string) *process {
	t.Helper()
	p := &process{gateway: freeport.Addr(t), admin: freeport.Addr(t), mock: freeport.Addr(t), dataDir: dataDir, log: new(lockedBuffer)}
	p.config = filepath.Join(t.TempDir(), "Caddyfile")
	cfg := edit(gatewayCaddyfile(p.admin, dataDir, p.gateway, p.mock, "1ms"))
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t)
	return p
}

// TestFreeModelCountersSurviveRestart: the counters are stored with the
// account; a SIGKILL and a restart keep them.
func TestFreeModelCountersSurviveRestart(t *testing.T) {
	// per_minute 2 and per_day 2: after two requests the next is refused
	// by the minute's cap if the UTC minute is the same, else the day's.
	p := startProcessWith(t, t.TempDir(), withFreeModel(t, 2, 2, 2, "1000"))
	c := newClient(t, p.gateway, p.admin)
	tn := c.newTenant("organization", "5")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"restart"}`)
	minute := utcMinute() // before the first request: both must fall in it
	c.mustPost("/chat/completions", key, freeChat, nil).expect(t, 200)
	c.mustPost("/chat/completions", key, freeChat, nil).expect(t, 200)
	expectDaily(t, c.freeDaily(key), 2, 2, false, "before the restart")

	p.kill()
	p.start(t)
	c = newClient(t, p.gateway, p.admin)
	expectDaily(t, c.freeDaily(key), 2, 2, false, "after the restart")
	sent := time.Now()
	r := c.mustPost("/chat/completions", key, freeChat, nil)
	if utcMinute() == minute {
		expectPlatform429(t, r, "free_model_per_minute", 2, sent, time.Minute)
	} else {
		expectPlatform429(t, r, "free_model_per_day", 2, sent, 24*time.Hour)
	}
	expectDaily(t, c.freeDaily(key), 2, 2, false, "after the refusal")
}

// TestAbuseCeilingPerKey: per_key 3 1m refuses a key's fourth request in a
// burst, on every route, whatever the model; other keys are unaffected.
func TestAbuseCeilingPerKey(t *testing.T) {
	startInProcessWith(t, withAuthCeilings(t, "per_key 3 1m"))
	c := newClient(t, gatewayAddr, adminAddr)
	tn := c.newTenant("organization", "1")
	key, _ := c.newKey(tn.MgmtKey, `{"name":"busy"}`)
	other, _ := c.newKey(tn.MgmtKey, `{"name":"quiet"}`)
	balance := func() string {
		return c.operator("GET", "/accounts/"+tn.AccountID, nil).expect(t, 200).JSON.Get("data.balance").Raw
	}

	c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":10`), nil).expect(t, 200)
	c.mustPost("/chat/completions", key, freeChat, nil).expect(t, 200)
	c.api("GET", "/key", key, nil).expect(t, 200)
	before := balance()
	sent := time.Now()
	// Three requests a minute: a token every 20s.
	expectPlatform429(t, c.mustPost("/chat/completions", key, chatBody("tollgate-mock", `,"max_tokens":10`), nil),
		"abuse_per_key", 3, sent, 20*time.Second)
	expectPlatform429(t, c.api("GET", "/key", key, nil), "abuse_per_key", 3, time.Now(), 20*time.Second)
	if after := balance(); after != before {
		t.Fatalf("a refused request was charged: balance %s, then %s", before, after)
	}
	// Another key of the same account has its own bucket; a wrong key is
	// refused as such.
	c.mustPost("/chat/completions", other, freeChat, nil).expect(t, 200)
	c.mustPost("/chat/completions", "sk-invalid-key", freeChat, nil).expectError(t, 401, "Invalid API key")
}

// TestAbuseCeilingPerIP: per_ip 3 1m counts every request under /api/v1
// from the address, before its key is even looked up.
func TestAbuseCeilingPerIP(t *testing.T) {
	startInProcessWith(t, withAuthCeilings(t, "per_ip 3 1m"))
	c := newClient(t, gatewayAddr, adminAddr)
	for range 3 {
		c.mustPost("/chat/completions", "sk-invalid-key", freeChat, nil).expectError(t, 401, "Invalid API key")
	}
	expectPlatform429(t, c.mustPost("/chat/completions", "sk-invalid-key", freeChat, nil), "abuse_per_ip", 3, time.Now(), 20*time.Second)
	expectPlatform429(t, c.api("GET", "/models", "", nil), "abuse_per_ip", 3, time.Now(), 20*time.Second)
	// A valid key from the same address is refused as well.
	tn := c.newTenant("organization", "1")
	mgmt := c.api("GET", "/keys", tn.MgmtKey, nil)
	expectPlatform429(t, mgmt, "abuse_per_ip", 3, time.Now(), 20*time.Second)
}
