package storage

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/storage/redistest"
)

// Concurrent script calls share pipelines, each gets its own answer, and
// a server that lost the script runs the calls once it is sent again.
func TestScriptPipeSharesRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	p := &scriptPipe{client: rc}
	echo := redis.NewScript(`redis.call('INCR', KEYS[1]) return {ARGV[1]}`)
	for round := range 2 {
		if round == 1 {
			if err := rc.ScriptFlush(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
		}
		p.sent.Store(0)
		const n = 400
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				want := fmt.Sprint(i)
				out, err := p.call(echo, []string{"pipe:" + want}, []any{want})
				if err != nil || len(out) != 1 || out[0] != want {
					t.Errorf("call %d: %v, %v", i, out, err)
				}
			})
		}
		wg.Wait()
		if sent := p.sent.Load(); sent >= n {
			t.Fatalf("round %d: %d pipelines for %d calls", round, sent, n)
		}
		if p.pipes != 0 || len(p.pending) != 0 {
			t.Fatalf("round %d: %d pipelines still counted, %d calls pending", round, p.pipes, len(p.pending))
		}
	}
	// Each call ran once a round.
	for _, i := range []int{0, 199, 399} {
		if v, _ := rc.Get(t.Context(), fmt.Sprint("pipe:", i)).Int(); v != 2 {
			t.Fatalf("call %d ran %d times in 2 rounds", i, v)
		}
	}
}

// Several accounts' batches of one pipeline go as one script call, and
// each keeps its own outcome: a stale batch refuses only its own scripts,
// and a batch the server fails on fails alone.
func TestScriptPipeRunsSeveralAccountsInOneCall(t *testing.T) {
	srv := redistest.Start(t)
	st := openSharedReplica(t, srv, "g:")
	l := sharedOf(t, st)
	rc := l.rb.Client()
	ctx := t.Context()
	if err := rc.HSet(ctx, l.moneyKey("stale"), "a", "7").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(ctx, l.moneyKey("broken"), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	batches := map[string][]script{
		"one":    {{accountID: "one", triples: []string{"a", "", "1"}}, {accountID: "one", triples: []string{"a", "1", "2"}}},
		"stale":  {{accountID: "stale", triples: []string{"a", "", "1"}}, {accountID: "stale", triples: []string{"a", "1", "2"}}},
		"broken": {{accountID: "broken", triples: []string{"a", "", "1"}}},
		"two":    {{accountID: "two", triples: []string{"a", "", "5", "k:x", "", "6"}}},
	}
	order := []string{"one", "stale", "broken", "two"}
	var calls []*pipeCall
	for _, id := range order {
		var batch []*queued
		for _, sc := range batches[id] {
			batch = append(batch, &queued{sc: sc})
		}
		keys, args := l.batchArgs(batch)
		calls = append(calls, &pipeCall{script: casBatchScript, keys: keys, args: args, batch: true, bucket: l.lay.AccountBucket(id)})
	}
	if err := casBatchScript.Load(ctx, rc).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	l.pipe.run(calls)
	if n := scriptCalls(t, rc); n != 1 {
		t.Fatalf("%d script calls for 4 accounts' batches on one server, want 1", n)
	}
	status := func(c *pipeCall) []int64 {
		var s []int64
		for _, a := range c.out {
			s = append(s, a.([]any)[0].(int64))
		}
		return s
	}
	if got := status(calls[0]); calls[0].err != nil || len(got) != 2 || got[0] != 1 || got[1] != 1 {
		t.Fatalf("account one: %v, %v; want [1 1]", got, calls[0].err)
	}
	if got := status(calls[1]); calls[1].err != nil || len(got) != 2 || got[0] != 0 || got[1] != 0 {
		t.Fatalf("stale account: %v, %v; want [0 0]", got, calls[1].err)
	}
	if calls[2].err == nil || !strings.Contains(calls[2].err.Error(), "WRONGTYPE") {
		t.Fatalf("broken account: %v, %v; want its WRONGTYPE error", calls[2].out, calls[2].err)
	}
	if got := status(calls[3]); calls[3].err != nil || len(got) != 1 || got[0] != 1 {
		t.Fatalf("account two: %v, %v; want [1]", got, calls[3].err)
	}
	for key, want := range map[string]string{l.moneyKey("one"): "2", l.moneyKey("stale"): "7", l.moneyKey("two"): "5"} {
		if v, _ := rc.HGet(ctx, key, "a").Result(); v != want {
			t.Fatalf("%s: a is %q, want %q", key, v, want)
		}
	}
	// One feed entry per account that changed.
	if n, _ := rc.XLen(ctx, l.lay.FeedKey(0)).Result(); n != 2 {
		t.Fatalf("%d feed entries, want 2 (accounts one and two)", n)
	}
}
