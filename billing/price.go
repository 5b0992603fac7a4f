// Package billing holds the gateway's money and limit arithmetic as pure
// functions: prices, request costs, admission estimates and the credit-limit
// decisions (the key's cap, the balance, the in-flight budget). It does no
// I/O and keeps no state.
package billing

import (
	"errors"
	"math/big"
	"math/bits"
	"strings"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// Price is a price per unit (token, request, search result) in femto-credits
// (1e-15), fine enough for any per-token price quoted as a decimal string.
type Price int64

// femtoPerNano converts Price units to money.Amount units.
const femtoPerNano = 1_000_000

const priceScale = 1_000_000_000_000_000

// ErrPrice is returned for a price that is not a non-negative decimal or has
// more precision than a femto-credit.
var ErrPrice = errors.New("price must be a non-negative decimal with at most 15 decimal places")

// ParsePrice parses a decimal price such as "0.000002" or "4e-3" exactly.
func ParsePrice(s string) (Price, error) {
	s = strings.TrimSpace(s)
	r, ok := new(big.Rat).SetString(s)
	if s == "" || !ok || strings.ContainsAny(s, "/xXpP") || r.Sign() < 0 {
		return 0, ErrPrice
	}
	r.Mul(r, new(big.Rat).SetInt64(priceScale))
	if !r.IsInt() || !r.Num().IsInt64() {
		return 0, ErrPrice
	}
	return Price(r.Num().Int64()), nil
}

// String renders the price as the public API does: a decimal string.
func (p Price) String() string {
	s := new(big.Rat).SetFrac64(int64(p), priceScale).FloatString(15)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// MarshalJSON writes the price as a decimal string, the public format.
func (p Price) MarshalJSON() ([]byte, error) { return []byte(`"` + p.String() + `"`), nil }

// femto is an exact 128-bit sum of price × quantity terms. Each term is
// below 2^126, so the few terms of a request's cost cannot overflow it.
type femto struct{ hi, lo uint64 }

func (f femto) add(p Price, n int64) femto {
	if p <= 0 || n <= 0 {
		return f
	}
	hi, lo := bits.Mul64(uint64(p), uint64(n))
	lo, carry := bits.Add64(f.lo, lo, 0)
	hi, _ = bits.Add64(f.hi, hi, carry)
	return femto{hi, lo}
}

// amount rounds to the nearest nano-credit, half up, and reports false when
// the result does not fit an Amount.
func (f femto) amount() (money.Amount, bool) {
	if f.hi >= femtoPerNano {
		return 0, false
	}
	q, r := bits.Div64(f.hi, f.lo, femtoPerNano)
	if r*2 >= femtoPerNano {
		q++
	}
	if q > uint64(money.MaxAmount) {
		return 0, false
	}
	return money.Amount(q), true
}
