package storage

import (
	"testing"
	"time"
)

func TestSubscribeGenerations(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	acct, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	key, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	var got []string
	cancel := s.SubscribeGenerations(func(g Generation) { got = append(got, g.ID) })
	settle := func(id string) {
		res, err := s.Reserve(acct.ID, key.Hash, Holds{Hold: 1})
		if err != nil {
			t.Fatal(err)
		}
		g := &Generation{ID: id, AccountID: acct.ID, KeyHash: key.Hash, CreatedAt: time.Now()}
		if err := s.Settle(res, Charge{Cost: 1, Generation: g}); err != nil {
			t.Fatal(err)
		}
	}
	settle("gen-1")
	cancel()
	settle("gen-2")
	if len(got) != 1 || got[0] != "gen-1" {
		t.Fatalf("subscriber saw %v, want [gen-1] (nothing after cancel)", got)
	}
}
