package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// The records' snapshot (recordsnapshot.go) holds accounts, purchases and
// management keys in a compact binary form: each field in declaration
// order, strings length-prefixed, integers as varints, times as
// time.Time's binary form, a pointer as a presence byte and its value.
// Decoding it costs a fraction of reading their JSON. Workspaces (nested
// maps, rarely more than one an account) are stored as the database
// stores them and loaded by their decoder. TestRecordCodecFields fails
// when a record gains a field these codecs do not know.

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
		{prefix: prefixWorkspace, collect: o.collectWorkspaces, keyOf: workspaceSnapKey, encode: encodeJSON,
			load: wsKind.Load, dbLoad: wsKind.Load, reset: wsKind.Reset},
	}
}

// grow replaces an empty map (read through its field) by one sized for n
// entries.
func grow[M ~map[K]V, K comparable, V any](m *M, n int) {
	if len(*m) == 0 {
		*m = make(M, n)
	}
}

func (s *AccountStore) collectAccounts() []snapRecord {
	out := make([]snapRecord, 0, len(s.accounts))
	for id, a := range s.accounts {
		out = append(out, snapRecord{id, a})
	}
	return out
}

// collectPurchases takes each account's purchases (append-only: the
// elements a slice covers never change).
func (s *AccountStore) collectPurchases() []snapRecord {
	var out []snapRecord
	for _, ps := range s.purchases {
		for i := range ps {
			out = append(out, snapRecord{"", &ps[i]})
		}
	}
	return out
}

func (s *AccountStore) collectMgmtKeys() []snapRecord {
	out := make([]snapRecord, 0, len(s.mgmtKeys))
	for h, m := range s.mgmtKeys {
		out = append(out, snapRecord{h, m})
	}
	return out
}

func (s *OrgStore) collectWorkspaces() []snapRecord {
	var out []snapRecord
	for _, m := range s.workspaces {
		for _, w := range m {
			out = append(out, snapRecord{"", w})
		}
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

// encodeJSON stores a record as the database does.
func encodeJSON(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	return append(b, j...), err
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
	b, err := binTime(b, a.CreatedAt)
	if err != nil {
		return b, err
	}
	return binTime(b, a.UpdatedAt)
}

func decodeAccount(v []byte, a *Account) error {
	p := snapReader{b: v}
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

func (s *AccountStore) loadSnapAccount(_, v []byte) error {
	a := new(Account)
	if err := decodeAccount(v, a); err != nil {
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
	return binTime(b, r.CreatedAt)
}

func decodePurchase(v []byte, r *Purchase) error {
	p := snapReader{b: v}
	r.ID = p.str()
	r.AccountID = p.str()
	r.Amount = money.Amount(p.varint())
	r.Note = p.str()
	r.CreatedAt = p.time()
	return p.done(true)
}

func (s *AccountStore) loadSnapPurchase(_, v []byte) error {
	var r Purchase
	if err := decodePurchase(v, &r); err != nil {
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
	b, err := binTime(b, m.CreatedAt)
	if err != nil {
		return b, err
	}
	b = appendBool(b, m.ExpiresAt != nil)
	if m.ExpiresAt != nil {
		return binTime(b, *m.ExpiresAt)
	}
	return b, nil
}

func decodeMgmtKey(v []byte, m *ManagementKey) error {
	p := snapReader{b: v}
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

func (s *AccountStore) loadSnapMgmtKey(_, v []byte) error {
	m := new(ManagementKey)
	if err := decodeMgmtKey(v, m); err != nil {
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

// binTime appends t's binary form (its instant and zone offset, as
// its JSON holds them), length-prefixed.
func binTime(b []byte, t time.Time) ([]byte, error) {
	at := len(b)
	b = append(b, 0)
	b, err := t.AppendBinary(b)
	if err != nil || len(b)-at-1 > 0x7f {
		return b, errors.Join(errRecordCodec, err)
	}
	b[at] = byte(len(b) - at - 1)
	return b, nil
}

func (p *snapReader) str() string { return string(p.bytes()) }

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
