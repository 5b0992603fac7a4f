package kernel

import "testing"

func TestOldLayoutKey(t *testing.T) {
	for rest, want := range map[string]bool{
		"~m/acct": true, "~leases": true, "~feed": true, "~ab/h": true,
		"a/acct": true, "gu/acct/resp": true, "pe/acct/x": true, "g/gen-1": true,
		"~cc/hash": false, "~st/0a1b": false, "~rc/ab/cd/ef": false, "dashboard-link-used/h": false, "{tg}a/acct": false,
		"eu:{tg}a/acct": false, "eu:a/acct": false, "abcd/x": false,
	} {
		if got := oldLayoutKey(rest); got != want {
			t.Errorf("oldLayoutKey(%q) = %v, want %v", rest, got, want)
		}
	}
}

// Each bucket's tag hashes to its own slot, spread evenly: with the usual
// split of the slots between three masters, each serves a third of them.
func TestClusterBucketsSpreadOverTheSlots(t *testing.T) {
	l := newLayout("p:", ClusterBuckets)
	seen := map[int]bool{}
	thirds := [3]int{}
	for b := range ClusterBuckets {
		s := Slot(l.feedKey(b))
		if seen[s] {
			t.Fatalf("bucket %d shares slot %d", b, s)
		}
		seen[s] = true
		thirds[s*3/clusterSlots]++
		if Slot(l.key(b, "~m/x")) != s {
			t.Fatalf("bucket %d: its keys hash to another slot than its feed", b)
		}
	}
	for i, n := range thirds {
		if n < ClusterBuckets/3 {
			t.Errorf("third %d of the slots holds %d buckets, want at least %d", i, n, ClusterBuckets/3)
		}
	}
	if Slot("{user1000}.following") != Slot("{user1000}.followers") || Slot("foo") != 12182 {
		t.Errorf("Slot disagrees with Redis's CRC16 (foo: %d, want 12182)", Slot("foo"))
	}
}
