// Package sharedledger is the ledger of several replicas on one Redis or
// Redis Cluster (ledger.Ledger): every counter requests change lives in
// Redis, and each reservation, settlement and release is one
// compare-and-set script. It reaches the store's records only through
// ledger.Records, and the store opens it with the Redis backend.
package sharedledger

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/tollgate-dev/caddy-tollgate/jsonstr"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/ledger"
	"github.com/tollgate-dev/caddy-tollgate/storage/levels"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// The ledger of several replicas (see ledger.Ledger for the two designs;
// this is the optimistic one).
//
// Every counter that requests change lives in one Redis hash per account,
// "<prefix>{<bucket tag>}~m/<account id>" (kernel.Layout: every
// key one script touches shares the account's bucket's tag, so that it
// runs on one slot of a cluster), apart from the records, so that an
// administrative write (a record rewritten whole) never carries a counter:
//
//	a          the account's usage, BYOK usage, free-model windows, holds,
//	           in-flight holds and settling costs (acctMoney)
//	k:<hash>   a key's usage counters and holds (scopeMoney)
//	w:<id>     a workspace's, m:<id> a member's (scopeMoney)
//	h:<res id> one running request's holds (holdRecord), with its lease
//	           in its bucket's sorted set "<prefix>{<tag>}~leases"
//	           (score: expiry, ms)
//
// A snapshot is the replica's in-memory copy of these fields; the
// gateway decides on it, and Commit computes the new fields and sends
// them with the exact strings the snapshot read to one script
// (casScript), which writes them only if every field read is unchanged;
// otherwise it answers the current strings, the replica adopts them and
// the gateway decides again. So a decision is always applied to the
// figures it was made on, over every level of the account at once, as
// under the one lock of a single process; one round trip when the
// replica's copy is fresh. Settle and Release are the same
// script, and Settle also writes the generation record, once (a repeated
// Settle finds it and changes nothing). A lease that expires (its replica
// died) is released by any replica's reaper with the same script, which
// re-checks the expiry. A replica sends one account's concurrent scripts
// in one round trip (acctQueue).

// casScript compares and sets an account's money fields. KEYS: the money
// hash, the lease set, the change feed, the generation key, the upstream
// id key, the key's abuse-ceiling bucket. ARGV: replica, account id, lease
// op ("", add, del, reap), lease member, lease score (add) or now (reap),
// generation JSON, upstream JSON, feed length, n, then n triples (field,
// expected, new; an empty string is an absent field), then the generation
// id for the feed, then the key's abuse ceiling (tokens per ms, or "" for
// none) and its burst, then the generation's expiry (Unix ms, PXAT; 0:
// none). Answers {1} done, {0, field, value, ...} the
// current values on a mismatch, {2} the generation was already written,
// {3} the lease is still alive, {4, ms} the abuse ceiling refused (ms
// until its next token).
var casScript = redis.NewScript(`
if ARGV[6] ~= '' and redis.call('EXISTS', KEYS[4]) == 1 then return {2} end
if ARGV[3] == 'reap' then
  local s = redis.call('ZSCORE', KEYS[2], ARGV[4])
  if s and tonumber(s) > tonumber(ARGV[5]) then return {3} end
end
local n = tonumber(ARGV[9])
local cur = {0}
local ok = true
for i = 0, n - 1 do
  local f = ARGV[10 + 3 * i]
  local v = redis.call('HGET', KEYS[1], f)
  if not v then v = '' end
  cur[#cur + 1] = f
  cur[#cur + 1] = v
  if v ~= ARGV[11 + 3 * i] then ok = false end
end
if not ok then return cur end
if ARGV[11 + 3 * n] ~= '' then
  -- the key's shared abuse ceiling: a token bucket (tokens, at ms)
  local rate, burst = tonumber(ARGV[11 + 3 * n]), tonumber(ARGV[12 + 3 * n])
  local tm = redis.call('TIME')
  local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
  local b = redis.call('HMGET', KEYS[6], 't', 'at')
  local tokens, at = tonumber(b[1]) or burst, tonumber(b[2]) or now
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
  if tokens < 1 then return {4, math.ceil((1 - tokens) / rate)} end
  redis.call('HSET', KEYS[6], 't', tostring(tokens - 1), 'at', now)
  redis.call('PEXPIRE', KEYS[6], math.ceil(burst / rate) + 1000)
end
local fs = {}
for i = 0, n - 1 do
  local f, v = ARGV[10 + 3 * i], ARGV[12 + 3 * i]
  if v == '' then redis.call('HDEL', KEYS[1], f) else redis.call('HSET', KEYS[1], f, v) end
  fs[#fs + 1] = f
end
local changed = table.concat(fs, ' ')
if ARGV[3] == 'add' then redis.call('ZADD', KEYS[2], ARGV[5], ARGV[4])
elseif ARGV[3] ~= '' then redis.call('ZREM', KEYS[2], ARGV[4]) end
if ARGV[6] ~= '' then
  local exp = tonumber(ARGV[13 + 3 * n]) or 0
  if exp > 0 then
    redis.call('SET', KEYS[4], ARGV[6], 'PXAT', exp)
    if ARGV[7] ~= '' then redis.call('SET', KEYS[5], ARGV[7], 'PXAT', exp) end
  else
    redis.call('SET', KEYS[4], ARGV[6])
    if ARGV[7] ~= '' then redis.call('SET', KEYS[5], ARGV[7]) end
  end
end
if ARGV[6] ~= '' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'r', ARGV[1], 'm', ARGV[2], 'f', changed, 'g', ARGV[10 + 3 * n])
else
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'r', ARGV[1], 'm', ARGV[2], 'f', changed)
end
return {1}
`)

// maxAttempts bounds the attempts of one ledger call: each retry follows
// another writer's success, so only a storm of them exhausts it.
const maxAttempts = 100

// DefaultHoldLease is how long a running request's holds outlive its
// replica: renewed every third of it while the request runs.
const DefaultHoldLease = 30 * time.Second

// acctMoney is an account's "a" field.
type acctMoney struct {
	Usage      money.Amount   `json:"u"`
	BYOKUsage  money.Amount   `json:"b"`
	FreeDay    money.Windowed `json:"fd"`
	FreeMinute money.Windowed `json:"fm"`
	Held       money.Amount   `json:"h"`
	Running    money.Amount   `json:"r"`
	Settling   []settleEntry  `json:"s,omitempty"`
	Rate       levels.Rate    `json:"rl,omitzero"`
}

type settleEntry struct {
	Until  int64        `json:"t"` // unix ms
	Amount money.Amount `json:"a"`
}

