// Package keytable is the store's API keys in memory: the table of every
// key (Table), each account's keys in creation order (Index), and the
// table's snapshot file, which lets a start skip decoding every key
// record (Snapshots, Read). Callers hold the kernel's lock.
package keytable

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
	"unsafe"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Table holds every API key in memory without a pointer per key: the
// garbage collector never walks it. What admission reads per request
// (hash, account, workspace, creator, limit, expiry, counters) is one
// fixed-size keySlot in a slice; the rest of the record (name, label,
// timestamps, external user, connect app) is one encoded run of bytes in
// an append-only arena; account, workspace and user ids are interned, one
// string per distinct id; a key's usage counters, once it has any, are in
// a second slice (most keys of a large gateway are idle). An
// open-addressing index maps a key's hash to its slot. At a million keys
// this is about 180 bytes a key (a map of records was about 1.9 KB, and
// the collector's work grew with it).
//
// A slot's number is stable while the key lives (Index refers to keys
// by it); a deleted key's slot is reused. Callers hold the kernel's lock
// (Lock to change the table).
type Table struct {
	slots []keySlot
	free  []uint32 // deleted slots, reused first
	index []uint32 // slot+1 by the hash's first bits, linear probing; 0: empty
	live  int
	// cold is the arena of the records' cold parts; dead counts the bytes
	// of replaced ones, reclaimed by compaction. Bytes once written are
	// never changed (strings of materialized records point into them): a
	// compaction or reset starts a new arena.
	cold []byte
	dead int
	strs strTable
	// ctrs are the counters of keys that have any (keySlot.ctr);
	// ctrFree the entries of deleted keys, reused first.
	ctrs    []keyCounters
	ctrFree []uint32
	// gen changes when slots change without their keys' records: a new
	// arena (compaction, reset). A snapshot taken in steps is void then.
	gen uint64
}

// keyCounters is a key's usage counters.
type keyCounters struct {
	usage, byok money.UsageCounters
}

// keySlot is one key's hot part. It holds no pointer.
type keySlot struct {
	id        [32]byte // the hash, decoded (keyID)
	seq       uint64
	limit     money.Amount
	expires   int64 // Unix seconds and nanoseconds, with slotExpires
	expiresNs uint32
	account   uint32 // strTable ids
	workspace uint32
	creator   uint32
	reset     uint32
	coldAt    uint32 // the cold part: cold[coldAt:coldAt+coldLen]
	coldLen   uint32
	ctr       uint32 // ctrs[ctr-1] holds the counters; 0: all zero
	flags     uint16
}

const (
	slotLive uint16 = 1 << iota
	slotDisabled
	slotLimit
	slotIncludeBYOK
	slotExpires
	slotCreator
	// slotOddHash: the hash is not 64 lowercase hex digits (records
	// written by hand); id is its SHA-256 and the cold part holds it.
	slotOddHash
	slotLimitByAdmin
	slotDisabledByAdmin
)

func New() *Table {
	t := &Table{}
	t.Reset()
	return t
}

// reset empties the table. Materialized records keep the old arena.
func (t *Table) Reset() {
	t.gen++
	t.slots, t.free, t.live, t.cold, t.dead = nil, nil, 0, nil, 0
	t.ctrs, t.ctrFree = nil, nil
	t.index = make([]uint32, 64)
	t.strs.reset()
}

// keyID is the table's form of a hash: the SHA-256 it spells in hex, or
// for any other string, the SHA-256 of the string itself.
func keyID(hash string) (id [32]byte, odd bool) {
	if len(hash) == 64 {
		// Eight digits at a time (hexWord), read in place; a word with
		// any byte that is not a lowercase hex digit makes the hash odd.
		digits := (*[64]byte)(unsafe.Pointer(unsafe.StringData(hash)))
		bad := false
		for i := range 8 {
			v, ok := hexWord(binary.LittleEndian.Uint64(digits[8*i:]))
			bad = bad || !ok
			binary.LittleEndian.PutUint32(id[4*i:], v)
		}
		if !bad {
			return id, false
		}
	}
	return sha256.Sum256([]byte("odd key hash:" + hash)), true
}

