package storage

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Different accounts' script calls are pipelined together. An account's
// batch (sharedqueue.go) is one call; with many busy accounts each call
// used to be its own round trip, one write and one read on each side of
// the connection per call. A call waits for no other: it is sent at once
// while fewer than maxPipes pipelines are in flight, else with every call
// that arrives meanwhile, in the next pipeline, when one comes back.
// Redis runs each call whole, so pipelining changes no outcome.
//
// The accounts' batches of one pipeline whose keys share a slot (on one
// server, all of them: it has one bucket) go as one casBatchScript call,
// which runs each in turn as its own call would: a script call costs
// redis-server more than the commands it runs, and with many accounts
// each batch is small.

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
	out    []any
	err    error
	// ch receives true when the caller is to send the pending calls (at
	// most once, while its call is pending: handed, under the pipe's
	// lock), then false once its call is answered.
	ch     chan bool
	handed bool
	// batch: one account's casBatchScript batch (keys and args without
	// the call's leading count), sent with its bucket's other batches.
	batch  bool
	bucket int
}

// call runs a script call and returns its answer.
func (p *scriptPipe) call(script *redis.Script, keys []string, args []any) ([]any, error) {
	return p.do(&pipeCall{script: script, keys: keys, args: args})
}

// batchLead is the number of free slots before a batch's arguments:
// a batch sent alone is the call's arguments in place.
const batchLead = 3

// callBatch runs one account's batch of casBatchScript (keys and args
// are one batch's, after batchLead free slots) and returns its answers.
func (p *scriptPipe) callBatch(bucket int, keys []string, args []any) ([]any, error) {
	return p.do(&pipeCall{script: casBatchScript, keys: keys, args: args, batch: true, bucket: bucket})
}

func (p *scriptPipe) do(c *pipeCall) ([]any, error) {
	c.ch = make(chan bool, 2)
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

// pipeCmd is one command of a pipeline: a call, or the batches of one
// bucket as one casBatchScript call.
type pipeCmd struct {
	calls []*pipeCall
	keys  []string
	args  []any
	cmd   *redis.Cmd
}

// commands turns calls into the pipeline's commands (see above).
func commands(calls []*pipeCall) []*pipeCmd {
	cmds := make([]*pipeCmd, 0, len(calls))
next:
	for _, c := range calls {
		if c.batch {
			for _, m := range cmds {
				if m.calls[0].batch && m.calls[0].bucket == c.bucket {
					m.calls = append(m.calls, c)
					continue next
				}
			}
		}
		cmds = append(cmds, &pipeCmd{calls: []*pipeCall{c}, keys: c.keys, args: c.args})
	}
	for _, m := range cmds {
		if !m.calls[0].batch {
			continue
		}
		if len(m.calls) == 1 {
			m.args[0], m.args[1], m.args[2] = 1, len(m.keys), len(m.args)-batchLead
			continue
		}
		nk, na := 0, 1
		for _, c := range m.calls {
			nk, na = nk+len(c.keys), na+2+len(c.args)-batchLead
		}
		m.keys, m.args = make([]string, 0, nk), make([]any, 1, na)
		m.args[0] = len(m.calls)
		for _, c := range m.calls {
			m.keys = append(m.keys, c.keys...)
			m.args = append(m.args, len(c.keys), len(c.args)-batchLead)
			m.args = append(m.args, c.args[batchLead:]...)
		}
	}
	return cmds
}

// answer sets the answers of a command's calls.
func (m *pipeCmd) answer(out []any, err error) {
	if !m.calls[0].batch {
		m.calls[0].out, m.calls[0].err = out, err
		return
	}
	for i, c := range m.calls {
		switch {
		case err != nil:
			c.err = err
		case i >= len(out):
			c.err = errBatchLost
		default:
			switch a := out[i].(type) {
			case []any:
				c.out = a
			case error:
				c.err = a
			default:
				c.err = errBatchLost
			}
		}
	}
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
	cmds := commands(calls)
	if len(cmds) == 1 {
		m := cmds[0]
		m.answer(m.calls[0].script.Run(ctx, p.client, m.keys, m.args...).Slice())
		return
	}
	pipe := p.client.Pipeline()
	for _, m := range cmds {
		m.cmd = m.calls[0].script.EvalSha(ctx, pipe, m.keys, m.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, m := range cmds {
		out, err := m.cmd.Slice()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			out, err = m.calls[0].script.Run(ctx, p.client, m.keys, m.args...).Slice()
		}
		m.answer(out, err)
	}
}
