package kernel

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

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

// gatedBackend holds each Commit until release is closed and tells
// whether the backend was scanned while a commit was held.
type gatedBackend struct {
	*memBackend
	entered chan struct{}
	release chan struct{}
	holding atomic.Bool
	scanned atomic.Bool // Scan ran while a commit was held
}

func (g *gatedBackend) Commit(w []Write) error {
	g.holding.Store(true)
	g.entered <- struct{}{}
	<-g.release
	enc := make([]Write, len(w))
	for i, x := range w {
		enc[i] = Write{Key: x.Key}
		if x.Value != nil {
			b, err := json.Marshal(x.Value)
			if err != nil {
				return err
			}
			enc[i].Value = string(b)
		}
	}
	err := g.memBackend.Commit(enc)
	g.holding.Store(false)
	return err
}

func (g *gatedBackend) Scan(prefix string, fn func(key, value []byte) (bool, error)) error {
	if g.holding.Load() {
		g.scanned.Store(true)
	}
	return g.memBackend.Scan(prefix, fn)
}

// TestKernelReloadWaitsForACommitInFlight: a reload while this process's
// commit is on its way to the backend waits for it, since a read of the
// backend meanwhile would miss the record and the reload drop it from
// memory.
func TestKernelReloadWaitsForACommitInFlight(t *testing.T) {
	g := &gatedBackend{memBackend: &memBackend{data: map[string]string{}}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	k := New(g, zap.NewNop())
	r := Records[testRecord]{}
	k.Register(r.Kind("r/", nil))
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	defer k.Close()
	published := make(chan error, 1)
	go func() {
		k.Lock()
		published <- Publish(k, r, "r/", &testRecord{Account: "a", ID: "1", N: 1})
	}()
	<-g.entered // the commit is in flight
	// Were the reload not to wait, it would read the backend while the
	// commit is held; the commit is released a moment later either way.
	time.AfterFunc(50*time.Millisecond, func() { close(g.release) })
	if err := k.Reload(func() {}); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if g.scanned.Load() {
		t.Fatal("the reload read the backend while a commit was in flight")
	}
	k.RLock()
	defer k.RUnlock()
	if r["a"]["1"] == nil {
		t.Fatal("the reload dropped a record whose commit was in flight")
	}
}
