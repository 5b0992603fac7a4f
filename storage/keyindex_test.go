package storage

import (
	"fmt"
	"sync"
	"testing"
)

// visits runs read and returns how many records it walked.
func visits(s *Store, read func()) uint64 {
	before := s.k.Visits()
	read()
	return s.k.Visits() - before
}

// TestAccountReadsWalkTheAccountOnly fills a gateway with many accounts,
// each with its keys, management keys, workspaces, members, guardrails and
// end users, and checks that reading one small account's records walks
// that account's records only, however many the others hold.
func TestAccountReadsWalkTheAccountOnly(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill := func(n, keys int) Account {
		var last Account
		for i := range n {
			a, err := s.CreateAccount(NewAccount{Name: fmt.Sprint("acct", i), Kind: AccountOrganization})
			if err != nil {
				t.Fatal(err)
			}
			for j := range keys {
				if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: fmt.Sprint("k", j)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, _, err := s.CreateManagementKey(NewManagementKey{AccountID: a.ID, Name: "m"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateEndUser(a.ID, "u1", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateMember(NewMember{AccountID: a.ID, Email: "x@example.com"}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateGuardrail(a.ID, func(g *Guardrail) error { g.Name = "g"; return nil }); err != nil {
				t.Fatal(err)
			}
			last = a
		}
		return last
	}
	reads := func(a Account) map[string]func() {
		return map[string]func(){
			"keys":       func() { s.ListAPIKeys(KeyFilter{AccountID: a.ID, IncludeDisabled: true, Limit: 100}) },
			"mgmt keys":  func() { s.ManagementKeys(a.ID) },
			"workspaces": func() { s.Workspaces(a.ID) },
			"members":    func() { s.Members(a.ID) },
			"guardrails": func() { s.Guardrails(a.ID, "") },
			"end users":  func() { s.ListEndUsers(a.ID) },
			"byok":       func() { s.ListBYOK(BYOKFilter{AccountID: a.ID}) },
			"dests":      func() { s.ListDestinations(a.ID, "", 0, 100) },
			"endpoints":  func() { s.ListPrivateEndpoints(a.ID, 0, 100) },
			"creators":   func() { s.KeyCreators(a.ID) },
		}
	}
	small := fill(1, 5)
	want := map[string]uint64{}
	for name, read := range reads(small) {
		want[name] = visits(s, read)
	}
	if want["keys"] != 5 || want["mgmt keys"] != 1 || want["end users"] != 1 {
		t.Fatalf("visits of a small account: %v", want)
	}
	fill(300, 20) // 6,000 more keys, 300 of each other record
	for name, read := range reads(small) {
		if got := visits(s, read); got != want[name] {
			t.Errorf("%s: %d records walked with 300 other accounts, %d without", name, got, want[name])
		}
	}
	big := fill(1, 500)
	if got := visits(s, func() { s.ListAPIKeys(KeyFilter{AccountID: big.ID, Limit: 100}) }); got != 100 {
		t.Errorf("the first page of 500 keys walked %d keys, want 100", got)
	}
}

// TestListAPIKeysStableUnderCreates pages through an account's keys while
// others are created: every key that existed when paging began is listed,
// newest first, and none twice on one page.
func TestListAPIKeysStableUnderCreates(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	var before []string
	for range 250 {
		k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, k.Hash)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "new"}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	seen := map[string]bool{}
	for off := 0; !seen[before[0]]; off += 50 {
		page := s.ListAPIKeys(KeyFilter{AccountID: a.ID, Offset: off, Limit: 50})
		if len(page) == 0 {
			break
		}
		for i, k := range page {
			if i > 0 && k.Seq >= page[i-1].Seq {
				t.Fatalf("page at %d not newest first", off)
			}
			seen[k.Hash] = true
		}
	}
	close(stop)
	wg.Wait()
	for _, h := range before {
		if !seen[h] {
			t.Fatalf("key %s created before paging was never listed", h)
		}
	}
}

// TestKeyIndexAfterReopen checks the account index rebuilt from disk: the
// list is newest first although the scan reads keys in hash order, and a
// deleted key is gone from it.
func TestKeyIndexAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	var hashes []string
	for range 40 {
		k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, k.Hash)
	}
	if err := s.DeleteAPIKey(hashes[7]); err != nil {
		t.Fatal(err)
	}
	m, _, _ := s.CreateManagementKey(NewManagementKey{AccountID: a.ID, Name: "m"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	page := s.ListAPIKeys(KeyFilter{AccountID: a.ID, Limit: 100})
	if len(page) != 39 {
		t.Fatalf("%d keys after reopen, want 39", len(page))
	}
	want := append(append([]string{}, hashes[:7]...), hashes[8:]...)
	for i, k := range page {
		if k.Hash != want[len(want)-1-i] {
			t.Fatalf("key %d after reopen is %s, want %s", i, k.Hash, want[len(want)-1-i])
		}
	}
	if got := s.ManagementKeys(a.ID); len(got) != 1 || got[0].Hash != m.Hash {
		t.Fatalf("management keys after reopen: %v", got)
	}
	if err := s.DeleteAPIKey(page[0].Hash); err != nil {
		t.Fatal(err)
	}
	if n := len(s.ListAPIKeys(KeyFilter{AccountID: a.ID, Limit: 100})); n != 38 {
		t.Fatalf("%d keys after a delete, want 38", n)
	}
}
