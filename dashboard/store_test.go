package dashboard

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

func openStore(t *testing.T) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func org(t *testing.T, st *storage.Store) (storage.Account, storage.Member, storage.Member) {
	t.Helper()
	a, err := st.CreateAccount(storage.NewAccount{Name: "Acme", Kind: storage.AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := st.CreateMember(storage.NewMember{AccountID: a.ID, Email: "ada@example.com", Role: storage.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	member, err := st.CreateMember(storage.NewMember{AccountID: a.ID, Email: "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return a, admin, member
}

func TestLinkSignsInOnceWithTheMembersRole(t *testing.T) {
	st := openStore(t)
	a, admin, member := org(t, st)
	ds := StoreOf(st)
	for _, c := range []struct {
		p    Principal
		role Role
	}{
		{Principal{AccountID: a.ID}, RoleOwner},
		{Principal{AccountID: a.ID, MemberID: admin.ID}, RoleAdmin},
		{Principal{AccountID: a.ID, MemberID: member.ID}, RoleMember},
		{Principal{Operator: true}, RoleOperator},
		// A role set by the caller is ignored: the member's decides.
		{Principal{AccountID: a.ID, MemberID: member.ID, Role: RoleAdmin}, RoleMember},
	} {
		token, link, err := ds.IssueLink(c.p, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if link.Principal.Role != c.role {
			t.Errorf("%+v: link role %q, want %q", c.p, link.Principal.Role, c.role)
		}
		p, err := ds.ConsumeLink(token)
		if err != nil || p.Role != c.role || p.Method != "link" {
			t.Fatalf("%+v: consume = %+v, %v", c.p, p, err)
		}
		if _, err := ds.ConsumeLink(token); !errors.Is(err, ErrLinkInvalid) {
			t.Fatalf("second use: %v, want ErrLinkInvalid", err)
		}
	}
}

func TestLinkRefusals(t *testing.T) {
	st := openStore(t)
	a, _, member := org(t, st)
	ds := StoreOf(st)
	for _, p := range []Principal{
		{},                                       // no account, not operator
		{AccountID: "org_nope"},                  // unknown account
		{AccountID: a.ID, MemberID: "user_nope"}, // unknown member
		{MemberID: member.ID, Operator: true},    // member without account
	} {
		if _, _, err := ds.IssueLink(p, time.Minute); err == nil {
			t.Errorf("IssueLink(%+v) succeeded", p)
		}
	}
	if _, _, err := ds.IssueLink(Principal{AccountID: a.ID}, 25*time.Hour); err == nil {
		t.Error("a link of 25h was issued")
	}
	for _, forged := range []string{"", "tgl_", "tgl_AAAA", "not-a-link", LinkPrefix + string(make([]byte, 200))} {
		if _, err := ds.ConsumeLink(forged); !errors.Is(err, ErrLinkInvalid) {
			t.Errorf("ConsumeLink(%q) = %v", forged, err)
		}
	}
	// Expired: refused as expired, and gone.
	token, _, err := ds.IssueLink(Principal{AccountID: a.ID}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := ds.ConsumeLink(token); !errors.Is(err, ErrLinkExpired) {
		t.Fatalf("expired link: %v", err)
	}
	if _, err := ds.ConsumeLink(token); !errors.Is(err, ErrLinkInvalid) {
		t.Fatalf("expired link, again: %v", err)
	}
	// A member deactivated after the link was issued cannot use it.
	now = time.Now
	token, _, err = ds.IssueLink(Principal{AccountID: a.ID, MemberID: member.ID}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeactivateMember(a.ID, member.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ds.ConsumeLink(token); !errors.Is(err, ErrLinkInvalid) {
		t.Fatalf("deactivated member's link: %v", err)
	}
}

// Many requests with one link at once: exactly one signs in.
func TestLinkConcurrentUseSignsInOnce(t *testing.T) {
	st := openStore(t)
	a, _, _ := org(t, st)
	ds := StoreOf(st)
	token, _, err := ds.IssueLink(Principal{AccountID: a.ID}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if _, err := ds.ConsumeLink(token); err == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d requests signed in with one link", wins.Load())
	}
}

// Two replicas on one Redis: a link is used once across both, and a
// session started on one is seen (and ended) on the other.
func TestSharedReplicasUseLinkOnceAndShareSessions(t *testing.T) {
	srv := redistest.Start(t)
	open := func() *storage.Store {
		st, err := storage.Open(storage.Options{Redis: &kernel.RedisOptions{Address: srv.Addr, KeyPrefix: "dash:"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	a, b := open(), open()
	acct, err := a.CreateAccount(storage.NewAccount{Name: "Acme", Kind: storage.AccountPersonal})
	if err != nil {
		t.Fatal(err)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for start := time.Now(); !cond(); time.Sleep(2 * time.Millisecond) {
			if time.Since(start) > 2*time.Second {
				t.Fatalf("%s: not within 2s", what)
			}
		}
	}
	until("account on b", func() bool { _, ok := b.Account(acct.ID); return ok })
	for round := range 5 {
		token, _, err := StoreOf(a).IssueLink(Principal{AccountID: acct.ID}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		until("link on b", func() bool {
			h := hashToken(token)
			b.Kernel().RLock()
			defer b.Kernel().RUnlock()
			_, ok := StoreOf(b).links[h]
			return ok
		})
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			ds := StoreOf(a)
			if i%2 == 1 {
				ds = StoreOf(b)
			}
			wg.Go(func() {
				if _, err := ds.ConsumeLink(token); err == nil {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d requests across two replicas signed in with one link", round, wins.Load())
		}
	}
	cookie, _, err := StoreOf(a).createSession(Principal{AccountID: acct.ID}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	until("session on b", func() bool { _, ok := StoreOf(b).session(cookie); return ok })
	if err := StoreOf(b).deleteSession(cookie); err != nil {
		t.Fatal(err)
	}
	until("sign-out on a", func() bool { _, ok := StoreOf(a).session(cookie); return !ok })
}

func TestSessionExpiresAndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.Open(storage.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.CreateAccount(storage.NewAccount{Name: "Solo", Kind: storage.AccountPersonal})
	if err != nil {
		t.Fatal(err)
	}
	cookie, rec, err := StoreOf(st).createSession(Principal{AccountID: a.ID}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Principal.Role != RoleOwner {
		t.Fatalf("role %q", rec.Principal.Role)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = storage.Open(storage.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := StoreOf(st).session(cookie); !ok {
		t.Fatal("session lost across a restart")
	}
	defer func(f func() time.Time) { now = f }(now)
	now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, ok := StoreOf(st).session(cookie); ok {
		t.Fatal("expired session still valid")
	}
}
