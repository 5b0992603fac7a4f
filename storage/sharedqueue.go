package storage

import (
	"errors"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
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

// casBatchScript runs batches of casScript calls, each of one account,
// in one script call: each batch in order, each of its calls exactly as
// casScript would (a call expecting what an earlier one failed to write
// finds a mismatch), and announces what a batch changed in one feed entry.
// ARGV[1] is the number of batches; then per batch the number of its keys
// and of its arguments, then its arguments. A batch's KEYS (in order, after
// the batches' before it): the money hash, the lease set, the change feed,
// then per call its generation key, upstream id key and abuse-ceiling
// bucket. A batch's arguments: replica, account id, feed length, the
// number of calls, then per call the number of its arguments and
// casScript's arguments but the replica, account id and feed length. It
// answers per batch one casScript answer per call, or the batch's error.
// Several accounts' batches share a call where their keys share a slot
// (sharedpipe.go): each call costs the server more than its commands.
var casBatchScript = redis.NewScript(`
local function batch(kb, ab)
-- known: the fields' strings as this batch read or wrote them
local out, changed, seen, gens, known = {}, {}, {}, {}, {}
local a = ab + 5
for c = 1, tonumber(ARGV[ab + 4]) do
  local argc = tonumber(ARGV[a])
  local b = a
  a = a + 1 + argc
  local gk, uk, ck = KEYS[kb + 1 + 3 * c], KEYS[kb + 2 + 3 * c], KEYS[kb + 3 + 3 * c]
  local op, member, score, gen, up = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
  local n = tonumber(ARGV[b + 6])
  local res
  if gen ~= '' and redis.call('EXISTS', gk) == 1 then res = {2} end
  if not res and op == 'reap' then
    local s = redis.call('ZSCORE', KEYS[kb + 2], member)
    if s and tonumber(s) > tonumber(score) then res = {3} end
  end
  if not res then
    -- the fields this batch has not read or written yet, in one HMGET
    local miss = {}
    for i = 0, n - 1 do
      local f = ARGV[b + 7 + 3 * i]
      if known[f] == nil then miss[#miss + 1] = f end
    end
    if #miss > 0 then
      local vs = redis.call('HMGET', KEYS[kb + 1], unpack(miss))
      for i, f in ipairs(miss) do known[f] = vs[i] or '' end
    end
    local cur = {0}
    local ok = true
    for i = 0, n - 1 do
      local f = ARGV[b + 7 + 3 * i]
      local v = known[f]
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
    local sets, dels = {}, {}
    for i = 0, n - 1 do
      local f, v = ARGV[b + 7 + 3 * i], ARGV[b + 9 + 3 * i]
      if v == '' then dels[#dels + 1] = f else
        sets[#sets + 1] = f
        sets[#sets + 1] = v
      end
      known[f] = v
      if not seen[f] then
        seen[f] = true
        changed[#changed + 1] = f
      end
    end
    if #sets > 0 then redis.call('HSET', KEYS[kb + 1], unpack(sets)) end
    if #dels > 0 then redis.call('HDEL', KEYS[kb + 1], unpack(dels)) end
    if op == 'add' then redis.call('ZADD', KEYS[kb + 2], score, member)
    elseif op ~= '' then redis.call('ZREM', KEYS[kb + 2], member) end
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
    redis.call('XADD', KEYS[kb + 3], 'MAXLEN', '~', ARGV[ab + 3], '*', 'r', ARGV[ab + 1], 'm', ARGV[ab + 2], 'f', table.concat(changed, ' '), 'g', table.concat(gens, ' '))
  else
    redis.call('XADD', KEYS[kb + 3], 'MAXLEN', '~', ARGV[ab + 3], '*', 'r', ARGV[ab + 1], 'm', ARGV[ab + 2], 'f', table.concat(changed, ' '))
  end
end
return out
end
local res = {}
local p, kb = 2, 0
for g = 1, tonumber(ARGV[1]) do
  local nk, na = tonumber(ARGV[p]), tonumber(ARGV[p + 1])
  -- a batch that fails answers its error and spares the others, as
  -- separate calls would
  local ok, r = pcall(batch, kb, p + 1)
  if ok then res[g] = r
  elseif type(r) == 'table' and r.err then res[g] = r
  else res[g] = {err = tostring(r)} end
  kb = kb + nk
  p = p + 2 + na
end
return res
`)

// runBatch runs a batch's scripts in one script call (casBatchScript),
// in order, applies each outcome to the replica's copy as run does, and
// sets it in out. Redis runs the call whole and, with appendfsync
// always, answers it once it is on disk: one round trip and one fsync
// for every request of the batch, each acknowledged only when durable.
func (l *sharedLedger) runBatch(batch []*queued, out []queueEvent) {
	keys, args := l.batchArgs(batch)
	answers, err := l.pipe.callBatch(l.lay.AccountBucket(batch[0].sc.accountID), keys, args)
	for i, p := range batch {
		var answer []any
		if err == nil && i < len(answers) {
			answer, _ = answers[i].([]any)
		}
		out[i].status, out[i].err = l.apply(p.sc, answer, err)
	}
}

// batchArgs are one account's batch's keys and arguments in
// casBatchScript, after batchLead free slots (the call's leading counts,
// set by the pipe): built at once, each value boxed once.
func (l *sharedLedger) batchArgs(batch []*queued) (keys []string, args []any) {
	accountID := batch[0].sc.accountID
	b := l.lay.AccountBucket(accountID)
	none := l.lay.AccountKey(accountID, "~none")
	n := batchLead + 4
	for _, p := range batch {
		n += 11 + len(p.sc.triples)
	}
	keys = make([]string, 0, 3+3*len(batch))
	keys = append(keys, l.moneyKey(accountID), l.leaseKey(b), l.lay.FeedKey(b))
	args = make([]any, batchLead, n)
	args = append(args, l.rb.Replica(), accountID, feedLength, len(batch))
	for _, p := range batch {
		sc := &p.sc
		genKey, upKey, ceilingKey := sc.genKey, sc.upKey, sc.ceilingKey
		if genKey == "" {
			genKey = none
		}
		if upKey == "" {
			upKey = genKey
		}
		// casScript's arguments but the replica, account id and feed length
		args = append(args, 10+len(sc.triples), sc.leaseOp, sc.leaseMember, sc.leaseScore, sc.genValue, sc.upValue, len(sc.triples)/3)
		for _, t := range sc.triples {
			args = append(args, t)
		}
		args = append(args, sc.genID)
		if sc.ceiling != nil && ceilingKey != "" {
			args = append(args, strconv.FormatFloat(sc.ceiling.Requests/float64(sc.ceiling.Window.Milliseconds()), 'g', -1, 64), sc.ceiling.Burst)
		} else {
			args = append(args, "", 0)
			ceilingKey = genKey
		}
		args = append(args, sc.genExpireAt)
		keys = append(keys, genKey, upKey, ceilingKey)
	}
	return keys, args
}

// feedLength is the change feed's length (MAXLEN ~), boxed once.
var feedLength any = 100000
