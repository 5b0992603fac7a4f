package storage

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func testSealer(t *testing.T, fill byte) *Sealer {
	t.Helper()
	s, err := NewSealer(bytes.Repeat([]byte{fill}, SealerKeySize))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSealerRoundTripAndTamper(t *testing.T) {
	s := testSealer(t, 7)
	secret := []byte("sk-proj-0123456789abcdef")
	a := s.Seal(secret, []byte("id-1"))
	b := s.Seal(secret, []byte("id-1"))
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one secret are equal: the nonce is not random")
	}
	if bytes.Contains(a, secret) {
		t.Fatal("sealed value contains the plaintext")
	}
	got, err := s.Open(a, []byte("id-1"))
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// another record's id
	if _, err := s.Open(a, []byte("id-2")); !errors.Is(err, ErrUnseal) {
		t.Fatalf("open with another record id: %v", err)
	}
	// every single-bit flip is detected
	for i := range a {
		c := bytes.Clone(a)
		c[i] ^= 0x10
		if _, err := s.Open(c, []byte("id-1")); !errors.Is(err, ErrUnseal) {
			t.Fatalf("tampered byte %d opened: %v", i, err)
		}
	}
	for _, short := range [][]byte{nil, a[:1], a[:20]} {
		if _, err := s.Open(short, []byte("id-1")); !errors.Is(err, ErrUnseal) {
			t.Fatalf("truncated value opened: %v", err)
		}
	}
	// the wrong key fails
	if _, err := testSealer(t, 8).Open(a, []byte("id-1")); !errors.Is(err, ErrUnseal) {
		t.Fatalf("open with the wrong key: %v", err)
	}
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := NewSealer(make([]byte, n)); err == nil {
			t.Errorf("NewSealer accepted a %d-byte key", n)
		}
	}
}

func TestBYOKCRUD(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sealer := testSealer(t, 1)
	acct, _ := s.CreateAccount(NewAccount{Name: "a", Kind: AccountOrganization})
	other, _ := s.CreateAccount(NewAccount{Name: "b", Kind: AccountPersonal})

	name := "prod"
	c1, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "openai", Name: &name, Secret: "sk-openai-secret-000001"}, sealer)
	if err != nil {
		t.Fatal(err)
	}
	if c1.WorkspaceID != acct.DefaultWorkspaceID || c1.SortOrder != 0 || c1.Label != "sk-...0001" || *c1.Name != "prod" {
		t.Fatalf("created: %+v", c1)
	}
	c2, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "openai", Secret: "short-k2"}, sealer)
	if err != nil || c2.SortOrder != 1 || c2.Label != "...k2" {
		t.Fatalf("second credential: %+v %v", c2, err)
	}
	if _, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "mock", Secret: "x", WorkspaceID: other.DefaultWorkspaceID}, sealer); !errors.Is(err, ErrInvalid) {
		t.Fatalf("foreign workspace: %v", err)
	}
	if _, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "mock", Secret: "x"}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no sealer: %v", err)
	}
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: other.ID, Name: "k"})
	if _, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "mock", Secret: "x", AllowedAPIKeyHashes: []string{k.Hash}}, sealer); !errors.Is(err, ErrInvalid) {
		t.Fatalf("foreign key hash: %v", err)
	}

	// lookup: enabled, first in order, isolated per account
	got, ok := s.BYOKFor(acct.ID, "openai")
	if !ok || got.ID != c1.ID {
		t.Fatalf("BYOKFor = %+v %v", got, ok)
	}
	if secret, err := got.Open(sealer); err != nil || secret != "sk-openai-secret-000001" {
		t.Fatalf("Open = %q %v", secret, err)
	}
	if _, ok := s.BYOKFor(other.ID, "openai"); ok {
		t.Fatal("another account's credential was found")
	}
	if _, ok := s.BYOK(other.ID, c1.ID); ok {
		t.Fatal("BYOK across accounts")
	}
	if _, err := s.UpdateBYOK(acct.ID, c1.ID, func(c *Credential) error { c.Disabled = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.BYOKFor(acct.ID, "openai"); got.ID != c2.ID {
		t.Fatalf("disabled credential still chosen: %+v", got)
	}
	// a fallback comes after the others, an allowlist must admit the use
	fb, _ := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "mock", Secret: "fallback-key-1", IsFallback: true}, sealer)
	restricted, _ := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "mock", Secret: "restricted-key", AllowedModels: []string{"m1"}}, sealer)
	if got, _ := s.BYOKFor(acct.ID, "mock"); got.ID != fb.ID {
		t.Fatalf("restricted credential matched an unknown use: %+v", got)
	}
	if got, _ := s.BYOKForRequest(acct.ID, "mock", BYOKUse{WorkspaceID: acct.DefaultWorkspaceID, Model: "m1"}); got.ID != restricted.ID {
		t.Fatalf("non-fallback not preferred: %+v", got)
	}
	if got, _ := s.BYOKForRequest(acct.ID, "mock", BYOKUse{WorkspaceID: acct.DefaultWorkspaceID, Model: "m2"}); got.ID != fb.ID {
		t.Fatalf("allowlist ignored: %+v", got)
	}

	// rotation replaces the sealed key and label; identity is kept
	up, err := s.UpdateBYOK(acct.ID, c2.ID, func(c *Credential) error {
		c.SetSecret(sealer, "rotated-key-abcdefgh")
		c.Provider, c.AccountID, c.SortOrder = "evil", other.ID, 9
		return nil
	})
	if err != nil || up.Provider != "openai" || up.AccountID != acct.ID || up.SortOrder != 1 || up.Label != "rot...efgh" {
		t.Fatalf("update: %+v %v", up, err)
	}
	if secret, _ := up.Open(sealer); secret != "rotated-key-abcdefgh" {
		t.Fatalf("rotated secret = %q", secret)
	}

	list, total := s.ListBYOK(BYOKFilter{AccountID: acct.ID})
	if total != 4 || len(list) != 4 || list[0].ID != restricted.ID || list[3].ID != c1.ID {
		t.Fatalf("list: %d %+v", total, list)
	}
	list, total = s.ListBYOK(BYOKFilter{AccountID: acct.ID, Provider: "openai", Offset: 1, Limit: 5})
	if total != 2 || len(list) != 1 || list[0].ID != c1.ID {
		t.Fatalf("filtered page: %d %+v", total, list)
	}
	if err := s.DeleteBYOK(other.ID, c1.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete across accounts: %v", err)
	}
	if err := s.DeleteBYOK(acct.ID, c1.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.BYOK(acct.ID, c1.ID); ok {
		t.Fatal("deleted credential still there")
	}
}

