package storage

import (
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/testkit/redistest"
)

// A replica whose memory has not yet seen another replica's demotion or
// deactivation of a member still answers CurrentMember with it.
func TestCurrentMemberSeesAnotherReplicasChangeAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	a, b := openSharedReplica(t, srv, "cm:"), openSharedReplica(t, srv, "cm:")
	acct, err := a.CreateAccount(NewAccount{Name: "Org", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	m, err := a.CreateMember(NewMember{AccountID: acct.ID, Email: "ada@example.com", Role: RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "member at B", func() bool { _, ok := b.Member(acct.ID, m.ID); return ok })
	// B stops following the feed: its memory keeps the admin.
	b.stopFollowing()
	role := RoleMember
	if _, err := a.UpdateMember(acct.ID, m.ID, MemberUpdate{Role: &role}); err != nil {
		t.Fatal(err)
	}
	if mem, _ := b.Member(acct.ID, m.ID); mem.Role != RoleAdmin {
		t.Fatalf("B's memory already has role %s: the test proves nothing", mem.Role)
	}
	got, ok, err := b.CurrentMember(acct.ID, m.ID)
	if err != nil || !ok || got.Role != RoleMember || !got.Active {
		t.Fatalf("demoted at A, B's CurrentMember: %+v %v %v", got, ok, err)
	}
	if _, err := a.DeactivateMember(acct.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.CurrentMember(acct.ID, m.ID); err != nil || !ok || got.Active {
		t.Fatalf("deactivated at A, B's CurrentMember: %+v %v %v", got, ok, err)
	}
}

// OnMemberDeactivated hears a deactivation however it is made (an
// update, SCIM's PutMember), once, and not a role change.
func TestOnMemberDeactivatedHearsEveryDeactivation(t *testing.T) {
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var heard []string
	s.OnMemberDeactivated(func(_, id string) { heard = append(heard, id) })
	acct, err := s.CreateAccount(NewAccount{Name: "Org", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := s.CreateMember(NewMember{AccountID: acct.ID, Email: "a@example.com", Role: RoleAdmin})
	m2, _ := s.CreateMember(NewMember{AccountID: acct.ID, Email: "b@example.com"})
	role := RoleMember
	if _, err := s.UpdateMember(acct.ID, m1.ID, MemberUpdate{Role: &role}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeactivateMember(acct.ID, m1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeactivateMember(acct.ID, m1.ID); err != nil { // already inactive
		t.Fatal(err)
	}
	s.k.Lock()
	cp := *s.members[acct.ID][m2.ID]
	cp.Active = false
	b := s.Locked().PutMember(&cp)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 2 || heard[0] != m1.ID || heard[1] != m2.ID {
		t.Fatalf("heard %v", heard)
	}
}
