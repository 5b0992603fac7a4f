package money

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Amount is a quantity of credits in nano-credits (1e-9). Integer arithmetic
// keeps totals exact over any number of charges; float64 only appears at the
// JSON boundary.
type Amount int64

// AmountScale is the number of Amount units in one credit.
const AmountScale = 1_000_000_000

const amountDecimals = 9

// MaxAmount is the largest Amount, 9,223,372,036.854775807 credits: no
// balance, total, cap, hold or charge goes beyond it.
const MaxAmount Amount = math.MaxInt64

// AddAmounts returns a+b, and false when the sum does not fit an Amount:
// money never wraps.
func AddAmounts(a, b Amount) (Amount, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

// SumAmounts adds its arguments, and reports false when a partial sum does
// not fit an Amount.
func SumAmounts(xs ...Amount) (Amount, bool) {
	var s Amount
	for _, x := range xs {
		var ok bool
		if s, ok = AddAmounts(s, x); !ok {
			return 0, false
		}
	}
	return s, true
}

// SpendingSum adds two spending figures (credits and BYOK) that are
// compared with a limit: a sum beyond MaxAmount is beyond every limit, so
// it reads as MaxAmount. It is never stored.
func SpendingSum(a, b Amount) Amount {
	if s, ok := AddAmounts(a, b); ok {
		return s
	}
	return MaxAmount
}

// MulAmount returns a*n for a non-negative count n, and false when the
// product does not fit an Amount.
func MulAmount(a Amount, n int64) (Amount, bool) {
	if a == 0 || n == 0 {
		return 0, true
	}
	if n < 0 || a < 0 || a > MaxAmount/Amount(n) {
		return 0, false
	}
	return a * Amount(n), true
}

// ErrAmountSyntax is returned for a string that is not a plain decimal number.
var ErrAmountSyntax = errors.New("not a decimal number")

// ErrAmountRange is returned for a value outside what an Amount can hold.
var ErrAmountRange = errors.New("amount out of range")

// ParseAmount parses a decimal string such as "12.5", "-0.000001" or "1e-3"
// into an Amount, rounding half away from zero below one nano-credit.
func ParseAmount(s string) (Amount, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, ErrAmountSyntax
	}
	if a, ok := parsePlainAmount(s); ok {
		return a, nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || strings.ContainsAny(s, "/xXpP") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "nan") {
		return 0, ErrAmountSyntax
	}
	r.Mul(r, new(big.Rat).SetInt64(AmountScale))
	// round half away from zero
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	m.Abs(m).Mul(m, big.NewInt(2))
	if m.Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() {
		return 0, ErrAmountRange
	}
	return Amount(q.Int64()), nil
}

// parsePlainAmount parses the common form exactly and without allocating:
// an optional minus, at most 9 integer digits, and at most 9 fraction
// digits (no rounding needed, no overflow possible). Anything else (an
// exponent, more digits) is left to ParseAmount's rational arithmetic.
func parsePlainAmount(s string) (Amount, bool) {
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if len(intPart) == 0 || len(intPart) > 9 || len(frac) > 9 || hasDot && len(frac) == 0 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(intPart); i++ {
		c := intPart[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	scale := int64(AmountScale)
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		scale /= 10
		v = v*10 + int64(c-'0')
	}
	v *= scale
	if neg {
		v = -v
	}
	return Amount(v), true
}

// AmountFromFloat converts a float64 credit value, rounding to the nearest
// nano-credit. It is meant for values already parsed by a JSON reader.
func AmountFromFloat(f float64) (Amount, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > math.MaxInt64/AmountScale {
		return 0, ErrAmountRange
	}
	return ParseAmount(strconv.FormatFloat(f, 'g', -1, 64))
}

// String renders the exact decimal value with no trailing zeros ("0", "12.5").
func (a Amount) String() string {
	var buf [24]byte // "-9223372036.854775808"
	return string(a.Append(buf[:0]))
}

// Append appends a.String() to b without allocating.
func (a Amount) Append(b []byte) []byte {
	u := uint64(a)
	if a < 0 {
		b = append(b, '-')
		u = uint64(-a)
	}
	b = strconv.AppendUint(b, u/AmountScale, 10)
	frac := u % AmountScale
	if frac == 0 {
		return b
	}
	var digits [amountDecimals]byte
	for i := amountDecimals - 1; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := amountDecimals
	for digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// Float64 returns the value in credits, for APIs that speak JSON numbers.
func (a Amount) Float64() float64 { return float64(a) / AmountScale }

// MarshalJSON writes the exact decimal value as a JSON number.
func (a Amount) MarshalJSON() ([]byte, error) { return a.Append(make([]byte, 0, 24)), nil }

// UnmarshalJSON reads a JSON number or a decimal string.
func (a *Amount) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := ParseAmount(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}