// hexWord decodes the eight hex digits in x's bytes (x's first byte the
// first digit) into four bytes (the first in v's low byte); ok is false
// unless each is a lowercase hex digit. The digits' ranges are tested in
// every byte at once: adding 0x80-lo to an ASCII byte sets its top bit
// exactly when it is lo or more, and carries into no other byte (a byte
// that is not ASCII makes ok false whatever its carry does).
func hexWord(x uint64) (v uint32, ok bool) {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	digit := (x + (0x80-'0')*ones) &^ (x + (0x80-'9'-1)*ones)
	letter := (x + (0x80-'a')*ones) &^ (x + (0x80-'f'-1)*ones)
	ok = (digit|letter)&^x&tops == tops
	// A digit's value is its low four bits, plus 9 for a letter (bit 6);
	// pairs of digits into bytes, then the bytes together.
	n := x&(0x0f*ones) + (x>>6&ones)*9
	p := (n&0x000f000f000f000f)<<4 | (n>>8)&0x000f000f000f000f
	p = (p | p>>8) & 0x0000ffff0000ffff
	return uint32(p | p>>16), ok
}

// bucket is id's first probe in an index of n (a power of two) entries:
// bits of its last bytes (ids are uniform hashes already). The database
// lists keys in their hashes' order, which the first bytes decide: a load
// inserting them in that order into an index sized for the keys so far
// piled them into runs of full buckets when the bucket came from those
// (40 probes a key, each reading a slot).
func bucket(id *[32]byte, n int) int {
	return int(binary.LittleEndian.Uint64(id[24:]) & uint64(n-1))
}

// find returns the slot of id and where the index holds it, or ok false
// and the empty index entry where it would go.
func (t *Table) find(id *[32]byte) (slot uint32, at int, ok bool) {
	mask := len(t.index) - 1
	for i := bucket(id, len(t.index)); ; i = (i + 1) & mask {
		e := t.index[i]
		if e == 0 {
			return 0, i, false
		}
		if t.slots[e-1].id == *id {
			return e - 1, i, true
		}
	}
}

// lookup returns the live slot of a hash.
func (t *Table) Lookup(hash string) (uint32, bool) {
	id, _ := keyID(hash)
	s, _, ok := t.find(&id)
	return s, ok
}

func (t *Table) Has(hash string) bool {
	_, ok := t.Lookup(hash)
	return ok
}

func (t *Table) Len() int { return t.live }

// accountOf returns the account id of the key.
func (t *Table) AccountOf(hash string) (string, bool) {
	s, ok := t.Lookup(hash)
	if !ok {
		return "", false
	}
	return t.strs.get(t.slots[s].account), true
}

// get materializes the key's record (fresh pointer fields; strings shared
// with the table, which never changes them).
func (t *Table) Get(hash string) (record.APIKey, bool) {
	s, ok := t.Lookup(hash)
	if !ok {
		return record.APIKey{}, false
	}
	var k record.APIKey
	t.Read(s, hash, &k)
	return k, true
}

// readInto is get into k; false, leaving k alone, when there is no such
// key.
func (t *Table) ReadInto(hash string, k *record.APIKey) bool {
	s, ok := t.Lookup(hash)
	if ok {
		t.Read(s, hash, k)
	}
	return ok
}

// slotCounters are slot s's usage counters.
func (t *Table) SlotCounters(s uint32) (usage, byok money.UsageCounters) {
	if c := t.slots[s].ctr; c != 0 {
		return t.ctrs[c-1].usage, t.ctrs[c-1].byok
	}
	return usage, byok
}

// ptrs backs a materialized record's pointer fields in one allocation.
type keyPtrs struct {
	limit    money.Amount
	expires  time.Time
	creator  string
	external string
	connect  record.ConnectApp
	rate     record.RateLimits
}

