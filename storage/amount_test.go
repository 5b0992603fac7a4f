package storage

import "testing"

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
