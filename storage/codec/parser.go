package codec

import (
	"strconv"
	"time"
	"unsafe"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Parser reads a record in the form its encoder writes, from the front
// of its bytes.
type Parser struct{ b []byte }

// NewParser reads b.
func NewParser(b []byte) Parser { return Parser{b: b} }

// Done reports whether every byte was read.
func (p *Parser) Done() bool { return len(p.b) == 0 }

// Lit reads s, exactly.
func (p *Parser) Lit(s string) bool {
	if len(p.b) < len(s) || string(p.b[:len(s)]) != s {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// RawStr returns a string's text between its quotes, when it has no
// escape, control or non-ASCII byte.
func (p *Parser) RawStr() ([]byte, bool) {
	if len(p.b) == 0 || p.b[0] != '"' {
		return nil, false
	}
	for i := 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := p.b[1:i]
			p.b = p.b[i+1:]
			return s, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

// SkipStr reads a string it does not keep.
func (p *Parser) SkipStr() bool {
	_, ok := p.RawStr()
	return ok
}

func (p *Parser) Str(s *string) bool {
	raw, ok := p.RawStr()
	if ok {
		*s = string(raw)
	}
	return ok
}

func (p *Parser) NullableStr(s **string) bool {
	if p.Lit("null") {
		*s = nil
		return true
	}
	v := new(string)
	*s = v
	return p.Str(v)
}

func (p *Parser) Bool(b *bool) bool {
	switch {
	case p.Lit("true"):
		*b = true
	case p.Lit("false"):
		*b = false
	default:
		return false
	}
	return true
}

// Number returns a JSON number of the form -?(0|[1-9][0-9]*)(.[0-9]+)?
// (fraction only when frac), the only numbers apiKeyJSON writes.
func (p *Parser) Number(frac bool) ([]byte, bool) {
	i := 0
	if i < len(p.b) && p.b[i] == '-' {
		i++
	}
	start := i
	for i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9' {
		i++
	}
	if i == start || p.b[start] == '0' && i-start > 1 {
		return nil, false
	}
	if frac && i < len(p.b) && p.b[i] == '.' {
		i++
		f := i
		for i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9' {
			i++
		}
		if i == f {
			return nil, false
		}
	}
	if i < len(p.b) && (p.b[i] == '.' || p.b[i] == 'e' || p.b[i] == 'E') {
		return nil, false // a form this parser leaves to decodeAPIKey
	}
	n := p.b[:i]
	p.b = p.b[i:]
	return n, true
}

func (p *Parser) Amount(a *money.Amount) bool {
	n, ok := p.Number(true)
	if !ok {
		return false
	}
	v, err := money.ParseAmount(BytesString(n))
	*a = v
	return err == nil
}

func (p *Parser) NullableAmount(a **money.Amount) bool {
	if p.Lit("null") {
		*a = nil
		return true
	}
	v := new(money.Amount)
	*a = v
	return p.Amount(v)
}

func (p *Parser) Int(n *int64) bool {
	d, ok := p.Number(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseInt(BytesString(d), 10, 64)
	*n = v
	return err == nil
}

func (p *Parser) Uint(n *uint64) bool {
	d, ok := p.Number(false)
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(BytesString(d), 10, 64)
	*n = v
	return err == nil
}

func (p *Parser) Time(t *time.Time) bool {
	start := p.b
	if _, ok := p.RawStr(); !ok {
		return false
	}
	return t.UnmarshalJSON(start[:len(start)-len(p.b)]) == nil
}

func (p *Parser) NullableTime(t **time.Time) bool {
	if p.Lit("null") {
		*t = nil
		return true
	}
	v := new(time.Time)
	*t = v
	return p.Time(v)
}

func (p *Parser) Windowed(w *money.Windowed) bool {
	return p.Lit(`{"p":`) && p.Int(&w.Period) && p.Lit(`,"v":`) && p.Amount(&w.Value) && p.Lit(`}`)
}

func (p *Parser) Counters(c *money.UsageCounters) bool {
	return p.Lit(`{"total":`) && p.Amount(&c.Total) &&
		p.Lit(`,"daily":`) && p.Windowed(&c.Daily) &&
		p.Lit(`,"weekly":`) && p.Windowed(&c.Weekly) &&
		p.Lit(`,"monthly":`) && p.Windowed(&c.Monthly) &&
		p.Lit(`}`)
}

// BytesString views b as a string, for a parse or lookup that does not
// keep it.
func BytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// Strs reads null (nil) or an array of strings (empty: not nil).
func (p *Parser) Strs(s *[]string) bool { return Array(p, s, p.Str) }

// Ints reads null (nil) or an array of integers (empty: not nil).
func (p *Parser) Ints(s *[]int64) bool { return Array(p, s, p.Int) }

// Array reads null (nil) or an array (empty: not nil) whose elements one
// reads.
func Array[T any](p *Parser, s *[]T, one func(*T) bool) bool {
	if p.Lit("null") {
		*s = nil
		return true
	}
	if !p.Lit("[") {
		return false
	}
	out := []T{}
	for i := 0; !p.Lit("]"); i++ {
		if i > 0 && !p.Lit(",") {
			return false
		}
		var v T
		if !one(&v) {
			return false
		}
		out = append(out, v)
	}
	*s = out
	return true
}

// Float reads a number of the forms Number accepts, as encoding/json
// parses a float64.
func (p *Parser) Float(f *float64) bool {
	n, ok := p.Number(true)
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(BytesString(n), 64)
	*f = v
	return err == nil
}
