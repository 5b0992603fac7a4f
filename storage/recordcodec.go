package storage

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// The records' snapshot (writeRecordSnapshot) holds accounts, purchases and
// management keys in a compact binary form: each field in declaration
// order, strings length-prefixed, integers as varints, times as
// time.Time's binary form, a pointer as a presence byte and its value.
// Workspaces too, with a count before a slice's elements (or a map's
// entries, in no order) and a presence byte before a slice, so that nil
// and empty stay apart as in their JSON. Decoding it costs a fraction of
// reading their JSON. TestRecordCodecs fails when a record gains a field
// these codecs do not know.

var errRecordCodec = errors.New("malformed record in the records' snapshot")

// snapKinds are the kinds in the records' snapshot, in load order.
func (s *Store) snapKinds() []snapKind {
	a, o := s.AccountStore, s.OrgStore
	wsKind := o.workspaceKind()
	return []snapKind{
		{prefix: prefixAccount, collect: a.collectAccounts, encode: encodeAccount,
			load: a.loadSnapAccount, dbLoad: a.loadAccount, reset: func() { clear(a.accounts) },
			grow: func(n int) { grow(&a.accounts, n) }},
		{prefix: prefixPurchase, collect: a.collectPurchases, keyOf: purchaseSnapKey, encode: encodePurchase,
			load: a.loadSnapPurchase, dbLoad: a.loadPurchase, reset: func() { clear(a.purchases) },
			grow: func(n int) { grow(&a.purchases, n) }},
		{prefix: prefixMgmtKey, collect: a.collectMgmtKeys, encode: encodeMgmtKey,
			load: a.loadSnapMgmtKey, dbLoad: a.loadMgmtKey, reset: func() { clear(a.mgmtKeys); clear(a.mgmtIdx) },
			grow: func(n int) { grow(&a.mgmtKeys, n); grow(&a.mgmtIdx, n) }},
		{prefix: prefixWorkspace, collect: o.collectWorkspaces, keyOf: workspaceSnapKey, encode: encodeWorkspace,
			load: o.loadSnapWorkspace, dbLoad: wsKind.Load, reset: wsKind.Reset},
	}
}

// grow replaces an empty map (read through its field) by one sized for n
// entries.
func grow[M ~map[K]V, K comparable, V any](m *M, n int) {
	if len(*m) == 0 {
		*m = make(M, n)
	}
}

// The collect functions read the maps under RLock (writers wait, readers
// do not), each map in one pass but for the workspaces' per-account
// maps, read in steps of collectStep accounts: at 100,000 accounts one
// pass over a map took about 3 ms, over every account's workspaces 50.
// A record changed between two steps is tracked as changed, so the
// steps need not be one instant.

// collectStep is how many accounts' workspaces one step reads.
var collectStep = 512

func (s *AccountStore) collectAccounts(k *kernel.Kernel) []snapRecord {
	return collectMap(k, s.accounts)
}

// collectMap takes a map of published records (never changed in place)
// in one pass under the read lock.
func collectMap[V any](k *kernel.Kernel, m map[string]*V) []snapRecord {
	k.RLock()
	defer k.RUnlock()
	out := make([]snapRecord, 0, len(m))
	for key, v := range m {
		out = append(out, snapRecord{key, v})
	}
	return out
}

// collectPurchases takes each account's purchases, as a slice (append-
// only: the elements a slice covers never change), then lists them
// without the lock.
func (s *AccountStore) collectPurchases(k *kernel.Kernel) []snapRecord {
	type account struct{ ps []Purchase }
	k.RLock()
	lists := make([]account, 0, len(s.purchases))
	n := 0
	for _, ps := range s.purchases {
		lists = append(lists, account{ps})
		n += len(ps)
	}
	k.RUnlock()
	out := make([]snapRecord, 0, n)
	for _, l := range lists {
		for i := range l.ps {
			out = append(out, snapRecord{"", &l.ps[i]})
		}
	}
	return out
}

func (s *AccountStore) collectMgmtKeys(k *kernel.Kernel) []snapRecord {
	return collectMap(k, s.mgmtKeys)
}

