package kernel

import "testing"

type testRecord struct {
	Account string `json:"account"`
	ID      string `json:"id"`
	N       int    `json:"n"`
}

func (r testRecord) RecordIDs() (string, string) { return r.Account, r.ID }

func TestRecordsPutRemoveSnapshotLoad(t *testing.T) {
	r := Records[testRecord]{}
	r.Put(&testRecord{Account: "a", ID: "1", N: 1})
	r.Put(&testRecord{Account: "a", ID: "2", N: 2})
	r.Put(&testRecord{Account: "b", ID: "1", N: 3})
	if len(r) != 2 || len(r["a"]) != 2 || r["b"]["1"].N != 3 {
		t.Fatalf("after put: %v", r)
	}
	if got := r.Snapshot("x/", RecordKey("x/", "a", "2")); got != (testRecord{Account: "a", ID: "2", N: 2}) {
		t.Fatalf("snapshot = %#v", got)
	}
	for _, key := range []string{"x/a/9", "x/c/1", "x/a"} {
		if got := r.Snapshot("x/", key); got != nil {
			t.Fatalf("snapshot(%q) = %#v, want nil", key, got)
		}
	}
	// a snapshot is a copy: republishing does not change it
	snap := r.Snapshot("x/", "x/a/1")
	r.Put(&testRecord{Account: "a", ID: "1", N: 10})
	if snap.(testRecord).N != 1 || r["a"]["1"].N != 10 {
		t.Fatalf("snapshot %v, record %v", snap, r["a"]["1"])
	}
	if r.Remove("a", "9") || r.Remove("c", "1") {
		t.Fatal("removed a missing record")
	}
	if !r.Remove("b", "1") {
		t.Fatal("did not remove b/1")
	}
	if _, ok := r["b"]; ok {
		t.Fatal("empty account map kept")
	}
	if !r.Remove("a", "1") || len(r["a"]) != 1 {
		t.Fatalf("after removing a/1: %v", r["a"])
	}
	got, err := r.Load([]byte(`{"account":"c","id":"7","n":7}`))
	if err != nil || got != r["c"]["7"] || got.N != 7 {
		t.Fatalf("load: %v %v", got, err)
	}
	if _, err := r.Load([]byte(`{"account":`)); err == nil {
		t.Fatal("load of bad JSON succeeded")
	}
}
