package storage

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
)

// The tests of the catch-up after a crash (changesSince): a start reads
// only what changed since the snapshots, yet restores exactly what
// reading every record gives, deletions included, whether or not their
// tombstones survived compaction.

// fullLoad opens a copy of dir without either snapshot: what reading
// every record gives, the reference a catch-up must equal.
func fullLoad(t *testing.T, dir string) (map[string]APIKey, recordState) {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", dir, cp).CombinedOutput(); err != nil {
		t.Fatalf("copying the data directory: %v %s", err, out)
	}
	for _, f := range []string{keytable.SnapshotFile, recordSnapshotFile} {
		if err := os.Remove(filepath.Join(cp, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	s := openTemp(t, cp)
	defer s.Close()
	if s.keysRestored || s.recordsRestored {
		t.Fatal("restored from a snapshot that was removed")
	}
	return allKeys(s), recordsOf(s)
}

// caughtUp checks that a store opened after a crash restored both
// snapshots and caught them up to what a full load of dir gives.
func caughtUp(t *testing.T, s *Store, dir, what string) {
	t.Helper()
	if !s.keysRestored || !s.recordsRestored || s.keysCurrent || s.recordsCurrent {
		t.Fatalf("%s: keys restored %v (current %v), records restored %v (current %v)", what,
			s.keysRestored, s.keysCurrent, s.recordsRestored, s.recordsCurrent)
	}
	keys, records := fullLoad(t, dir)
	sameKeys(t, what, allKeys(s), keys)
	sameRecords(t, what, recordsOf(s), records)
}

// moveJournal moves the journal into Badger (a checkpoint), so that a
// deletion reaches Badger before what follows it.
func moveJournal(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.k.ReadVersion(); err != nil {
		t.Fatal(err)
	}
}

// snapshotBoth writes both periodic snapshots.
func snapshotBoth(t *testing.T, s *Store) {
	t.Helper()
	if err := s.snapshotKeys(); err != nil {
		t.Fatal(err)
	}
	if err := s.snapshotRecords(); err != nil {
		t.Fatal(err)
	}
}

// deleteAfterSnapshot deletes a key, a management key and a workspace
// that the snapshots hold.
func deleteAfterSnapshot(t *testing.T, s *Store, acct Account, key, mgmt string) {
	t.Helper()
	if err := s.DeleteAPIKey(key); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteManagementKey(mgmt); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWorkspace(acct.ID, "research"); err != nil {
		t.Fatal(err)
	}
}

// bothFixtures fills a store with keys and records of every shape; the
// records' account (whose research workspace and management keys the
// tests delete) and the keys' hashes.
func bothFixtures(t *testing.T, s *Store) (keys Account, hashes []string, records Account, mgmt []string) {
	t.Helper()
	keys, hashes = snapshotFixture(t, s)
	records, mgmt = recordsFixture(t, s)
	return keys, hashes, records, mgmt
}

// purchaseFirst records a purchase whose id sorts before every other of
// the account's (ids are random): loaded after the snapshot's, it would
// come last in the account's list, where a full load puts it first.
func purchaseFirst(t *testing.T, s *Store, accountID string) {
	t.Helper()
	p := Purchase{ID: "pur_0", AccountID: accountID, Amount: 3_000_000, Note: "first", CreatedAt: now().UTC()}
	s.k.Lock()
	s.purchases[accountID] = append(s.purchases[accountID], p)
	b := s.k.Append(prefixPurchase+accountID+"/"+p.ID, p)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestCrashCatchUpEqualsFullLoad: after a crash, keys and records created,
// changed and deleted after the snapshots (some moved into Badger, some
// still in the journal) come back exactly as reading every record gives
// them, through a second crash without a newer snapshot.
func TestCrashCatchUpEqualsFullLoad(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		dir := t.TempDir()
		s := openTemp(t, dir)
		kacct, hashes, racct, mgmt := bothFixtures(t, s)
		snapshotBoth(t, s)
		changeKeys(t, s, kacct, hashes, "a")
		changeRecords(t, s, racct, mgmt, "a")
		purchaseFirst(t, s, racct.ID)
		if checkpoint {
			moveJournal(t, s)
		}
		deleteAfterSnapshot(t, s, racct, hashes[2], mgmt[1])
		crashStore(t, s)
		s = openTemp(t, dir)
		caughtUp(t, s, dir, "after a crash")
		changeKeys(t, s, kacct, hashes, "b")
		if _, _, err := s.RecordPurchase(racct.ID, 7_000_000, "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteManagementKey(mgmt[2]); err != nil {
			t.Fatal(err)
		}
		crashStore(t, s)
		s = openTemp(t, dir)
		caughtUp(t, s, dir, "after a second crash")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// compactBadger compacts the closed store's Badger at dir until one level
// holds everything: a tombstone with nothing under it in a lower level
// goes with the values it hides. It fails the test unless every version
// of each of gone's keys, tombstones included, is gone.
func compactBadger(t *testing.T, dir string, gone ...string) {
	t.Helper()
	// Level 0 past one table (the store's last memtable, and one of a
	// write here) is compacted into the level below. No compactor runs in
	// the background: one that ran before the discard timestamp was set
	// would consolidate the levels keeping every version, and Flatten
	// would find nothing left to do.
	opts := badger.DefaultOptions(dir).WithLogger(nil).WithNumLevelZeroTables(1).WithNumCompactors(0)
	for range 2 {
		db, err := badger.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("~test/filler"), []byte("x")) }); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Managed, so that every version may be discarded: unmanaged, the
	// discard timestamp follows a read watermark updated in the
	// background, and a compaction that runs before it catches up keeps
	// the tombstones.
	db, err := badger.OpenManaged(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetDiscardTs(math.MaxUint64)
	if err := db.Flatten(1); err != nil {
		t.Fatal(err)
	}
	err = db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.AllVersions, o.PrefetchValues = true, false
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if key := string(it.Item().Key()); slices.Contains(gone, key) {
				t.Fatalf("compaction left %s at version %d (deleted %v)", key, it.Item().Version(), it.Item().IsDeletedOrExpired())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrashCatchUpAfterCompaction: a record deleted after the snapshot
// whose tombstone compaction dropped (nothing after the snapshot's
// version says it is gone but the deletion log) stays deleted.
func TestCrashCatchUpAfterCompaction(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	_, hashes, racct, mgmt := bothFixtures(t, s)
	research, ok := s.Workspace(racct.ID, "research")
	if !ok {
		t.Fatal("no research workspace")
	}
	snapshotBoth(t, s)
	deleteAfterSnapshot(t, s, racct, hashes[2], mgmt[1])
	moveJournal(t, s)
	crashStore(t, s)
	compactBadger(t, dir, prefixAPIKey+hashes[2], prefixMgmtKey+mgmt[1], prefixWorkspace+racct.ID+"/"+research.ID)

	s = openTemp(t, dir)
	defer s.Close()
	caughtUp(t, s, dir, "after a compaction")
	if _, ok := s.APIKey(hashes[2]); ok {
		t.Error("the key deleted after the snapshot came back")
	}
	if _, ok := s.Workspace(racct.ID, research.ID); ok {
		t.Error("the workspace deleted after the snapshot came back")
	}
}

// recreateKey publishes k again, as it was, and waits until it is durable.
func recreateKey(t *testing.T, s *Store, k APIKey) {
	t.Helper()
	s.k.Lock()
	s.putKey(&k)
	b := s.k.MarkDirty(prefixAPIKey + k.Hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// recreateMgmtKey does the same for a management key.
func recreateMgmtKey(t *testing.T, s *Store, m ManagementKey) {
	t.Helper()
	s.k.Lock()
	s.putMgmtKey(&m)
	b := s.k.MarkDirty(prefixMgmtKey + m.Hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// deleteAndRecreate deletes a key and a management key, moves the
// deletions into Badger (each leaves its entry in the deletion log), and
// writes them again.
func deleteAndRecreate(t *testing.T, s *Store, hash, mgmt string) {
	t.Helper()
	k, _ := s.APIKey(hash)
	s.k.RLock()
	m := *s.mgmtKeys[mgmt]
	s.k.RUnlock()
	if err := s.DeleteAPIKey(hash); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteManagementKey(mgmt); err != nil {
		t.Fatal(err)
	}
	moveJournal(t, s)
	recreateKey(t, s, k)
	recreateMgmtKey(t, s, m)
}

// snapshotsWithoutCleanup writes both snapshots of the version read now
// as a crash right after their rename leaves them: the deletion log's
// entries they cover not dropped.
func snapshotsWithoutCleanup(t *testing.T, s *Store) {
	t.Helper()
	v, err := s.k.ReadVersion()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.keySnapshots().Write(s.keys, v, false); err != nil {
		t.Fatal(err)
	}
	if err := writeRecordSnapshot(s.dir, v, s.k, s.snapKinds(), false); err != nil {
		t.Fatal(err)
	}
}

// loggedDeletions lists the deletion log's entries under prefix.
func loggedDeletions(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	var keys []string
	if err := s.k.ScanDeletions(prefix, 0, func(key []byte) error {
		keys = append(keys, string(key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestCrashCatchUpRecreated: a record deleted then written again after the
// snapshot is read back; one deleted and written again before it is the
// snapshot's, though the deletion log still names it (a crash between the
// snapshot's rename and the log's cleanup).
func TestCrashCatchUpRecreated(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	_, hashes, _, mgmt := bothFixtures(t, s)
	deleteAndRecreate(t, s, hashes[0], mgmt[0]) // before the snapshot
	snapshotsWithoutCleanup(t, s)
	if got := loggedDeletions(t, s, prefixAPIKey); !slices.Contains(got, prefixAPIKey+hashes[0]) {
		t.Fatalf("the deletion log lacks the deletion before the snapshot: %q", got)
	}
	deleteAndRecreate(t, s, hashes[1], mgmt[2]) // after it
	charge(t, s, hashes[1], 99)
	crashStore(t, s)

	s = openTemp(t, dir)
	caughtUp(t, s, dir, "records written again")
	for _, h := range hashes[:2] {
		if _, ok := s.APIKey(h); !ok {
			t.Errorf("key %s, deleted and written again, is missing", h)
		}
	}
	for _, m := range []string{mgmt[0], mgmt[2]} {
		s.k.RLock()
		_, ok := s.mgmtKeys[m]
		s.k.RUnlock()
		if !ok {
			t.Errorf("management key %s, deleted and written again, is missing", m)
		}
	}
	// The next snapshot drops what the log holds up to its version.
	snapshotBoth(t, s)
	for _, p := range []string{prefixAPIKey, prefixMgmtKey} {
		if got := loggedDeletions(t, s, p); len(got) != 0 {
			t.Errorf("the deletion log under %q after a snapshot: %q", p, got)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotForgetsOnlyOlderDeletions: a snapshot, once in place, drops
// the deletion log's entries at most its version under the kinds it
// holds, not those of later deletions nor of the other snapshot's kinds.
func TestSnapshotForgetsOnlyOlderDeletions(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	defer s.Close()
	kacct, hashes, racct, mgmt := bothFixtures(t, s)
	deleteAfterSnapshot(t, s, racct, hashes[2], mgmt[1])
	moveJournal(t, s)
	if err := s.snapshotKeys(); err != nil {
		t.Fatal(err)
	}
	if got := loggedDeletions(t, s, prefixAPIKey); len(got) != 0 {
		t.Fatalf("deletions of keys left after the key table's snapshot: %q", got)
	}
	if got := loggedDeletions(t, s, prefixMgmtKey); !slices.Equal(got, []string{prefixMgmtKey + mgmt[1]}) {
		t.Fatalf("the key table's snapshot dropped the deletions of management keys: %q", got)
	}
	later, _, err := s.CreateAPIKey(NewAPIKey{AccountID: kacct.ID, Name: "later"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAPIKey(later.Hash); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteManagementKey(mgmt[0]); err != nil {
		t.Fatal(err)
	}
	snapshotStep = func() { // during the records' snapshot: after its version
		snapshotStep = nil
		if err := s.DeleteManagementKey(mgmt[2]); err != nil {
			t.Error(err)
		}
		moveJournal(t, s) // in Badger before the cleanup
	}
	defer func() { snapshotStep = nil }()
	if err := s.snapshotRecords(); err != nil {
		t.Fatal(err)
	}
	if got := loggedDeletions(t, s, prefixMgmtKey); !slices.Equal(got, []string{prefixMgmtKey + mgmt[2]}) {
		t.Fatalf("the deletion log of management keys after the records' snapshot: %q (want only the one after its version)", got)
	}
	if got := loggedDeletions(t, s, prefixAPIKey); !slices.Equal(got, []string{prefixAPIKey + later.Hash}) {
		t.Fatalf("the records' snapshot dropped a deletion of a key: %q", got)
	}
}

// TestCrashCatchUpVisitsOnlyChanges: the catch-up visits the records that
// changed since the snapshots, not every record.
func TestCrashCatchUpVisitsOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	kacct, hashes, racct, mgmt := bothFixtures(t, s)
	const accounts, keysEach = 200, 10
	for range accounts {
		a, err := s.CreateAccount(NewAccount{Name: "bulk", Kind: AccountPersonal})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.RecordPurchase(a.ID, 1_000_000, "bulk"); err != nil {
			t.Fatal(err)
		}
		for range keysEach {
			if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "bulk"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	snapshotBoth(t, s)
	changeKeys(t, s, kacct, hashes, "a")
	changeRecords(t, s, racct, mgmt, "a")
	charge(t, s, hashes[2], money.Amount(5))
	crashStore(t, s)

	s = openTemp(t, dir)
	defer s.Close()
	caughtUp(t, s, dir, "after a crash")
	// Changed since the snapshots: 5 keys written and one deleted
	// (changeKeys, charge), 6 records written and 2 deleted
	// (changeRecords).
	if s.keysVisited == 0 || s.keysVisited > 10 {
		t.Errorf("the keys' catch-up visited %d records of %d keys", s.keysVisited, accounts*keysEach)
	}
	if s.recordsVisited == 0 || s.recordsVisited > 14 {
		t.Errorf("the records' catch-up visited %d records of %d accounts", s.recordsVisited, accounts)
	}
}