// collectWorkspaces lists the accounts that have workspaces, then reads
// their workspaces (maps changed in place) in steps.
func (s *OrgStore) collectWorkspaces(k *kernel.Kernel) []snapRecord {
	k.RLock()
	ids := make([]string, 0, len(s.workspaces))
	for id := range s.workspaces {
		ids = append(ids, id)
	}
	k.RUnlock()
	out := make([]snapRecord, 0, len(ids))
	for at := 0; at < len(ids); at += collectStep {
		k.RLock()
		for _, id := range ids[at:min(at+collectStep, len(ids))] {
			for _, w := range s.workspaces[id] {
				out = append(out, snapRecord{"", w})
			}
		}
		k.RUnlock()
	}
	return out
}

// purchaseSnapKey and workspaceSnapKey are a record's key after its prefix, made
// outside the lock.
func purchaseSnapKey(v any) string {
	p := v.(*Purchase)
	return p.AccountID + "/" + p.ID
}

func workspaceSnapKey(v any) string {
	w := v.(*Workspace)
	return w.AccountID + "/" + w.ID
}

func encodeAccount(b []byte, v any) ([]byte, error) {
	a := v.(*Account)
	b = appendBytes(b, a.ID)
	b = appendBytes(b, a.Name)
	b = appendBytes(b, string(a.Kind))
	b = appendBytes(b, string(a.Billing))
	b = appendBytes(b, a.OwnerUserID)
	b = appendBytes(b, a.DefaultWorkspaceID)
	b = binary.AppendVarint(b, int64(a.CreditsPurchased))
	b = binary.AppendVarint(b, int64(a.Purchases))
	b = binary.AppendVarint(b, int64(a.Usage))
	b = binary.AppendVarint(b, int64(a.BYOKUsage))
	b = appendBool(b, a.RateLimitExempt)
	b = appendBool(b, a.FilteredModelCatalog)
	b = binWindowed(b, a.FreeModelRequests)
	b = binWindowed(b, a.FreeModelMinute)
	var err error
	b = binTime(b, a.CreatedAt, &err)
	return binTime(b, a.UpdatedAt, &err), err
}

func decodeAccount(v []byte, a *Account, strs *strArena) error {
	p := snapReader{b: v, strs: strs}
	a.ID = p.str()
	a.Name = p.str()
	a.Kind = AccountKind(p.str())
	a.Billing = Billing(p.str())
	a.OwnerUserID = p.str()
	a.DefaultWorkspaceID = p.str()
	a.CreditsPurchased = money.Amount(p.varint())
	purchases := p.varint()
	a.Purchases = int(purchases)
	a.Usage = money.Amount(p.varint())
	a.BYOKUsage = money.Amount(p.varint())
	a.RateLimitExempt = p.boolean()
	a.FilteredModelCatalog = p.boolean()
	a.FreeModelRequests = p.windowed()
	a.FreeModelMinute = p.windowed()
	a.CreatedAt = p.time()
	a.UpdatedAt = p.time()
	return p.done(int64(a.Purchases) == purchases)
}

func (s *AccountStore) loadSnapAccount(_, v []byte, strs *strArena) error {
	a := new(Account)
	if err := decodeAccount(v, a, strs); err != nil {
		return err
	}
	s.accounts[a.ID] = a
	return nil
}

func encodePurchase(b []byte, v any) ([]byte, error) {
	r := v.(*Purchase)
	b = appendBytes(b, r.ID)
	b = appendBytes(b, r.AccountID)
	b = binary.AppendVarint(b, int64(r.Amount))
	b = appendBytes(b, r.Note)
	var err error
	return binTime(b, r.CreatedAt, &err), err
}

func decodePurchase(v []byte, r *Purchase, strs *strArena) error {
	p := snapReader{b: v, strs: strs}
	r.ID = p.str()
	r.AccountID = p.str()
	r.Amount = money.Amount(p.varint())
	r.Note = p.str()
	r.CreatedAt = p.time()
	return p.done(true)
}

func (s *AccountStore) loadSnapPurchase(_, v []byte, strs *strArena) error {
	var r Purchase
	if err := decodePurchase(v, &r, strs); err != nil {
		return err
	}
	s.purchases[r.AccountID] = append(s.purchases[r.AccountID], r)
	return nil
}

