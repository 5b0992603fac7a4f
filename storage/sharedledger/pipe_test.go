package sharedledger

import (
	"fmt"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
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