// read fills k from slot s; hash is the key's hash (empty: decoded from the
// slot).
func (t *Table) Read(s uint32, hash string, k *record.APIKey) {
	sl := &t.slots[s]
	c := coldReader{b: t.cold[sl.coldAt : sl.coldAt+sl.coldLen]}
	name, label := c.str(), c.str()
	created, updated := c.time(), c.time()
	external, hasExternal := c.optStr()
	var connect record.ConnectApp
	hasConnect := c.byte() == 1
	if hasConnect {
		connect.ID = int64(c.u64())
		connect.Name, connect.Origin = c.str(), c.str()
	}
	var rate record.RateLimits
	hasRate := c.byte() == 1
	if hasRate {
		rate.RequestsPerMinute, rate.RequestsPerDay = int64(c.u64()), int64(c.u64())
		rate.PromptTokensPerMinute, rate.CompletionTokensPerMinute = int64(c.u64()), int64(c.u64())
		rate.ConcurrentRequests = int64(c.u64())
	}
	if sl.flags&slotOddHash != 0 {
		hash = c.str()
	} else if hash == "" {
		hash = hex.EncodeToString(sl.id[:])
	}
	*k = record.APIKey{
		Hash: hash, AccountID: t.strs.get(sl.account), WorkspaceID: t.strs.get(sl.workspace),
		Name: name, Label: label, Disabled: sl.flags&slotDisabled != 0,
		LimitReset: money.Interval(t.strs.get(sl.reset)), IncludeBYOKInLimit: sl.flags&slotIncludeBYOK != 0,
		CreatedAt: created, UpdatedAt: updated, Seq: sl.seq,
		LimitByAdmin: sl.flags&slotLimitByAdmin != 0, DisabledByAdmin: sl.flags&slotDisabledByAdmin != 0,
	}
	k.Usage, k.BYOKUsage = t.SlotCounters(s)
	if sl.flags&(slotLimit|slotExpires|slotCreator) == 0 && !hasExternal && !hasConnect && !hasRate {
		return
	}
	p := new(keyPtrs)
	if sl.flags&slotLimit != 0 {
		p.limit = sl.limit
		k.Limit = &p.limit
	}
	if sl.flags&slotExpires != 0 {
		p.expires = time.Unix(sl.expires, int64(sl.expiresNs)).UTC()
		k.ExpiresAt = &p.expires
	}
	if sl.flags&slotCreator != 0 {
		p.creator = t.strs.get(sl.creator)
		k.CreatorUserID = &p.creator
	}
	if hasExternal {
		p.external = external
		k.ExternalUser = &p.external
	}
	if hasConnect {
		p.connect = connect
		k.Connect = &p.connect
	}
	if hasRate {
		p.rate = rate
		k.RateLimits = &p.rate
	}
}

// put stores a key's record, replacing the one with its hash; it returns
// the slot and, when it replaced one, the old record's account and Seq.
func (t *Table) Put(k *record.APIKey) (slot uint32, oldAccount string, oldSeq uint64, replaced bool) {
	id, odd := keyID(k.Hash)
	s, at, ok := t.find(&id)
	var ctr uint32
	if ok {
		old := &t.slots[s]
		oldAccount, oldSeq, replaced = t.strs.get(old.account), old.seq, true
		t.dead += int(old.coldLen)
		ctr = old.ctr
	} else {
		if n := len(t.free); n > 0 {
			s = t.free[n-1]
			t.free = t.free[:n-1]
		} else {
			s = uint32(len(t.slots))
			t.slots = append(t.slots, keySlot{})
		}
		t.index[at] = s + 1
		t.live++
	}
	sl := keySlot{
		id: id, seq: k.Seq, ctr: ctr, flags: slotLive,
		account: t.strs.intern(k.AccountID), workspace: t.strs.intern(k.WorkspaceID),
		reset: t.strs.intern(string(k.LimitReset)),
	}
	if k.Disabled {
		sl.flags |= slotDisabled
	}
	if k.IncludeBYOKInLimit {
		sl.flags |= slotIncludeBYOK
	}
	if k.Limit != nil {
		sl.flags |= slotLimit
		sl.limit = *k.Limit
	}
	if k.ExpiresAt != nil {
		sl.flags |= slotExpires
		sl.expires, sl.expiresNs = k.ExpiresAt.Unix(), uint32(k.ExpiresAt.Nanosecond())
	}
	if k.CreatorUserID != nil {
		sl.flags |= slotCreator
		sl.creator = t.strs.intern(*k.CreatorUserID)
	}
	if odd {
		sl.flags |= slotOddHash
	}
	if k.LimitByAdmin {
		sl.flags |= slotLimitByAdmin
	}
	if k.DisabledByAdmin {
		sl.flags |= slotDisabledByAdmin
	}
	sl.coldAt, sl.coldLen = t.writeCold(k, odd)
	t.slots[s] = sl
	t.storeCounters(&t.slots[s], k.Usage, k.BYOKUsage)
	if !ok {
		t.maybeGrow()
	}
	t.maybeCompact()
	return s, oldAccount, oldSeq, replaced
}