func encodeMgmtKey(b []byte, v any) ([]byte, error) {
	m := v.(*ManagementKey)
	b = appendBytes(b, m.Hash)
	b = appendBytes(b, m.AccountID)
	b = appendBytes(b, m.Name)
	b = appendBytes(b, m.Label)
	b = appendBool(b, m.CreatorUserID != nil)
	if m.CreatorUserID != nil {
		b = appendBytes(b, *m.CreatorUserID)
	}
	var err error
	b = binTime(b, m.CreatedAt, &err)
	b = appendBool(b, m.ExpiresAt != nil)
	if m.ExpiresAt != nil {
		b = binTime(b, *m.ExpiresAt, &err)
	}
	return b, err
}

func decodeMgmtKey(v []byte, m *ManagementKey, strs *strArena) error {
	p := snapReader{b: v, strs: strs}
	m.Hash = p.str()
	m.AccountID = p.str()
	m.Name = p.str()
	m.Label = p.str()
	if p.boolean() {
		c := p.str()
		m.CreatorUserID = &c
	}
	m.CreatedAt = p.time()
	if p.boolean() {
		t := p.time()
		m.ExpiresAt = &t
	}
	return p.done(true)
}

func (s *AccountStore) loadSnapMgmtKey(_, v []byte, strs *strArena) error {
	m := new(ManagementKey)
	if err := decodeMgmtKey(v, m, strs); err != nil {
		return err
	}
	s.putMgmtKey(m)
	return nil
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func binWindowed(b []byte, w money.Windowed) []byte {
	return binary.AppendVarint(binary.AppendVarint(b, w.Period), int64(w.Value))
}

// binTime appends t's binary form (its instant and zone offset, as its
// JSON holds them), length-prefixed; the first failure stays in *err.
func binTime(b []byte, t time.Time, err *error) []byte {
	at := len(b)
	b = append(b, 0)
	b, e := t.AppendBinary(b)
	if e != nil || len(b)-at-1 > 0x7f {
		if *err == nil {
			*err = errors.Join(errRecordCodec, e)
		}
		return b
	}
	b[at] = byte(len(b) - at - 1)
	return b
}

func (p *snapReader) str() string { return p.strs.str(p.bytes()) }

func (p *snapReader) boolean() bool {
	if len(p.b) == 0 || p.b[0] > 1 {
		p.bad, p.b = true, nil
		return false
	}
	v := p.b[0] == 1
	p.b = p.b[1:]
	return v
}

func (p *snapReader) windowed() money.Windowed {
	return money.Windowed{Period: p.varint(), Value: money.Amount(p.varint())}
}

func (p *snapReader) time() time.Time {
	var t time.Time
	if err := t.UnmarshalBinary(p.bytes()); err != nil {
		p.bad, p.b = true, nil
	}
	return t
}

// done reports a record read whole and well formed (ok: the caller's own
// checks passed).
func (p *snapReader) done(ok bool) error {
	if p.bad || len(p.b) != 0 || !ok {
		return errRecordCodec
	}
	return nil
}

func encodeWorkspace(b []byte, v any) ([]byte, error) {
	w := v.(*Workspace)
	b = appendBytes(b, w.ID)
	b = appendBytes(b, w.AccountID)
	b = appendBytes(b, w.Name)
	b = appendBytes(b, w.Slug)
	b = appendOptStr(b, w.Description)
	b = appendOptStr(b, w.CreatedBy)
	b = appendBytes(b, w.DefaultGuardrailID)
	b = appendOptStr(b, w.DefaultImageModel)
	b = appendOptStr(b, w.DefaultProviderSort)
	b = appendOptStr(b, w.DefaultTextModel)
	b = appendBool(b, w.DisabledServerTools != nil)
	b = binary.AppendUvarint(b, uint64(len(w.DisabledServerTools)))
	for _, t := range w.DisabledServerTools {
		b = appendBytes(b, t)
	}
	b = appendBool(b, w.IOLoggingAPIKeyIDs != nil)
	b = binary.AppendUvarint(b, uint64(len(w.IOLoggingAPIKeyIDs)))
	for _, id := range w.IOLoggingAPIKeyIDs {
		b = binary.AppendVarint(b, id)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(w.IOLoggingSamplingRate))
	b = appendBool(b, w.IsDataDiscountLoggingEnabled)
	b = appendBool(b, w.IsObservabilityBroadcastEnabled)
	b = appendBool(b, w.IsObservabilityIOLoggingEnabled)
	b = appendBool(b, w.IncludeBYOKInBudgets)
	var err error
	b = binTime(b, w.CreatedAt, &err)
	b = appendBool(b, w.UpdatedAt != nil)
	if w.UpdatedAt != nil {
		b = binTime(b, *w.UpdatedAt, &err)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Budgets)))
	for iv, bu := range w.Budgets {
		b = appendBytes(b, string(iv))
		b = appendBytes(b, bu.ID)
		b = appendBytes(b, string(bu.Interval))
		b = binary.AppendVarint(b, int64(bu.Limit))
		b = binTime(b, bu.CreatedAt, &err)
		b = binTime(b, bu.UpdatedAt, &err)
	}
	b = binary.AppendUvarint(b, uint64(len(w.Members)))
	for id, m := range w.Members {
		b = appendBytes(b, id)
		b = appendBytes(b, m.UserID)
		b = appendBytes(b, string(m.Role))
		b = binTime(b, m.CreatedAt, &err)
	}
	return b, err
}