func TestBYOKPersistsSealed(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	sealer := testSealer(t, 3)
	acct, _ := s.CreateAccount(NewAccount{Name: "a", Kind: AccountOrganization})
	const secret = "sk-live-PLAINTEXT-MUST-NEVER-HIT-DISK-4242"
	c, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "openai", Secret: secret}, sealer)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "mock", Secret: "deleted-key-123456"}, sealer)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBYOK(acct.ID, gone.ID); err != nil {
		t.Fatal(err)
	}
	// The records as stored (Badger may compress its tables on disk, so
	// the files alone could hide a plaintext secret from a byte scan).
	var stored int
	var sawID bool
	err = s.k.Scan("", func(key, v []byte) (bool, error) {
		stored++
		if bytes.Contains(v, []byte(secret)) || bytes.Contains(v, []byte("PLAINTEXT-MUST")) {
			t.Errorf("record %s holds the provider key in plaintext", key)
		}
		sawID = sawID || bytes.Contains(v, []byte(c.ID))
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if stored == 0 || !sawID {
		t.Fatalf("found no stored credential (%d records, id seen %v): the check would pass vacuously", stored, sawID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// And the files, write-ahead logs included.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("PLAINTEXT-MUST")) {
			t.Errorf("%s holds the provider key in plaintext", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	defer s.Close()
	got, ok := s.BYOKFor(acct.ID, "openai")
	if !ok || got.ID != c.ID || got.Label != c.Label || !got.CreatedAt.Equal(c.CreatedAt) {
		t.Fatalf("after reopen: %+v %v", got, ok)
	}
	if plain, err := got.Open(sealer); err != nil || plain != secret {
		t.Fatalf("Open after reopen = %q %v", plain, err)
	}
	if _, err := got.Open(testSealer(t, 4)); !errors.Is(err, ErrUnseal) {
		t.Fatalf("wrong key after reopen: %v", err)
	}
	if _, ok := s.BYOK(acct.ID, gone.ID); ok {
		t.Fatal("deleted credential came back")
	}
	// the sequence continues past loaded credentials
	c3, err := s.CreateBYOK(NewBYOK{AccountID: acct.ID, Provider: "openai", Secret: "another-key-xyz"}, sealer)
	if err != nil || c3.Seq <= c.Seq || c3.SortOrder != 1 {
		t.Fatalf("after reopen create: %+v %v", c3, err)
	}
}
