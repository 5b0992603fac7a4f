package storage

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func openTemp(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreKeysPersistAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, err := s.CreateAccount(NewAccount{Name: "Acme", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordPurchase(acct.ID, 10*money.AmountScale, "first"); err != nil {
		t.Fatal(err)
	}
	limit := money.Amount(5 * money.AmountScale)
	k, secret, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k1", Limit: &limit, LimitReset: money.IntervalDaily})
	if err != nil {
		t.Fatal(err)
	}
	if k.Hash != HashSecret(secret) || k.Label == secret || len(secret) != len(APIKeyPrefix)+64 {
		t.Fatalf("key identity: hash=%s label=%s", k.Hash, k.Label)
	}
	exp := time.Now().Add(time.Hour)
	m, msecret, err := s.CreateManagementKey(NewManagementKey{AccountID: acct.ID, Name: "ops", ExpiresAt: &exp})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	defer s.Close()
	p, err := s.Authenticate(secret)
	if err != nil || p.Management || p.Key.Name != "k1" || *p.Key.Limit != limit || p.Key.LimitReset != money.IntervalDaily {
		t.Fatalf("regular key after reopen: %+v, %v", p, err)
	}
	p, err = s.Authenticate(msecret)
	if err != nil || !p.Management || p.MgmtKey.Hash != m.Hash || p.MgmtKey.ExpiresAt == nil {
		t.Fatalf("management key after reopen: %+v, %v", p, err)
	}
	a, _ := s.Account(acct.ID)
	if a.CreditsPurchased != 10*money.AmountScale || a.Purchases != 1 || len(s.Purchases(acct.ID)) != 1 {
		t.Fatalf("account after reopen: %+v", a)
	}
	if _, err := s.Authenticate(secret + "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestStoreUpdateAndDeleteInvalidateLookup(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	acct, _ := s.CreateAccount(NewAccount{Name: "Solo", Kind: AccountPersonal})
	k, secret, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	if k.CreatorUserID == nil || *k.CreatorUserID != acct.ID {
		t.Fatalf("personal account keys are created by the owner: %v", k.CreatorUserID)
	}
	if _, err := s.UpdateAPIKey(k.Hash, func(k *APIKey) error { k.Disabled = true; k.Hash = "forged"; return nil }); err != nil {
		t.Fatal(err)
	}
	p, _ := s.Authenticate(secret)
	if !p.Key.Disabled || p.Key.Hash != k.Hash {
		t.Fatalf("update not visible or identity changed: %+v", p.Key)
	}
	abort := errors.New("abort")
	if _, err := s.UpdateAPIKey(k.Hash, func(k *APIKey) error { k.Name = "x"; return abort }); !errors.Is(err, abort) {
		t.Fatal(err)
	}
	if got, _ := s.APIKey(k.Hash); got.Name != "k" {
		t.Fatal("aborted update was applied")
	}
	if err := s.DeleteAPIKey(k.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(secret); !errors.Is(err, ErrNotFound) {
		t.Fatal("deleted key still authenticates")
	}
	if err := s.DeleteAPIKey(k.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatal("second delete must be ErrNotFound")
	}
}

func TestListAPIKeysPagesNewestFirst(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, _ := s.CreateAccount(NewAccount{Name: "A", Kind: AccountOrganization})
	b, _ := s.CreateAccount(NewAccount{Name: "B", Kind: AccountOrganization})
	var hashes []string
	for i := range 150 {
		k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k"})
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, k.Hash)
		if i%10 == 0 {
			_, _ = s.UpdateAPIKey(k.Hash, func(k *APIKey) error { k.Disabled = true; return nil })
		}
	}
	_, _, _ = s.CreateAPIKey(NewAPIKey{AccountID: b.ID, Name: "other"})

	page := s.ListAPIKeys(KeyFilter{AccountID: a.ID, IncludeDisabled: true, Limit: 100})
	if len(page) != 100 || page[0].Hash != hashes[149] || page[99].Hash != hashes[50] {
		t.Fatalf("first page: %d keys", len(page))
	}
	page = s.ListAPIKeys(KeyFilter{AccountID: a.ID, IncludeDisabled: true, Offset: 100, Limit: 100})
	if len(page) != 50 || page[49].Hash != hashes[0] {
		t.Fatalf("second page: %d keys", len(page))
	}
	if n := len(s.ListAPIKeys(KeyFilter{AccountID: a.ID})); n != 135 {
		t.Fatalf("enabled keys = %d, want 135", n)
	}
	if n := len(s.ListAPIKeys(KeyFilter{AccountID: a.ID, Offset: 1000})); n != 0 {
		t.Fatalf("past the end = %d", n)
	}
}

func TestCreateValidation(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateAccount(NewAccount{Name: "x", Kind: "team"}); !errors.Is(err, ErrInvalid) {
		t.Fatal("bad kind accepted")
	}
	a, _ := s.CreateAccount(NewAccount{Name: "x", Kind: AccountPersonal})
	past := time.Now().Add(-time.Second)
	if _, _, err := s.CreateManagementKey(NewManagementKey{AccountID: a.ID, Name: "m", ExpiresAt: &past}); !errors.Is(err, ErrInvalid) {
		t.Fatal("expired management key accepted")
	}
	if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a.ID, Name: "k", WorkspaceID: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Fatal("foreign workspace accepted")
	}
	if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: "user_missing", Name: "k"}); !errors.Is(err, ErrNotFound) {
		t.Fatal("missing account accepted")
	}
	if _, _, err := s.RecordPurchase(a.ID, 0, ""); !errors.Is(err, ErrInvalid) {
		t.Fatal("zero purchase accepted")
	}
}

// Each purchase fits an Amount, but their total must too: the second of two
// 5,000,000,000-credit purchases is refused and changes nothing.
func TestPurchaseTotalOverflowRefused(t *testing.T) {
	s := openTemp(t, t.TempDir())
	defer s.Close()
	a, err := s.CreateAccount(NewAccount{Name: "x", Kind: AccountPersonal})
	if err != nil {
		t.Fatal(err)
	}
	big := money.Amount(5_000_000_000 * money.AmountScale)
	if _, _, err := s.RecordPurchase(a.ID, big, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordPurchase(a.ID, big, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("overflowing purchase: %v", err)
	}
	got, _ := s.Account(a.ID)
	if got.CreditsPurchased != big || got.Purchases != 1 || len(s.Purchases(a.ID)) != 1 {
		t.Fatalf("total %s after %d purchases (%d listed)", got.CreditsPurchased, got.Purchases, len(s.Purchases(a.ID)))
	}
	// Up to the maximum exactly is fine.
	if _, acct, err := s.RecordPurchase(a.ID, money.MaxAmount-big, ""); err != nil || acct.CreditsPurchased != money.MaxAmount {
		t.Fatalf("purchase up to the maximum: %v, %s", err, acct.CreditsPurchased)
	}
}

// A key's hash is the hex SHA-256 of the secret: stored records and the
// shared backend's depend on it staying so.
func TestHashSecretIsHexSHA256(t *testing.T) {
	for secret, want := range map[string]string{
		"":    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	} {
		if got := HashSecret(secret); got != want {
			t.Errorf("HashSecret(%q) = %s, want %s", secret, got, want)
		}
	}
}
