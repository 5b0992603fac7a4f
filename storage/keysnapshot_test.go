package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
)

// snapshotFixture fills a store on disk with keys of every shape: limits,
// expiry, a disabled one, a deleted one, a charged one.
func snapshotFixture(t *testing.T, s *Store) (acct Account, hashes []string) {
	t.Helper()
	acct, err := s.CreateAccount(NewAccount{Name: "Acme", Kind: AccountPersonal})
	if err != nil {
		t.Fatal(err)
	}
	limit := money.Amount(5_000_000)
	exp := time.Now().Add(48 * time.Hour)
	ext := "customer-7"
	for i, n := range []NewAPIKey{
		{Name: "plain"},
		{Name: "capped", Limit: &limit, LimitReset: money.IntervalDaily, IncludeBYOKInLimit: true},
		{Name: "expiring", ExpiresAt: &exp, ExternalUser: &ext},
		{Name: "deleted"},
		{Name: "disabled"},
	} {
		n.AccountID = acct.ID
		k, _, err := s.CreateAPIKey(n)
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if err := s.DeleteAPIKey(k.Hash); err != nil {
				t.Fatal(err)
			}
			continue
		}
		hashes = append(hashes, k.Hash)
	}
	if _, err := s.UpdateAPIKey(hashes[3], func(k *APIKey) error { k.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	s.k.Lock()
	c, _ := s.keys.Get(hashes[1])
	c.Usage = c.Usage.Add(now(), 1234)
	s.keys.SetCounters(c.Hash, c.Usage, c.BYOKUsage)
	b := s.k.MarkDirty(prefixAPIKey + c.Hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	return acct, hashes
}

func keysOf(s *Store, accountID string) []APIKey {
	return s.ListAPIKeys(KeyFilter{AccountID: accountID, IncludeDisabled: true})
}

func snapshotExists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, keytable.SnapshotFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestKeySnapshotRestoresKeys: a clean close writes the key table's
// snapshot; the next open restores the same keys from it without reading
// the key records, removes the file, and numbers new keys after them.
func TestKeySnapshotRestoresKeys(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, hashes := snapshotFixture(t, s)
	want := keysOf(s, acct.ID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !snapshotExists(t, dir) {
		t.Fatal("a clean close wrote no snapshot")
	}
	// A snapshot's temporary file, as a process killed while it wrote
	// one leaves it.
	if err := os.WriteFile(filepath.Join(dir, keytable.SnapshotFile+".123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	if !s.keysRestored {
		t.Fatal("the keys were not restored from the snapshot")
	}
	if !s.keysCurrent || s.keysCaughtUp != 0 {
		t.Fatalf("a start after a clean close read %d key records", s.keysCaughtUp)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, keytable.SnapshotFile+".*")); len(tmps) != 0 {
		t.Fatalf("temporary snapshot files left: %v", tmps)
	}
	if got := keysOf(s, acct.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored keys:\n got %+v\nwant %+v", got, want)
	}
	for _, h := range hashes {
		if k, ok := s.APIKey(h); !ok || k.Hash != h {
			t.Fatalf("key %s missing after the restore", h)
		}
	}
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "after"})
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(s, acct.ID); got[0].Hash != k.Hash || got[0].Seq <= want[0].Seq {
		t.Fatalf("a key created after the restore is not the newest: %+v", got[0])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	if !s.keysRestored || len(keysOf(s, acct.ID)) != len(want)+1 {
		t.Fatalf("second restore: restored %v, %d keys", s.keysRestored, len(keysOf(s, acct.ID)))
	}
}

// TestKeySnapshotOlderIsCaughtUp: a snapshot older than the database is
// restored and brought up to date from the records written since; a
// damaged one is not used: the key records are.
func TestKeySnapshotOlderIsCaughtUp(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, hashes := snapshotFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(dir, keytable.SnapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "newer"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAPIKey(hashes[0]); err != nil {
		t.Fatal(err)
	}
	want := keysOf(s, acct.ID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The older snapshot back in place: the database moved on since.
	if err := os.WriteFile(filepath.Join(dir, keytable.SnapshotFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	if !s.keysRestored || s.keysCurrent || s.keysCaughtUp != 1 {
		t.Fatalf("an older snapshot: restored %v, current %v, %d records read (want 1)", s.keysRestored, s.keysCurrent, s.keysCaughtUp)
	}
	if got := keysOf(s, acct.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("keys after catching up an older snapshot:\n got %+v\nwant %+v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, keytable.SnapshotFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const keySnapshotMagic = "tollgate key table v4\n" // the file's first bytes
	for name, damage := range map[string]func([]byte) []byte{
		"a byte of the body":   func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
		"a byte of the header": func(b []byte) []byte { b[len(keySnapshotMagic)+3] ^= 1; return b },
		"the last byte":        func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"truncated":            func(b []byte) []byte { return b[:len(b)-100] },
		"cut to its header":    func(b []byte) []byte { return b[:len(keySnapshotMagic)+8] },
		"empty":                func(b []byte) []byte { return nil },
	} {
		if err := os.WriteFile(path, damage(slices.Clone(b)), 0o600); err != nil {
			t.Fatal(err)
		}
		s = openTemp(t, dir)
		if s.keysRestored {
			t.Fatalf("%s: a damaged snapshot was restored", name)
		}
		if got := keysOf(s, acct.ID); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: keys after ignoring a damaged snapshot:\n got %+v\nwant %+v", name, got, want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkOpenKeys is a restart of a store of 50,000 keys (10 per
// account): from the key table's snapshot, as after a clean close, and
// from the key records, as after a crash. bench/scale.sh measures the
// same at a million keys through Caddy.
func BenchmarkOpenKeys(b *testing.B) {
	const accounts, perAccount = 5000, 10
	dir := b.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	errs := make(chan error, 32)
	for w := range 32 {
		go func() {
			for i := w; i < accounts; i += 32 {
				a, err := s.CreateAccount(NewAccount{Name: "bench", Kind: AccountOrganization})
				for j := 0; err == nil && j < perAccount; j++ {
					_, _, err = s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "bench key"})
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 32 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(dir, keytable.SnapshotFile))
	if err != nil {
		b.Fatal(err)
	}
	for _, fromSnapshot := range []bool{true, false} {
		name := "records"
		if fromSnapshot {
			name = "snapshot"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if !fromSnapshot {
					_ = os.Remove(filepath.Join(dir, keytable.SnapshotFile))
				}
				s, err := Open(Options{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if s.keysRestored != fromSnapshot || s.keys.Len() != accounts*perAccount {
					b.Fatalf("restored %v, %d keys", s.keysRestored, s.keys.Len())
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(accounts*perAccount, "keys")
		})
	}
	// After a kill -9, with the snapshot of the clean close older than the
	// last writes: 1% of the keys charged (in the journal, replayed) and
	// a hundred created since.
	b.Run("crash", func(b *testing.B) {
		var hashes []string
		for b.Loop() {
			b.StopTimer()
			if err := os.WriteFile(filepath.Join(dir, keytable.SnapshotFile), old, 0o600); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			s, err := Open(Options{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if !s.keysRestored || hashes != nil && s.keysCaughtUp == 0 {
				b.Fatalf("restored %v, %d records read", s.keysRestored, s.keysCaughtUp)
			}
			if hashes == nil {
				a, err := s.CreateAccount(NewAccount{Name: "later", Kind: AccountOrganization})
				if err != nil {
					b.Fatal(err)
				}
				for range 100 {
					if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "later"}); err != nil {
						b.Fatal(err)
					}
				}
				s.k.RLock()
				s.keys.Each(func(slot uint32) bool {
					hashes = append(hashes, s.keys.SlotHash(slot))
					return len(hashes) < accounts*perAccount/100
				})
				s.k.RUnlock()
			}
			for _, h := range hashes {
				s.k.Lock()
				c, _ := s.keys.Get(h)
				s.keys.SetCounters(h, c.Usage.Add(now(), 1), c.BYOKUsage)
				s.k.MarkDirty(prefixAPIKey + h)
				s.k.Unlock()
			}
			s.k.Lock()
			bt := s.k.Pending()
			s.k.Unlock()
			if err := bt.Wait(); err != nil {
				b.Fatal(err)
			}
			s.AnalyticsStore.a.StopSealing()
			s.stopKeySnapshots()
			if err := s.k.Crash(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(accounts*perAccount, "keys")
	})
}

// crashStore stops s as a kill -9 would (kernel.Crash): nothing dirty is
// committed, no snapshot is written, the journal stays on disk to be
// replayed.
func crashStore(t *testing.T, s *Store) {
	t.Helper()
	s.AnalyticsStore.a.StopSealing()
	if s.stopFollowing != nil {
		s.stopFollowing()
	}
	if s.stopKeySnapshots != nil {
		s.stopKeySnapshots()
	}
	if err := s.k.Crash(); err != nil {
		t.Fatal(err)
	}
}

// charge adds to a key's usage counters as a settled request does, and
// waits until it is durable.
func charge(t *testing.T, s *Store, hash string, amount money.Amount) {
	t.Helper()
	s.k.Lock()
	c, ok := s.keys.Get(hash)
	if !ok {
		s.k.Unlock()
		t.Fatalf("no key %s to charge", hash)
	}
	s.keys.SetCounters(hash, c.Usage.Add(now(), amount), c.BYOKUsage.Add(now(), amount/2))
	b := s.k.MarkDirty(prefixAPIKey + hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
}

// allKeys lists every key of every account.
func allKeys(s *Store) map[string]APIKey {
	out := map[string]APIKey{}
	for _, a := range s.Accounts() {
		for _, k := range keysOf(s, a.ID) {
			out[k.Hash] = k
		}
	}
	return out
}

func sameKeys(t *testing.T, what string, got, want map[string]APIKey) {
	t.Helper()
	for h, w := range want {
		if g, ok := got[h]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("%s: key %s:\n got %+v (found %v)\nwant %+v", what, h, g, ok, w)
		}
	}
	for h, g := range got {
		if _, ok := want[h]; !ok {
			t.Errorf("%s: key %s should not exist: %+v", what, h, g)
		}
	}
}

// changeKeys creates, changes, disables, charges and deletes keys: each
// kind of change a snapshot may miss.
func changeKeys(t *testing.T, s *Store, acct Account, hashes []string, tag string) {
	t.Helper()
	limit := money.Amount(7_000_000)
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "new " + tag, Limit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	charge(t, s, k.Hash, 11)
	charge(t, s, hashes[1], 1000)
	if _, err := s.UpdateAPIKey(hashes[0], func(k *APIKey) error {
		l := money.Amount(3_000_000)
		k.Limit, k.Name = &l, "renamed "+tag
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateAPIKey(hashes[3], func(k *APIKey) error { k.Disabled = !k.Disabled; return nil }); err != nil {
		t.Fatal(err)
	}
	victim, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "short-lived " + tag})
	if err != nil {
		t.Fatal(err)
	}
	charge(t, s, victim.Hash, 5)
	if err := s.DeleteAPIKey(victim.Hash); err != nil {
		t.Fatal(err)
	}
}

// TestKeySnapshotAfterCrash: after a kill -9 the key table comes back from
// the last periodic snapshot plus the key records written since (in Badger
// or still in the journal): every key created, changed, charged or deleted
// after the snapshot is exactly as it was acknowledged, and deleted keys
// stay deleted.
func TestKeySnapshotAfterCrash(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		dir := t.TempDir()
		s := openTemp(t, dir)
		acct, hashes := snapshotFixture(t, s)
		other, err := s.CreateAccount(NewAccount{Name: "Other", Kind: AccountOrganization})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: other.ID, Name: "bulk"})
			if err != nil {
				t.Fatal(err)
			}
			charge(t, s, k.Hash, money.Amount(i+1))
		}
		if err := s.snapshotKeys(); err != nil {
			t.Fatal(err)
		}
		changeKeys(t, s, acct, hashes, "a")
		if checkpoint {
			// The journal moved into Badger (a Scan checkpoints first),
			// then more changes that stay in the journal.
			if err := s.k.Scan(prefixAPIKey, func(_, _ []byte) (bool, error) { return false, nil }); err != nil {
				t.Fatal(err)
			}
			charge(t, s, hashes[1], 77)
		}
		want := allKeys(s)
		crashStore(t, s)

		s = openTemp(t, dir)
		if !s.keysRestored || s.keysCurrent || s.keysCaughtUp == 0 || s.keysCaughtUp > 8 {
			t.Fatalf("after a crash: restored %v, current %v, %d records read", s.keysRestored, s.keysCurrent, s.keysCaughtUp)
		}
		sameKeys(t, "after a crash", allKeys(s), want)
		// Keys created after the restart sort after every key.
		k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "after the crash"})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range want {
			if o.Seq >= k.Seq {
				t.Fatalf("a new key's Seq %d is not after %d", k.Seq, o.Seq)
			}
		}
		changeKeys(t, s, acct, hashes, "b")
		want = allKeys(s)
		crashStore(t, s) // a second crash, no newer snapshot
		s = openTemp(t, dir)
		sameKeys(t, "after a second crash", allKeys(s), want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTemp(t, dir)
		if !s.keysCurrent {
			t.Fatal("a clean close after the crash wrote no current snapshot")
		}
		sameKeys(t, "after a clean close", allKeys(s), want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeySnapshotTracksChangesWhileTaken: keys changed while the snapshot
// is taken (between its steps, the lock released) are listed as changed
// and read from the database at the next start, whatever part of them
// the snapshot copied.
func TestKeySnapshotTracksChangesWhileTaken(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, hashes := snapshotFixture(t, s)
	for range 20 {
		if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "filler"}); err != nil {
			t.Fatal(err)
		}
	}
	defer func(n int) { snapshotChunk, snapshotStep = n, nil }(snapshotChunk)
	snapshotChunk = 3
	steps := 0
	snapshotStep = func() {
		if steps++; steps == 2 {
			changeKeys(t, s, acct, hashes, "during")
		}
	}
	if err := s.snapshotKeys(); err != nil {
		t.Fatal(err)
	}
	snapshotStep = nil
	var tbl keytable.Table
	r, err := keytable.Read(dir, &tbl)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{hashes[0], hashes[1], hashes[3]} {
		if !slices.Contains(r.ChangedHashes, h) {
			t.Errorf("key %s changed during the snapshot is not listed as changed", h)
		}
		if tbl.Has(h) {
			t.Errorf("the snapshot's table holds key %s, changed while it was taken", h)
		}
	}
	if !tbl.Has(hashes[2]) {
		t.Errorf("the snapshot lacks key %s, unchanged", hashes[2])
	}
	want := allKeys(s)
	crashStore(t, s)
	s = openTemp(t, dir)
	defer s.Close()
	if !s.keysRestored {
		t.Fatal("the snapshot taken during changes was not restored")
	}
	sameKeys(t, "after a crash", allKeys(s), want)
}

// TestKeySnapshotWrittenWhileKeysChange: the periodic snapshot, written
// while keys are created, charged and deleted concurrently, restores after
// a crash to exactly the acknowledged keys.
func TestKeySnapshotWrittenWhileKeysChange(t *testing.T) {
	defer func(every time.Duration, chunk int) { keySnapshotEvery, snapshotChunk = every, chunk }(keySnapshotEvery, snapshotChunk)
	keySnapshotEvery, snapshotChunk = 2*time.Millisecond, 4
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, hashes := snapshotFixture(t, s)
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			var err error
			for i := 0; i < 40 && err == nil; i++ {
				var k APIKey
				k, _, err = s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: fmt.Sprintf("w%d-%d", w, i)})
				if err != nil {
					break
				}
				s.k.Lock()
				for _, h := range []string{k.Hash, hashes[w%len(hashes)]} {
					c, _ := s.keys.Get(h)
					s.keys.SetCounters(h, c.Usage.Add(now(), money.Amount(i+1)), c.BYOKUsage)
					s.k.MarkDirty(prefixAPIKey + h)
				}
				b := s.k.Pending()
				s.k.Unlock()
				if err = b.Wait(); err == nil && i%3 == 0 {
					err = s.DeleteAPIKey(k.Hash)
				}
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !snapshotExists(t, dir); {
		if time.Now().After(deadline) {
			t.Fatal("no periodic snapshot was written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := allKeys(s)
	crashStore(t, s)
	s = openTemp(t, dir)
	defer s.Close()
	if !s.keysRestored {
		t.Fatal("the periodic snapshot was not restored")
	}
	sameKeys(t, "after a crash", allKeys(s), want)
}