// scopeMoney is a key's, workspace's or member's field.
type scopeMoney struct {
	Usage     money.UsageCounters `json:"u"`
	BYOKUsage money.UsageCounters `json:"b"`
	Held      money.Amount        `json:"h"`
	Rate      levels.Rate         `json:"rl,omitzero"`
}

// holdRecord is one running request's holds (field h:<reservation id>).
type holdRecord struct {
	Key       string       `json:"k,omitempty"`
	Workspace string       `json:"w,omitempty"`
	Member    string       `json:"m,omitempty"`
	Hold      money.Amount `json:"h"`
	InFlight  money.Amount `json:"i,omitempty"`
	Credits   money.Amount `json:"c,omitempty"`
	KeyOnly   bool         `json:"o,omitempty"`
	WSHold    money.Amount `json:"wh,omitempty"`
	// Rate is what the request counted on the rate limits: its running
	// count ends with the hold, its tokens are corrected at settlement.
	Rate levels.RatePlaced `json:"rl,omitzero"`
}

// placed is what the hold record says was placed on each level.
func (r *holdRecord) placed() levels.Placed {
	return levels.Placed{
		Account: ledger.Holds{Hold: r.Hold, KeyOnly: r.KeyOnly, Credits: r.Credits}.OnAccount(),
		OnKey:   r.Key != "", Key: r.Hold,
		OnWorkspace: r.Workspace != "", Workspace: r.WSHold,
		OnMember: r.Member != "", Member: r.Hold,
		InFlight: max(r.InFlight, 0),
		Rate:     r.Rate,
	}
}

var _ ledger.Backend = (*Ledger)(nil)

// Ledger is the ledger over Redis of one store.
type Ledger struct {
	k *kernel.Kernel
	// storedUntil is when Redis deletes a generation created at Unix ms
	// (the generation retention's).
	storedUntil func(ms int64) int64
	recs        ledger.Records
	now         func() time.Time
	publish     func(record.Generation) // a settled generation, once in Redis
	rb          *kernel.RedisBackend
	lay         kernel.Layout // the keys' names
	replica     string        // this replica's id, as the scripts' feed entries name it
	pipe        *scriptPipe   // every ledger script call, pipelined across accounts
	log         *zap.Logger
	lease       time.Duration

	// mu and queues order this replica's ledger scripts of one account
	// (RLock, then the account's queue: acctQueue), so that its own
	// requests do not invalidate each other's reads while other accounts'
	// run beside them; whole-ledger reads (LoadAll, Refresh) take
	// Lock, which also waits for the batches in flight. Authentication
	// never takes either.
	mu     sync.RWMutex
	queues sync.Map // account id -> *acctQueue
	// raw is the last known string of every money field, with its
	// decoded value, by account id then field (missing: absent), under mu
	// and the kernel's lock.
	raw map[string]moneyFields
	// seq counts the changes to raw: a refresh read without mu is applied
	// only if nothing changed raw meanwhile.
	seq atomic.Uint64
	// live are this replica's running reservations: their leases are
	// renewed. Under liveMu.
	liveMu sync.Mutex
	live   map[string]string // lease member -> account id
	ids    map[*ledger.Reservation]string

	// keyCeiling is the per-key abuse ceiling shared by the replicas
	// (Store.ShareKeyCeiling); nil: none.
	keyCeiling atomic.Pointer[ledger.KeyCeiling]

	wg  sync.WaitGroup
	ctx context.Context // ends when the store closes
}

// Config is what a Ledger runs on.
type Config struct {
	// Kernel's lock guards Records and the replica's copy of the money
	// fields.
	Kernel  *kernel.Kernel
	Records ledger.Records
	Backend *kernel.RedisBackend
	// Publish is given each settled generation, once in Redis.
	Publish func(record.Generation)
	// StoredUntil is when Redis deletes a generation created at Unix ms
	// (the generation retention's); nil: never.
	StoredUntil func(ms int64) int64
	// Now is the ledger's clock; nil: time.Now.
	Now func() time.Time
	Log *zap.Logger
}

// New is the shared ledger of one store on c.Backend.
func New(c Config) *Ledger {
	rb := c.Backend
	lease := rb.HoldLease()
	if lease <= 0 {
		lease = DefaultHoldLease
	}
	now := c.Now
	if now == nil {
		now = time.Now
	}
	log := c.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Ledger{k: c.Kernel, recs: c.Records, now: now, publish: c.Publish, storedUntil: c.StoredUntil, rb: rb, replica: rb.Replica(), lay: rb.Layout(), pipe: &scriptPipe{client: rb.Client()}, log: log, lease: lease, raw: map[string]moneyFields{}, live: map[string]string{}, ids: map[*ledger.Reservation]string{}}
}

// moneyKey is the account's money hash, in the account's bucket (see
// kernel.Layout: every key a script touches is in one slot).
func (l *Ledger) moneyKey(accountID string) string {
	return l.lay.AccountKey(accountID, "~m/"+accountID)
}

// leaseKey is bucket b's lease set: the leases of its accounts' holds.
func (l *Ledger) leaseKey(b int) string { return l.lay.Key(b, "~leases") }

func ctxTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Second)
}

// LoadAll reads every account's money fields (under mu: see refresh).
func (l *Ledger) LoadAll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx := context.Background()
	match := kernel.GlobEscape(l.lay.Tag(0)+"~m/") + "*"
	if l.lay.Buckets() > 1 {
		match = kernel.GlobEscape(l.rb.Prefix()) + "{*}~m/*"
	}
	keys, err := l.rb.ScanKeys(ctx, match)
	if err != nil {
		return err
	}
	raw := map[string]moneyFields{}
	for chunk := range slices.Chunk(keys, 200) {
		cctx, cancel := ctxTimeout()
		cmds, err := l.rb.Client().Pipelined(cctx, func(p redis.Pipeliner) error {
			for _, k := range chunk {
				p.HGetAll(cctx, k)
			}
			return nil
		})
		cancel()
		if err := l.rb.Observe(err); err != nil {
			return err
		}
		for i, c := range cmds {
			_, id, _ := strings.Cut(chunk[i][len(l.rb.Prefix()):], "}~m/")
			raw[id] = newMoneyFields(c.(*redis.MapStringStringCmd).Val())
		}
	}
	l.seq.Add(1)
	l.k.Lock()
	l.raw = raw
	l.k.Unlock()
	return nil
}

// rawFields is the account's map in raw, made when missing. Callers hold
// the kernel's lock.
func (l *Ledger) rawFields(accountID string) moneyFields {
	raw := l.raw[accountID]
	if raw == nil {
		raw = moneyFields{}
		l.raw[accountID] = raw
	}
	return raw
}

// OverlayAll applies every account's money fields to memory. Callers hold
// the kernel's lock.
func (l *Ledger) OverlayAll() {
	l.recs.LedgerAccountIDs(l.Overlay)
}

