package storage

import "testing"

// TestBYOKCredits checks the platform's own part of a BYOK request: held
// against the balance although the rest is KeyOnly, released with the
// reservation, and charged to usage while the rest lands in byok_usage.
func TestBYOKCredits(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountPersonal})
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
	held := func() LedgerView {
		var seen LedgerView
		_, _ = reserveIf(s, a.ID, k.Hash, Holds{}, func(v LedgerView) error { seen = v; return errRefused })
		return seen
	}
	res, err := s.Reserve(a.ID, k.Hash, Holds{Hold: 100, KeyOnly: true, Credits: 30})
	if err != nil {
		t.Fatal(err)
	}
	if v := held(); v.AccountHeld != 30 || v.KeyHeld != 100 {
		t.Fatalf("held: account %s key %s", v.AccountHeld, v.KeyHeld)
	}
	if err := s.Release(res); err != nil {
		t.Fatal(err)
	}
	if v := held(); v.AccountHeld != 0 || v.KeyHeld != 0 {
		t.Fatalf("after release: account %s key %s", v.AccountHeld, v.KeyHeld)
	}
	res, _ = s.Reserve(a.ID, k.Hash, Holds{Hold: 100, KeyOnly: true, Credits: 30})
	if err := s.Settle(res, Charge{Cost: 70, BYOK: true, Credits: 25}); err != nil {
		t.Fatal(err)
	}
	acct, _ := s.Account(a.ID)
	key, _ := s.APIKey(k.Hash)
	if acct.Usage != 25 || acct.BYOKUsage != 45 || key.Usage.Total != 25 || key.BYOKUsage.Total != 45 {
		t.Fatalf("account %+v key %+v", acct, key)
	}
	if v := held(); v.AccountHeld != 0 || v.KeyHeld != 0 {
		t.Fatalf("after settle: account %s key %s", v.AccountHeld, v.KeyHeld)
	}
}
