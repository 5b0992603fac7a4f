package codec

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// AppendBytes appends a length-prefixed string.
func AppendBytes[S string | []byte](b []byte, s S) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// BinReader reads what AppendBytes and the binary codecs append; bad once it
// ran past its bytes or met a malformed number.
type BinReader struct {
	b    []byte
	bad  bool
	strs *StrArena // where its strings are copied; nil: each its own
}

func (p *BinReader) Uvarint() uint64 {
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.bad, p.b = true, nil
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *BinReader) Varint() int64 {
	v, n := binary.Varint(p.b)
	if n <= 0 {
		p.bad, p.b = true, nil
		return 0
	}
	p.b = p.b[n:]
	return v
}

// Bytes reads a length-prefixed byte string (a slice of the input).
func (p *BinReader) Bytes() []byte {
	n := p.Uvarint()
	if n > uint64(len(p.b)) {
		p.bad, p.b = true, nil
		return nil
	}
	v := p.b[:n:n]
	p.b = p.b[n:]
	return v
}

// ErrMalformed is a record whose binary form does not read back.
var ErrMalformed = errors.New("malformed record in the records' snapshot")

func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func AppendBinWindowed(b []byte, w money.Windowed) []byte {
	return binary.AppendVarint(binary.AppendVarint(b, w.Period), int64(w.Value))
}

// AppendBinTime appends t's binary form (its instant and zone offset, as its
// JSON holds them), length-prefixed; the first failure stays in *err.
func AppendBinTime(b []byte, t time.Time, err *error) []byte {
	at := len(b)
	b = append(b, 0)
	b, e := t.AppendBinary(b)
	if e != nil || len(b)-at-1 > 0x7f {
		if *err == nil {
			*err = errors.Join(ErrMalformed, e)
		}
		return b
	}
	b[at] = byte(len(b) - at - 1)
	return b
}

func (p *BinReader) Str() string { return p.strs.Str(p.Bytes()) }

func (p *BinReader) Bool() bool {
	if len(p.b) == 0 || p.b[0] > 1 {
		p.bad, p.b = true, nil
		return false
	}
	v := p.b[0] == 1
	p.b = p.b[1:]
	return v
}

func (p *BinReader) Windowed() money.Windowed {
	return money.Windowed{Period: p.Varint(), Value: money.Amount(p.Varint())}
}

func (p *BinReader) Time() time.Time {
	var t time.Time
	if err := t.UnmarshalBinary(p.Bytes()); err != nil {
		p.bad, p.b = true, nil
	}
	return t
}

// Done reports a record read whole and well formed (ok: the caller's own
// checks passed).
func (p *BinReader) Done(ok bool) error {
	if p.bad || len(p.b) != 0 || !ok {
		return ErrMalformed
	}
	return nil
}

func AppendOptStr(b []byte, s *string) []byte {
	b = AppendBool(b, s != nil)
	if s != nil {
		b = AppendBytes(b, *s)
	}
	return b
}

func (p *BinReader) OptStr() *string {
	if !p.Bool() {
		return nil
	}
	s := p.Str()
	return &s
}

// Count reads a number of elements, each at least a byte.
func (p *BinReader) Count() int {
	n := p.Uvarint()
	if n > uint64(len(p.b)) {
		p.bad, p.b = true, nil
		return 0
	}
	return int(n)
}

func (p *BinReader) Uint64() uint64 {
	if len(p.b) < 8 {
		p.bad, p.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint64(p.b)
	p.b = p.b[8:]
	return v
}

// NewBinReader reads b, copying its strings into strs (nil: each its own).
func NewBinReader(b []byte, strs *StrArena) BinReader { return BinReader{b: b, strs: strs} }

// Bad reports whether the reader ran past its bytes or met a malformed
// number.
func (p *BinReader) Bad() bool { return p.bad }

// Rest is how many bytes are left to read.
func (p *BinReader) Rest() int { return len(p.b) }

// Fail marks the input malformed: a check of the caller's failed.
func (p *BinReader) Fail() { p.bad, p.b = true, nil }