// Overlay applies an account's known money fields to its records in
// memory and to the held figures that views read. Callers hold the
// kernel's lock.
func (l *Ledger) Overlay(accountID string) {
	fs := l.raw[accountID]
	for name := range fs {
		l.overlayField(accountID, fs, name)
	}
}

// overlayField applies one of an account's money fields (fs: its fields in
// raw) to memory; after a script, only the fields it changed need it.
// Callers hold the kernel's lock.
func (l *Ledger) overlayField(accountID string, fs moneyFields, name string) {
	if name == "a" {
		if acct := l.recs.LedgerAccount(accountID); acct != nil && fs[name].raw != "" {
			am, _ := fs.decoded(name).(*acctMoney)
			if am != nil { // not valid: the record's figures stay, as acctOf reads them
				l.recs.SetAccountCounters(accountID, am.level())
			}
		}
		return
	}
	kind, id, _ := strings.Cut(name, ":")
	if kind != "k" && kind != "w" && kind != "m" {
		return
	}
	sm, ok := fs.decoded(name).(*scopeMoney)
	if !ok {
		return
	}
	switch kind {
	case "k":
		l.recs.SetKeyCounters(id, levels.Scope(*sm))
	case "w":
		l.recs.SetWorkspaceCounters(accountID, id, levels.Scope(*sm))
	case "m":
		l.recs.SetMemberCounters(accountID, id, levels.Scope(*sm))
	}
}

// moneyField is one money field's string as last known and its decoded
// value (*acctMoney, *scopeMoney or *holdRecord; nil until decoded, or
// when the string is not valid). Decoding was the ledger's main cost per
// script, so a string is decoded once, under the kernel's lock, or never
// when this replica wrote it: the value it was encoded from is kept. The
// value is shared and never changed in place: readers copy it.
type moneyField struct {
	raw string
	val any
}

// moneyFields are one account's fields, by name.
type moneyFields map[string]moneyField

func newMoneyFields(m map[string]string) moneyFields {
	fs := make(moneyFields, len(m))
	for name, v := range m {
		fs[name] = moneyField{raw: v}
	}
	return fs
}

// decoded is the field's value, decoded and kept now if it was not.
// Callers hold the kernel's lock (exclusive).
func (fs moneyFields) decoded(name string) any {
	f := fs[name]
	if f.val == nil && f.raw != "" {
		if v, err := decodeField(name, f.raw); err == nil {
			f.val = v
			fs[name] = f
		}
	}
	return f.val
}

// value is the field's value, decoded now (and not kept: callers may hold
// only the kernel's read lock) if it was not; nil when absent.
func (f moneyField) value(name string) (any, error) {
	if f.val != nil || f.raw == "" {
		return f.val, nil
	}
	return decodeField(name, f.raw)
}

// decodeField decodes a field's string by the kind its name says.
func decodeField(name, raw string) (any, error) {
	var v any
	switch {
	case name == "a":
		v = new(acctMoney)
	case strings.HasPrefix(name, "h:"):
		v = new(holdRecord)
	case strings.HasPrefix(name, "k:"), strings.HasPrefix(name, "w:"), strings.HasPrefix(name, "m:"):
		v = new(scopeMoney)
	default:
		return nil, fmt.Errorf("unknown money field %q", name)
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return nil, err
	}
	return v, nil
}

// acctOf is an "a" field's figures, a copy; absent or not valid, the
// record's (migrated from Badger, or never charged).
func acctOf(f moneyField, acct *record.Account) acctMoney {
	if v, _ := f.value("a"); v != nil {
		am := *v.(*acctMoney)
		am.Settling = slices.Clone(am.Settling)
		return am
	}
	return acctMoney{Usage: acct.Usage, BYOKUsage: acct.BYOKUsage, FreeDay: acct.FreeModelRequests, FreeMinute: acct.FreeModelMinute}
}

// scopeOf is a key's, workspace's or member's field, a copy; absent or
// not valid, the record's counters.
func scopeOf(name string, f moneyField, usage, byok money.UsageCounters) scopeMoney {
	if v, _ := f.value(name); v != nil {
		return *v.(*scopeMoney)
	}
	return scopeMoney{Usage: usage, BYOKUsage: byok}
}

// holdOf is an "h:" field's record, a copy; nil when absent.
func holdOf(name string, f moneyField) (*holdRecord, error) {
	v, err := f.value(name)
	if v == nil || err != nil {
		return nil, err
	}
	h := *v.(*holdRecord)
	return &h, nil
}

// level is the account's figures as the levels' arithmetic takes them.
func (am *acctMoney) level() levels.Account {
	return levels.Account{Usage: am.Usage, BYOKUsage: am.BYOKUsage, FreeDay: am.FreeDay, FreeMinute: am.FreeMinute, Held: am.Held, Running: am.Running, Rate: am.Rate}
}

// fieldLevels is one request's money fields, decoded into its levels,
// with what was read.
type fieldLevels struct {
	accountID string
	queue     *acctQueue // a snapshot's: the account's
	acct      *record.Account
	acctField fieldRead
	// figures are the levels; its Key, Workspace and Member point at ks,
	// wm and mm when the request has them.
	figures     levels.Levels
	settling    []settleEntry
	key         *record.APIKey
	keyField    fieldRead
	ks          levels.Scope
	ws          *record.Workspace
	wsField     fieldRead
	wm          levels.Scope
	member      *record.Member
	memberField fieldRead
	mm          levels.Scope
	hold        *holdRecord // the reservation's, when asked and present
	holdField   fieldRead   // the reservation's; no name: not asked
}

// fieldRead is a field a request reads and writes back, with the string
// it read ("": absent).
type fieldRead struct{ name, read string }

