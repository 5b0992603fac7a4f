package storage

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
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
	c, _ := s.keys.get(hashes[1])
	c.Usage = c.Usage.Add(now(), 1234)
	s.keys.setCounters(c.Hash, c.Usage, c.BYOKUsage)
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
	_, err := os.Stat(filepath.Join(dir, keySnapshotFile))
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
	s = openTemp(t, dir)
	if !s.keysRestored {
		t.Fatal("the keys were not restored from the snapshot")
	}
	if snapshotExists(t, dir) {
		t.Fatal("the snapshot outlived the open that read it")
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

// TestKeySnapshotStaleOrDamagedIsIgnored: a snapshot written for another
// version of the database, or damaged, is not used: the key records are.
func TestKeySnapshotStaleOrDamagedIsIgnored(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := snapshotFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(filepath.Join(dir, keySnapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "newer"}); err != nil {
		t.Fatal(err)
	}
	want := keysOf(s, acct.ID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The older snapshot back in place: the database moved on since.
	if err := os.WriteFile(filepath.Join(dir, keySnapshotFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	if s.keysRestored {
		t.Fatal("a stale snapshot was restored")
	}
	if got := keysOf(s, acct.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("keys after ignoring a stale snapshot:\n got %+v\nwant %+v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A current snapshot with one byte changed.
	path := filepath.Join(dir, keySnapshotFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	if s.keysRestored {
		t.Fatal("a damaged snapshot was restored")
	}
	if got := keysOf(s, acct.ID); !reflect.DeepEqual(got, want) {
		t.Fatalf("keys after ignoring a damaged snapshot:\n got %+v\nwant %+v", got, want)
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
	for _, fromSnapshot := range []bool{true, false} {
		name := "records"
		if fromSnapshot {
			name = "snapshot"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if !fromSnapshot {
					_ = os.Remove(filepath.Join(dir, keySnapshotFile))
				}
				s, err := Open(Options{Dir: dir})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if s.keysRestored != fromSnapshot || s.keys.len() != accounts*perAccount {
					b.Fatalf("restored %v, %d keys", s.keysRestored, s.keys.len())
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(accounts*perAccount, "keys")
		})
	}
}
