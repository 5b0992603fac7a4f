package storage

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// recordState is what the records' snapshot holds, as the store serves
// it: every account, its purchases, management keys (through the
// account's index) and workspaces.
type recordState struct {
	Accounts   map[string]Account
	Purchases  map[string][]Purchase
	MgmtKeys   map[string][]ManagementKey
	Workspaces map[string][]Workspace
}

func recordsOf(s *Store) recordState {
	st := recordState{Accounts: map[string]Account{}, Purchases: map[string][]Purchase{},
		MgmtKeys: map[string][]ManagementKey{}, Workspaces: map[string][]Workspace{}}
	for _, a := range s.Accounts() {
		st.Accounts[a.ID] = a
		st.Purchases[a.ID] = s.Purchases(a.ID)
		ms := s.ManagementKeys(a.ID)
		slices.SortFunc(ms, func(x, y ManagementKey) int { return cmp.Compare(x.Hash, y.Hash) })
		st.MgmtKeys[a.ID] = ms
		ws := s.Workspaces(a.ID)
		slices.SortFunc(ws, func(x, y Workspace) int { return cmp.Compare(x.ID, y.ID) })
		for i := range ws { // a loaded workspace leaves empty maps nil
			if len(ws[i].Budgets) == 0 {
				ws[i].Budgets = nil
			}
			if len(ws[i].Members) == 0 {
				ws[i].Members = nil
			}
		}
		st.Workspaces[a.ID] = ws
	}
	return st
}

func sameRecords(t *testing.T, what string, got, want recordState) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("%s: the records differ:\n got %s\nwant %s", what, g, w)
	}
}

// recordsFixture fills a store with records of every shape: two accounts,
// purchases, management keys with and without expiry and creator, a
// second workspace with a budget and a description.
func recordsFixture(t *testing.T, s *Store) (Account, []string) {
	t.Helper()
	acct, err := s.CreateAccount(NewAccount{Name: "Acme", Kind: AccountOrganization, Billing: BillingInvoiced})
	if err != nil {
		t.Fatal(err)
	}
	solo, err := s.CreateAccount(NewAccount{Name: "Solo", Kind: AccountPersonal, RateLimitExempt: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, amt := range []money.Amount{5_000_000_000, 1} {
		if _, _, err := s.RecordPurchase(acct.ID, amt, "wire \"ref\" ü"); err != nil {
			t.Fatal(err)
		}
	}
	exp := time.Now().Add(72 * time.Hour).UTC()
	var mgmt []string
	for _, n := range []NewManagementKey{{AccountID: acct.ID, Name: "plain"},
		{AccountID: solo.ID, Name: "expiring", ExpiresAt: &exp, CreatorUserID: &solo.ID}, {AccountID: acct.ID, Name: "third"}} {
		m, _, err := s.CreateManagementKey(n)
		if err != nil {
			t.Fatal(err)
		}
		mgmt = append(mgmt, m.Hash)
	}
	desc := "the research team"
	w, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug, w.Description = "Research", "research", &desc })
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetWorkspaceBudget(acct.ID, w.ID, BudgetInterval("monthly"), 7_000_000_000, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateAccount(acct.ID, func(a *Account) error { a.Usage += 123_456; return nil }); err != nil {
		t.Fatal(err)
	}
	return acct, mgmt
}

// changeRecords changes, creates and deletes records of every kind: it
// returns how many records it wrote.
func changeRecords(t *testing.T, s *Store, acct Account, mgmt []string, tag string) int {
	t.Helper()
	if _, _, err := s.RecordPurchase(acct.ID, 42_000_000_000, "more "+tag); err != nil { // account + purchase
		t.Fatal(err)
	}
	if _, err := s.UpdateAccount(acct.ID, func(a *Account) error { // same account
		a.Name, a.FilteredModelCatalog = "Acme "+tag, !a.FilteredModelCatalog
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateAccount(NewAccount{Name: "New " + tag, Kind: AccountOrganization}); err != nil { // account + workspace
		t.Fatal(err)
	}
	if err := s.DeleteManagementKey(mgmt[0]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateManagementKey(NewManagementKey{AccountID: acct.ID, Name: "new " + tag}); err != nil {
		t.Fatal(err)
	}
	w, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "Temp "+tag, "temp-"+tag })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWorkspace(acct.ID, w.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateWorkspace(acct.ID, "research", func(w *Workspace) error { w.Name = "Research " + tag; return nil }); err != nil {
		t.Fatal(err)
	}
	return 8
}

func recordSnapshotExists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(dir, recordSnapshotFile))
	return err == nil
}

// loadedWithout opens a copy of dir without the records' snapshot: what
// reading every record gives, the reference a restore must equal.
func loadedWithout(t *testing.T, dir string) recordState {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", dir, cp).CombinedOutput(); err != nil {
		t.Fatalf("copying the data directory: %v %s", err, out)
	}
	if err := os.Remove(filepath.Join(cp, recordSnapshotFile)); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s := openTemp(t, cp)
	defer s.Close()
	if s.recordsRestored {
		t.Fatal("restored from a snapshot that was removed")
	}
	return recordsOf(s)
}