// readLevels decodes the fields of an account, key, workspace and member
// from the replica's copy (fv). Callers hold the account's locks and the
// kernel's lock.
func (l *Ledger) readLevels(fv fieldView, accountID, keyHash, wsID, memberID, holdField string) (*fieldLevels, error) {
	acct := l.recs.LedgerAccount(accountID)
	if acct == nil {
		return nil, kernel.ErrNotFound
	}
	a := fv.get("a")
	lv := &fieldLevels{accountID: accountID, acct: acct, acctField: fieldRead{"a", a.raw}}
	am := acctOf(a, acct)
	lv.figures.Account, lv.settling = am.level(), am.Settling
	if keyHash != "" {
		if k := l.recs.LedgerKey(keyHash); k != nil {
			f := "k:" + keyHash
			v := fv.get(f)
			lv.key, lv.keyField = k, fieldRead{f, v.raw}
			lv.ks = levels.Scope(scopeOf(f, v, k.Usage, k.BYOKUsage))
			lv.figures.Key = &lv.ks
			if wsID == "" && memberID == "" && holdField == "" {
				wsID = k.WorkspaceID
				if k.CreatorUserID != nil {
					memberID = *k.CreatorUserID
				}
			}
		}
	}
	if ws := l.recs.LedgerWorkspace(accountID, wsID); ws != nil {
		f := "w:" + wsID
		v := fv.get(f)
		lv.ws, lv.wsField = ws, fieldRead{f, v.raw}
		lv.wm = levels.Scope(scopeOf(f, v, ws.Usage, ws.BYOKUsage))
		lv.figures.Workspace, lv.figures.WorkspaceCountsBYOK = &lv.wm, ws.IncludeBYOKInBudgets
	}
	if m := l.recs.LedgerMember(accountID, memberID); m != nil {
		f := "m:" + memberID
		v := fv.get(f)
		lv.member, lv.memberField = m, fieldRead{f, v.raw}
		lv.mm = levels.Scope(scopeOf(f, v, m.Usage, m.BYOKUsage))
		lv.figures.Member = &lv.mm
	}
	if holdField != "" {
		v := fv.get(holdField)
		lv.holdField = fieldRead{holdField, v.raw}
		h, err := holdOf(holdField, v)
		if err != nil {
			return nil, err
		}
		lv.hold = h
	}
	return lv, nil
}

// inFlight is the account's in-flight use at t (running holds and the
// settling costs not yet released) and the time until the next release,
// expired settling costs dropped (in place: lv.settling is the request's
// own copy, acctOf).
func (lv *fieldLevels) inFlight(t time.Time) (held money.Amount, next time.Duration) {
	ms := t.UnixMilli()
	lv.settling = slices.DeleteFunc(lv.settling, func(e settleEntry) bool { return e.Until <= ms })
	held = lv.figures.Account.Running
	for _, e := range lv.settling {
		held += e.Amount
	}
	if len(lv.settling) > 0 {
		next = time.UnixMilli(lv.settling[0].Until).Sub(t)
	}
	return held, next
}

// writes encodes the levels: the triples for casScript, in the order of
// the fields' names, and the value each new string encodes (kept as the
// field's decoded value). The new strings share one allocation: the
// buffer they were encoded in, never written again.
func (lv *fieldLevels) writes() (triples []string, values []any) {
	type encoded struct {
		field fieldRead
		end   int // of its string in buf
		val   any // nil: deleted
	}
	var encs [5]encoded
	n := 0
	// The new strings are about as long as the ones read (a new hold
	// about 200 bytes; a settling list grows by one entry at most).
	size := 256 + len(lv.acctField.read) + len(lv.holdField.read) + len(lv.keyField.read) + len(lv.wsField.read) + len(lv.memberField.read)
	buf := make([]byte, 0, size)
	a := lv.figures.Account
	am := &acctMoney{Usage: a.Usage, BYOKUsage: a.BYOKUsage, FreeDay: a.FreeDay, FreeMinute: a.FreeMinute,
		Held: a.Held, Running: a.Running, Settling: lv.settling, Rate: a.Rate}
	buf = appendAcct(buf, am)
	encs[n], n = encoded{lv.acctField, len(buf), am}, n+1
	if lv.holdField.name != "" {
		var val any
		if lv.hold != nil {
			h := new(holdRecord)
			*h = *lv.hold
			buf, val = appendHold(buf, h), h
		}
		encs[n], n = encoded{lv.holdField, len(buf), val}, n+1
	}
	scope := func(f fieldRead, v levels.Scope) {
		sm := (*scopeMoney)(&v)
		buf = appendScope(buf, sm)
		encs[n], n = encoded{f, len(buf), sm}, n+1
	}
	if lv.key != nil {
		scope(lv.keyField, lv.ks)
	}
	if lv.member != nil {
		scope(lv.memberField, lv.mm)
	}
	if lv.ws != nil {
		scope(lv.wsField, lv.wm)
	}
	news := unsafe.String(unsafe.SliceData(buf), len(buf))
	triples, values = make([]string, 0, 3*n), make([]any, 0, n)
	start := 0
	for _, e := range encs[:n] {
		triples = append(triples, e.field.name, e.field.read, news[start:e.end])
		values = append(values, e.val)
		start = e.end
	}
	return triples, values
}

// script is one casScript call.
type script struct {
	accountID        string
	leaseOp          string
	leaseMember      string
	leaseScore       int64
	genID            string
	genKey, genValue string
	genExpireAt      int64 // Unix ms; 0: never
	upKey, upValue   string
	triples          []string
	// values are the values the triples' new strings encode, one per
	// triple (nil, or none: decoded when read).
	values []any
	// ceilingKey, when set, takes a token from the key's shared abuse
	// ceiling (keyCeiling) in the same step.
	ceilingKey string
	ceiling    *ledger.KeyCeiling
	// keys are the call's keys (scriptArgs), kept here for the call.
	keys [6]string
}

// run calls the script: done, or the current fields on a mismatch
// (adopted into the replica's copy), or already (the generation exists),
// or alive (a reaped lease was renewed); memory then shows the fields the
// script found or wrote. Callers hold the account's locks (lockAccount,
// or flushMu as flush does).
func (l *Ledger) run(sc *script) (status int64, err error) {
	keys, args := l.scriptArgs(sc)
	out, err := l.pipe.call(casScript, keys, args)
	return l.apply(sc, out, err)
}

// scriptArgs are the keys and arguments of a casScript call. The strings
// and integers are passed as pointers into sc (the client writes *string
// and *int64 as it writes their values): boxing each value in an
// interface was a fifth of a request's allocations on the shared ledger.
// So sc must not change until the call is answered.
func (l *Ledger) scriptArgs(sc *script) (keys []string, args []any) {
	q := l.queueOf(sc.accountID)
	genKey, upKey := sc.genKey, sc.upKey
	if genKey == "" {
		genKey = q.keys[3]
	}
	if upKey == "" {
		upKey = genKey
	}
	args = make([]any, 0, 14+len(sc.triples))
	args = append(args, &l.replica, &sc.accountID, &sc.leaseOp, &sc.leaseMember, &sc.leaseScore,
		&sc.genValue, &sc.upValue, 100000, len(sc.triples)/3)
	for i := range sc.triples {
		args = append(args, &sc.triples[i])
	}
	args = append(args, &sc.genID)
	ceilingKey := sc.ceilingKey
	if sc.ceiling != nil && ceilingKey != "" {
		args = append(args, strconv.FormatFloat(sc.ceiling.Requests/float64(sc.ceiling.Window.Milliseconds()), 'g', -1, 64), sc.ceiling.Burst)
	} else {
		args = append(args, "", 0)
		ceilingKey = genKey
	}
	args = append(args, &sc.genExpireAt)
	sc.keys = [6]string{q.keys[0], q.keys[1], q.keys[2], genKey, upKey, ceilingKey}
	return sc.keys[:], args
}

