package kernel

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// logged lists what ScanDeletions names under prefix after since.
func logged(t *testing.T, j *journal, prefix string, since uint64) []string {
	t.Helper()
	var keys []string
	if err := j.ScanDeletions(prefix, since, func(key []byte) error {
		keys = append(keys, string(key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// writtenSince lists what ScanVersions walks under prefix after since.
func writtenSince(t *testing.T, j *journal, prefix string, since uint64) []string {
	t.Helper()
	var keys []string
	if _, err := j.ScanVersions(prefix, since, func(key []byte, _ uint64, _ func(func([]byte) error) error) (bool, error) {
		keys = append(keys, string(key))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestDeletionLog: deleting a record of a logged kind leaves a marker at
// the deletion's version, named by ScanDeletions after an earlier
// version, through a crash and the journal's replay; other kinds leave
// none; no scan of records sees a marker; ForgetDeletions drops only
// the markers at most its version.
func TestDeletionLog(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	j.KeepKind(Kind{Prefix: "k/", LogDeletes: true})
	if err := j.Commit([]Write{{Key: "k/a", Value: "a"}, {Key: "k/b", Value: "b"}, {Key: "x/a", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	v, err := j.ReadVersion()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Commit([]Write{{Key: "k/a", Value: nil}, {Key: "x/a", Value: nil}, {Key: "k/c", Value: "c"}}); err != nil {
		t.Fatal(err)
	}
	crash(t, j) // the deletions still in the journal
	j = openTestJournal(t, dir)
	j.KeepKind(Kind{Prefix: "k/", LogDeletes: true})
	defer j.Close()
	if got := writtenSince(t, j, "k/", v); !slices.Equal(got, []string{"k/c"}) {
		t.Fatalf("written since the version: %q", got)
	}
	if got := logged(t, j, "k/", v); !slices.Equal(got, []string{"k/a"}) {
		t.Fatalf("deleted since the version: %q", got)
	}
	if got := logged(t, j, "x/", 0); len(got) != 0 {
		t.Fatalf("a kind without LogDeletes logged %q", got)
	}
	if err := j.Scan("", func(key, _ []byte) (bool, error) {
		if strings.HasPrefix(string(key), deletedPrefix) {
			t.Errorf("a scan of records met the marker %q", key)
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	v2, err := j.ReadVersion()
	if err != nil {
		t.Fatal(err)
	}
	if got := logged(t, j, "k/", v2); len(got) != 0 {
		t.Fatalf("deleted after the latest version: %q", got)
	}
	// Written again after its deletion: both walks name it.
	if err := j.Commit([]Write{{Key: "k/a", Value: "again"}, {Key: "k/b", Value: nil}}); err != nil {
		t.Fatal(err)
	}
	if got := writtenSince(t, j, "k/", v2); !slices.Equal(got, []string{"k/a"}) {
		t.Fatalf("written since the second version: %q", got)
	}
	if got := logged(t, j, "k/", v); !slices.Equal(got, []string{"k/a", "k/b"}) {
		t.Fatalf("deleted since the first version: %q", got)
	}
	if n, err := j.ForgetDeletions("k/", v2); err != nil || n != 1 {
		t.Fatalf("forgetting the deletions up to the second version: %d, %v (want 1)", n, err)
	}
	if got := logged(t, j, "k/", 0); !slices.Equal(got, []string{"k/b"}) {
		t.Fatalf("deletions left after forgetting those up to the second version: %q", got)
	}
	if got := logged(t, j, "k/", v2); !slices.Equal(got, []string{"k/b"}) {
		t.Fatalf("forgetting the old markers logged deletions of its own: %q", got)
	}
}

// TestDeletionLogSplitTransaction: a checkpoint too big for one Badger
// transaction still leaves every deletion its marker, never at a version
// below the deletion's, wherever the transaction splits (a write before
// the deletions moves the split from a deletion to a marker).
func TestDeletionLogSplitTransaction(t *testing.T) {
	const n = 40_000 // past Badger's count of entries in one transaction
	split := false   // some marker landed in the transaction after its deletion's
	for _, lead := range []bool{false, true} {
		j := openTestJournal(t, t.TempDir())
		j.KeepKind(Kind{Prefix: "k/", LogDeletes: true})
		sets, dels := make([]Write, n), make([]Write, 0, n+1)
		if lead {
			dels = append(dels, Write{Key: "a/lead", Value: "v"})
		}
		for i := range n {
			key := fmt.Sprintf("k/%06d", i)
			sets[i] = Write{Key: key, Value: "v"}
			dels = append(dels, Write{Key: key})
		}
		if err := j.db.Commit(sets); err != nil {
			t.Fatal(err)
		}
		v, err := j.ReadVersion()
		if err != nil {
			t.Fatal(err)
		}
		if err := j.db.Commit(dels); err != nil {
			t.Fatal(err)
		}
		if got := logged(t, j, "k/", v); len(got) != n {
			t.Fatalf("%d deletions logged, want %d", len(got), n)
		}
		tombstones, markers := deletionVersions(t, j)
		versions := map[uint64]bool{}
		for key, at := range tombstones {
			m, ok := markers[key]
			if !ok || m < at {
				t.Fatalf("the deletion of %s at version %d has its marker at %d (found %v)", key, at, m, ok)
			}
			split = split || m > at
			versions[at] = true
		}
		if len(tombstones) != n || len(versions) < 2 {
			t.Fatalf("%d deletions in %d transactions: the test did not split one", len(tombstones), len(versions))
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if !split {
		t.Fatal("no transaction split between a deletion and its marker: the test did not try that case")
	}
}

// deletionVersions are the versions of the tombstones and of the markers
// in j's Badger, by record key.
func deletionVersions(t *testing.T, j *journal) (tombstones, markers map[string]uint64) {
	t.Helper()
	tombstones, markers = map[string]uint64{}, map[string]uint64{}
	err := j.db.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.AllVersions, opts.PrefetchValues = true, false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := string(item.Key())
			switch {
			case item.IsDeletedOrExpired():
				tombstones[key] = item.Version()
			case strings.HasPrefix(key, deletedPrefix):
				markers[key[len(deletedPrefix):]] = item.Version()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tombstones, markers
}

// TestRegisterRefusesLoggedExpiry: a kind whose records expire cannot log
// its deletions (an expired record leaves no marker).
func TestRegisterRefusesLoggedExpiry(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Register accepted a kind that expires and logs its deletions")
		}
	}()
	k := New(&memBackend{data: map[string]string{}}, zap.NewNop())
	k.Register(Kind{Prefix: "g/", LogDeletes: true, Expires: func(string, []byte) int64 { return 0 }})
}
