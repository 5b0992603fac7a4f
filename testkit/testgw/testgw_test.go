package testgw

import (
	"testing"
)

func TestParseSSE(t *testing.T) {
	got := ParseSSE(t, "event: a\ndata: 1\n\ndata: 2\n\ndata: cut")
	want := []Event{{"a", "1"}, {"", "2"}, {"", "cut"}}
	if len(got) != len(want) {
		t.Fatalf("events %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