// apply reads a casScript answer (see run).
func (l *Ledger) apply(sc *script, out []any, err error) (status int64, _ error) {
	if err := l.rb.Observe(err); err != nil {
		return 0, err
	}
	if len(out) == 0 {
		return 0, fmt.Errorf("ledger script: empty answer")
	}
	status, _ = out[0].(int64)
	if status == 4 {
		wait, _ := out[1].(int64)
		return status, &ledger.CeilingError{Burst: sc.ceiling.Burst, Reset: l.now().Add(time.Duration(wait) * time.Millisecond)}
	}
	if status != 0 && status != 1 {
		return status, nil // nothing changed
	}
	l.seq.Add(1)
	l.k.Lock()
	defer l.k.Unlock()
	fs := l.rawFields(sc.accountID)
	if status == 0 {
		for i := 1; i+1 < len(out); i += 2 {
			f, _ := out[i].(string)
			v, _ := out[i+1].(string)
			fs.set(f, v, nil)
			l.overlayField(sc.accountID, fs, f)
		}
		return status, nil
	}
	for i := 0; i+2 < len(sc.triples); i += 3 {
		var val any
		if i/3 < len(sc.values) {
			val = sc.values[i/3]
		}
		fs.set(sc.triples[i], sc.triples[i+2], val)
		l.overlayField(sc.accountID, fs, sc.triples[i])
	}
	return status, nil
}

// set records a field's new string ("": absent) and, when known, the
// value it encodes; an unchanged string keeps its decoded value.
func (fs moneyFields) set(name, raw string, val any) {
	switch {
	case raw == "":
		delete(fs, name)
	case val != nil:
		fs[name] = moneyField{raw: raw, val: val}
	case fs[name].raw != raw:
		fs[name] = moneyField{raw: raw}
	}
}

// Snapshot reads the account's fields as its queued scripts leave them
// (under the queue's lock, held on when exclusive, so that no decision of
// this replica on the account runs beside it).
func (l *Ledger) Snapshot(accountID, keyHash string, exclusive bool) (ledger.View, ledger.Stamp, error) {
	q := l.queueOf(accountID)
	l.lockQueue(q)
	t := l.now()
	l.k.RLock()
	lv, err := l.readLevels(l.view(q, accountID), accountID, keyHash, "", "", "")
	l.k.RUnlock()
	if err != nil {
		l.unlockQueue(q)
		return ledger.View{}, ledger.Stamp{}, err
	}
	lv.queue = q
	st := ledger.Stamp{AccountID: accountID, KeyHash: keyHash, At: t, Shared: lv}
	if exclusive {
		st.Lock = l.queueLock(q)
	} else {
		l.unlockQueue(q)
	}
	v := lv.view(t)
	st.InFlightHeld = v.InFlightHeld
	return v, st, nil
}

// Commit places the holds with one script that re-checks every field the
// snapshot read: first against the fields as this replica's queued scripts
// leave them (a decision on older strings would fail, and fail the rest of
// its batch with it), then in Redis against what other replicas wrote.
func (l *Ledger) Commit(st ledger.Stamp, h ledger.Holds) (*ledger.Reservation, error) {
	q := st.Shared.(*fieldLevels).queue
	if st.Lock == nil {
		l.lockQueue(q)
		st.Lock = l.queueLock(q)
	} else if st.Lock.Released() {
		return nil, ledger.ErrStale
	}
	res, p, lead, err := l.queueCommit(st, h)
	st.Lock.Release()
	if err != nil {
		return nil, err
	}
	status, err := l.await(q, p, lead)
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	if err != nil || status != 1 {
		// Not placed, or not known to be: a hold that landed all the
		// same is reaped once its lease lapses.
		delete(l.live, p.sc.leaseMember)
		if err != nil {
			return nil, err
		}
		return nil, ledger.ErrStale // the current fields are adopted: decide again
	}
	l.ids[res] = p.sc.leaseMember[len(res.AccountID)+1:]
	return res, nil
}

// queueCommit queues the script of a snapshot's holds if the fields it
// read are still those the account's queued scripts leave. Callers hold
// the queue's lock.
func (l *Ledger) queueCommit(st ledger.Stamp, h ledger.Holds) (*ledger.Reservation, *queued, bool, error) {
	lv := st.Shared.(*fieldLevels)
	q := lv.queue
	l.k.RLock()
	fresh := lv.hold == nil && lv.unchanged(l.view(q, st.AccountID))
	l.k.RUnlock()
	if !fresh {
		return nil, nil, false, ledger.ErrStale
	}
	if !lv.figures.Fits(h, st.InFlightHeld) {
		return nil, nil, false, money.ErrAmountRange
	}
	resID := newReservationID()
	res := &ledger.Reservation{AccountID: st.AccountID, KeyHash: st.KeyHash, Holds: h}
	rec := lv.place(res, st.At)
	lv.holdField, lv.hold = fieldRead{name: "h:" + resID}, rec
	triples, values := lv.writes()
	sc := script{accountID: st.AccountID, leaseOp: "add", leaseMember: st.AccountID + "\n" + resID,
		leaseScore: st.At.Add(l.lease).UnixMilli(), triples: triples, values: values}
	if c := l.keyCeiling.Load(); c != nil && st.KeyHash != "" {
		sc.ceiling, sc.ceilingKey = c, l.lay.AccountKey(st.AccountID, "~ab/"+st.KeyHash)
	}
	p, lead := q.enqueue(sc)
	// Renewed from now on: the lease may land at any renewal's tick.
	l.liveMu.Lock()
	l.live[sc.leaseMember] = st.AccountID
	l.liveMu.Unlock()
	return res, p, lead, nil
}

// Abandon lets go of the account's lock, if the snapshot holds it.
func (l *Ledger) Abandon(st ledger.Stamp) { st.Lock.Release() }

// unchanged reports whether every field the levels were read from still
// reads the same in fv. Callers hold the kernel's lock.
func (lv *fieldLevels) unchanged(fv fieldView) bool {
	for _, f := range [...]*fieldRead{&lv.acctField, &lv.keyField, &lv.wsField, &lv.memberField} {
		if f.name != "" && fv.get(f.name).raw != f.read {
			return false
		}
	}
	return true
}