// writeCold appends a record's cold part to the arena.
func (t *Table) writeCold(k *record.APIKey, odd bool) (at, n uint32) {
	start := len(t.cold)
	b := t.cold
	b = putStr(b, k.Name)
	b = putStr(b, k.Label)
	b = putTime(b, k.CreatedAt)
	b = putTime(b, k.UpdatedAt)
	if k.ExternalUser != nil {
		b = putStr(append(b, 1), *k.ExternalUser)
	} else {
		b = append(b, 0)
	}
	if k.Connect != nil {
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint64(b, uint64(k.Connect.ID))
		b = putStr(putStr(b, k.Connect.Name), k.Connect.Origin)
	} else {
		b = append(b, 0)
	}
	if r := k.RateLimits; r != nil {
		b = append(b, 1)
		for _, v := range [...]int64{r.RequestsPerMinute, r.RequestsPerDay, r.PromptTokensPerMinute, r.CompletionTokensPerMinute, r.ConcurrentRequests} {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	} else {
		b = append(b, 0)
	}
	if odd {
		b = putStr(b, k.Hash)
	}
	t.cold = b
	return uint32(start), uint32(len(b) - start)
}

// setCounters replaces a key's usage counters in place.
func (t *Table) SetCounters(hash string, usage, byok money.UsageCounters) bool {
	s, ok := t.Lookup(hash)
	if !ok {
		return false
	}
	t.storeCounters(&t.slots[s], usage, byok)
	return true
}

// storeCounters sets a slot's counters, giving it an entry in ctrs the
// first time they are not zero.
// StoreSlotCounters is SetCounters on a slot Lookup found.
func (t *Table) StoreSlotCounters(slot uint32, usage, byok money.UsageCounters) {
	t.storeCounters(&t.slots[slot], usage, byok)
}

func (t *Table) storeCounters(sl *keySlot, usage, byok money.UsageCounters) {
	if sl.ctr == 0 {
		if usage == (money.UsageCounters{}) && byok == (money.UsageCounters{}) {
			return
		}
		if n := len(t.ctrFree); n > 0 {
			sl.ctr = t.ctrFree[n-1] + 1
			t.ctrFree = t.ctrFree[:n-1]
		} else {
			t.ctrs = append(t.ctrs, keyCounters{})
			sl.ctr = uint32(len(t.ctrs))
		}
	}
	t.ctrs[sl.ctr-1] = keyCounters{usage, byok}
}

// remove deletes a key; it returns its slot, account and Seq.
func (t *Table) Remove(hash string) (slot uint32, account string, seq uint64, ok bool) {
	id, _ := keyID(hash)
	s, at, ok := t.find(&id)
	if !ok {
		return 0, "", 0, false
	}
	sl := &t.slots[s]
	account, seq = t.strs.get(sl.account), sl.seq
	t.dead += int(sl.coldLen)
	if sl.ctr != 0 {
		t.ctrs[sl.ctr-1] = keyCounters{}
		t.ctrFree = append(t.ctrFree, sl.ctr-1)
	}
	*sl = keySlot{}
	t.free = append(t.free, s)
	t.live--
	t.unindex(at)
	return s, account, seq, true
}

// unindex empties index entry at and shifts the entries after it that
// probed past it back (deletion without tombstones).
func (t *Table) unindex(at int) {
	mask := len(t.index) - 1
	for j := (at + 1) & mask; t.index[j] != 0; j = (j + 1) & mask {
		home := bucket(&t.slots[t.index[j]-1].id, len(t.index))
		// Move j into the hole unless its home lies cyclically in (at, j].
		if (j > at && (home <= at || home > j)) || (j < at && home <= at && home > j) {
			t.index[at] = t.index[j]
			at = j
		}
	}
	t.index[at] = 0
}

// maybeGrow doubles the index past a load of 3/4.
func (t *Table) maybeGrow() {
	if 4*t.live <= 3*len(t.index) {
		return
	}
	t.rebuildIndex(2 * len(t.index))
}

func (t *Table) rebuildIndex(n int) {
	t.index = make([]uint32, n)
	mask := n - 1
	for s := range t.slots {
		if t.slots[s].flags&slotLive == 0 {
			continue
		}
		i := bucket(&t.slots[s].id, n)
		for t.index[i] != 0 {
			i = (i + 1) & mask
		}
		t.index[i] = uint32(s) + 1
	}
}

// maybeCompact rewrites the arena once replaced records are most of it:
// amortized over the records written since, a copy of each live one.
func (t *Table) maybeCompact() {
	if t.dead < 1<<20 || 2*t.dead < len(t.cold) {
		return
	}
	cold := make([]byte, 0, len(t.cold)-t.dead+len(t.cold)/8)
	for s := range t.slots {
		sl := &t.slots[s]
		if sl.flags&slotLive == 0 {
			continue
		}
		at := len(cold)
		cold = append(cold, t.cold[sl.coldAt:sl.coldAt+sl.coldLen]...)
		sl.coldAt = uint32(at)
	}
	t.cold, t.dead = cold, 0
	t.gen++
}

// each calls fn with each key's slot until it returns false.
func (t *Table) Each(fn func(slot uint32) bool) {
	for s := range t.slots {
		if t.slots[s].flags&slotLive != 0 && !fn(uint32(s)) {
			return
		}
	}
}

// at materializes the record in a live slot.
func (t *Table) At(s uint32) record.APIKey {
	var k record.APIKey
	t.Read(s, "", &k)
	return k
}

// slotHash is a live slot's key hash.
func (t *Table) SlotHash(s uint32) string {
	sl := &t.slots[s]
	if sl.flags&slotOddHash == 0 {
		return hex.EncodeToString(sl.id[:])
	}
	var k record.APIKey
	t.Read(s, "", &k)
	return k.Hash
}

// slotAccount, slotWorkspace and slotCreator read a live slot's ids
// without materializing its record.
func (t *Table) SlotAccount(s uint32) string   { return t.strs.get(t.slots[s].account) }
func (t *Table) SlotWorkspace(s uint32) string { return t.strs.get(t.slots[s].workspace) }
func (t *Table) SlotDisabled(s uint32) bool    { return t.slots[s].flags&slotDisabled != 0 }
func (t *Table) SlotCreator(s uint32) (string, bool) {
	if t.slots[s].flags&slotCreator == 0 {
		return "", false
	}
	return t.strs.get(t.slots[s].creator), true
}

// strTable interns ids: each distinct string once, by number.
type strTable struct {
	list []string
	ids  map[string]uint32
}

func (st *strTable) reset() {
	st.list = []string{""}
	st.ids = map[string]uint32{"": 0}
}

func (st *strTable) intern(s string) uint32 {
	if id, ok := st.ids[s]; ok {
		return id
	}
	id := uint32(len(st.list))
	st.list = append(st.list, s)
	st.ids[s] = id
	return id
}

func (st *strTable) get(id uint32) string { return st.list[id] }

func putStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// putTime keeps an instant to the nanosecond in UTC (what the records'
// JSON keeps); the zero time stays zero.
func putTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = binary.LittleEndian.AppendUint64(append(b, 1), uint64(t.Unix()))
	return binary.LittleEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

// coldReader reads a cold part; its strings point into the arena.
type coldReader struct{ b []byte }

func (c *coldReader) str() string {
	n, w := binary.Uvarint(c.b)
	s := c.b[w : w+int(n)]
	c.b = c.b[w+int(n):]
	if len(s) == 0 {
		return ""
	}
	return unsafe.String(&s[0], len(s))
}

func (c *coldReader) optStr() (string, bool) {
	if c.byte() == 0 {
		return "", false
	}
	return c.str(), true
}

func (c *coldReader) byte() byte {
	v := c.b[0]
	c.b = c.b[1:]
	return v
}

func (c *coldReader) u64() uint64 {
	v := binary.LittleEndian.Uint64(c.b)
	c.b = c.b[8:]
	return v
}

func (c *coldReader) time() time.Time {
	if c.byte() == 0 {
		return time.Time{}
	}
	sec := int64(c.u64())
	ns := binary.LittleEndian.Uint32(c.b)
	c.b = c.b[4:]
	return time.Unix(sec, int64(ns)).UTC()
}
