package answer

import "testing"

// A provider's error message is bounded before its secrets are removed,
// and cut between characters.
func TestTruncateText(t *testing.T) {
	if got := truncateText("ééé", 3); got != "é" {
		t.Errorf("truncateText = %q", got)
	}
	if got := truncateText("abc", 3); got != "abc" {
		t.Errorf("truncateText = %q", got)
	}
}