// view is the LedgerView of these levels at t, and the in-flight state.
func (lv *fieldLevels) view(t time.Time) ledger.View {
	fa := lv.figures.Account
	a := *lv.acct
	a.Usage, a.BYOKUsage, a.FreeModelRequests, a.FreeModelMinute = fa.Usage, fa.BYOKUsage, fa.FreeDay, fa.FreeMinute
	v := ledger.View{Now: t, Account: a, AccountHeld: fa.Held, AccountRate: fa.Rate}
	if lv.key != nil {
		v.Key = *lv.key
		v.Key.Usage, v.Key.BYOKUsage = lv.ks.Usage, lv.ks.BYOKUsage
		v.KeyHeld, v.KeyRate = lv.ks.Held, lv.ks.Rate
	}
	if lv.ws != nil {
		w := *lv.ws
		w.Usage, w.BYOKUsage = lv.wm.Usage, lv.wm.BYOKUsage
		v.Workspace, v.WorkspaceHeld, v.WorkspaceRate = &w, lv.wm.Held, lv.wm.Rate
	}
	if lv.member != nil {
		m := *lv.member
		m.Usage, m.BYOKUsage = lv.mm.Usage, lv.mm.BYOKUsage
		v.Member, v.MemberHeld = &m, lv.mm.Held
	}
	v.InFlightHeld, v.NextRelease = lv.inFlight(t)
	return v
}

// place adds an admitted request's holds to the levels (levels.Place)
// and returns its hold record.
func (lv *fieldLevels) place(res *ledger.Reservation, t time.Time) *holdRecord {
	h := res.Holds
	p := lv.figures.Place(h, t)
	res.Placed = p
	rec := &holdRecord{Hold: h.Hold, InFlight: h.InFlight, Credits: h.Credits, KeyOnly: h.KeyOnly, Rate: p.Rate}
	if p.OnKey {
		rec.Key = res.KeyHash
	}
	if p.OnWorkspace {
		rec.Workspace, rec.WSHold = lv.ws.ID, p.Workspace
		res.Workspace = res.AccountID + "/" + lv.ws.ID
	}
	if p.OnMember {
		rec.Member = lv.member.ID
		res.Member = res.AccountID + "/" + lv.member.ID
	}
	return rec
}

// unhold takes a hold record's holds off the levels (levels.Unhold).
func (lv *fieldLevels) unhold(rec *holdRecord) { lv.figures.Unhold(rec.placed()) }

// readHeld reads the levels a reservation holds, with its hold record, as
// the account's queued scripts leave them. Callers hold the queue's lock.
func (l *Ledger) readHeld(q *acctQueue, res *ledger.Reservation) (*fieldLevels, error) {
	wsID, memberID := "", ""
	if _, id, ok := strings.Cut(res.Workspace, "/"); ok {
		wsID = id
	}
	if _, id, ok := strings.Cut(res.Member, "/"); ok {
		memberID = id
	}
	l.liveMu.Lock()
	resID, ok := l.ids[res]
	l.liveMu.Unlock()
	if !ok {
		return nil, ledger.ErrSettled
	}
	l.k.RLock()
	defer l.k.RUnlock()
	return l.readLevels(l.view(q, res.AccountID), res.AccountID, res.KeyHash, wsID, memberID, "h:"+resID)
}

// member is a reservation's lease member.
func (l *Ledger) member(res *ledger.Reservation) string {
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	return res.AccountID + "\n" + l.ids[res]
}

// Settle releases the holds, charges every level and writes the
// generation record in one script, once.
func (l *Ledger) Settle(res *ledger.Reservation, c ledger.Charge) error {
	q := l.queueOf(res.AccountID)
	for range maxAttempts {
		p, lead, ch, err := l.queueSettle(q, res, c)
		if err != nil {
			return err
		}
		status, err := l.await(q, p, lead)
		if err != nil {
			return err
		}
		if status == 1 || status == 2 {
			res.Done = true
			l.forget(res, p.sc.leaseMember)
			if status == 1 && ch.Generation != nil {
				l.publish(*ch.Generation)
			}
			return nil
		}
	}
	return ledger.ErrContended
}

// queueSettle computes a settlement on the account's fields as its queued
// scripts leave them, and queues its script.
func (l *Ledger) queueSettle(q *acctQueue, res *ledger.Reservation, c ledger.Charge) (*queued, bool, ledger.Charge, error) {
	l.lockQueue(q)
	defer l.unlockQueue(q)
	if res.Done {
		return nil, false, c, ledger.ErrSettled
	}
	t := l.now()
	lv, err := l.readHeld(q, res)
	if err != nil {
		return nil, false, c, err
	}
	if lv.hold != nil {
		lv.unhold(lv.hold)
		if g := c.Generation; g != nil {
			lv.figures.SettleRate(lv.hold.Rate, g.PromptTokens, g.CompletionTokens, t)
		}
		lv.hold = nil
	}
	ch := c.Within(lv.figures.Account.Usage, lv.figures.Account.BYOKUsage)
	lv.figures.Charge(ch.Levels(), t)
	if levels.KeepsSettling(res.Holds.InFlight, ch.Cost, ch.SettlementWindow) {
		lv.settling = keepSettling(lv.settling, t, ch.SettlementWindow, ch.Cost)
	}
	sc := script{accountID: res.AccountID, leaseOp: "del", leaseMember: l.member(res)}
	if g := ch.Generation; g != nil {
		// MarshalJSON itself: json.Marshal would scan its output again.
		b, err := g.MarshalJSON()
		if err != nil {
			return nil, false, c, err
		}
		sc.genID, sc.genKey, sc.genValue = g.ID, l.lay.AccountKey(res.AccountID, record.GenerationPrefix+g.ID), string(b)
		if ms, ok := record.GenerationMillis(g.ID); ok && l.storedUntil != nil {
			sc.genExpireAt = l.storedUntil(ms)
		}
		if g.UpstreamID != "" && g.UpstreamID != g.ID && !g.UpstreamIDHidden {
			sc.upKey, sc.upValue = l.lay.AccountKey(res.AccountID, record.UpstreamIDPrefix+g.AccountID+"/"+g.UpstreamID), string(jsonstr.Quote(g.ID))
		}
	}
	sc.triples, sc.values = lv.writes()
	p, lead := q.enqueue(sc)
	return p, lead, ch, nil
}

// settleSteps coarsens the settling costs' release times: costs released
// within the same step (a tenth of the window, at least settleMinStep) are
// one entry, so the account's field stays small at any request rate (at
// most settleSteps+1 entries): every script of the account carries that
// field, and Redis hashes each byte of every string a script reads or
// receives. Each cost is held at most one step longer than its window,
// never shorter; Retry-After counts whole seconds anyway.
const (
	settleSteps   = 10
	settleMinStep = 100 * time.Millisecond
)

