package sharedledger

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// The compare-and-set script itself, against a real redis-server.
func TestSharedLedgerScript(t *testing.T) {
	srv := redistest.Start(t)
	l := openReplica(t, srv, "s:", 0).l
	rc := l.rb.Client()
	ctx := t.Context()
	run := func(sc script) int64 {
		t.Helper()
		l.mu.Lock()
		defer l.mu.Unlock()
		status, err := l.run(&sc)
		if err != nil {
			t.Fatal(err)
		}
		return status
	}

	// Absent fields are expected as "": the first write lands.
	if got := run(script{accountID: "acct", triples: []string{"a", "", `{"u":"1"}`, "k:x", "", `{"h":"2"}`}}); got != 1 {
		t.Fatalf("first write: status %d", got)
	}
	// A stale expectation changes nothing and answers the current values.
	if got := run(script{accountID: "acct", triples: []string{"a", `{"u":"0"}`, `{"u":"5"}`, "k:x", `{"h":"2"}`, ""}}); got != 0 {
		t.Fatalf("stale write: status %d", got)
	}
	if v, _ := rc.HGet(ctx, "s:{tg}~m/acct", "a").Result(); v != `{"u":"1"}` {
		t.Fatalf("a stale write changed the field: %s", v)
	}
	if l.raw["acct"]["a"].raw != `{"u":"1"}` || l.raw["acct"]["k:x"].raw != `{"h":"2"}` {
		t.Fatalf("the replica did not adopt the current values: %v", l.raw["acct"])
	}
	// An empty new value deletes the field.
	if got := run(script{accountID: "acct", triples: []string{"k:x", `{"h":"2"}`, ""}}); got != 1 {
		t.Fatalf("delete: status %d", got)
	}
	if n, _ := rc.HExists(ctx, "s:{tg}~m/acct", "k:x").Result(); n {
		t.Fatal("the field was not deleted")
	}

	// A settlement's generation is written once: a repeat changes nothing.
	settle := script{accountID: "acct", genID: "gen-1", genKey: "s:g/gen-1", genValue: `{"id":"gen-1"}`,
		triples: []string{"a", `{"u":"1"}`, `{"u":"2"}`}}
	if got := run(settle); got != 1 {
		t.Fatalf("settle: status %d", got)
	}
	settle.triples = []string{"a", `{"u":"2"}`, `{"u":"3"}`}
	if got := run(settle); got != 2 {
		t.Fatalf("repeated settle: status %d, want 2 (already written)", got)
	}
	if v, _ := rc.HGet(ctx, "s:{tg}~m/acct", "a").Result(); v != `{"u":"2"}` {
		t.Fatalf("a repeated settlement charged again: %s", v)
	}

	// A lease is reaped only once expired.
	now := time.Now().UnixMilli()
	if got := run(script{accountID: "acct", leaseOp: "add", leaseMember: "acct\nr1", leaseScore: now + 60_000,
		triples: []string{"h:r1", "", `{"h":"1"}`}}); got != 1 {
		t.Fatalf("hold: status %d", got)
	}
	if got := run(script{accountID: "acct", leaseOp: "reap", leaseMember: "acct\nr1", leaseScore: now,
		triples: []string{"h:r1", `{"h":"1"}`, ""}}); got != 3 {
		t.Fatalf("reaping a live lease: status %d, want 3", got)
	}
	if got := run(script{accountID: "acct", leaseOp: "reap", leaseMember: "acct\nr1", leaseScore: now + 61_000,
		triples: []string{"h:r1", `{"h":"1"}`, ""}}); got != 1 {
		t.Fatalf("reaping an expired lease: status %d", got)
	}
	if n, _ := rc.ZCard(ctx, "s:{tg}~leases").Result(); n != 0 {
		t.Fatalf("%d leases left", n)
	}
	// Every applied script is on the change feed, naming what it changed.
	msgs, err := rc.XRange(ctx, "s:{tg}~feed", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	n := 0
	for _, m := range msgs {
		if m.Values["m"] == "acct" {
			n++
			last = m.Values
		}
	}
	if n != 5 || last["f"] != "h:r1" {
		t.Fatalf("%d feed entries for the account's 5 applied scripts, last %v", n, last)
	}
}
