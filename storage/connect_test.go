package storage

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

func openConnectTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newCode(t *testing.T, s *Store, acct Account, ttl time.Duration) (ConnectCode, string) {
	t.Helper()
	c, code, err := s.CreateConnectCode(NewConnectCode{
		AccountID: acct.ID, UserID: acct.OwnerUserID, ChallengeS256: "challenge", Method: "S256",
		CallbackURL: "https://app.example/cb", App: ConnectApp{ID: 7, Name: "app.example", Origin: "https://app.example"},
		KeyName: "app.example", TTL: ttl,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, code
}

// consumeRace consumes one code from every store at once, n times each,
// and returns how many calls got it.
func consumeRace(t *testing.T, hash string, stores ...*Store) int {
	t.Helper()
	var mu sync.Mutex
	won := 0
	var wg sync.WaitGroup
	for _, s := range stores {
		for range 8 {
			wg.Go(func() {
				_, err := s.ConsumeConnectCode(hash)
				switch {
				case err == nil:
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, ErrNotFound):
					t.Errorf("consume: %v", err)
				}
			})
		}
	}
	wg.Wait()
	return won
}

// A code is handed out once, among concurrent calls; it is stored by
// its hash only; an expired one is consumed and reported; expired codes
// are swept as new ones are issued.
func TestConnectCodeIsConsumedOnce(t *testing.T) {
	s := openConnectTest(t)
	acct, _ := s.CreateAccount(NewAccount{Name: "P", Kind: AccountPersonal})
	c, code := newCode(t, s, acct, time.Minute)
	if c.Hash != HashSecret(code) || c.Hash == code || len(code) != len(CodeIDPrefix)+64 {
		t.Fatalf("code %q, hash %q", code, c.Hash)
	}
	if won := consumeRace(t, c.Hash, s); won != 1 {
		t.Fatalf("the code was handed out %d times", won)
	}
	if _, err := s.ConsumeConnectCode(c.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reused: %v", err)
	}

	old, _ := newCode(t, s, acct, time.Nanosecond)
	if _, err := s.ConsumeConnectCode(old.Hash); !errors.Is(err, ErrCodeExpired) {
		t.Fatalf("expired: %v", err)
	}
	if _, err := s.ConsumeConnectCode(old.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired, again: %v", err)
	}

	stale, _ := newCode(t, s, acct, time.Minute)
	at := time.Now().Add(time.Minute + codeSweepGrace)
	prev := now
	now = func() time.Time { return at }
	defer func() { now = prev }()
	newCode(t, s, acct, time.Minute)
	if n := s.ConnectCodes(); n != 1 {
		t.Fatalf("%d codes after the sweep; want the new one", n)
	}
	if _, err := s.ConsumeConnectCode(stale.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("swept: %v", err)
	}
}

// Codes are for the account's users, in workspaces they belong to.
func TestConnectCodeNeedsAMember(t *testing.T) {
	s := openConnectTest(t)
	org, _ := s.CreateAccount(NewAccount{Name: "O", Kind: AccountOrganization})
	m, err := s.CreateMember(NewMember{AccountID: org.ID, Email: "m@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := s.CreateWorkspace(org.ID, func(w *Workspace) { w.Name, w.Slug = "Other", "other" })
	if err != nil {
		t.Fatal(err)
	}
	base := NewConnectCode{AccountID: org.ID, ChallengeS256: "c", Method: "S256", CallbackURL: "https://a.example/", TTL: time.Minute}
	for _, tc := range []struct {
		user, ws string
		want     error
	}{
		{"user_nobody", "", ErrForbidden},
		{m.ID, ws.ID, ErrForbidden},
		{m.ID, "no-such-workspace", ErrNotFound},
		{m.ID, "", nil},
	} {
		n := base
		n.UserID, n.WorkspaceID = tc.user, tc.ws
		if _, _, err := s.CreateConnectCode(n); !errors.Is(err, tc.want) {
			t.Errorf("user %s workspace %q: %v, want %v", tc.user, tc.ws, err, tc.want)
		}
	}
}

// Across replicas on one Redis: every replica holds the code, exactly one
// call among all of theirs gets it, and the others drop it.
func TestSharedConnectCodeIsConsumedOnce(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openSharedReplica(t, srv, "cc:"), openSharedReplica(t, srv, "cc:")
	acct, _ := a.CreateAccount(NewAccount{Name: "P", Kind: AccountPersonal})
	for round := range 5 {
		c, _ := newCode(t, a, acct, time.Minute)
		eventually(t, time.Second, "the code reaches B", func() bool { return b.ConnectCodes() == 1 })
		if won := consumeRace(t, c.Hash, a, b); won != 1 {
			t.Fatalf("round %d: the code was handed out %d times", round, won)
		}
		for _, r := range []*Store{a, b} {
			eventually(t, time.Second, "the code leaves every replica", func() bool { return r.ConnectCodes() == 0 })
		}
	}
	// A code the feed has not brought yet is read from Redis.
	c, _ := newCode(t, a, acct, time.Minute)
	got, err := b.ConsumeConnectCode(c.Hash)
	if err != nil || got.UserID != acct.OwnerUserID {
		t.Fatalf("consumed at B: %+v %v", got, err)
	}
	if _, err := a.ConsumeConnectCode(c.Hash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("reused at A: %v", err)
	}
}
