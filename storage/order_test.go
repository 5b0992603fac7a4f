package storage

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

type testRecord struct {
	Account string `json:"account"`
	ID      string `json:"id"`
	N       int    `json:"n"`
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
		page, total := kernel.NewestFirstPage(mk(3, 1, 5, 2, 4), seq, c.offset, c.limit)
		if page == nil || total != 5 || !reflect.DeepEqual(ns(page), c.want) {
			t.Errorf("offset %d limit %d: %v (nil %v) of %d, want %v of 5", c.offset, c.limit, ns(page), page == nil, total, c.want)
		}
	}
	if page, total := kernel.NewestFirstPage[testRecord](nil, seq, 0, 0); page == nil || total != 0 {
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
	// The emptied account's map is pruned by Records.Remove, which
	// kernel.Delete calls (tested in package kernel).
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
	kernel.SortOldestFirst(rs, func(r *rec) (time.Time, string) { return r.at, r.id })
	var got []string
	for _, r := range rs {
		got = append(got, r.id)
	}
	if !reflect.DeepEqual(got, []string{"z", "b", "c", "a"}) {
		t.Fatalf("order %v", got)
	}
}
