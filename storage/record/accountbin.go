package record

import (
	"encoding/binary"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
)

// The binary forms of the account, purchase and management key records in
// the records' snapshot: each field in declaration order, strings
// length-prefixed, integers as varints, times as time.Time's binary form,
// a pointer as a presence byte and its value (package codec's binary
// readers and writers).

// EncodeAccount appends an *Account's binary form.
func EncodeAccount(b []byte, v any) ([]byte, error) {
	a := v.(*Account)
	b = codec.AppendBytes(b, a.ID)
	b = codec.AppendBytes(b, a.Name)
	b = codec.AppendBytes(b, string(a.Kind))
	b = codec.AppendBytes(b, string(a.Billing))
	b = codec.AppendBytes(b, a.OwnerUserID)
	b = codec.AppendBytes(b, a.DefaultWorkspaceID)
	b = binary.AppendVarint(b, int64(a.CreditsPurchased))
	b = binary.AppendVarint(b, int64(a.Purchases))
	b = binary.AppendVarint(b, int64(a.Usage))
	b = binary.AppendVarint(b, int64(a.BYOKUsage))
	b = codec.AppendBool(b, a.RateLimitExempt)
	b = codec.AppendBool(b, a.FilteredModelCatalog)
	b = codec.AppendBinWindowed(b, a.FreeModelRequests)
	b = codec.AppendBinWindowed(b, a.FreeModelMinute)
	var err error
	b = codec.AppendBinTime(b, a.CreatedAt, &err)
	return codec.AppendBinTime(b, a.UpdatedAt, &err), err
}

// DecodeAccount reads what EncodeAccount appends.
func DecodeAccount(v []byte, a *Account, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	a.ID = p.Str()
	a.Name = p.Str()
	a.Kind = AccountKind(p.Str())
	a.Billing = Billing(p.Str())
	a.OwnerUserID = p.Str()
	a.DefaultWorkspaceID = p.Str()
	a.CreditsPurchased = money.Amount(p.Varint())
	purchases := p.Varint()
	a.Purchases = int(purchases)
	a.Usage = money.Amount(p.Varint())
	a.BYOKUsage = money.Amount(p.Varint())
	a.RateLimitExempt = p.Bool()
	a.FilteredModelCatalog = p.Bool()
	a.FreeModelRequests = p.Windowed()
	a.FreeModelMinute = p.Windowed()
	a.CreatedAt = p.Time()
	a.UpdatedAt = p.Time()
	return p.Done(int64(a.Purchases) == purchases)
}

// EncodePurchase appends a *Purchase's binary form.
func EncodePurchase(b []byte, v any) ([]byte, error) {
	r := v.(*Purchase)
	b = codec.AppendBytes(b, r.ID)
	b = codec.AppendBytes(b, r.AccountID)
	b = binary.AppendVarint(b, int64(r.Amount))
	b = codec.AppendBytes(b, r.Note)
	var err error
	return codec.AppendBinTime(b, r.CreatedAt, &err), err
}

// DecodePurchase reads what EncodePurchase appends.
func DecodePurchase(v []byte, r *Purchase, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	r.ID = p.Str()
	r.AccountID = p.Str()
	r.Amount = money.Amount(p.Varint())
	r.Note = p.Str()
	r.CreatedAt = p.Time()
	return p.Done(true)
}

// EncodeMgmtKey appends a *ManagementKey's binary form.
func EncodeMgmtKey(b []byte, v any) ([]byte, error) {
	m := v.(*ManagementKey)
	b = codec.AppendBytes(b, m.Hash)
	b = codec.AppendBytes(b, m.AccountID)
	b = codec.AppendBytes(b, m.Name)
	b = codec.AppendBytes(b, m.Label)
	b = codec.AppendBool(b, m.CreatorUserID != nil)
	if m.CreatorUserID != nil {
		b = codec.AppendBytes(b, *m.CreatorUserID)
	}
	var err error
	b = codec.AppendBinTime(b, m.CreatedAt, &err)
	b = codec.AppendBool(b, m.ExpiresAt != nil)
	if m.ExpiresAt != nil {
		b = codec.AppendBinTime(b, *m.ExpiresAt, &err)
	}
	return b, err
}

// DecodeMgmtKey reads what EncodeMgmtKey appends.
func DecodeMgmtKey(v []byte, m *ManagementKey, strs *codec.StrArena) error {
	p := codec.NewBinReader(v, strs)
	m.Hash = p.Str()
	m.AccountID = p.Str()
	m.Name = p.Str()
	m.Label = p.Str()
	if p.Bool() {
		c := p.Str()
		m.CreatorUserID = &c
	}
	m.CreatedAt = p.Time()
	if p.Bool() {
		t := p.Time()
		m.ExpiresAt = &t
	}
	return p.Done(true)
}
