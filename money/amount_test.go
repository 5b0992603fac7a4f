package money

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestParseAmount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Amount
		err  bool
	}{
		{"0", 0, false},
		{"1", AmountScale, false},
		{"12.5", 12_500_000_000, false},
		{"-0.000000001", -1, false},
		{"0.0000000015", 2, false}, // half rounds away from zero
		{"-0.0000000015", -2, false},
		{"0.0000000014", 1, false},
		{"1e-3", 1_000_000, false},
		{"", 0, true},
		{"abc", 0, true},
		{"1/3", 0, true},
		{"0x10", 0, true},
		{"1e30", 0, true},
	} {
		got, err := ParseAmount(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d, err=%v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestAmountString(t *testing.T) {
	for _, tc := range []struct {
		in   Amount
		want string
	}{
		{0, "0"}, {AmountScale, "1"}, {12_500_000_000, "12.5"}, {-1, "-0.000000001"}, {74_500_000_000, "74.5"},
		{1234567891, "1.234567891"}, {100000000, "0.1"}, {-999999999, "-0.999999999"}, {10, "0.00000001"},
		{math.MaxInt64, "9223372036.854775807"}, {math.MinInt64 + 1, "-9223372036.854775807"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%d.String() = %q, want %q", int64(tc.in), got, tc.want)
		}
		back, err := ParseAmount(tc.want)
		if err != nil || back != tc.in {
			t.Errorf("round trip of %q = %d, %v", tc.want, back, err)
		}
	}
}

// Ten thousand charges of a price that float64 cannot represent add up exactly.
func TestAmountSumExact(t *testing.T) {
	c, _ := ParseAmount("0.000123457")
	var total Amount
	for range 10_000 {
		total += c
	}
	if total.String() != "1.23457" {
		t.Fatalf("total = %s, want 1.23457", total)
	}
}

func TestAmountFromFloat(t *testing.T) {
	a, err := AmountFromFloat(0.1)
	if err != nil || a != 100_000_000 {
		t.Fatalf("AmountFromFloat(0.1) = %d, %v", a, err)
	}
}

func TestAddAmountsRefusesOverflow(t *testing.T) {
	for _, tc := range []struct {
		a, b Amount
		ok   bool
	}{
		{1, 2, true},
		{MaxAmount, 0, true},
		{MaxAmount, 1, false},
		{MaxAmount - 1, 1, true},
		{-MaxAmount - 1, -1, false},
		{-5, 3, true},
		{MaxAmount, -MaxAmount, true},
		{5_000_000_000 * AmountScale, 5_000_000_000 * AmountScale, false},
	} {
		s, ok := AddAmounts(tc.a, tc.b)
		if ok != tc.ok || ok && s != tc.a+tc.b {
			t.Errorf("AddAmounts(%d, %d) = %d, %v", tc.a, tc.b, s, ok)
		}
	}
	if _, ok := SumAmounts(MaxAmount/2, MaxAmount/2, 2); ok {
		t.Error("SumAmounts overflowed silently")
	}
	if s, ok := SumAmounts(MaxAmount/2, MaxAmount/2, 1); !ok || s != MaxAmount {
		t.Errorf("SumAmounts to the maximum = %d, %v", s, ok)
	}
}

func TestMulAmountRefusesOverflow(t *testing.T) {
	if p, ok := MulAmount(3, 4); !ok || p != 12 {
		t.Errorf("MulAmount(3, 4) = %d, %v", p, ok)
	}
	if p, ok := MulAmount(MaxAmount, 1); !ok || p != MaxAmount {
		t.Errorf("MulAmount(max, 1) = %d, %v", p, ok)
	}
	for _, tc := range [][2]int64{{1 << 32, 1 << 31}, {2, -1}, {-2, 1}, {int64(MaxAmount), 2}} {
		if _, ok := MulAmount(Amount(tc[0]), tc[1]); ok {
			t.Errorf("MulAmount(%d, %d) did not refuse", tc[0], tc[1])
		}
	}
}

func TestAppendAmount(t *testing.T) {
	for _, a := range []Amount{0, 1, -1, AmountScale, -AmountScale, 1234567891, 5 * AmountScale / 4, 10, 100000000, -999999999} {
		if got := string(a.Append([]byte("x"))); got != "x"+a.String() {
			t.Errorf("Append(%d) = %s, want x%s", int64(a), got, a.String())
		}
		if got, _ := a.MarshalJSON(); string(got) != a.String() {
			t.Errorf("MarshalJSON(%d) = %s, want %s", int64(a), got, a.String())
		}
	}
}

// The plain-decimal fast path parses exactly what the rational path does.
func TestParsePlainAmountMatchesRational(t *testing.T) {
	slow := func(s string) Amount {
		r, _ := new(big.Rat).SetString(s)
		r.Mul(r, new(big.Rat).SetInt64(AmountScale))
		return Amount(new(big.Int).Quo(r.Num(), r.Denom()).Int64())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		ip := strconv.FormatInt(rng.Int64N(1_000_000_000), 10)
		s := ip
		if rng.IntN(3) > 0 {
			n := 1 + rng.IntN(9)
			f := strconv.FormatInt(rng.Int64N(1_000_000_000), 10)
			for len(f) < 9 {
				f = "0" + f
			}
			s += "." + f[:n]
		}
		if rng.IntN(4) == 0 {
			s = "-" + s
		}
		got, ok := parsePlainAmount(s)
		if !ok || got != slow(s) {
			t.Fatalf("%s: fast %v (%v), rational %v", s, got, ok, slow(s))
		}
	}
	for _, s := range []string{"", "-", ".5", "1.", "1e3", "1.0000000001", "1234567890", "+1", "1_0", "0x10", " 1"} {
		if _, ok := parsePlainAmount(s); ok {
			t.Errorf("%q took the fast path", s)
		}
	}
}
