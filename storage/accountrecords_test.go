package storage

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

type testRecord struct {
	Account string `json:"account"`
	ID      string `json:"id"`
	N       int    `json:"n"`
}

func (r testRecord) recordIDs() (string, string) { return r.Account, r.ID }

func TestAccountRecordsPutRemoveSnapshotLoad(t *testing.T) {
	r := accountRecords[testRecord]{}
	r.put(&testRecord{Account: "a", ID: "1", N: 1})
	r.put(&testRecord{Account: "a", ID: "2", N: 2})
	r.put(&testRecord{Account: "b", ID: "1", N: 3})
	if len(r) != 2 || len(r["a"]) != 2 || r["b"]["1"].N != 3 {
		t.Fatalf("after put: %v", r)
	}
	if got := r.snapshot("x/", recordKey("x/", "a", "2")); got != (testRecord{Account: "a", ID: "2", N: 2}) {
		t.Fatalf("snapshot = %#v", got)
	}
	for _, key := range []string{"x/a/9", "x/c/1", "x/a"} {
		if got := r.snapshot("x/", key); got != nil {
			t.Fatalf("snapshot(%q) = %#v, want nil", key, got)
		}
	}
	// a snapshot is a copy: republishing does not change it
	snap := r.snapshot("x/", "x/a/1")
	r.put(&testRecord{Account: "a", ID: "1", N: 10})
	if snap.(testRecord).N != 1 || r["a"]["1"].N != 10 {
		t.Fatalf("snapshot %v, record %v", snap, r["a"]["1"])
	}
	if r.remove("a", "9") || r.remove("c", "1") {
		t.Fatal("removed a missing record")
	}
	if !r.remove("b", "1") {
		t.Fatal("did not remove b/1")
	}
	if _, ok := r["b"]; ok {
		t.Fatal("empty account map kept")
	}
	if !r.remove("a", "1") || len(r["a"]) != 1 {
		t.Fatalf("after removing a/1: %v", r["a"])
	}
	got, err := r.load([]byte(`{"account":"c","id":"7","n":7}`))
	if err != nil || got != r["c"]["7"] || got.N != 7 {
		t.Fatalf("load: %v %v", got, err)
	}
	if _, err := r.load([]byte(`{"account":`)); err == nil {
		t.Fatal("load of bad JSON succeeded")
	}
}

func TestNewestFirstPage(t *testing.T) {
	seq := func(r *testRecord) uint64 { return uint64(r.N) }
	mk := func(ns ...int) []testRecord {
		out := make([]testRecord, len(ns))
		for i, n := range ns {
			out[i] = testRecord{N: n}
		}
		return out
	}
	ns := func(rs []testRecord) []int {
		out := []int{}
		for _, r := range rs {
			out = append(out, r.N)
		}
		return out
	}
	for _, c := range []struct {
		offset, limit int
		want          []int
	}{
		{0, 0, []int{5, 4, 3, 2, 1}},
		{0, 2, []int{5, 4}},
		{2, 2, []int{3, 2}},
		{4, 10, []int{1}},
		{5, 1, []int{}},
		{9, 0, []int{}},
	} {
		page, total := newestFirstPage(mk(3, 1, 5, 2, 4), seq, c.offset, c.limit)
		if page == nil || total != 5 || !reflect.DeepEqual(ns(page), c.want) {
			t.Errorf("offset %d limit %d: %v (nil %v) of %d, want %v of 5", c.offset, c.limit, ns(page), page == nil, total, c.want)
		}
	}
	if page, total := newestFirstPage[testRecord](nil, seq, 0, 0); page == nil || total != 0 {
		t.Fatalf("empty: %v %d", page, total)
	}
}

// TestAccountRecordsDiskFormat: a record written in the stored layout
// (key <prefix><account>/<id>, the record's JSON) loads, and what the store
// writes back stays in that layout.
func TestAccountRecordsDiskFormat(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, err := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	raw := `{"account_id":"` + acct.ID + `","user":"u1","name":"Ann","active":false,"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","deactivated_at":"2026-01-02T03:04:05Z"}`
	if err := db.Update(func(txn *badger.Txn) error {
		return txn.Set([]byte("e/"+acct.ID+"/u1"), []byte(raw))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	u, ok := s.EndUser(acct.ID, "u1")
	if !ok || u.Active || u.Name == nil || *u.Name != "Ann" || !s.EndUserDeactivated(acct.ID, "u1") {
		t.Fatalf("loaded end user %+v %v", u, ok)
	}
	if _, err := s.UpdateEndUser(acct.ID, "nobody", func(*EndUser) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a missing end user: %v", err)
	}
	refused := errors.New("refused")
	if _, err := s.UpdateEndUser(acct.ID, "u1", func(u *EndUser) error { u.Active = true; return refused }); !errors.Is(err, refused) {
		t.Fatalf("refused update: %v", err)
	}
	if !s.EndUserDeactivated(acct.ID, "u1") {
		t.Fatal("a refused update was applied")
	}
	if _, err := s.SetEndUserActive(acct.ID, "u1", true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got map[string]any
	if err := db.View(func(txn *badger.Txn) error {
		item, err := txn.Get([]byte("e/" + acct.ID + "/u1"))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error { return json.Unmarshal(v, &got) })
	}); err != nil {
		t.Fatal(err)
	}
	if got["user"] != "u1" || got["account_id"] != acct.ID || got["active"] != true || got["deactivated_at"] != nil || got["name"] != "Ann" {
		t.Fatalf("stored record %v", got)
	}
}

func TestDeleteRecordPrunesAndPersists(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	d, err := s.CreateDestination(Destination{AccountID: acct.ID, Type: "webhook"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDestination(acct.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDestination(acct.ID, d.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	s.mu.RLock()
	_, kept := s.destinations[acct.ID]
	s.mu.RUnlock()
	if kept {
		t.Fatal("empty account map kept")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	if _, ok := s.Destination(acct.ID, d.ID); ok {
		t.Fatal("deleted destination came back after reopen")
	}
}

func TestSortOldestFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type rec struct {
		at time.Time
		id string
	}
	rs := []rec{{t0.Add(time.Second), "a"}, {t0, "c"}, {t0, "b"}, {t0.Add(-time.Second), "z"}}
	sortOldestFirst(rs, func(r *rec) (time.Time, string) { return r.at, r.id })
	var got []string
	for _, r := range rs {
		got = append(got, r.id)
	}
	if !reflect.DeepEqual(got, []string{"z", "b", "c", "a"}) {
		t.Fatalf("order %v", got)
	}
}
