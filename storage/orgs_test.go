package storage

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

func newOrgStore(t *testing.T, dir string) (*Store, Account, Member, Member) {
	t.Helper()
	s := openTemp(t, dir)
	acct, err := s.CreateAccount(NewAccount{Name: "Acme", Kind: AccountOrganization})
	if err != nil {
		t.Fatal(err)
	}
	first := "Ada"
	admin, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "Ada@Example.com", Role: RoleAdmin, FirstName: &first})
	if err != nil {
		t.Fatal(err)
	}
	member, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "mia@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return s, acct, admin, member
}

func TestMembersByEmailAndDeactivation(t *testing.T) {
	s, acct, admin, member := newOrgStore(t, t.TempDir())
	defer s.Close()
	if admin.Email != "ada@example.com" || member.Role != RoleMember || !member.Active {
		t.Fatalf("members: %+v %+v", admin, member)
	}
	if _, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "ADA@example.com"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate email: %v", err)
	}
	if _, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "not an email"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad email: %v", err)
	}
	personal, _ := s.CreateAccount(NewAccount{Name: "me", Kind: AccountPersonal})
	if _, err := s.CreateMember(NewMember{AccountID: personal.ID, Email: "x@example.com"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("member of a personal account: %v", err)
	}
	if got, ok := s.MemberByEmail(acct.ID, "MIA@example.com"); !ok || got.ID != member.ID {
		t.Fatalf("by email: %+v %v", got, ok)
	}
	if !s.IsOrgAdmin(acct.ID, admin.ID) || s.IsOrgAdmin(acct.ID, member.ID) {
		t.Fatal("IsOrgAdmin")
	}

	ws, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "R", "r" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddWorkspaceMembers(acct.ID, "r", []string{member.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeactivateMember(acct.ID, member.ID); err != nil {
		t.Fatal(err)
	}
	if ms := s.Members(acct.ID); len(ms) != 1 || ms[0].ID != admin.ID {
		t.Fatalf("active members: %+v", ms)
	}
	if ms, _, _ := s.WorkspaceMembers(acct.ID, ws.ID); len(ms) != 0 {
		t.Fatalf("a deactivated member stays in a workspace: %+v", ms)
	}
	if _, err := s.AddWorkspaceMembers(acct.ID, "r", []string{member.ID}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("adding a deactivated member: %v", err)
	}
	// Re-creating the email reactivates the same user.
	back, err := s.CreateMember(NewMember{AccountID: acct.ID, Email: "mia@example.com", Role: RoleAdmin})
	if err != nil || back.ID != member.ID || back.Role != RoleAdmin || !back.Active {
		t.Fatalf("reactivated: %+v, %v", back, err)
	}
}

func TestManagementKeyCreatorMustBeOrgAdmin(t *testing.T) {
	s, acct, admin, member := newOrgStore(t, t.TempDir())
	defer s.Close()
	if _, _, err := s.CreateManagementKey(NewManagementKey{AccountID: acct.ID, Name: "x", CreatorUserID: &member.ID}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("member creator: %v", err)
	}
	if _, _, err := s.CreateManagementKey(NewManagementKey{AccountID: acct.ID, Name: "x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no creator: %v", err)
	}
	if _, _, err := s.CreateManagementKey(NewManagementKey{AccountID: acct.ID, Name: "x", CreatorUserID: &admin.ID}); err != nil {
		t.Fatalf("admin creator: %v", err)
	}
	// An organization without members is bootstrapped by the operator.
	bare, _ := s.CreateAccount(NewAccount{Name: "new", Kind: AccountOrganization})
	if _, _, err := s.CreateManagementKey(NewManagementKey{AccountID: bare.ID, Name: "x"}); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
}

func TestWorkspacesPersistAndRefuseDeletes(t *testing.T) {
	dir := t.TempDir()
	s, acct, admin, member := newOrgStore(t, dir)
	ws, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "Research", "research" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "Again", "research" }); !errors.Is(err, ErrConflict) {
		t.Fatalf("duplicate slug: %v", err)
	}
	if _, err := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "Bad", "Bad Slug" }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad slug: %v", err)
	}
	added, err := s.AddWorkspaceMembers(acct.ID, "research", []string{admin.ID, member.ID})
	if err != nil || len(added) != 2 {
		t.Fatalf("add: %+v, %v", added, err)
	}
	for _, m := range added {
		want := map[string]MemberRole{admin.ID: RoleAdmin, member.ID: RoleMember}[m.UserID]
		if m.Role != want {
			t.Errorf("%s inherited %s, want %s", m.UserID, m.Role, want)
		}
	}
	if _, err := s.SetWorkspaceMember(acct.ID, ws.ID, member.ID, RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetWorkspaceBudget(acct.ID, "research", BudgetMonthly, 10*money.AmountScale, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetWorkspaceBudget(acct.ID, "research", BudgetDaily, 10*money.AmountScale, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("daily budget not below monthly: %v", err)
	}
	k, _, err := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", WorkspaceID: "research", CreatorUserID: &member.ID})
	if err != nil || k.WorkspaceID != ws.ID {
		t.Fatalf("key in workspace: %+v, %v", k, err)
	}
	if err := s.DeleteWorkspace(acct.ID, acct.DefaultWorkspaceID); !errors.Is(err, ErrForbidden) {
		t.Fatalf("deleting the default workspace: %v", err)
	}
	if err := s.DeleteWorkspace(acct.ID, "research"); !errors.Is(err, ErrConflict) {
		t.Fatalf("deleting a workspace with keys: %v", err)
	}
	if _, err := s.RemoveWorkspaceMembers(acct.ID, "research", []string{member.ID}); !errors.Is(err, ErrConflict) {
		t.Fatalf("removing a member with keys: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTemp(t, dir)
	defer s.Close()
	got, ok := s.Workspace(acct.ID, "research")
	if !ok || got.ID != ws.ID || got.Members[member.ID].Role != RoleAdmin || got.Budgets[BudgetMonthly].Limit != 10*money.AmountScale {
		t.Fatalf("after reopen: %+v", got)
	}
	if m, ok := s.Member(acct.ID, admin.ID); !ok || m.Role != RoleAdmin || *m.FirstName != "Ada" {
		t.Fatalf("member after reopen: %+v", m)
	}
	if ws := s.Workspaces(acct.ID); len(ws) != 2 || ws[0].ID != acct.DefaultWorkspaceID {
		t.Fatalf("workspaces after reopen: %+v", ws)
	}
	if err := s.DeleteAPIKey(k.Hash); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWorkspace(acct.ID, "research"); err != nil {
		t.Fatal(err)
	}
}

func TestLegacyAccountGetsDefaultWorkspace(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	acct, _ := s.CreateAccount(NewAccount{Name: "old", Kind: AccountPersonal})
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k"})
	// Simulate a database written before workspaces: no workspace record,
	// a key without workspace.
	s.k.Lock()
	delete(s.workspaces, acct.ID)
	c, _ := s.keys.Get(k.Hash)
	c.WorkspaceID = ""
	s.putKey(&c)
	s.k.MarkDirty(workspaceKey(acct.ID, acct.DefaultWorkspaceID))
	b := s.k.MarkDirty(prefixAPIKey + k.Hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openTemp(t, dir)
	defer s.Close()
	ws, ok := s.Workspace(acct.ID, "default")
	if !ok || ws.ID != acct.DefaultWorkspaceID {
		t.Fatalf("default workspace on load: %+v %v", ws, ok)
	}
	if got, _ := s.APIKey(k.Hash); got.WorkspaceID != acct.DefaultWorkspaceID {
		t.Fatalf("legacy key's workspace %q", got.WorkspaceID)
	}
}

func TestEffectiveRulesCachedAndInvalidated(t *testing.T) {
	s, acct, _, member := newOrgStore(t, t.TempDir())
	defer s.Close()
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", CreatorUserID: &member.ID})
	r := s.EffectiveRules(k.Hash)
	if len(r.Guardrails) != 0 || r.MemberID != member.ID || s.EffectiveRules(k.Hash) != r {
		t.Fatalf("no rules, cached: %+v", r)
	}
	g, err := s.CreateGuardrail(acct.ID, func(g *Guardrail) error {
		g.Name, g.AllowedModels, g.IgnoredProviders = "G", []string{"a/m"}, []string{"bad"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AssignKeys(acct.ID, g.ID, []string{k.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	r = s.EffectiveRules(k.Hash)
	if len(r.Guardrails) != 1 || r.Guardrails[0].Scope != ScopeAPIKey {
		t.Fatalf("after assignment: %+v", r)
	}
	if got := r.Guardrails[0].Guardrail; got.ID != g.ID || len(got.AllowedModels) != 1 || len(got.IgnoredProviders) != 1 {
		t.Errorf("applied guardrail %+v, want %s with its lists", got, g.ID)
	}
	// A key holds one guardrail: assigning another replaces it.
	g2, _ := s.CreateGuardrail(acct.ID, func(g *Guardrail) error { g.Name = "G2"; return nil })
	if _, err := s.AssignKeys(acct.ID, g2.ID, []string{k.Hash}, nil); err != nil {
		t.Fatal(err)
	}
	if ka := s.KeyAssignments(acct.ID, ""); len(ka) != 1 || ka[0].GuardrailID != g2.ID {
		t.Fatalf("assignments: %+v", ka)
	}
	// Member and workspace default guardrails, in enforcement order.
	if _, err := s.AssignMembers(acct.ID, g.ID, []string{member.ID}, nil); err != nil {
		t.Fatal(err)
	}
	ws, _ := s.Workspace(acct.ID, acct.DefaultWorkspaceID)
	if _, created, err := s.UpdateGuardrail(acct.ID, ws.DefaultGuardrailID, func(*Guardrail, bool) error { return nil }); err != nil || !created {
		t.Fatalf("materialize default: %v %v", created, err)
	}
	if _, err := s.AssignKeys(acct.ID, ws.DefaultGuardrailID, []string{k.Hash}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("assigning to a workspace default: %v", err)
	}
	r = s.EffectiveRules(k.Hash)
	var scopes []GuardrailScope
	for _, a := range r.Guardrails {
		scopes = append(scopes, a.Scope)
	}
	if len(scopes) != 3 || scopes[0] != ScopeWorkspaceDefault || scopes[1] != ScopeMember || scopes[2] != ScopeAPIKey {
		t.Fatalf("scopes %v", scopes)
	}
	// Settling charges does not invalidate the cache.
	res, err := s.Reserve(acct.ID, k.Hash, Holds{Hold: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(res, Charge{Cost: 1}); err != nil {
		t.Fatal(err)
	}
	if s.EffectiveRules(k.Hash) != r {
		t.Error("a charge invalidated the rules")
	}
	if err := s.DeleteGuardrail(acct.ID, g.ID); err != nil {
		t.Fatal(err)
	}
	if r2 := s.EffectiveRules(k.Hash); len(r2.Guardrails) != 2 {
		t.Fatalf("after delete: %+v", r2)
	}
	// Deleting the key deletes its assignment.
	if err := s.DeleteAPIKey(k.Hash); err != nil {
		t.Fatal(err)
	}
	if g, _ := s.Guardrail(acct.ID, g2.ID); len(g.Keys) != 0 {
		t.Fatalf("assignment of a deleted key: %+v", g.Keys)
	}
}

// Workspace and member holds are placed and released with the key's, and
// charges land in the workspace's and member's counters.
func TestReserveWorkspaceAndMemberHolds(t *testing.T) {
	s, acct, _, member := newOrgStore(t, t.TempDir())
	defer s.Close()
	ws, _ := s.CreateWorkspace(acct.ID, func(w *Workspace) { w.Name, w.Slug = "W", "w" })
	k1, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "1", WorkspaceID: ws.ID, CreatorUserID: &member.ID})
	k2, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "2", WorkspaceID: ws.ID, CreatorUserID: &member.ID})
	const budget = 10
	decide := func(hold money.Amount) func(LedgerView) error {
		return func(v LedgerView) error {
			if v.Workspace == nil || v.Member == nil {
				return errors.New("no scope")
			}
			if v.Workspace.BudgetUsage(BudgetDaily, v.Now)+v.WorkspaceHeld+hold > budget {
				return errors.New("over")
			}
			return nil
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var admitted []*Reservation
	for i := range 50 {
		wg.Go(func() {
			k := k1
			if i%2 == 1 {
				k = k2
			}
			if res, err := reserveIf(s, acct.ID, k.Hash, Holds{Hold: 1}, decide(1)); err == nil {
				mu.Lock()
				admitted = append(admitted, res)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(admitted) != budget {
		t.Fatalf("%d admitted, want %d", len(admitted), budget)
	}
	for _, res := range admitted[:4] {
		if err := s.Settle(res, Charge{Cost: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, res := range admitted[4:] {
		if err := s.Release(res); err != nil {
			t.Fatal(err)
		}
	}
	s.k.RLock()
	l := s.impl.(*localLedger)
	held := l.workspaceHeld.live() + l.memberHeld.live()
	s.k.RUnlock()
	if held != 0 {
		t.Fatal("holds left after release")
	}
	w, _ := s.Workspace(acct.ID, ws.ID)
	m, _ := s.Member(acct.ID, member.ID)
	if w.Usage.Total != 4 || m.Usage.Total != 4 {
		t.Fatalf("workspace usage %s, member usage %s", w.Usage.Total, m.Usage.Total)
	}

	// A BYOK request holds against the workspace only when it counts BYOK.
	byok, err := s.Reserve(acct.ID, k1.Hash, Holds{Hold: 7, KeyOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if v := s.view(t, acct.ID, k1.Hash); v.WorkspaceHeld != 0 || v.MemberHeld != 7 {
		t.Fatalf("BYOK holds: workspace %s, member %s", v.WorkspaceHeld, v.MemberHeld)
	}
	if err := s.Settle(byok, Charge{Cost: 3, BYOK: true}); err != nil {
		t.Fatal(err)
	}
	on := true
	if _, _, err := s.SetWorkspaceBudget(acct.ID, ws.ID, BudgetDaily, 100, &on); err != nil {
		t.Fatal(err)
	}
	byok, _ = s.Reserve(acct.ID, k1.Hash, Holds{Hold: 7, KeyOnly: true})
	if v := s.view(t, acct.ID, k1.Hash); v.WorkspaceHeld != 7 || v.Workspace.BudgetUsage(BudgetDaily, v.Now) != 4+3 {
		t.Fatalf("BYOK counted: held %s, usage %s", v.WorkspaceHeld, v.Workspace.BudgetUsage(BudgetDaily, v.Now))
	}
	if err := s.Release(byok); err != nil {
		t.Fatal(err)
	}
	if v := s.view(t, acct.ID, k1.Hash); v.WorkspaceHeld != 0 || v.MemberHeld != 0 {
		t.Fatal("holds left")
	}

	// A BYOK request's Credits (a gateway-side search) are credits: held
	// against a workspace that does not count BYOK, and charged to the
	// workspace's and member's Usage, the rest to their BYOKUsage.
	off := false
	if _, _, err := s.SetWorkspaceBudget(acct.ID, ws.ID, BudgetDaily, 100, &off); err != nil {
		t.Fatal(err)
	}
	byok, _ = s.Reserve(acct.ID, k1.Hash, Holds{Hold: 7, KeyOnly: true, Credits: 2})
	if v := s.view(t, acct.ID, k1.Hash); v.WorkspaceHeld != 2 || v.MemberHeld != 7 {
		t.Fatalf("BYOK credit holds: workspace %s, member %s", v.WorkspaceHeld, v.MemberHeld)
	}
	if err := s.Settle(byok, Charge{Cost: 5, BYOK: true, Credits: 2}); err != nil {
		t.Fatal(err)
	}
	v := s.view(t, acct.ID, k1.Hash)
	if v.WorkspaceHeld != 0 || v.MemberHeld != 0 {
		t.Fatal("holds left")
	}
	if v.Workspace.Usage.Total != 4+2 || v.Workspace.BYOKUsage.Total != 3+3 || v.Member.Usage.Total != 4+2 || v.Member.BYOKUsage.Total != 3+3 {
		t.Fatalf("workspace usage %s byok %s, member usage %s byok %s",
			v.Workspace.Usage.Total, v.Workspace.BYOKUsage.Total, v.Member.Usage.Total, v.Member.BYOKUsage.Total)
	}
}

// view returns what an admission decision would see.
func (s *Store) view(t *testing.T, accountID, keyHash string) LedgerView {
	t.Helper()
	var v LedgerView
	errSeen := errors.New("seen")
	if _, err := reserveIf(s, accountID, keyHash, Holds{}, func(lv LedgerView) error { v = lv; return errSeen }); err != errSeen {
		t.Fatal(err)
	}
	return v
}

// Workspace and member counters persist in their own records.
func TestScopeUsagePersists(t *testing.T) {
	dir := t.TempDir()
	s, acct, _, member := newOrgStore(t, dir)
	k, _, _ := s.CreateAPIKey(NewAPIKey{AccountID: acct.ID, Name: "k", CreatorUserID: &member.ID})
	for _, c := range []Charge{{Cost: 5 * money.AmountScale / 4}, {Cost: 7, BYOK: true}} {
		res, err := s.Reserve(acct.ID, k.Hash, Holds{Hold: 1, KeyOnly: c.BYOK})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(res, c); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := s.Workspace(acct.ID, "default")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTemp(t, dir)
	defer s.Close()
	w, _ := s.Workspace(acct.ID, "default")
	m, _ := s.Member(acct.ID, member.ID)
	if w.Usage != before.Usage || w.Usage.Total != 5*money.AmountScale/4 || w.BYOKUsage.Total != 7 {
		t.Fatalf("workspace counters after reopen: %+v %+v", w.Usage, w.BYOKUsage)
	}
	if m.Usage != w.Usage || m.BYOKUsage != w.BYOKUsage {
		t.Fatalf("member counters after reopen: %+v %+v", m.Usage, m.BYOKUsage)
	}
}

func TestScopeUsageJSONMatchesEncodingJSON(t *testing.T) {
	type plain scopeUsage
	u := scopeUsage{Usage: money.UsageCounters{}.Add(time.Now(), 123456789), BYOKUsage: money.UsageCounters{Total: -5}}
	got, _ := u.MarshalJSON()
	want, _ := json.Marshal(plain(u))
	if string(got) != string(want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
