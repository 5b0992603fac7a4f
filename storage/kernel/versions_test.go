package kernel

import (
	"maps"
	"slices"
	"testing"

	"go.uber.org/zap"
)

// TestTrackerRecordsChangesWhileItRuns: a Tracker holds the records of its
// prefix that were dirty when it began, those committed while it ran and
// those still dirty when it ended, and no other.
func TestTrackerRecordsChangesWhileItRuns(t *testing.T) {
	b := &memBackend{data: map[string]string{}}
	k := New(b, zap.NewNop())
	k.Register(Kind{Prefix: "x/", Snapshot: func(key string) any { return "v" }}, Kind{Prefix: "y/", Snapshot: func(key string) any { return "v" }})
	k.Lock()
	k.MarkDirty("x/before")
	k.MarkDirty("y/other")
	tr := k.Track("x/", true)
	count := k.Track("x/", false)
	k.Unlock()
	k.Start()
	defer k.Close()
	k.Lock()
	bt := k.MarkDirty("x/during")
	k.Unlock()
	if err := bt.Wait(); err != nil {
		t.Fatal(err)
	}
	k.Lock()
	k.MarkDirty("x/at-end")
	k.EndTrack(tr)
	k.EndTrack(count)
	bt = k.MarkDirty("x/after")
	k.Unlock()
	if err := bt.Wait(); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(tr.Keys()))
	if want := []string{"x/at-end", "x/before", "x/during"}; !slices.Equal(got, want) {
		t.Fatalf("tracked %q, want %q", got, want)
	}
	if count.Keys() != nil || count.Changes() < 3 {
		t.Fatalf("a counting tracker kept %v, counted %d", count.Keys(), count.Changes())
	}
}

// TestScanVersions: the versioned scan gives every record its last
// commit's version, higher than ReadVersion's for records written after
// it, and sees the journal a crash left moved into Badger at new versions.
func TestScanVersions(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	if err := j.Commit([]Write{{Key: "k/a", Value: "a1"}, {Key: "k/b", Value: "b1"}, {Key: "k/c", Value: "c1"}}); err != nil {
		t.Fatal(err)
	}
	v, err := j.ReadVersion() // moves the journal into Badger
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Commit([]Write{{Key: "k/b", Value: "b2"}, {Key: "k/c", Value: nil}, {Key: "k/d", Value: "d1"}}); err != nil {
		t.Fatal(err)
	}
	crash(t, j)
	j = openTestJournal(t, dir)
	defer j.Close()
	got := map[string]string{}
	at, err := j.ScanVersions("k/", 0, func(key []byte, version uint64, value func(func([]byte) error) error) (bool, error) {
		if version <= v {
			got[string(key)] = "unchanged"
			return true, nil
		}
		return true, value(func(b []byte) error { got[string(key)] = string(b); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k/a": "unchanged", "k/b": `"b2"`, "k/d": `"d1"`}
	if !maps.Equal(got, want) || at <= v {
		t.Fatalf("versioned scan after a crash: %v at %d, want %v after %d", got, at, want, v)
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
}