// keepSettling holds a finished request's cost until its window from t
// ends (rounded up to the step), in release order.
func keepSettling(s []settleEntry, t time.Time, window time.Duration, cost money.Amount) []settleEntry {
	b := max(window/settleSteps, settleMinStep).Milliseconds()
	ms := t.Add(window).UnixMilli()
	ms = (ms + b - 1) / b * b
	i, found := slices.BinarySearchFunc(s, ms, func(x settleEntry, u int64) int { return cmp.Compare(x.Until, u) })
	if found {
		s[i].Amount += cost
		return s
	}
	return slices.Insert(s, i, settleEntry{Until: ms, Amount: cost})
}

// Release takes the reservation's holds off the account's fields.
func (l *Ledger) Release(res *ledger.Reservation) error {
	q := l.queueOf(res.AccountID)
	for range maxAttempts {
		p, lead, err := l.queueRelease(q, res)
		if err != nil || p == nil {
			return err
		}
		status, err := l.await(q, p, lead)
		if err != nil {
			return err
		}
		if status == 1 {
			res.Done = true
			l.forget(res, p.sc.leaseMember)
			return nil
		}
	}
	return ledger.ErrContended
}

// queueRelease queues the script that takes a reservation's holds off the
// account's fields as its queued scripts leave them; none when they were
// released meanwhile.
func (l *Ledger) queueRelease(q *acctQueue, res *ledger.Reservation) (*queued, bool, error) {
	l.lockQueue(q)
	defer l.unlockQueue(q)
	if res.Done {
		return nil, false, ledger.ErrSettled
	}
	lv, err := l.readHeld(q, res)
	if err != nil {
		return nil, false, err
	}
	if lv.hold == nil { // reaped meanwhile
		res.Done = true
		l.forget(res, l.member(res))
		return nil, false, nil
	}
	lv.unhold(lv.hold)
	// Nothing was charged: neither were the tokens.
	lv.figures.SettleRate(lv.hold.Rate, 0, 0, l.now())
	lv.hold = nil
	sc := script{accountID: res.AccountID, leaseOp: "del", leaseMember: l.member(res)}
	sc.triples, sc.values = lv.writes()
	p, lead := q.enqueue(sc)
	return p, lead, nil
}

func (l *Ledger) forget(res *ledger.Reservation, member string) {
	l.liveMu.Lock()
	delete(l.live, member)
	delete(l.ids, res)
	l.liveMu.Unlock()
}

// Start runs the lease keeper until ctx ends: it renews this replica's
// leases and releases the expired leases of any replica. Each on its own
// ticker: reaping waits for busy accounts' locks and may take many round
// trips, and a renewal behind it could let a live request's lease lapse.
func (l *Ledger) Start(ctx context.Context) {
	l.ctx = ctx
	l.every(ctx, l.renew)
	l.every(ctx, func() {
		if _, err := l.ReapExpired(); err != nil && !errors.Is(err, kernel.ErrUnavailable) {
			l.log.Error("releasing expired holds failed", zap.Error(err))
		}
	})
}

// every runs do every third of a lease until ctx ends.
func (l *Ledger) every(ctx context.Context, do func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(l.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			do()
		}
	}()
}

func (l *Ledger) Wait() { l.wg.Wait() }

// later retries do (a settlement or release of res) with a growing
// backoff while it fails for a reason that passes (retryLater), until it
// lands or the store closes. On any
// other failure the request's lease is no longer renewed, so that any
// replica's reaper releases its holds once it lapses.
func (l *Ledger) later(res *ledger.Reservation, what string, do func() error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for backoff := 50 * time.Millisecond; ; backoff = min(backoff*2, 2*time.Second) {
			select {
			case <-l.ctx.Done():
				l.log.Error("store closed before a "+what+" could reach redis", zap.String("account", res.AccountID))
				return
			case <-time.After(backoff):
			}
			err := do()
			if err == nil || errors.Is(err, ledger.ErrSettled) {
				return
			}
			if !retryLater(err) {
				l.log.Error("a "+what+" could not be made", zap.String("account", res.AccountID), zap.Error(err))
				l.abandon(res)
				return
			}
		}
	}()
}

// retryLater reports whether a settlement or release that failed for err
// may land if tried again: Redis could not be reached, or other replicas
// changed the account's counters at every attempt (maxAttempts).
func retryLater(err error) bool {
	return errors.Is(err, kernel.ErrUnavailable) || errors.Is(err, ledger.ErrContended)
}

// abandon stops renewing res's lease: its holds are released by a
// reaper once it lapses, as a dead replica's are.
func (l *Ledger) abandon(res *ledger.Reservation) { l.forget(res, l.member(res)) }

// renew extends the leases of this replica's running requests.
func (l *Ledger) renew() {
	l.liveMu.Lock()
	members := make([]string, 0, len(l.live))
	for m := range l.live {
		members = append(members, m)
	}
	l.liveMu.Unlock()
	if len(members) == 0 {
		return
	}
	score := float64(l.now().Add(l.lease).UnixMilli())
	byBucket := map[int][]redis.Z{}
	for _, m := range members {
		accountID, _, _ := strings.Cut(m, "\n")
		b := l.lay.AccountBucket(accountID)
		byBucket[b] = append(byBucket[b], redis.Z{Score: score, Member: m})
	}
	ctx, cancel := ctxTimeout()
	defer cancel()
	_, err := l.rb.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, zs := range byBucket {
			p.ZAddXX(ctx, l.leaseKey(b), zs...)
		}
		return nil
	})
	_ = l.rb.Observe(err) // a failure marks Redis down (readiness and metrics show it); the next tick renews again, within the lease
}

// reap releases holds whose lease expired: their replica died. Not
// within a lease of the end of an outage (this read may be what ends it):
// no replica could renew its leases while Redis was down, and a live one
// renews them within a third of a lease once it is back, so until then
// an expired lease does not mean a dead replica.
func (l *Ledger) ReapExpired() (int, error) {
	ctx, cancel := ctxTimeout()
	nowMS := l.now().UnixMilli()
	// Every bucket's lease set, in one round trip (per master).
	cmds := make([]*redis.StringSliceCmd, l.lay.Buckets())
	_, err := l.rb.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range cmds {
			cmds[b] = p.ZRangeArgs(ctx, redis.ZRangeArgs{Key: l.leaseKey(b), ByScore: true, Start: "-inf", Stop: strconv.FormatInt(nowMS, 10), Count: 100})
		}
		return nil
	})
	cancel()
	if err := l.rb.Observe(err); err != nil {
		return 0, err
	}
	var members []string
	for _, c := range cmds {
		members = append(members, c.Val()...)
	}
	if time.Since(l.rb.UpSince()) < l.lease {
		return 0, nil
	}
	n := 0
	for _, m := range members {
		accountID, resID, ok := strings.Cut(m, "\n")
		if !ok {
			continue
		}
		reaped, err := l.reapOne(accountID, resID, m, nowMS)
		if err != nil {
			return n, err
		}
		if reaped {
			n++
		}
	}
	return n, nil
}

