package sharedledger

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Different accounts' script calls are pipelined together. An account's
// batch (acctQueue) is one call; with many busy accounts each call
// used to be its own round trip, one write and one read on each side of
// the connection per call. A call waits for no other: it is sent at once
// while fewer than maxPipes pipelines are in flight, else with every call
// that arrives meanwhile, in the next pipeline, when one comes back.
// Redis runs each call whole, so pipelining changes no outcome.

// maxPipes is how many pipelines are in flight at once: enough that a
// call rarely waits for a slow one, few enough that calls share them.
const maxPipes = 4

// maxPipeCalls bounds the calls of one pipeline.
const maxPipeCalls = 128

// scriptPipe sends script calls in pipelines (see above).
type scriptPipe struct {
	client  redis.UniversalClient
	mu      sync.Mutex
	pending []*pipeCall
	pipes   int          // in flight
	sent    atomic.Int64 // pipelines sent, for the tests
}

// pipeCall is one script call and, once answered, its answer.
type pipeCall struct {
	script *redis.Script
	keys   []string
	args   []any
	// hash is the script's SHA1, for EVALSHA (evalSHA).
	hash string
	out  []any
	err  error
	// ch receives true when the caller is to send the pending calls (at
	// most once, while its call is pending: handed, under the pipe's
	// lock), then false once its call is answered.
	ch     chan bool
	handed bool
}

// call runs a script call and returns its answer.
func (p *scriptPipe) call(script *redis.Script, keys []string, args []any) ([]any, error) {
	c := &pipeCall{script: script, keys: keys, args: args, hash: script.Hash(), ch: make(chan bool, 2)}
	p.mu.Lock()
	p.pending = append(p.pending, c)
	lead := p.pipes < maxPipes
	if lead {
		p.pipes++
	}
	p.mu.Unlock()
	for {
		if lead {
			p.send()
		}
		if lead = <-c.ch; !lead {
			return c.out, c.err
		}
	}
}

// send sends the pending calls in one pipeline, answers them, and hands
// the turn to the first call pending then, if any.
func (p *scriptPipe) send() {
	p.mu.Lock()
	n := min(len(p.pending), maxPipeCalls)
	calls := p.pending[:n:n]
	p.pending = p.pending[n:]
	if len(p.pending) == 0 {
		p.pending = nil
	}
	p.mu.Unlock()
	// Deferred so that a panic still answers every caller.
	defer func() {
		p.mu.Lock()
		handed := false
		for _, c := range p.pending { // the first few may be handed already
			if !c.handed {
				c.handed, handed = true, true
				c.ch <- true
				break
			}
		}
		if !handed {
			p.pipes--
		}
		p.mu.Unlock()
		for _, c := range calls {
			if c.out == nil && c.err == nil {
				c.err = errBatchLost
			}
			c.ch <- false
		}
	}()
	p.run(calls)
}

// run sends calls in one pipeline and sets their answers. A call the
// server did not run for want of its script (a restart flushed it) is
// sent again with the script's text.
func (p *scriptPipe) run(calls []*pipeCall) {
	if len(calls) == 0 {
		return
	}
	p.sent.Add(1)
	ctx, cancel := ctxTimeout()
	defer cancel()
	if len(calls) == 1 {
		c := calls[0]
		cmd := c.evalSHA(ctx)
		_ = p.client.Process(ctx, cmd) // its error is the command's own, which answer reads
		c.answer(ctx, p.client, cmd)
		return
	}
	pipe := p.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.evalSHA(ctx)
		_ = pipe.Process(ctx, cmds[i]) // its error is the command's own, which answer reads
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, c := range calls {
		c.answer(ctx, p.client, cmds[i])
	}
}

// evalSHA is the call's EVALSHA command. Its keys are passed as pointers
// into c.keys, as scriptArgs passes the arguments: go-redis's EvalSha
// would box each key and copy the arguments into a new slice.
func (c *pipeCall) evalSHA(ctx context.Context) *redis.Cmd {
	cmd := make([]any, 0, 3+len(c.keys)+len(c.args))
	cmd = append(cmd, "evalsha", &c.hash, len(c.keys))
	for i := range c.keys {
		cmd = append(cmd, &c.keys[i])
	}
	return redis.NewCmd(ctx, append(cmd, c.args...)...)
}

// answer sets the call's answer from its EVALSHA; a server that did not
// have the script (a restart flushed it) runs it again with its text.
func (c *pipeCall) answer(ctx context.Context, client redis.UniversalClient, cmd *redis.Cmd) {
	c.out, c.err = cmd.Slice()
	if c.err != nil && strings.HasPrefix(c.err.Error(), "NOSCRIPT") {
		c.out, c.err = c.script.Run(ctx, client, c.keys, c.args...).Slice()
	}
}
