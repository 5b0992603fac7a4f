package sharedledger

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// queueScripts queues scripts on an account as requests do and sends them
// in one batch, returning their outcomes.
func queueScripts(t *testing.T, l *Ledger, accountID string, scs ...script) []queueEvent {
	t.Helper()
	q := l.queueOf(accountID)
	l.lockQueue(q)
	var ps []*queued
	lead := false
	for i, sc := range scs {
		p, first := q.enqueue(sc)
		ps = append(ps, p)
		if i == 0 {
			lead = first
		}
	}
	l.unlockQueue(q)
	if !lead {
		t.Fatal("the first queued script does not send the queue")
	}
	out := make([]queueEvent, len(ps))
	for i, p := range ps {
		if i == 0 {
			out[i].status, out[i].err = l.await(q, p, true)
			continue
		}
		out[i] = <-p.ch
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.sending || len(q.queue) > 0 || len(q.spec) > 0 {
		t.Fatalf("after the batch: sending %v, %d queued, %d pending fields", q.sending, len(q.queue), len(q.spec))
	}
	return out
}

func TestSharedBatchRunsInOrderAndFailsTogether(t *testing.T) {
	srv := redistest.Start(t)
	l := openReplica(t, srv, "q:", 0).l
	rc := l.rb.Client()
	if err := casScript.Load(t.Context(), rc).Err(); err != nil {
		t.Fatal(err)
	}
	// Each script expects what the one before it writes: all land.
	out := queueScripts(t, l, "acct",
		script{accountID: "acct", triples: []string{"a", "", "1"}},
		script{accountID: "acct", triples: []string{"a", "1", "2"}},
		script{accountID: "acct", triples: []string{"a", "2", "3", "k:x", "", "9"}})
	for i, o := range out {
		if o.err != nil || o.status != 1 {
			t.Fatalf("script %d: status %d, %v", i, o.status, o.err)
		}
	}
	if v, _ := rc.HGet(t.Context(), "q:{tg}~m/acct", "a").Result(); v != "3" || l.raw["acct"]["a"].raw != "3" {
		t.Fatalf("a is %q in redis, %q in memory; want 3", v, l.raw["acct"]["a"].raw)
	}
	// A stale first script fails, and so does every one that expected its
	// write: nothing lands, and the replica adopts the current strings.
	out = queueScripts(t, l, "acct",
		script{accountID: "acct", triples: []string{"a", "2", "4"}},
		script{accountID: "acct", triples: []string{"a", "4", "5", "k:x", "9", "10"}})
	for i, o := range out {
		if o.err != nil || o.status != 0 {
			t.Fatalf("script %d after a stale one: status %d, %v; want 0", i, o.status, o.err)
		}
	}
	if v, _ := rc.HGet(t.Context(), "q:{tg}~m/acct", "k:x").Result(); v != "9" {
		t.Fatalf("k:x is %q, want 9 (unchanged)", v)
	}
	if l.raw["acct"]["a"].raw != "3" {
		t.Fatalf("memory holds a=%q, want 3", l.raw["acct"]["a"].raw)
	}
}

// A batch's scripts read each field as its earlier scripts left it:
// deleted, written again, or refused (unchanged).
func TestSharedBatchReadsFieldsAsItsScriptsLeaveThem(t *testing.T) {
	srv := redistest.Start(t)
	l := openReplica(t, srv, "f:", 0).l
	rc := l.rb.Client()
	if err := rc.HSet(t.Context(), "f:{tg}~m/acct", "k:y", "1").Err(); err != nil {
		t.Fatal(err)
	}
	out := queueScripts(t, l, "acct",
		script{accountID: "acct", triples: []string{"a", "", "1", "k:y", "1", ""}},
		script{accountID: "acct", triples: []string{"a", "1", "2", "k:y", "", "2"}},
		script{accountID: "acct", triples: []string{"a", "2", "3", "k:y", "1", "3"}}, // stale: k:y is 2
	)
	want := []int64{1, 1, 0}
	for i, o := range out {
		if o.err != nil || o.status != want[i] {
			t.Fatalf("script %d: status %d, %v; want %d", i, o.status, o.err, want[i])
		}
	}
	got, err := rc.HGetAll(t.Context(), "f:{tg}~m/acct").Result()
	if err != nil || got["a"] != "2" || got["k:y"] != "2" || len(got) != 2 {
		t.Fatalf("fields %v, %v; want a=2, k:y=2", got, err)
	}
}

// A server that lost its scripts (restarted) runs a batch once the
// script is sent again, each of its calls once.
func TestSharedBatchAfterScriptFlush(t *testing.T) {
	srv := redistest.Start(t)
	l := openReplica(t, srv, "n:", 0).l
	rc := l.rb.Client()
	if err := rc.ScriptFlush(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	out := queueScripts(t, l, "acct",
		script{accountID: "acct", triples: []string{"a", "", "1"}},
		script{accountID: "acct", triples: []string{"a", "1", "2"}})
	for i, o := range out {
		if o.err != nil || o.status != 1 {
			t.Fatalf("script %d without the script loaded: status %d, %v; want 1", i, o.status, o.err)
		}
	}
	if v, _ := rc.HGet(t.Context(), "n:{tg}~m/acct", "a").Result(); v != "2" {
		t.Fatalf("field a is %q after the batch, want 2", v)
	}
	if n, _ := rc.XLen(t.Context(), l.rb.Layout().FeedKey(0)).Result(); n != 1 {
		t.Fatalf("%d feed entries for one batch, want 1", n)
	}
}

// Requests refused by the key's shared abuse ceiling do not fail the
// account's other requests, decided and sent beside them.
func TestSharedCeilingRefusalsSpareTheAccountsOtherRequests(t *testing.T) {
	srv := redistest.Start(t)
	r := openReplica(t, srv, "b:", 0)
	r.l.ShareKeyCeiling(&ledger.KeyCeiling{Requests: 1, Window: time.Hour, Burst: 3})
	rc := r.rb.Client()
	if err := casScript.Load(t.Context(), rc).Err(); err != nil {
		t.Fatal(err)
	}
	const acctID = "acct-b"
	k := addAccount(acctID, nil, r)
	var admitted, refused, keyless, charged atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 60 {
		wg.Go(func() {
			<-start
			keyHash := k.Hash
			if i%2 == 0 {
				keyHash = "" // no key: no ceiling
			}
			res, err := r.reserve(acctID, keyHash, ledger.Holds{Hold: 1000, InFlight: 1000})
			var ce *ledger.CeilingError
			switch {
			case errors.As(err, &ce):
				refused.Add(1)
				return
			case err != nil:
				t.Errorf("request %d: %v", i, err)
				return
			}
			if keyHash == "" {
				keyless.Add(1)
			} else {
				admitted.Add(1)
			}
			cost := money.Amount(100 + i)
			if err := r.l.Settle(res, ledger.Charge{Cost: cost, SettlementWindow: time.Second}); err != nil {
				t.Errorf("settle %d: %v", i, err)
				return
			}
			charged.Add(int64(cost))
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 3 || refused.Load() != 27 || keyless.Load() != 30 {
		t.Fatalf("key: %d admitted, %d refused (want 3, 27); %d of 30 keyless admitted", admitted.Load(), refused.Load(), keyless.Load())
	}
	a := r.account(acctID)
	if int64(a.Usage) != charged.Load() {
		t.Fatalf("account usage %s, charged %d", a.Usage, charged.Load())
	}
	held, _ := r.held(acctID, "")
	if held != 0 {
		t.Fatalf("%s still held after every request ended", held)
	}
	// One script per reservation and per settlement: no request was
	// decided again because a refused one was not applied.
	q := r.l.queueOf(acctID)
	q.mu.Lock()
	n := q.seq
	q.mu.Unlock()
	if n != 27+2*33 {
		t.Fatalf("%d scripts decided for 60 reservations (27 refused) and 33 settlements", n)
	}
	if calls := scriptCalls(t, rc); calls > int(n) {
		t.Fatalf("%d script calls for %d scripts", calls, n)
	}
}

// scriptCalls is how many ledger scripts the server ran.
func scriptCalls(t *testing.T, rc redis.UniversalClient) int {
	t.Helper()
	info, err := rc.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(info, "cmdstat_evalsha:calls=")
	n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
	if err != nil {
		t.Fatalf("no evalsha calls in %q", info)
	}
	return n
}
