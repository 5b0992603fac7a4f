package storage

import (
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// One account's scripts of this replica are decided one at a time but sent
// in batches. A request decides on the account's fields as the scripts
// already queued or in flight will leave them (spec over raw), queues its
// script and, unless another request is sending, sends every queued script
// in one pipeline: one round trip (and, with appendfsync always, one
// fsync) for all of them, where each used to wait for the one before.
//
// Exactness does not rest on the batching: every script still writes only
// if each field its decision read holds the string it expected, and Redis
// runs each script whole. A script expecting what an earlier one of its
// batch failed to write finds a mismatch and changes nothing; as every
// script writes the account's field, the rest of that batch fails alike,
// and the scripts queued meanwhile are sent back to decide again on the
// current figures without being sent.
//
// A script that takes a token of the key's shared abuse ceiling can be
// refused for another reason than a mismatch: no decision is made on what
// it would write (that would fail every other request of the account
// behind a refused one, and an abusive key could then starve the others).
// The next decision waits until it is answered (barrier).

// acctQueue is one account's queue. Lock order: the ledger's mu (read),
// flushMu, mu, the kernel's lock.
type acctQueue struct {
	mu      sync.Mutex // decisions, queue, spec
	flushMu sync.Mutex // held while a batch is in flight, and by the reaper
	queue   []*queued  // decided, not sent
	sending bool       // a request is sending, or will send, the queue
	// spec are the strings the queued and in-flight scripts leave, by
	// field ("": absent), with the number of the script that writes them.
	spec map[string]specField
	seq  uint64
	// barrier, while a queued or in-flight script takes a ceiling token,
	// is closed once it is answered: decisions wait for it.
	barrier chan struct{}
}

type specField struct {
	f   moneyField
	seq uint64
}

// queued is one request's script in an account's queue.
type queued struct {
	sc  script
	seq uint64
	// ch receives, once, the script's outcome; before it, possibly a turn
	// to send the queue.
	ch chan queueEvent
}

type queueEvent struct {
	lead   bool // send the queue now
	status int64
	err    error
}

// fieldView reads an account's fields as its queued scripts leave them.
type fieldView struct {
	raw  moneyFields
	spec map[string]specField
}

func (v fieldView) get(name string) moneyField {
	if f, ok := v.spec[name]; ok {
		return f.f
	}
	return v.raw[name]
}

// queueOf is the account's queue, made when missing.
func (l *sharedLedger) queueOf(accountID string) *acctQueue {
	if q, ok := l.queues.Load(accountID); ok {
		return q.(*acctQueue)
	}
	q, _ := l.queues.LoadOrStore(accountID, &acctQueue{})
	return q.(*acctQueue)
}

// lockQueue takes the locks of a decision on the account (see acctQueue),
// once no barrier is up, and returns their release.
func (l *sharedLedger) lockQueue(q *acctQueue) (unlock func()) {
	for {
		l.mu.RLock()
		q.mu.Lock()
		b := q.barrier
		if b == nil {
			return func() {
				q.mu.Unlock()
				l.mu.RUnlock()
			}
		}
		q.mu.Unlock()
		l.mu.RUnlock()
		<-b
	}
}

// lockAccount takes every lock of the account's scripts, waiting for a
// batch in flight: for the reaper, which reads Redis and runs its script
// directly. It returns their release.
func (l *sharedLedger) lockAccount(accountID string) (unlock func()) {
	q := l.queueOf(accountID)
	l.mu.RLock()
	q.flushMu.Lock()
	q.mu.Lock()
	return func() {
		q.mu.Unlock()
		q.flushMu.Unlock()
		l.mu.RUnlock()
	}
}

// view is the account's fields as its queued scripts leave them. Callers
// hold the queue's lock and the kernel's lock.
func (l *sharedLedger) view(q *acctQueue, accountID string) fieldView {
	return fieldView{raw: l.raw[accountID], spec: q.spec}
}

// enqueue queues a decided script; lead: the caller sends the queue.
// Callers hold the queue's lock.
func (q *acctQueue) enqueue(sc script) (p *queued, lead bool) {
	q.seq++
	p = &queued{sc: sc, seq: q.seq, ch: make(chan queueEvent, 2)}
	if q.spec == nil {
		q.spec = map[string]specField{}
	}
	for i := 0; i+2 < len(sc.triples); i += 3 {
		f := moneyField{raw: sc.triples[i+2]}
		if i/3 < len(sc.values) && f.raw != "" {
			f.val = sc.values[i/3]
		}
		q.spec[sc.triples[i]] = specField{f, p.seq}
	}
	if sc.ceiling != nil && sc.ceilingKey != "" {
		q.barrier = make(chan struct{})
	}
	q.queue = append(q.queue, p)
	lead = !q.sending
	q.sending = true
	return p, lead
}

// await sends the queue when it is the caller's turn and returns the
// script's outcome.
func (l *sharedLedger) await(q *acctQueue, p *queued, lead bool) (int64, error) {
	if lead {
		l.flush(q)
	}
	for {
		ev := <-p.ch
		if !ev.lead {
			return ev.status, ev.err
		}
		l.flush(q)
	}
}

// flush sends the queued scripts in one round trip, applies their outcomes
// in order, and hands the turn to the first script queued meanwhile.
func (l *sharedLedger) flush(q *acctQueue) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	q.mu.Lock()
	batch := q.queue
	q.queue = nil
	q.mu.Unlock()
	out := make([]queueEvent, len(batch))
	for i := range out {
		out[i].err = errBatchLost // until its outcome is known
	}
	// Deferred so that a panic still answers every waiter.
	defer q.finish(batch, out)
	l.runBatch(batch, out)
}

