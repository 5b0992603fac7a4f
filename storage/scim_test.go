package storage

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func wsMembers(t *testing.T, s *Store, accountID, ws string) map[string]MemberRole {
	t.Helper()
	ms, _, err := s.WorkspaceMembers(accountID, ws)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]MemberRole{}
	for _, m := range ms {
		out[m.UserID] = m.Role
	}
	return out
}

func runJob(t *testing.T, s *Store, accountID string) SCIMSyncJob {
	t.Helper()
	j, err := s.CreateSCIMSyncJob(accountID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != SyncQueued || j.SyncedGroups != nil {
		t.Fatalf("new job %+v", j)
	}
	done, err := s.RunSCIMSyncJob(accountID, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunSCIMSyncJob(accountID, j.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a job runs once: %v", err)
	}
	return done
}

func counts(j SCIMSyncJob) string {
	return fmt.Sprintf("synced=%d deleted=%d added=%d updated=%d removed=%d kept=%d",
		*j.SyncedGroups, *j.DeletedGroups, *j.Added, *j.Updated, *j.Removed, *j.Kept)
}

func TestSCIMTokenHashedAndRotated(t *testing.T) {
	dir := t.TempDir()
	s, acct, _, _ := newOrgStore(t, dir)
	secret, tok, err := s.RotateSCIMToken(acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Hash != HashSecret(secret) || tok.Label == secret {
		t.Fatalf("token record %+v", tok)
	}
	if a, ok := s.SCIMAccount(secret); !ok || a.ID != acct.ID {
		t.Fatal("token does not resolve")
	}
	second, _, err := s.RotateSCIMToken(acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.SCIMAccount(secret); ok {
		t.Fatal("rotated token still valid")
	}
	s.Close()
	s = openTemp(t, dir)
	defer s.Close()
	if a, ok := s.SCIMAccount(second); !ok || a.ID != acct.ID {
		t.Fatal("token lost on reopen")
	}
	// Only the hash is on disk.
	_ = s.k.Scan("", func(key, v []byte) (bool, error) {
		if string(v) != "" && contains(string(v), second) {
			t.Errorf("the SCIM token is stored in %q", key)
		}
		return true, nil
	})
	if err := s.RevokeSCIMToken(acct.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.SCIMAccount(second); ok {
		t.Fatal("revoked token still valid")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// The sync rules: mapped members join with the mapping's role (admin wins),
// hand-added memberships are never touched, a member who left is removed
// unless it has keys there, deleted groups' mappings go; and all of it
// survives a reopen.
func TestSCIMSyncRules(t *testing.T) {
	dir := t.TempDir()
	s, acct, admin, manual := newOrgStore(t, dir)
	a := acct.ID
	user := func(email string) string {
		u, err := s.ProvisionSCIMUser(a, SCIMUserInput{UserName: email, Email: email, Active: true})
		if err != nil {
			t.Fatal(err)
		}
		return u.ID
	}
	bob, cat, dan := user("bob@example.com"), user("cat@example.com"), user("dan@example.com")
	if _, err := s.ProvisionSCIMUser(a, SCIMUserInput{UserName: "x", Email: "bob@example.com", Active: true}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate user: %v", err)
	}
	if _, err := s.ProvisionSCIMUser(a, SCIMUserInput{UserName: "BOB@example.com", Email: "other@example.com", Active: true}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate userName: %v", err)
	}
	if _, err := s.ProvisionSCIMUser(a, SCIMUserInput{UserName: "eve", Active: true}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no email: %v", err)
	}
	// A deprovisioned user is hidden; provisioning its email again brings
	// the same member back.
	eve := user("eve@example.com")
	if err := s.DeleteSCIMUser(a, eve); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.SCIMUser(a, eve); ok {
		t.Fatal("a deleted SCIM user is still shown")
	}
	if m, _ := s.Member(a, eve); m.Active {
		t.Fatal("a deleted SCIM user is still active")
	}
	if again := user("eve@example.com"); again != eve {
		t.Fatalf("reprovisioned %s, want %s", again, eve)
	}
	eng, err := s.CreateSCIMGroup(a, "Engineering", nil, []string{bob, cat, manual.ID})
	if err != nil {
		t.Fatal(err)
	}
	leads, err := s.CreateSCIMGroup(a, "Leads", nil, []string{cat})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSCIMGroup(a, "engineering", nil, nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate group name: %v", err)
	}
	if _, err := s.CreateSCIMGroup(a, "X", nil, []string{"user_nobody"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown member: %v", err)
	}
	ws, _ := s.CreateWorkspace(a, func(w *Workspace) { w.Name, w.Slug = "R", "r" })
	if _, err := s.AddWorkspaceMembers(a, ws.ID, []string{manual.ID}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateSCIMGroupMapping(a, eng.ID, acct.DefaultWorkspaceID, RoleMember); !errors.Is(err, ErrInvalid) {
		t.Fatalf("mapping the default workspace: %v", err)
	}
	m1, added, err := s.CreateSCIMGroupMapping(a, eng.ID, "r", RoleMember)
	if err != nil || added != 2 {
		t.Fatalf("mapping: %v, added %d", err, added)
	}
	if _, _, err := s.CreateSCIMGroupMapping(a, leads.ID, ws.ID, RoleAdmin); err != nil {
		t.Fatal(err)
	}
	j := runJob(t, s, a)
	if got := counts(j); got != "synced=2 deleted=0 added=0 updated=1 removed=0 kept=0" {
		t.Fatalf("first job %s", got)
	}
	want := fmt.Sprint(map[string]MemberRole{bob: RoleMember, cat: RoleAdmin, manual.ID: RoleMember})
	if got := fmt.Sprint(wsMembers(t, s, a, ws.ID)); got != want {
		t.Fatalf("members %s, want %s", got, want)
	}

	// Bob has a key in the workspace; Bob, Cat and the manual member leave
	// Engineering, Dan joins; Leads is deleted.
	if _, _, err := s.CreateAPIKey(NewAPIKey{AccountID: a, Name: "k", WorkspaceID: ws.ID, CreatorUserID: &bob}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateSCIMGroup(a, eng.ID, func(g *SCIMGroup) error {
		g.Members = map[string]bool{dan: true}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSCIMGroup(a, leads.ID); err != nil {
		t.Fatal(err)
	}
	j = runJob(t, s, a)
	if got := counts(j); got != "synced=1 deleted=1 added=1 updated=0 removed=1 kept=1" {
		t.Fatalf("second job %s", got)
	}
	want = fmt.Sprint(map[string]MemberRole{bob: RoleMember, dan: RoleMember, manual.ID: RoleMember})
	if got := fmt.Sprint(wsMembers(t, s, a, ws.ID)); got != want {
		t.Fatalf("members %s, want %s", got, want)
	}
	if n := len(s.SCIMGroupMappings(a)); n != 1 {
		t.Fatalf("mappings %d", n)
	}

	// Deactivating a user (SCIM active=false) removes it everywhere; the
	// next job neither re-adds it nor counts it.
	d, _ := s.SCIMUser(a, dan)
	in := SCIMUserInput{UserName: d.UserName, Email: d.Email, Active: false}
	if _, err := s.ReplaceSCIMUser(a, dan, in); err != nil {
		t.Fatal(err)
	}
	if _, in := wsMembers(t, s, a, ws.ID)[dan]; in {
		t.Fatal("deactivated member still in the workspace")
	}
	s.Close()

	// Everything survives a reopen.
	s = openTemp(t, dir)
	defer s.Close()
	if u, ok := s.SCIMUser(a, dan); !ok || u.Active {
		t.Fatalf("deactivated SCIM user after reopen: %+v %v", u, ok)
	}
	if g, ok := s.SCIMGroup(a, eng.ID); !ok || !g.Members[dan] {
		t.Fatalf("group after reopen: %+v", g)
	}
	if got := counts(runJob(t, s, a)); got != "synced=1 deleted=0 added=0 updated=0 removed=0 kept=1" {
		t.Fatalf("job after reopen %s", got)
	}
	if j2, ok := s.SCIMSyncJob(a, j.ID); !ok || j2.Status != SyncSucceeded || counts(j2) != counts(j) {
		t.Fatalf("job record after reopen %+v", j2)
	}
	// keep_members=true leaves the granted memberships as manual ones.
	if n, err := s.DeleteSCIMGroupMapping(a, m1.ID, true); err != nil || n != 0 {
		t.Fatalf("delete mapping: %d %v", n, err)
	}
	if got := counts(runJob(t, s, a)); got != "synced=0 deleted=0 added=0 updated=0 removed=0 kept=0" {
		t.Fatalf("job without mappings %s", got)
	}
	if got := len(wsMembers(t, s, a, ws.ID)); got != 2 {
		t.Fatalf("members kept: %d", got)
	}
	_ = admin
}

// A job interrupted before its commit is reported failed after a restart.
func TestSCIMInterruptedJobFails(t *testing.T) {
	dir := t.TempDir()
	s, acct, _, _ := newOrgStore(t, dir)
	j, err := s.CreateSCIMSyncJob(acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTemp(t, dir)
	defer s.Close()
	got, ok := s.SCIMSyncJob(acct.ID, j.ID)
	if !ok || got.Status != SyncFailed || got.ErrorMessage == nil || got.FinishedAt == nil {
		t.Fatalf("interrupted job %+v", got)
	}
}

// Concurrent group changes and sync jobs: the memberships always end equal
// to the final group, and every job's counts add up to it.
func TestSCIMConcurrentSyncs(t *testing.T) {
	s, acct, _, _ := newOrgStore(t, t.TempDir())
	defer s.Close()
	a := acct.ID
	var users []string
	for i := range 20 {
		e := fmt.Sprintf("u%d@example.com", i)
		u, err := s.ProvisionSCIMUser(a, SCIMUserInput{UserName: e, Email: e, Active: true})
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, u.ID)
	}
	// Every fourth user starts in the group and leaves it; the others join.
	var initial []string
	for i, u := range users {
		if i%4 == 0 {
			initial = append(initial, u)
		}
	}
	g, _ := s.CreateSCIMGroup(a, "G", nil, initial)
	ws, _ := s.CreateWorkspace(a, func(w *Workspace) { w.Name, w.Slug = "R", "r" })
	_, net, err := s.CreateSCIMGroupMapping(a, g.ID, ws.ID, RoleMember)
	if err != nil || net != 5 {
		t.Fatalf("mapping: %v, added %d", err, net)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, u := range users {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := s.UpdateSCIMGroup(a, g.ID, func(g *SCIMGroup) error {
				if i%4 == 0 {
					delete(g.Members, u)
				} else {
					g.Members[u] = true
				}
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			j := runJob(t, s, a)
			mu.Lock()
			net += *j.Added - *j.Removed
			mu.Unlock()
		}()
	}
	wg.Wait()
	j := runJob(t, s, a)
	net += *j.Added - *j.Removed
	got := wsMembers(t, s, a, ws.ID)
	if len(got) != 15 || net != 15 {
		t.Fatalf("members %d, net added %d; want 15", len(got), net)
	}
}
