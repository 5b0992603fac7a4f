package keytable

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// TestIndexTableEqualsIncremental: the index built from a whole table
// (keys of several accounts in no order, some removed) lists each
// account's keys as adding them one at a time and sorting does; and a key
// added afterwards to one account leaves its neighbour's list alone.
func TestIndexTableEqualsIncremental(t *testing.T) {
	tb := New()
	want := Index{}
	r := rand.New(rand.NewPCG(1, 2))
	var hashes []string
	for seq := range uint64(500) {
		h := fmt.Sprintf("%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())
		acct := fmt.Sprintf("acct_%d", r.IntN(7))
		// Seqs out of slot order, as a table filled from the records is.
		slot, _, _, _ := tb.Put(&record.APIKey{Hash: h, AccountID: acct, Seq: 1000 - seq})
		want.Add(acct, 1000-seq, slot)
		hashes = append(hashes, h)
	}
	for _, h := range hashes[:50] {
		slot, acct, seq, _ := tb.Remove(h)
		want.Remove(acct, seq, slot)
	}
	want.Sort()
	got := IndexOf(tb)
	if len(got) != len(want) {
		t.Fatalf("%d accounts indexed, want %d", len(got), len(want))
	}
	for acct, w := range want {
		if g := got[acct]; g == nil || !g.sorted || !slices.Equal(g.entries, w.entries) {
			t.Fatalf("account %s: %+v, want %+v", acct, g, w)
		}
	}
	for acct := range want {
		before := map[string][]keyEntry{}
		for other, ak := range got {
			before[other] = slices.Clone(ak.entries)
		}
		got.Add(acct, 5000, 99999)
		for other, entries := range before {
			if other != acct && !slices.Equal(got[other].entries, entries) {
				t.Fatalf("adding a key to %s changed %s's list", acct, other)
			}
		}
	}
}
