package suggest

import "testing"

func TestNearest(t *testing.T) {
	known := []string{"name", "context_length", "max_completion_tokens", "pricing", "provider", "completion", "prompt", "address"}
	for _, tc := range []struct{ in, want string }{
		{"context_lenght", "context_length"},
		{"completoin", "completion"},
		{"adress", "address"},
		{"pricng", "pricing"},
		{"nmae", "name"},
		{"zzz", ""},
		{"nam", "name"},
		{"ab", ""}, // two edits of two letters: not a typo
		{"timeout", ""},
	} {
		if got := Nearest(tc.in, known); got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if d := editDistance("ab", "ba"); d != 1 {
		t.Errorf("transposition: %d", d)
	}
	if d := editDistance("", "abc"); d != 3 {
		t.Errorf("insertions: %d", d)
	}
}