// TestRecordSnapshotRestoresRecords: a clean close writes the records'
// snapshot; the next open loads accounts, purchases, management keys and
// workspaces from it alone, exactly as reading them from the database.
func TestRecordSnapshotRestoresRecords(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := recordsFixture(t, s)
	want := recordsOf(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !recordSnapshotExists(t, dir) {
		t.Fatal("a clean close wrote no records' snapshot")
	}
	if err := os.WriteFile(filepath.Join(dir, recordSnapshotFile+".7"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := loadedWithout(t, dir)
	sameRecords(t, "read from the database", ref, want)
	s = openTemp(t, dir)
	if !s.recordsRestored || !s.recordsCurrent || s.recordsCaughtUp != 0 {
		t.Fatalf("after a clean close: restored %v, current %v, %d records read", s.recordsRestored, s.recordsCurrent, s.recordsCaughtUp)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, recordSnapshotFile+".*")); len(tmps) != 0 {
		t.Fatalf("temporary snapshot files left: %v", tmps)
	}
	sameRecords(t, "restored", recordsOf(s), want)
	// The restored records serve changes as loaded ones do.
	if _, _, err := s.RecordPurchase(acct.ID, 1_000, "after"); err != nil {
		t.Fatal(err)
	}
	want = recordsOf(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	sameRecords(t, "second restore", recordsOf(s), want)
}

// TestRecordSnapshotOlderIsCaughtUp: a snapshot older than the database
// is loaded and brought up to date with the records written since
// (changed, created and deleted); a damaged one is not used.
func TestRecordSnapshotOlderIsCaughtUp(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, mgmt := recordsFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, recordSnapshotFile)
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	changeRecords(t, s, acct, mgmt, "x")
	want := recordsOf(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	// Read: the account, its purchase, the new account and its
	// workspace, the new management key, the changed workspace.
	if !s.recordsRestored || s.recordsCurrent || s.recordsCaughtUp != 6 {
		t.Fatalf("an older snapshot: restored %v, current %v, %d records read (want 6)", s.recordsRestored, s.recordsCurrent, s.recordsCaughtUp)
	}
	sameRecords(t, "caught up", recordsOf(s), want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, damage := range map[string]func([]byte) []byte{
		"a byte of the body":   func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
		"a byte of the header": func(b []byte) []byte { b[len(recordSnapshotMagic)+3] ^= 1; return b },
		"the last byte":        func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"truncated":            func(b []byte) []byte { return b[:len(b)-100] },
		"cut to its header":    func(b []byte) []byte { return b[:len(recordSnapshotMagic)+8] },
		"empty":                func(b []byte) []byte { return nil },
		"another layout":       func(b []byte) []byte { b[len(recordSnapshotMagic)-2] = '9'; return b },
	} {
		if err := os.WriteFile(path, damage(slices.Clone(b)), 0o600); err != nil {
			t.Fatal(err)
		}
		s = openTemp(t, dir)
		if s.recordsRestored {
			t.Fatalf("%s: a damaged snapshot was restored", name)
		}
		sameRecords(t, name, recordsOf(s), want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecordSnapshotAfterCrash: after a kill -9 the snapshot taken while
// the store ran is loaded, and the records written since (in the journal,
// replayed, or already in Badger) are read: every acknowledged change
// comes back, money included, through two crashes in a row.
func TestRecordSnapshotAfterCrash(t *testing.T) {
	for _, checkpoint := range []bool{false, true} {
		dir := t.TempDir()
		s := openTemp(t, dir)
		acct, mgmt := recordsFixture(t, s)
		for range 30 {
			if _, err := s.CreateAccount(NewAccount{Name: "bulk", Kind: AccountPersonal}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.snapshotRecords(); err != nil {
			t.Fatal(err)
		}
		changeRecords(t, s, acct, mgmt, "a")
		if checkpoint {
			if err := s.k.Scan(prefixAccount, func(_, _ []byte) (bool, error) { return false, nil }); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.RecordPurchase(acct.ID, 5, "in the journal"); err != nil {
				t.Fatal(err)
			}
		}
		want := recordsOf(s)
		crashStore(t, s)
		sameRecords(t, "read from the database after a crash", loadedWithout(t, dir), want)

		s = openTemp(t, dir)
		if !s.recordsRestored || s.recordsCurrent || s.recordsCaughtUp == 0 || s.recordsCaughtUp > 8 {
			t.Fatalf("after a crash: restored %v, current %v, %d records read", s.recordsRestored, s.recordsCurrent, s.recordsCaughtUp)
		}
		sameRecords(t, "after a crash", recordsOf(s), want)
		mgmt = mgmt[1:]
		changeRecords(t, s, acct, mgmt, "b")
		want = recordsOf(s)
		crashStore(t, s) // a second crash, no newer snapshot
		s = openTemp(t, dir)
		if !s.recordsRestored {
			t.Fatal("the snapshot was not used after a second crash")
		}
		sameRecords(t, "after a second crash", recordsOf(s), want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openTemp(t, dir)
		if !s.recordsCurrent {
			t.Fatal("a clean close after the crash wrote no current snapshot")
		}
		sameRecords(t, "after a clean close", recordsOf(s), want)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecordSnapshotTracksChangesWhileTaken: records changed while the
// snapshot is taken (between its kinds, the lock released) are listed as
// changed and read from the database after a crash, whatever the
// snapshot copied of them.
func TestRecordSnapshotTracksChangesWhileTaken(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, mgmt := recordsFixture(t, s)
	defer func() { snapshotStep = nil }()
	steps := 0
	snapshotStep = func() {
		if steps++; steps == 1 { // the accounts copied, the rest not yet
			changeRecords(t, s, acct, mgmt, "during")
		}
	}
	if err := s.snapshotRecords(); err != nil {
		t.Fatal(err)
	}
	snapshotStep = nil
	r, err := readRecordSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.changed[prefixAccount+acct.ID]; !ok {
		t.Errorf("the account changed during the snapshot is not listed as changed: %v", r.changed)
	}
	if _, ok := r.changed[prefixMgmtKey+mgmt[0]]; !ok {
		t.Errorf("the management key deleted during the snapshot is not listed as changed: %v", r.changed)
	}
	want := recordsOf(s)
	crashStore(t, s)
	s = openTemp(t, dir)
	defer s.Close()
	if !s.recordsRestored || s.recordsCaughtUp == 0 {
		t.Fatalf("restored %v, %d records read", s.recordsRestored, s.recordsCaughtUp)
	}
	sameRecords(t, "after a crash", recordsOf(s), want)
}

// TestRecordCodecs: each binary codec gives back the record that its
// JSON, decoded as the database's is, gives.
func TestRecordCodecs(t *testing.T) {
	at := time.Date(2026, 11, 28, 15, 4, 5, 123456789, time.UTC)
	exp := at.Add(time.Hour)
	creator := "user_9"
	acct := Account{ID: "org_1", Name: "A \"q\" ü", Kind: AccountOrganization, Billing: BillingSubscription,
		OwnerUserID: "user_1", DefaultWorkspaceID: "ws", CreditsPurchased: money.MaxAmount, Purchases: 3,
		Usage: -5, BYOKUsage: 7, RateLimitExempt: true, FilteredModelCatalog: true,
		FreeModelRequests: money.Windowed{Period: 20000, Value: 9}, FreeModelMinute: money.Windowed{Period: -1, Value: 1},
		CreatedAt: at, UpdatedAt: at.Add(time.Nanosecond)}
	roundTrip(t, &acct, record.EncodeAccount, record.DecodeAccount)
	roundTrip(t, &Account{}, record.EncodeAccount, record.DecodeAccount)
	roundTrip(t, &Purchase{ID: "p1", AccountID: "org_1", Amount: 12, Note: "n", CreatedAt: at}, record.EncodePurchase, record.DecodePurchase)
	roundTrip(t, &ManagementKey{Hash: "h", AccountID: "a", Name: "n", Label: "l", CreatorUserID: &creator, CreatedAt: at, ExpiresAt: &exp},
		record.EncodeMgmtKey, record.DecodeMgmtKey)
	roundTrip(t, &ManagementKey{Hash: "h", CreatedAt: at}, record.EncodeMgmtKey, record.DecodeMgmtKey)
	desc, empty, model := "research", "", "gpt"
	full := Workspace{ID: "w1", AccountID: "org_1", Name: "R & D", Slug: "rd", Description: &desc, CreatedBy: &empty,
		DefaultGuardrailID: "g", DefaultImageModel: &model, DefaultProviderSort: &model, DefaultTextModel: &empty,
		DisabledServerTools: []string{"web", "ü"}, IOLoggingAPIKeyIDs: []int64{-1, 1 << 40}, IOLoggingSamplingRate: 0.25,
		IsDataDiscountLoggingEnabled: true, IsObservabilityBroadcastEnabled: true, IsObservabilityIOLoggingEnabled: true,
		IncludeBYOKInBudgets: true, CreatedAt: at, UpdatedAt: &exp,
		Budgets: map[BudgetInterval]*WorkspaceBudget{"daily": {ID: "b1", Interval: "daily", Limit: 5, CreatedAt: at, UpdatedAt: exp},
			"monthly": {ID: "b2", Interval: "monthly", Limit: 9, CreatedAt: exp, UpdatedAt: at}},
		Members: map[string]*WorkspaceMember{"user_1": {UserID: "user_1", Role: MemberRole("admin"), CreatedAt: at}}}
	roundTrip(t, &full, record.EncodeWorkspace, record.DecodeWorkspace)
	roundTrip(t, &Workspace{ID: "w2", DisabledServerTools: []string{}, IOLoggingAPIKeyIDs: []int64{}, CreatedAt: at}, record.EncodeWorkspace, record.DecodeWorkspace)
	roundTrip(t, &Workspace{ID: "w3"}, record.EncodeWorkspace, record.DecodeWorkspace)
	b, _ := record.EncodeWorkspace(nil, &full)
	var w Workspace
	for n := range len(b) {
		if record.DecodeWorkspace(b[:n], &w, nil) == nil {
			t.Fatalf("a workspace cut to %d of %d bytes decoded", n, len(b))
		}
	}
	b, _ = record.EncodeAccount(nil, &acct)
	var a Account
	for n := range len(b) {
		if record.DecodeAccount(b[:n], &a, nil) == nil {
			t.Fatalf("an account cut to %d of %d bytes decoded", n, len(b))
		}
	}
	if record.DecodeAccount(append(b, 0), &a, nil) == nil {
		t.Fatal("an account with a byte more decoded")
	}
}

func roundTrip[T any](t *testing.T, v *T, enc func([]byte, any) ([]byte, error), dec func([]byte, *T, *codec.StrArena) error) {
	t.Helper()
	b, err := enc(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	var got, want T
	var strs codec.StrArena
	if err := dec(b, &got, &strs); err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(v)
	if err := json.Unmarshal(j, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

// TestRecordSnapshotChangedIsRead: a record the snapshot lists as changed
// (it was dirty when copied: its copy may hold what never became
// durable) is read from the database even at a version the snapshot
// covers.
func TestRecordSnapshotChangedIsRead(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := recordsFixture(t, s)
	v, err := s.k.ReadVersion()
	if err != nil {
		t.Fatal(err)
	}
	want := recordsOf(s)
	kinds := s.snapKinds()
	recs := make([][]snapRecord, len(kinds))
	for i, kind := range kinds {
		recs[i] = kind.collect(s.k)
	}
	for i, r := range recs[0] {
		if r.key == acct.ID {
			a := *r.v.(*Account)
			a.CreditsPurchased += 1_000 * money.AmountScale // never acknowledged
			recs[0][i].v = &a
		}
	}
	file, err := recordSnapshotBytes(v, kinds, recs, []string{prefixAccount + acct.ID})
	if err != nil {
		t.Fatal(err)
	}
	crashStore(t, s)
	if err := os.WriteFile(filepath.Join(dir, recordSnapshotFile), file, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	if !s.recordsRestored || s.recordsCaughtUp != 1 {
		t.Fatalf("restored %v, %d records read (want 1)", s.recordsRestored, s.recordsCaughtUp)
	}
	sameRecords(t, "a changed record", recordsOf(s), want)
}

// TestRecordSnapshotNewerThanDatabase: a snapshot newer than the database
// (the directory restored from an older backup, the snapshot not) is not
// used: its records would replace older ones the database holds at
// versions it covers.
func TestRecordSnapshotNewerThanDatabase(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := recordsFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if out, err := exec.Command("cp", "-a", dir, backup).CombinedOutput(); err != nil {
		t.Fatalf("copying the data directory: %v %s", err, out)
	}
	s = openTemp(t, dir)
	// Changes only: nothing the older database holds is missing from
	// the snapshot.
	if _, _, err := s.RecordPurchase(acct.ID, 9_000_000_000, "later"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	newer, err := os.ReadFile(filepath.Join(dir, recordSnapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backup, recordSnapshotFile), newer, 0o600); err != nil {
		t.Fatal(err)
	}
	want := loadedWithout(t, backup)
	s = openTemp(t, backup)
	defer s.Close()
	if s.recordsRestored {
		t.Fatal("a snapshot newer than the database was restored")
	}
	sameRecords(t, "an older database", recordsOf(s), want)
}

// TestRecordSnapshotWrittenWhileRecordsChange: the periodic snapshot,
// written (workspaces read one account a step) while credits are
// purchased, accounts, management keys and workspaces created and
// deleted concurrently, restores after a crash to exactly
// the acknowledged records.
func TestRecordSnapshotWrittenWhileRecordsChange(t *testing.T) {
	defer func(every time.Duration, step int) { keySnapshotEvery, collectStep = every, step }(keySnapshotEvery, collectStep)
	keySnapshotEvery, collectStep = 2*time.Millisecond, 1
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := recordsFixture(t, s)
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			var err error
			for i := 0; i < 40 && err == nil; i++ {
				if _, _, err = s.RecordPurchase(acct.ID, money.Amount(w*1000+i+1), "p"); err != nil {
					break
				}
				if _, err = s.CreateAccount(NewAccount{Name: "w", Kind: AccountPersonal}); err != nil {
					break
				}
				var m ManagementKey
				if m, _, err = s.CreateManagementKey(NewManagementKey{AccountID: acct.ID, Name: "m"}); err == nil && i%3 == 0 {
					err = s.DeleteManagementKey(m.Hash)
				}
				if err != nil {
					break
				}
				var ws Workspace
				slug := fmt.Sprintf("w%d-%d", w, i)
				if ws, err = s.CreateWorkspace(acct.ID, func(x *Workspace) { x.Name, x.Slug = slug, slug }); err == nil && i%2 == 0 {
					err = s.DeleteWorkspace(acct.ID, ws.ID)
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
	for deadline := time.Now().Add(10 * time.Second); !recordSnapshotExists(t, dir); {
		if time.Now().After(deadline) {
			t.Fatal("no periodic records' snapshot was written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := recordsOf(s)
	crashStore(t, s)
	s = openTemp(t, dir)
	defer s.Close()
	if !s.recordsRestored {
		t.Fatal("the periodic snapshot was not restored")
	}
	sameRecords(t, "after a crash", recordsOf(s), want)
}

// TestOpenResumesGC: the collector, stopped while the snapshots are
// restored, runs again at its own setting once concurrent Opens return,
// whether they restored snapshots, read every record or failed.
func TestOpenResumesGC(t *testing.T) {
	prev := debug.SetGCPercent(77)
	defer debug.SetGCPercent(prev)
	dir := t.TempDir()
	s := openTemp(t, dir)
	recordsFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 6)
	for i := range 6 {
		go func() {
			d := dir
			switch i % 3 {
			case 1:
				d = t.TempDir()
			case 2:
				d = filepath.Join(t.TempDir(), "not-a-dir")
				if err := os.WriteFile(d, nil, 0o600); err != nil {
					errs <- err
					return
				}
			}
			s, err := Open(Options{Dir: d})
			if err == nil {
				if d == dir && !s.recordsRestored {
					err = errors.New("not restored from the snapshot")
				}
				s.Close()
			} else if i%3 == 2 {
				err = nil // expected: not a directory
			}
			errs <- err
		}()
		if i%3 == 0 {
			if err := <-errs; err != nil { // one store on dir at a time
				t.Fatal(err)
			}
		}
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := debug.SetGCPercent(77); got != 77 {
		t.Fatalf("the collector's setting after Open: %d, want 77", got)
	}
	openGC.Lock()
	defer openGC.Unlock()
	if openGC.n != 0 || openGC.paused != 0 {
		t.Fatalf("Opens still counted: %d, collector stops: %d", openGC.n, openGC.paused)
	}
}

// TestOpenBesideOpenStoreKeepsGC: a store opened while another is open
// (a reload onto another directory, the first serving meanwhile) leaves
// the collector running.
func TestOpenBesideOpenStoreKeepsGC(t *testing.T) {
	serving := openTemp(t, t.TempDir())
	defer serving.Close()
	done := noGC()
	defer done()
	if prev := debug.SetGCPercent(100); prev < 0 {
		t.Fatalf("the collector was stopped (GC percent %d) while another store was open", prev)
	} else {
		debug.SetGCPercent(prev)
	}
}
