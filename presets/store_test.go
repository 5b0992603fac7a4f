package presets

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

func openDir(t *testing.T, dir string) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func account(t *testing.T, st *storage.Store) storage.Account {
	t.Helper()
	a, err := st.CreateAccount(storage.NewAccount{Name: "acme", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func str(s string) *string { return &s }

// Each Put is a new version, the last designated; the versions and the
// preset are read back after the database is opened again.
func TestPutVersionsAndReopen(t *testing.T) {
	dir := t.TempDir()
	st := openDir(t, dir)
	a := account(t, st)
	s := StoreOf(st)
	v, created, err := s.Put(a.ID, "triage", NewVersion{CreatorID: "k1", SystemPrompt: str("Be brief."), Config: `{"model":"m1"}`})
	if err != nil || !created || v.Versions != 1 || v.Designated.Version != 1 || v.WorkspaceID != a.DefaultWorkspaceID || v.Name != "triage" {
		t.Fatalf("first put: %+v created=%v err=%v", v, created, err)
	}
	v2, created, err := s.Put(a.ID, "triage", NewVersion{CreatorID: "k1", Config: `{"model":"m2"}`})
	if err != nil || created || v2.Versions != 2 || v2.Designated.Config != `{"model":"m2"}` || v2.ID != v.ID {
		t.Fatalf("second put: %+v created=%v err=%v", v2, created, err)
	}
	if _, err := s.Update(a.ID, "triage", Details{Name: str("Triage"), Status: str("disabled")}); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openDir(t, dir)
	defer st.Close()
	s = StoreOf(st)
	got, ok := s.Get(a.ID, "triage")
	if !ok || got.Name != "Triage" || got.Status != "disabled" || got.StatusUpdatedAt == nil || got.Versions != 2 || got.Designated.Version != 2 {
		t.Fatalf("reopened: %+v", got)
	}
	one, ok := s.Version(a.ID, "triage", 1)
	if !ok || one.Config != `{"model":"m1"}` || one.SystemPrompt == nil || *one.SystemPrompt != "Be brief." || one.PresetID != got.ID {
		t.Fatalf("version 1: %+v", one)
	}
	vs, total, err := s.Versions(a.ID, "triage", 1, 10)
	if err != nil || total != 2 || len(vs) != 1 || vs[0].Version != 2 {
		t.Fatalf("versions page: %+v %d %v", vs, total, err)
	}
	if _, ok := s.Version(a.ID, "triage", 3); ok {
		t.Fatal("version 3 exists")
	}
	if _, ok := s.Get("another", "triage"); ok {
		t.Fatal("another account sees the preset")
	}
}

func TestSlugsChecked(t *testing.T) {
	st := openDir(t, t.TempDir())
	defer st.Close()
	a := account(t, st)
	for _, slug := range []string{"", "Upper", "-lead", "a b", "a/b", string(make([]byte, 65))} {
		if _, _, err := StoreOf(st).Put(a.ID, slug, NewVersion{Config: "{}"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("slug %q: %v, want ErrInvalid", slug, err)
		}
	}
}

// Writers racing on one preset each get a version of their own or a
// conflict: no version is written twice or lost.
func TestConcurrentPutsOneReplica(t *testing.T) {
	st := openDir(t, t.TempDir())
	defer st.Close()
	a := account(t, st)
	racePuts(t, a.ID, StoreOf(st), StoreOf(st))
}

// On Redis, replicas see each other's presets and versions, and two
// replicas never both write one version number.
func TestSharedReplicas(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *storage.Store {
		st, err := storage.Open(storage.Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "presets:"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b := open(), open()
	acct := account(t, a)
	until := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("%s: not within 2s", what)
			}
		}
	}
	if _, _, err := StoreOf(a).Put(acct.ID, "shared", NewVersion{Config: `{"model":"m1"}`}); err != nil {
		t.Fatal(err)
	}
	until("B sees the preset", func() bool { v, ok := StoreOf(b).Get(acct.ID, "shared"); return ok && v.Versions == 1 })
	if _, _, err := StoreOf(b).Put(acct.ID, "shared", NewVersion{Config: `{"model":"m2"}`}); err != nil {
		t.Fatal(err)
	}
	until("A sees B's version", func() bool { v, ok := StoreOf(a).Get(acct.ID, "shared"); return ok && v.Versions == 2 })
	if _, err := StoreOf(a).Update(acct.ID, "shared", Details{Status: str("archived")}); err != nil {
		t.Fatal(err)
	}
	until("B sees the status", func() bool { v, _ := StoreOf(b).Get(acct.ID, "shared"); return v.Status == "archived" })
	racePuts(t, acct.ID, StoreOf(a), StoreOf(b))
	until("both replicas agree", func() bool {
		va, _ := StoreOf(a).Get(acct.ID, "race")
		vb, _ := StoreOf(b).Get(acct.ID, "race")
		return va.Versions == vb.Versions && va.Designated.ID == vb.Designated.ID
	})
}

// racePuts has writers on x and y put versions of one preset at once, and
// checks that each success got a distinct version that is stored.
func racePuts(t *testing.T, accountID string, x, y *Store) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	won := map[int]string{}
	for i := range 16 {
		s := x
		if i%2 == 1 {
			s = y
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				v, _, err := s.Put(accountID, "race", NewVersion{Config: "{}"})
				if errors.Is(err, ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := won[v.Designated.Version]; dup {
					t.Errorf("version %d written twice (%s, %s)", v.Designated.Version, prev, v.Designated.ID)
				}
				won[v.Designated.Version] = v.Designated.ID
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(won) == 0 {
		t.Fatal("no put succeeded")
	}
	for n, id := range won {
		for start := time.Now(); ; time.Sleep(2 * time.Millisecond) {
			if v, ok := x.Version(accountID, "race", n); ok {
				if v.ID != id {
					t.Fatalf("version %d is %s, the writer got %s", n, v.ID, id)
				}
				break
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("version %d lost", n)
			}
		}
	}
}