// errBatchLost answers the scripts of a batch that did not complete.
var errBatchLost = errors.New("ledger: the batch of scripts did not complete")

// finish takes a sent batch's scripts off the pending fields, hands the
// turn on and answers the batch's requests. Callers hold flushMu.
func (q *acctQueue) finish(batch []*queued, out []queueEvent) {
	q.mu.Lock()
	var bounced []*queued
	if wrote(out) {
		last := batch[len(batch)-1].seq
		for name, f := range q.spec {
			if f.seq <= last {
				delete(q.spec, name)
			}
		}
	} else {
		// The scripts queued meanwhile expected what did not happen.
		bounced, q.queue = q.queue, nil
		clear(q.spec)
	}
	if len(q.queue) > 0 {
		q.queue[0].ch <- queueEvent{lead: true}
	} else {
		q.sending = false
	}
	// A barrier's script is the last queued: answered unless still queued.
	if q.barrier != nil && len(q.queue) == 0 {
		close(q.barrier)
		q.barrier = nil
	}
	q.mu.Unlock()
	for i, p := range batch {
		p.ch <- out[i]
	}
	for _, p := range bounced {
		p.ch <- queueEvent{status: 0}
	}
}

// wrote reports whether every script of a batch wrote its fields.
func wrote(out []queueEvent) bool {
	for _, o := range out {
		if o.err != nil || o.status != 1 {
			return false
		}
	}
	return true
}

// runBatch runs a batch's scripts in one round trip, in order, applies
// each outcome to the replica's copy as run does, and sets it in out.
func (l *sharedLedger) runBatch(batch []*queued, out []queueEvent) {
	if len(batch) == 1 {
		out[0].status, out[0].err = l.run(batch[0].sc)
		return
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	pipe := l.rb.Client().Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, p := range batch {
		keys, args := l.scriptArgs(p.sc)
		cmds[i] = casScript.EvalSha(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	var notRun []int      // the server lost the script (a restart)
	for i, p := range batch {
		answer, err := cmds[i].Slice()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			notRun = append(notRun, i)
			continue
		}
		out[i].status, out[i].err = l.apply(p.sc, answer, err)
	}
	if len(notRun) == 0 {
		return
	}
	// Loaded again, the requests decide again (status 0) and send it.
	lctx, lcancel := ctxTimeout()
	defer lcancel()
	err := l.rb.Observe(casScript.Load(lctx, l.rb.Client()).Err())
	for _, i := range notRun {
		out[i] = queueEvent{err: err}
	}
}