func decodeWorkspace(v []byte, w *Workspace, strs *strArena) error {
	p := snapReader{b: v, strs: strs}
	w.ID = p.str()
	w.AccountID = p.str()
	w.Name = p.str()
	w.Slug = p.str()
	w.Description = p.optStr()
	w.CreatedBy = p.optStr()
	w.DefaultGuardrailID = p.str()
	w.DefaultImageModel = p.optStr()
	w.DefaultProviderSort = p.optStr()
	w.DefaultTextModel = p.optStr()
	if some := p.boolean(); some {
		w.DisabledServerTools = make([]string, p.count())
		for i := range w.DisabledServerTools {
			w.DisabledServerTools[i] = p.str()
		}
	} else if p.count() != 0 {
		p.bad = true
	}
	if some := p.boolean(); some {
		w.IOLoggingAPIKeyIDs = make([]int64, p.count())
		for i := range w.IOLoggingAPIKeyIDs {
			w.IOLoggingAPIKeyIDs[i] = p.varint()
		}
	} else if p.count() != 0 {
		p.bad = true
	}
	w.IOLoggingSamplingRate = math.Float64frombits(p.uint64())
	w.IsDataDiscountLoggingEnabled = p.boolean()
	w.IsObservabilityBroadcastEnabled = p.boolean()
	w.IsObservabilityIOLoggingEnabled = p.boolean()
	w.IncludeBYOKInBudgets = p.boolean()
	w.CreatedAt = p.time()
	if p.boolean() {
		t := p.time()
		w.UpdatedAt = &t
	}
	if n := p.count(); n > 0 {
		w.Budgets = make(map[BudgetInterval]*WorkspaceBudget, n)
		for range n {
			iv := BudgetInterval(p.str())
			w.Budgets[iv] = &WorkspaceBudget{ID: p.str(), Interval: BudgetInterval(p.str()), Limit: money.Amount(p.varint()),
				CreatedAt: p.time(), UpdatedAt: p.time()}
		}
	}
	if n := p.count(); n > 0 {
		w.Members = make(map[string]*WorkspaceMember, n)
		for range n {
			id := p.str()
			w.Members[id] = &WorkspaceMember{UserID: p.str(), Role: MemberRole(p.str()), CreatedAt: p.time()}
		}
	}
	return p.done(true)
}

// loadSnapWorkspace publishes a workspace as the kind's Load does.
func (s *OrgStore) loadSnapWorkspace(_, v []byte, strs *strArena) error {
	w := new(Workspace)
	if err := decodeWorkspace(v, w, strs); err != nil {
		return err
	}
	s.workspaces.Put(w)
	return nil
}

func appendOptStr(b []byte, s *string) []byte {
	b = appendBool(b, s != nil)
	if s != nil {
		b = appendBytes(b, *s)
	}
	return b
}

func (p *snapReader) optStr() *string {
	if !p.boolean() {
		return nil
	}
	s := p.str()
	return &s
}

// count reads a number of elements, each at least a byte.
func (p *snapReader) count() int {
	n := p.uvarint()
	if n > uint64(len(p.b)) {
		p.bad, p.b = true, nil
		return 0
	}
	return int(n)
}

func (p *snapReader) uint64() uint64 {
	if len(p.b) < 8 {
		p.bad, p.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint64(p.b)
	p.b = p.b[8:]
	return v
}
