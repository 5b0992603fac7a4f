package kernel

import (
	"encoding/json"
	"errors"
	"maps"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// memBackend is a Backend in a map whose next Commit calls can be made to
// fail, as a full disk or an unreachable database would.
type memBackend struct {
	mu      sync.Mutex
	data    map[string]string
	fail    int // Commit calls still to fail
	commits int
}

func (m *memBackend) Commit(writes []Write) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits++
	if m.fail > 0 {
		m.fail--
		return errors.New("backend down")
	}
	for _, w := range writes {
		if w.Value == nil {
			delete(m.data, w.Key)
		} else {
			m.data[w.Key] = w.Value.(string)
		}
	}
	return nil
}

func (m *memBackend) Get(key string, decode func([]byte) error) error {
	m.mu.Lock()
	v, ok := m.data[key]
	m.mu.Unlock()
	if !ok {
		return ErrNotFound
	}
	return decode([]byte(v))
}

func (m *memBackend) Scan(prefix string, fn func(key, value []byte) (bool, error)) error {
	m.mu.Lock()
	var keys []string
	for k := range m.data {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	data := maps.Clone(m.data)
	m.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		if more, err := fn([]byte(k), []byte(data[k])); err != nil || !more {
			return err
		}
	}
	return nil
}

func (m *memBackend) Close() error { return nil }

// TestKernelLoadsKindsInRegistrationOrder: a kind that decorates another
// sees it loaded; records of kinds without Load stay in the backend.
func TestKernelLoadsKindsInRegistrationOrder(t *testing.T) {
	b := &memBackend{data: map[string]string{"x/1": "one", "y/1": "deco", "g/1": "gen"}}
	k := New(b, zap.NewNop())
	var order []string
	k.Register(
		Kind{Prefix: "x/", Load: func(key, v []byte) error { order = append(order, string(key)); return nil }, Reset: func() {}},
		Kind{Prefix: "y/", Load: func(key, v []byte) error { order = append(order, string(key)); return nil }, Reset: func() {}},
		Kind{Prefix: "g/", Append: true},
	)
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	defer k.Close()
	if strings.Join(order, ",") != "x/1,y/1" {
		t.Fatalf("load order %v", order)
	}
	var got string
	if err := k.Get("g/1", func(v []byte) error { got = string(v); return nil }); err != nil || got != "gen" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if err := k.Get("g/2", func([]byte) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing record: %v", err)
	}
}

func TestKernelRegisterRefusesOverlappingPrefixes(t *testing.T) {
	k := New(&memBackend{data: map[string]string{}}, zap.NewNop())
	k.Register(Kind{Prefix: "p/"})
	defer func() {
		if recover() == nil {
			t.Fatal("registered p/e/ over p/")
		}
	}()
	k.Register(Kind{Prefix: "p/e/"})
}

// TestKernelWriteWaitsUntilDurable: a write whose commit fails is retried,
// its waiter returns only once it landed, and the record written is the
// newest snapshot of memory; an append is written exactly once.
func TestKernelWriteWaitsUntilDurable(t *testing.T) {
	b := &memBackend{data: map[string]string{}, fail: 2}
	k := New(b, zap.NewNop())
	mem := map[string]string{}
	k.Register(
		Kind{Prefix: "r/", Snapshot: func(key string) any {
			if v, ok := mem[key]; ok {
				return v
			}
			return nil
		}},
		Kind{Prefix: "a/", Append: true},
	)
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	k.Lock()
	mem["r/1"] = "v1"
	k.MarkDirty("r/1")
	batch := k.Append("a/1", "once")
	k.Unlock()
	if err := batch.Wait(); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	if b.data["r/1"] != "v1" || b.data["a/1"] != "once" || b.commits != 3 {
		t.Fatalf("after retries: %v in %d commits", b.data, b.commits)
	}
	b.mu.Unlock()

	k.Lock()
	delete(mem, "r/1")
	batch = k.MarkDirty("r/1")
	k.Unlock()
	if err := batch.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.data["r/1"]; ok || len(b.data) != 1 {
		t.Fatalf("after delete: %v", b.data)
	}
}

