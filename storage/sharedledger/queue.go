package sharedledger

import (
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
)

// One account's scripts of this replica are queued one at a time but sent
// in batches. A request decides on the account's fields as the scripts
// already queued or in flight will leave them (spec over raw), queues its
// script if they still read so (Commit) and, unless another request is
// sending, sends every queued script
// in one pipeline: one round trip (and, with appendfsync always, one
// fsync) for all of them, where each used to wait for the one before.
//
// Exactness does not rest on the batching: every script still writes only
// if each field its decision read holds the string it expected, and Redis
// runs the batch whole. A script expecting what an earlier one of its
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
	// keys are the account's money hash, its bucket's lease set and feed,
	// and the key a script without a generation names in its place
	// (scriptArgs), named once.
	keys [4]string
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
func (l *Ledger) queueOf(accountID string) *acctQueue {
	if q, ok := l.queues.Load(accountID); ok {
		return q.(*acctQueue)
	}
	b := l.lay.AccountBucket(accountID)
	q, _ := l.queues.LoadOrStore(accountID, &acctQueue{keys: [4]string{l.moneyKey(accountID), l.leaseKey(b), l.lay.FeedKey(b), l.lay.AccountKey(accountID, "~none")}})
	return q.(*acctQueue)
}

// lockQueue takes the locks of a decision on the account (see acctQueue),
// once no barrier is up; unlockQueue releases them.
func (l *Ledger) lockQueue(q *acctQueue) {
	for {
		l.mu.RLock()
		q.mu.Lock()
		b := q.barrier
		if b == nil {
			return
		}
		q.mu.Unlock()
		l.mu.RUnlock()
		<-b
	}
}

// unlockQueue releases what lockQueue took.
func (l *Ledger) unlockQueue(q *acctQueue) {
	q.mu.Unlock()
	l.mu.RUnlock()
}

// queueLock is a Stamp's hold of the account's locks, taken by lockQueue.
func (l *Ledger) queueLock(q *acctQueue) *ledger.AccountLock {
	return ledger.NewAccountLock(func() { l.unlockQueue(q) })
}