func (l *Ledger) reapOne(accountID, resID, member string, nowMS int64) (bool, error) {
	defer l.lockAccount(accountID)()
	if err := l.refreshLocked(accountID); err != nil {
		return false, err
	}
	for range maxAttempts {
		l.k.RLock()
		rec, err := holdOf("h:"+resID, l.raw[accountID]["h:"+resID])
		if err != nil {
			l.k.RUnlock()
			return false, err
		}
		if rec == nil {
			rec = &holdRecord{}
		}
		lv, err := l.readLevels(fieldView{raw: l.raw[accountID]}, accountID, rec.Key, rec.Workspace, rec.Member, "h:"+resID)
		l.k.RUnlock()
		if errors.Is(err, kernel.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if lv.hold != nil {
			lv.unhold(lv.hold)
			lv.hold = nil
		}
		triples, values := lv.writes()
		status, err := l.run(&script{accountID: accountID, leaseOp: "reap", leaseMember: member, leaseScore: nowMS, triples: triples, values: values})
		if err != nil || status != 0 {
			if status == 1 {
				l.log.Warn("released the holds of a request whose replica stopped renewing them", zap.String("account", accountID))
			}
			return status == 1, err
		}
	}
	return false, ledger.ErrContended
}

// refreshLocked re-reads an account's fields. Callers hold the account's
// locks (lockAccount).
func (l *Ledger) refreshLocked(accountID string) error {
	ctx, cancel := ctxTimeout()
	defer cancel()
	m, err := l.rb.Client().HGetAll(ctx, l.moneyKey(accountID)).Result()
	if err := l.rb.Observe(err); err != nil {
		return err
	}
	l.seq.Add(1)
	l.k.Lock()
	l.raw[accountID] = newMoneyFields(m)
	l.Overlay(accountID)
	l.k.Unlock()
	return nil
}

// Refresh re-reads the fields other replicas' scripts changed, by
// account, in one round trip. The read runs without mu, so that this
// replica's admissions do not wait on it; it is applied only if no script
// of this replica ran meanwhile (else it is read again under mu), so an
// older answer never overwrites a newer one.
func (l *Ledger) Refresh(fields map[string][]string) error {
	seq := l.seq.Load()
	vals, err := l.readFields(fields)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seq.Load() != seq {
		if vals, err = l.readFields(fields); err != nil {
			return err
		}
	}
	l.seq.Add(1)
	l.k.Lock()
	defer l.k.Unlock()
	for accountID, fs := range fields {
		raw := l.rawFields(accountID)
		for i, f := range fs {
			v, _ := vals[accountID][i].(string)
			raw.set(f, v, nil)
			l.overlayField(accountID, raw, f)
		}
	}
	return nil
}

// readFields reads fields by account in one pipeline.
func (l *Ledger) readFields(fields map[string][]string) (map[string][]any, error) {
	ctx, cancel := ctxTimeout()
	defer cancel()
	cmds := map[string]*redis.SliceCmd{}
	_, err := l.rb.Client().Pipelined(ctx, func(p redis.Pipeliner) error {
		for accountID, fs := range fields {
			cmds[accountID] = p.HMGet(ctx, l.moneyKey(accountID), fs...)
		}
		return nil
	})
	if err := l.rb.Observe(err); err != nil {
		return nil, err
	}
	out := make(map[string][]any, len(cmds))
	for accountID, c := range cmds {
		out[accountID] = c.Val()
	}
	return out, nil
}

func newReservationID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// Admissible is nil when the replica may decide a reservation now:
// ErrUnavailable while Redis cannot be reached, ErrResyncing while the
// replica is not synced.
func (l *Ledger) Admissible() error {
	if l.rb.Synced() {
		return nil
	}
	if !l.rb.Available() {
		return kernel.ErrUnavailable
	}
	return ledger.ErrResyncing
}

// SettleFailed: the provider answered, so a charge Redis could not take
// is owed: it lands once Redis answers again, or once other replicas stop
// changing the account's counters at every attempt (a settled generation
// is never written twice), though this request reports the failure. A
// charge that cannot land stops its lease's renewal, so that its holds
// are released.
func (l *Ledger) SettleFailed(res *ledger.Reservation, c ledger.Charge, err error) {
	l.failed(res, err, "charge", func() error { return l.Settle(res, c) })
}

// ReleaseFailed retries a release as SettleFailed retries a settlement.
// Until it lands or its lease lapses the holds stay held: a renewed lease
// is never reaped.
func (l *Ledger) ReleaseFailed(res *ledger.Reservation, err error) {
	l.failed(res, err, "release", func() error { return l.Release(res) })
}

// failed follows a settlement or release of res (do, named what) that
// failed for err: retried later when err passes (retryLater), else the
// lease's renewal stops; nothing when res was settled already.
func (l *Ledger) failed(res *ledger.Reservation, err error, what string, do func() error) {
	switch {
	case retryLater(err):
		l.later(res, what, do)
	case !errors.Is(err, ledger.ErrSettled):
		l.abandon(res)
	}
}

// ShareKeyCeiling sets the per-key abuse ceiling taken in the admission
// script; nil (or a ceiling without a rate) removes it.
func (l *Ledger) ShareKeyCeiling(c *ledger.KeyCeiling) {
	if c != nil && (c.Requests <= 0 || c.Window <= 0 || c.Burst <= 0) {
		c = nil
	}
	l.keyCeiling.Store(c)
}

// Held is what the replica's copy of the account's fields holds.
func (l *Ledger) Held(accountID, keyHash string) (account, key money.Amount) {
	l.k.RLock()
	defer l.k.RUnlock()
	fs := l.raw[accountID]
	if v, _ := fs["a"].value("a"); v != nil {
		account = v.(*acctMoney).Held
	}
	if keyHash != "" {
		if v, _ := fs["k:"+keyHash].value("k:" + keyHash); v != nil {
			key = v.(*scopeMoney).Held
		}
	}
	return account, key
}

// Backend is the Redis backend the ledger runs on.
func (l *Ledger) Backend() *kernel.RedisBackend { return l.rb }

// MoneyKey is the Redis hash of the account's money fields.
func (l *Ledger) MoneyKey(accountID string) string { return l.moneyKey(accountID) }

// Renewing reports whether this replica still renews the lease of res:
// until it is settled or released, or its settlement is given up.
func (l *Ledger) Renewing(res *ledger.Reservation) bool {
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	_, ok := l.ids[res]
	return ok
}
