package integration

import (
	"fmt"
	"testing"
)

// 200 requests released at once against a key whose limit holds 10 of them:
// admission holds each request's estimate while it runs (the upstream is
// slow, so none finishes before all are decided), so at most 10 pass and the
// rest get 402 service_key_limit; the key never spends past its limit; and
// once every hold is released, a request needing exactly the rest of the
// limit passes (no phantom holds).
func TestConcurrencyKeyLimit(t *testing.T) {
	startInProcess(t)
	c := newClient(t, gatewayAddr, adminAddr)
	// 1000 credits: at or above the threshold (100) the in-flight budget
	// does not apply, and the balance never limits.
	org := c.newTenant("organization", "1000")
	const n, fit = 200, 10
	body := `{"model":"tollgate-mock","max_tokens":20,"messages":[{"role":"user","content":"one of many concurrent requests"}]}`
	hold := holdOf(body, 20)
	limit := hold*fit + hold/2 // 10.5 holds
	key, _ := c.newKey(org.MgmtKey, fmt.Sprintf(`{"name":"crowded","limit":%s}`, limit))

	results, errs, elapsed := postAtOnce(t, c, n, func(int) string { return key }, body)

	var failed []string
	for i := range n {
		if errs[i] != nil {
			failed = append(failed, fmt.Sprintf("request %d: %v", i, errs[i]))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d requests failed after %v, first: %s", len(failed), n, elapsed, failed[0])
	}
	ok, limited, charged := tallyCharges(t, results, errs, "service_key_limit")
	t.Logf("%d passed, %d refused in %v", ok, limited, elapsed)
	// Admission is sequential and no request finishes within the burst's
	// latency, so exactly 10 fit.
	checkFit(t, results, ok, fit)
	s := c.snapshot(key, org.MgmtKey)
	if s.usage != charged || s.totalUsage != charged {
		t.Fatalf("key usage %s, account usage %s, sum of answers %s", s.usage, s.totalUsage, charged)
	}
	if s.usage > limit {
		t.Fatalf("usage %s exceeds the limit %s", s.usage, limit)
	}
	if *s.remaining != limit-s.usage {
		t.Fatalf("limit_remaining %s, want %s", *s.remaining, limit-s.usage)
	}

	// Every hold is released: a request whose hold is the whole rest of
	// the limit (to the nano-credit, give or take one token) passes.
	rest := limit - s.usage
	probe := func(m int64) string {
		return fmt.Sprintf(`{"model":"tollgate-mock","max_tokens":%d,"messages":[{"role":"user","content":"fits exactly"}]}`, m)
	}
	m := int64(rest-tokenCost(promptEstimate(probe(1)), 0))/int64(completionPrice) + 2
	for holdOf(probe(m), m) > rest {
		m--
	}
	if h := holdOf(probe(m), m); rest-h >= completionPrice+promptPrice {
		t.Fatalf("test setup: probe hold %s for a rest of %s", h, rest)
	}
	// One token more does not fit.
	expect402(t, c.mustPost("/chat/completions", key, probe(m+1), nil), "service_key_limit", "", false)
	c.mustPost("/chat/completions", key, probe(m), nil).expect(t, 200)
}