// lockAccount takes every lock of the account's scripts, waiting for a
// batch in flight: for the reaper, which reads Redis and runs its script
// directly. It returns their release.
func (l *Ledger) lockAccount(accountID string) (unlock func()) {
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
func (l *Ledger) view(q *acctQueue, accountID string) fieldView {
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
func (l *Ledger) await(q *acctQueue, p *queued, lead bool) (int64, error) {
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
func (l *Ledger) flush(q *acctQueue) {
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

// casBatchScript runs a batch of casScript calls of one account in one
// script call, in order, each exactly as casScript would (a call expecting
// what an earlier one failed to write finds a mismatch), and announces
// what they changed in one feed entry. KEYS: the money hash, the lease
// set, the change feed, then per call its generation key, upstream id key
// and abuse-ceiling bucket. ARGV: replica, account id, feed length, the
// number of calls, then per call the number of its arguments and
// casScript's arguments but the replica, account id and feed length. It
// answers one casScript answer per call.
var casBatchScript = redis.NewScript(`
local out, changed, seen, gens = {}, {}, {}, {}
local a = 5
for c = 1, tonumber(ARGV[4]) do
  local argc = tonumber(ARGV[a])
  local b = a
  a = a + 1 + argc
  local gk, uk, ck = KEYS[1 + 3 * c], KEYS[2 + 3 * c], KEYS[3 + 3 * c]
  local op, member, score, gen, up = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
  local n = tonumber(ARGV[b + 6])
  local res
  if gen ~= '' and redis.call('EXISTS', gk) == 1 then res = {2} end
  if not res and op == 'reap' then
    local s = redis.call('ZSCORE', KEYS[2], member)
    if s and tonumber(s) > tonumber(score) then res = {3} end
  end
  if not res then
    local cur = {0}
    local ok = true
    for i = 0, n - 1 do
      local f = ARGV[b + 7 + 3 * i]
      local v = redis.call('HGET', KEYS[1], f)
      if not v then v = '' end
      cur[#cur + 1] = f
      cur[#cur + 1] = v
      if v ~= ARGV[b + 8 + 3 * i] then ok = false end
    end
    if not ok then res = cur end
  end
  if not res and ARGV[b + 8 + 3 * n] ~= '' then
    local rate, burst = tonumber(ARGV[b + 8 + 3 * n]), tonumber(ARGV[b + 9 + 3 * n])
    local tm = redis.call('TIME')
    local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
    local bk = redis.call('HMGET', ck, 't', 'at')
    local tokens, at = tonumber(bk[1]) or burst, tonumber(bk[2]) or now
    tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
    if tokens < 1 then
      res = {4, math.ceil((1 - tokens) / rate)}
    else
      redis.call('HSET', ck, 't', tostring(tokens - 1), 'at', now)
      redis.call('PEXPIRE', ck, math.ceil(burst / rate) + 1000)
    end
  end
  if not res then
    for i = 0, n - 1 do
      local f, v = ARGV[b + 7 + 3 * i], ARGV[b + 9 + 3 * i]
      if v == '' then redis.call('HDEL', KEYS[1], f) else redis.call('HSET', KEYS[1], f, v) end
      if not seen[f] then
        seen[f] = true
        changed[#changed + 1] = f
      end
    end
    if op == 'add' then redis.call('ZADD', KEYS[2], score, member)
    elseif op ~= '' then redis.call('ZREM', KEYS[2], member) end
    if gen ~= '' then
      local exp = tonumber(ARGV[b + 10 + 3 * n]) or 0
      if exp > 0 then
        redis.call('SET', gk, gen, 'PXAT', exp)
        if up ~= '' then redis.call('SET', uk, up, 'PXAT', exp) end
      else
        redis.call('SET', gk, gen)
        if up ~= '' then redis.call('SET', uk, up) end
      end
      gens[#gens + 1] = ARGV[b + 7 + 3 * n]
    end
    res = {1}
  end
  out[c] = res
end
if #changed > 0 then
  if #gens > 0 then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'r', ARGV[1], 'm', ARGV[2], 'f', table.concat(changed, ' '), 'g', table.concat(gens, ' '))
  else
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'r', ARGV[1], 'm', ARGV[2], 'f', table.concat(changed, ' '))
  end
end
return out
`)

// runBatch runs a batch's scripts in one script call (casBatchScript),
// in order, applies each outcome to the replica's copy as run does, and
// sets it in out. Redis runs the call whole and, with appendfsync
// always, answers it once it is on disk: one round trip and one fsync
// for every request of the batch, each acknowledged only when durable.
func (l *Ledger) runBatch(batch []*queued, out []queueEvent) {
	// A hold's lease runs from now, not from its snapshot: the decision
	// and the wait for this turn must not use up a live request's lease.
	expiry := l.now().Add(l.lease).UnixMilli()
	for _, p := range batch {
		if p.sc.leaseOp == "add" {
			p.sc.leaseScore = expiry
		}
	}
	if len(batch) == 1 {
		out[0].status, out[0].err = l.run(&batch[0].sc)
		return
	}
	keys := make([]string, 3, 3+3*len(batch))
	args := make([]any, 4, 4+len(batch)*16)
	for i, p := range batch {
		k, a := l.scriptArgs(&p.sc)
		if i == 0 {
			copy(keys, k[:3])
			args[0], args[1], args[2], args[3] = a[0], a[1], a[7], len(batch)
		}
		keys = append(keys, k[3:]...)
		// casScript's arguments but the replica, account id and feed length
		args = append(args, len(a)-3)
		args = append(args, a[2:7]...)
		args = append(args, a[8:]...)
	}
	answers, err := l.pipe.call(casBatchScript, keys, args)
	for i, p := range batch {
		var answer []any
		if err == nil && i < len(answers) {
			answer, _ = answers[i].([]any)
		}
		out[i].status, out[i].err = l.apply(&p.sc, answer, err)
	}
}
