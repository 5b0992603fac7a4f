package kernel

import (
	"slices"
	"testing"
)

// TestScanFromSkipsEarlierSlots: a scan from a slot reads the chunked
// records of that slot and later ones, and every record stored alone
// (whatever its key); a scan from no slot reads them all.
func TestScanFromSkipsEarlierSlots(t *testing.T) {
	j := openTestJournal(t, t.TempDir())
	defer j.Close()
	j.chunk("g/", firstLetterSlot)
	writes := []Write{{Key: "g/a1", Value: "a1"}, {Key: "g/b1", Value: "b1"}, {Key: "g/c1", Value: "c1"},
		{Key: "g/c2", Value: "c2"}, {Key: "g/-x", Value: "alone"}, {Key: "k/1", Value: "key"}}
	if err := j.Commit(writes); err != nil {
		t.Fatal(err)
	}
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	scan := func(slot string) []string {
		var out []string
		k := New(j, nil)
		if err := k.ScanFrom("g/", slot, func(key, _ []byte) (bool, error) {
			out = append(out, string(key))
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for slot, want := range map[string][]string{
		"":  {"g/-x", "g/a1", "g/b1", "g/c1", "g/c2"},
		"b": {"g/-x", "g/b1", "g/c1", "g/c2"},
		"c": {"g/-x", "g/c1", "g/c2"},
		"d": {"g/-x"},
	} {
		if got := scan(slot); !slices.Equal(got, want) {
			t.Errorf("scan from slot %q = %q, want %q", slot, got, want)
		}
	}
}
