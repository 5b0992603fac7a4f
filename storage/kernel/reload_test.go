package kernel

import (
	"testing"

	"go.uber.org/zap"
)

func TestKernelRegisterRefusesALoadedKindWithoutReset(t *testing.T) {
	k := New(&memBackend{data: map[string]string{}}, zap.NewNop())
	defer func() {
		if recover() == nil {
			t.Fatal("registered a loaded kind without a Reset")
		}
	}()
	k.Register(Kind{Prefix: "x/", Load: func(_, _ []byte) error { return nil }})
}

// TestKernelReloadReplacesEveryKind: a full reload empties every loaded
// kind and loads the backend's records, so that what another writer
// deleted is gone and what it created is there; afterwards the kinds'
// Load still fills the maps the stores read (a later change applied one
// record at a time reaches them).
func TestKernelReloadReplacesEveryKind(t *testing.T) {
	b := &memBackend{data: map[string]string{
		"r/a/1": `{"account":"a","id":"1","n":1}`,
		"r/a/2": `{"account":"a","id":"2","n":2}`,
		"s/b/1": `{"account":"b","id":"1","n":3}`,
	}}
	k := New(b, zap.NewNop())
	r, s := Records[testRecord]{}, Records[testRecord]{}
	plain := map[string]string{}
	k.Register(
		r.Kind("r/", nil),
		s.Kind("s/", nil),
		Kind{Prefix: "p/", Load: func(key, v []byte) error { plain[string(key)] = string(v); return nil }, Reset: func() { clear(plain) }},
	)
	b.data["p/x"] = "kept"
	b.data["p/y"] = "deleted later"
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	defer k.Close()
	if len(r["a"]) != 2 || len(s["b"]) != 1 || len(plain) != 2 {
		t.Fatalf("after load: %v %v %v", r, s, plain)
	}

	// Another writer deletes a/2, b/1 and p/y, changes a/1 and creates
	// s/c/1 while this process does not follow.
	b.mu.Lock()
	delete(b.data, "r/a/2")
	delete(b.data, "s/b/1")
	delete(b.data, "p/y")
	b.data["r/a/1"] = `{"account":"a","id":"1","n":10}`
	b.data["s/c/1"] = `{"account":"c","id":"1","n":4}`
	b.mu.Unlock()
	afterRan := false
	if err := k.Reload(func() { afterRan = true }); err != nil {
		t.Fatal(err)
	}
	if !afterRan {
		t.Fatal("after did not run")
	}
	if len(r) != 1 || len(r["a"]) != 1 || r["a"]["1"].N != 10 {
		t.Fatalf("r after reload: %v", r)
	}
	if _, ok := s["b"]; ok || s["c"]["1"] == nil {
		t.Fatalf("s after reload: %v", s)
	}
	if len(plain) != 1 || plain["p/x"] != "kept" {
		t.Fatalf("plain after reload: %v", plain)
	}

	// A change applied alone after the reload lands in the same maps.
	k.Lock()
	err := k.LoadRecord("s/d/1", []byte(`{"account":"d","id":"1","n":5}`))
	k.Unlock()
	if err != nil || s["d"]["1"] == nil || s["d"]["1"].N != 5 {
		t.Fatalf("a record loaded after the reload: %v, %v", s, err)
	}
}
