package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func openTestJournal(t *testing.T, dir string) *journal {
	t.Helper()
	b, err := openBadger(Options{Dir: dir}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return b.(*journal)
}

// crash stops j as a killed process would: no checkpoint, files left as
// they are.
func crash(t *testing.T, j *journal) {
	t.Helper()
	j.stopCheckpoints()
	j.ckMu.Lock() // a checkpoint under way finishes first
	defer j.ckMu.Unlock()
	_ = j.f.Close()
	if err := j.db.Close(); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, b Backend, key string) (string, bool) {
	t.Helper()
	var v string
	err := b.Get(key, func(value []byte) error { v = string(value); return nil })
	if errors.Is(err, ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return v, true
}

func wantRecords(t *testing.T, b Backend, want map[string]string) {
	t.Helper()
	for key, v := range want {
		got, ok := get(t, b, key)
		switch {
		case v == "" && ok:
			t.Errorf("%q = %s, want none", key, got)
		case v != "" && got != v:
			t.Errorf("%q = %q (found %v), want %q", key, got, ok, v)
		}
	}
}

func scanAll(t *testing.T, b Backend, prefix string) []string {
	t.Helper()
	var out []string
	err := b.Scan(prefix, func(key, value []byte) (bool, error) {
		out = append(out, string(key)+"="+string(value))
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func journalFileCount(t *testing.T, dir string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "journal", journalPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// TestJournalServesWritesBeforeAndAfterTheCheckpoint: a committed write is
// read back at once, from the journal, and after the checkpoint from
// Badger; a deletion hides the record in both; moved files are deleted.
func TestJournalServesWritesBeforeAndAfterTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	defer j.Close()
	if err := j.Commit([]Write{{Key: "a/1", Value: "one"}, {Key: "a/2", Value: "two"}, {Key: "a/3", Value: "three"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit([]Write{{Key: "a/2", Value: "two again"}, {Key: "a/3", Value: nil}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/1": `"one"`, "a/2": `"two again"`, "a/3": ""}
	wantRecords(t, j, want)
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, j, want)
	wantRecords(t, j.db, want)
	if n := journalFileCount(t, dir); n != 1 {
		t.Errorf("%d journal files after a checkpoint, want the current one", n)
	}
	if got := scanAll(t, j, "a/"); !slices.Equal(got, []string{`a/1="one"`, `a/2="two again"`}) {
		t.Errorf("scan = %q", got)
	}
}

// TestJournalKeepsCommitsAcrossACrash: what was committed before a kill is
// there after the restart, including a deletion of a record Badger held.
func TestJournalKeepsCommitsAcrossACrash(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	if err := j.Commit([]Write{{Key: "a/old", Value: "old"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := j.Commit([]Write{{Key: fmt.Sprintf("a/%02d", i), Value: i}, {Key: "a/old", Value: nil}}); err != nil {
			t.Fatal(err)
		}
	}
	crash(t, j)

	j = openTestJournal(t, dir)
	defer j.Close()
	want := map[string]string{"a/old": ""}
	for i := range 50 {
		want[fmt.Sprintf("a/%02d", i)] = fmt.Sprint(i)
	}
	wantRecords(t, j, want) // read back, before any checkpoint
	if got := len(scanAll(t, j, "a/")); got != 50 {
		t.Errorf("scan found %d records, want 50", got)
	}
	wantRecords(t, j.db, want) // the scan's checkpoint moved them
	if n := journalFileCount(t, dir); n != 1 {
		t.Errorf("%d journal files after the replay's checkpoint, want 1", n)
	}
}

// TestJournalSyncedKeepsCommitsAcrossACrash: with SyncWrites (each
// commit and each new file fsynced) the same holds.
func TestJournalSyncedKeepsCommitsAcrossACrash(t *testing.T) {
	dir := t.TempDir()
	b, err := openBadger(Options{Dir: dir, SyncWrites: true}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	j := b.(*journal)
	if err := j.Commit([]Write{{Key: "a/1", Value: "one"}}); err != nil {
		t.Fatal(err)
	}
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit([]Write{{Key: "a/2", Value: "two"}, {Key: "a/1", Value: nil}}); err != nil {
		t.Fatal(err)
	}
	crash(t, j)
	j = openTestJournal(t, dir)
	defer j.Close()
	wantRecords(t, j, map[string]string{"a/1": "", "a/2": `"two"`})
}

// TestJournalDropsATornWrite: a frame cut short or corrupted (a write a
// crash tore, never acknowledged) ends the replay of its file; what came
// before it is kept.
func TestJournalDropsATornWrite(t *testing.T) {
	for name, tear := range map[string]func([]byte) []byte{
		"cut short":   func(b []byte) []byte { return b[:len(b)-3] },
		"bit flipped": func(b []byte) []byte { b[len(b)-2] ^= 1; return b },
		"zeros after": func(b []byte) []byte { return append(b, make([]byte, 64)...) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			j := openTestJournal(t, dir)
			if err := j.Commit([]Write{{Key: "a/1", Value: "kept"}}); err != nil {
				t.Fatal(err)
			}
			last := name == "zeros after"
			if !last {
				if err := j.Commit([]Write{{Key: "a/2", Value: "torn"}}); err != nil {
					t.Fatal(err)
				}
			}
			path := j.f.Name()
			crash(t, j)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tear(data), 0o600); err != nil {
				t.Fatal(err)
			}
			j = openTestJournal(t, dir)
			defer j.Close()
			wantRecords(t, j, map[string]string{"a/1": `"kept"`, "a/2": ""})
		})
	}
}

// TestJournalStartsANewFileAfterAFailedWrite: a failed write may leave part
// of a frame; the next commit goes to a new file, so that it is replayed.
func TestJournalStartsANewFileAfterAFailedWrite(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	if err := j.Commit([]Write{{Key: "a/1", Value: "before"}}); err != nil {
		t.Fatal(err)
	}
	_ = j.f.Close() // the next write fails
	if err := j.Commit([]Write{{Key: "a/2", Value: "failed"}}); err == nil {
		t.Fatal("a write to a closed file succeeded")
	}
	if err := j.Commit([]Write{{Key: "a/3", Value: "after"}}); err != nil {
		t.Fatal(err)
	}
	if n := journalFileCount(t, dir); n != 2 {
		t.Errorf("%d journal files, want 2", n)
	}
	crash(t, j)
	j = openTestJournal(t, dir)
	defer j.Close()
	wantRecords(t, j, map[string]string{"a/1": `"before"`, "a/2": "", "a/3": `"after"`})
}

// firstLetterSlot slots "g/<letter>..." records by their first letter.
func firstLetterSlot(key string) (string, bool) {
	rest := strings.TrimPrefix(key, "g/")
	if rest == "" || rest[0] == '-' {
		return "", false
	}
	return rest[:1], true
}

// TestChunkedRecordsAreStoredBySlotAndReadOnce: a checkpoint writes a
// slotted kind's records as one chunk per slot; Get and Scan read them
// back, each once even when a replay wrote a slot's records twice, and a
// record without a slot is stored alone.
func TestChunkedRecordsAreStoredBySlotAndReadOnce(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	j.chunk("g/", firstLetterSlot)
	writes := []Write{{Key: "g/a1", Value: "a1"}, {Key: "g/a2", Value: "a2"}, {Key: "g/b1", Value: "b1"}, {Key: "g/-x", Value: "alone"}, {Key: "k/1", Value: "key"}}
	if err := j.Commit(writes); err != nil {
		t.Fatal(err)
	}
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	raw := scanAll(t, j.db, "")
	chunks := 0
	for _, r := range raw {
		if strings.HasPrefix(r, chunkPrefix) {
			chunks++
		}
	}
	if chunks != 2 || len(raw) != 4 {
		t.Fatalf("badger holds %q, want 2 chunks, g/-x and k/1", raw)
	}
	// The same records again, as a replay after a crash writes them.
	if err := j.Commit(writes[:3]); err != nil {
		t.Fatal(err)
	}
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	wantRecords(t, j, map[string]string{"g/a1": `"a1"`, "g/a2": `"a2"`, "g/b1": `"b1"`, "g/-x": `"alone"`, "g/c1": ""})
	want := []string{`g/-x="alone"`, `g/a1="a1"`, `g/a2="a2"`, `g/b1="b1"`}
	if got := scanAll(t, j, "g/"); !slices.Equal(got, want) {
		t.Errorf("scan g/ = %q, want %q", got, want)
	}
	// The records stored alone first, in key order, then the chunked ones.
	wantAll := []string{`g/-x="alone"`, `k/1="key"`, `g/a1="a1"`, `g/a2="a2"`, `g/b1="b1"`}
	if got := scanAll(t, j, ""); !slices.Equal(got, wantAll) {
		t.Errorf("scan all = %q, want %q", got, wantAll)
	}
	if got := scanAll(t, j, "g/a"); !slices.Equal(got, want[1:3]) {
		t.Errorf("scan g/a = %q, want %q", got, want[1:3])
	}
	stop := 0
	if err := j.Scan("g/", func(_, _ []byte) (bool, error) { stop++; return stop < 2, nil }); err != nil || stop != 2 {
		t.Errorf("a scan asked to stop after 2 records read %d (%v)", stop, err)
	}
	j.Close()

	// A reader that does not know the chunked kind is refused, not
	// silently given less.
	b, err := OpenBadger(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Scan("", func(_, _ []byte) (bool, error) { return true, nil }); err == nil {
		t.Error("a scan that cannot expand the chunks succeeded")
	}
}

// TestJournalKeepsLaterFilesWhenOneCannotBeDeleted: a moved file that
// cannot be deleted is replayed at the next start; the files moved after
// it must be replayed too, or its old values would replace the newer ones
// Badger holds.
func TestJournalKeepsLaterFilesWhenOneCannotBeDeleted(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	if err := j.Commit([]Write{{Key: "a/balance", Value: 100}}); err != nil {
		t.Fatal(err)
	}
	stuck := j.f.Name()
	removeJournal = func(name string) error {
		if name == stuck {
			return os.ErrPermission
		}
		return os.Remove(name)
	}
	defer func() { removeJournal = os.Remove }()
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit([]Write{{Key: "a/balance", Value: 40}}); err != nil {
		t.Fatal(err)
	}
	if err := j.checkpoint(); err != nil {
		t.Fatal(err)
	}
	crash(t, j)

	removeJournal = os.Remove
	j = openTestJournal(t, dir)
	defer j.Close()
	want := map[string]string{"a/balance": "40"}
	wantRecords(t, j, want)
	scanAll(t, j, "a/") // the first checkpoint moves the replayed files
	wantRecords(t, j.db, want)
}

// TestJournalEmptyCommitKeepsLaterCommits: a commit of no writes (the
// Backend contract allows it) writes nothing: its frame, of length zero,
// would end the file's replay before the commits after it.
func TestJournalEmptyCommitKeepsLaterCommits(t *testing.T) {
	dir := t.TempDir()
	j := openTestJournal(t, dir)
	if err := j.Commit(nil); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit([]Write{{Key: "a/1", Value: "after"}}); err != nil {
		t.Fatal(err)
	}
	crash(t, j)
	j = openTestJournal(t, dir)
	defer j.Close()
	wantRecords(t, j, map[string]string{"a/1": `"after"`})
}

// appendRecord is a record encoded by appending to the commit's buffer.
type appendRecord string

func (r appendRecord) AppendJSON(b []byte) ([]byte, error) {
	return append(append(append(b, '"'), r...), '"'), nil
}

// TestJournalEncodesAppendersInTheFrame: Appenders' values, encoded in
// the frame itself beside values encoded on their own and deletions, make
// the same bytes as values encoded apart, whatever the size of their
// length; they read back as written, before and after a crash, and each
// value is capped at its end, so that nothing can run into the next.
func TestJournalEncodesAppendersInTheFrame(t *testing.T) {
	long, longer := strings.Repeat("4", 5000), strings.Repeat("5", 20000)
	writes := []Write{{Key: "a/1", Value: appendRecord("one")}, {Key: "a/2", Value: "two"}, {Key: "a/gone", Value: nil}, {Key: "a/3", Value: appendRecord("")},
		{Key: "a/4", Value: appendRecord(long)}, {Key: "a/5", Value: appendRecord(longer)}, {Key: "a/6", Value: appendRecord(strings.Repeat("6", 125))}}
	apart := make([]Write, len(writes))
	for i, w := range writes {
		apart[i] = w
		if r, ok := w.Value.(appendRecord); ok {
			apart[i].Value = string(r) // a string is encoded on its own
		}
	}
	values := make([][]byte, len(writes))
	frame, err := encodeFrame(nil, writes, values)
	if err != nil {
		t.Fatal(err)
	}
	want, err := encodeFrame(nil, apart, make([][]byte, len(writes)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(frame, want) {
		t.Fatalf("frame with Appenders differs from the frame without")
	}
	for i, v := range values {
		if _, ok := writes[i].Value.(appendRecord); ok && len(v) != cap(v) {
			t.Errorf("%q: len %d, cap %d", writes[i].Key, len(v), cap(v))
		}
	}

	dir := t.TempDir()
	j := openTestJournal(t, dir)
	if err := j.Commit([]Write{{Key: "a/gone", Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the later commits size their frame by the first's
		if err := j.Commit(writes); err != nil {
			t.Fatal(err)
		}
	}
	records := map[string]string{"a/1": `"one"`, "a/2": `"two"`, "a/gone": "", "a/3": `""`,
		"a/4": `"` + long + `"`, "a/5": `"` + longer + `"`, "a/6": `"` + strings.Repeat("6", 125) + `"`}
	wantRecords(t, j, records)
	crash(t, j)
	j = openTestJournal(t, dir)
	defer j.Close()
	wantRecords(t, j, records)
}