// TestPendingWithNothingDirtyIsDurable: waiting for "every change so
// far" when every change is already committed returns at once, rather
// than waiting for a commit nothing will ask for (it ran out the
// durability timeout and answered ErrNotDurable).
func TestPendingWithNothingDirtyIsDurable(t *testing.T) {
	b := &memBackend{data: map[string]string{}}
	k := New(b, zap.NewNop())
	mem := map[string]string{}
	k.Register(Kind{Prefix: "r/", Snapshot: func(key string) any { return mem[key] }})
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	defer k.Close()
	k.Lock()
	mem["r/1"] = "v1"
	batch := k.MarkDirty("r/1")
	k.Unlock()
	if err := batch.Wait(); err != nil {
		t.Fatal(err)
	}
	k.Lock()
	batch = k.Pending()
	k.Unlock()
	if err := batch.Wait(); err != nil {
		t.Fatalf("nothing dirty: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data["r/1"] != "v1" {
		t.Fatalf("the change is not in the backend: %v", b.data)
	}
}

func TestEncodeStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "gen-0001763900000000-abcdef", "chatcmpl-9", "a\"b", `a\b`, "<&>", "\x01", "日本", "\xff", "\u2028", "\x7f"} {
		got, err := encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := json.Marshal(s); string(got) != string(want) {
			t.Errorf("encode(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestKernelReportsCommits: the commit observer (the metrics' hook) hears
// of every backend commit, failed ones with their error.
func TestKernelReportsCommits(t *testing.T) {
	b := &memBackend{data: map[string]string{}, fail: 1}
	k := New(b, zap.NewNop())
	var mu sync.Mutex
	var seen []error
	k.onCommit = func(d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if d < 0 {
			t.Errorf("commit took %v", d)
		}
		seen = append(seen, err)
	}
	k.Register(Kind{Prefix: "a/", Append: true})
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	k.Lock()
	batch := k.Append("a/1", "v")
	k.Unlock()
	if err := batch.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] == nil || seen[1] != nil {
		t.Fatalf("observed %v, want a failed commit then a committed one", seen)
	}
}

// TestKernelMarkDirtyAtWritesPrefixAndID: MarkDirtyAt marks the record
// prefix+id, once however often it is marked, ids longer than its buffer
// included.
func TestKernelMarkDirtyAtWritesPrefixAndID(t *testing.T) {
	b := &memBackend{data: map[string]string{}}
	k := New(b, zap.NewNop())
	mem := map[string]string{}
	k.Register(Kind{Prefix: "r/", Snapshot: func(key string) any { return mem[key] }})
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	defer k.Close()
	long := strings.Repeat("x", 200)
	k.Lock()
	mem["r/acct/ws"], mem["r/"+long] = "ws", "long"
	k.MarkDirtyAt("r/", "acct/ws")
	k.MarkDirtyAt("r/", "acct/ws")
	batch := k.MarkDirtyAt("r/", long)
	if len(k.dirty) != 2 {
		t.Errorf("dirty %v, want r/acct/ws and the long one", k.dirty)
	}
	k.Unlock()
	if err := batch.Wait(); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data["r/acct/ws"] != "ws" || b.data["r/"+long] != "long" || len(b.data) != 2 {
		t.Fatalf("backend holds %v", b.data)
	}
}

// TestKernelWaitGivesUpAfterDurableTimeout: a waiter whose commit keeps
// failing returns ErrNotDurable after durableTimeout; once the backend
// answers again, a later write is durable, and so is the earlier one.
func TestKernelWaitGivesUpAfterDurableTimeout(t *testing.T) {
	defer func(d time.Duration) { durableTimeout = d }(durableTimeout)
	durableTimeout = 50 * time.Millisecond
	b := &memBackend{data: map[string]string{}, fail: 1 << 30}
	k := New(b, zap.NewNop())
	k.Register(Kind{Prefix: "a/", Append: true})
	if err := k.Load(); err != nil {
		t.Fatal(err)
	}
	k.Start()
	defer k.Close()
	k.Lock()
	first := k.Append("a/1", "one")
	k.Unlock()
	began := time.Now()
	if err := first.Wait(); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("Wait while the backend fails: %v", err)
	}
	if d := time.Since(began); d < durableTimeout {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
	if err := first.Wait(); !errors.Is(err, ErrNotDurable) {
		t.Fatalf("second Wait while the backend fails: %v", err)
	}
	b.mu.Lock()
	b.fail = 0
	b.mu.Unlock()
	durableTimeout = 30 * time.Second
	k.Lock()
	later := k.Append("a/2", "two")
	k.Unlock()
	if err := later.Wait(); err != nil {
		t.Fatalf("Wait once the backend answers: %v", err)
	}
	select {
	case <-first.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the first write never became durable")
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("Wait on the first write once durable: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data["a/1"] != "one" || b.data["a/2"] != "two" {
		t.Fatalf("backend holds %v", b.data)
	}
}

// TestKernelCommitsAfterReusingTheDirtySet: the dirty set's map and its
// record names are reused from one commit to the next (reuseDirty); a
// record marked again after a commit, by a small or a bulk change, is in
// the next commit with its latest value, and a bulk change's set is not
// kept.
func TestKernelCommitsAfterReusingTheDirtySet(t *testing.T) {
	b := &memBackend{data: map[string]string{}}
	k := New(b, zap.NewNop())
	vals := map[string]string{}
	k.Register(Kind{Prefix: "r/", Snapshot: func(key string) any {
		if v, ok := vals[key]; ok {
			return v
		}
		return nil
	}})
	k.Start()
	defer k.Close()
	set := func(n int, v string) {
		t.Helper()
		k.Lock()
		var batch *Batch
		for i := range n {
			id := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
			vals["r/"+id] = v
			batch = k.MarkDirtyAt("r/", id)
		}
		k.Unlock()
		if err := batch.Wait(); err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		for key, want := range vals {
			if b.data[key] != want {
				t.Fatalf("%s = %q after the commit, want %q", key, b.data[key], want)
			}
		}
	}
	set(3, "one")
	set(3, "two")
	set(reuseDirty*2, "bulk")
	k.Lock()
	if len(k.names) != 0 {
		t.Errorf("a bulk change's %d names are kept", len(k.names))
	}
	k.Unlock()
	set(5, "three")
	set(reuseDirty*2, "four")
}
