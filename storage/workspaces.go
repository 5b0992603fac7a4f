package storage

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// The workspace and member records are package record's.
type (
	Workspace       = record.Workspace
	WorkspaceMember = record.WorkspaceMember
	WorkspaceBudget = record.WorkspaceBudget
	BudgetInterval  = record.BudgetInterval
	MemberRole      = record.MemberRole
	Member          = record.Member
)

// Budget intervals and member roles.
const (
	BudgetDaily    = record.BudgetDaily
	BudgetWeekly   = record.BudgetWeekly
	BudgetMonthly  = record.BudgetMonthly
	BudgetLifetime = record.BudgetLifetime

	RoleAdmin  = record.RoleAdmin
	RoleMember = record.RoleMember
)

// MembershipID is the stable public id of a user's membership in a
// workspace.
func MembershipID(workspaceID, userID string) string { return record.MembershipID(workspaceID, userID) }

// ParseBudgetInterval accepts the budget intervals' names.
func ParseBudgetInterval(s string) (BudgetInterval, bool) { return record.ParseBudgetInterval(s) }

// ParseMemberRole accepts admin and member.
func ParseMemberRole(s string) (MemberRole, bool) { return record.ParseMemberRole(s) }

const prefixWorkspace = "w/" // w/<account id>/<workspace id>

func workspaceKey(accountID, id string) string {
	return kernel.RecordKey(prefixWorkspace, accountID, id)
}

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// putWorkspace publishes a workspace record and marks it dirty. Callers
// hold the kernel's lock.
func (s *OrgStore) putWorkspace(w *Workspace) *kernel.Batch {
	s.rulesChanged()
	return kernel.PutDirty(s.k, s.workspaces, prefixWorkspace, w)
}

// defaultWorkspace builds the record of an account's default workspace.
func defaultWorkspace(a *Account) *Workspace {
	return &Workspace{
		ID: a.DefaultWorkspaceID, AccountID: a.ID, Name: "Default", Slug: "default",
		DefaultGuardrailID: record.NewUUID(), IOLoggingSamplingRate: 1, IsDataDiscountLoggingEnabled: true,
		CreatedAt: a.CreatedAt,
	}
}

// ensureDefaultWorkspaces gives every loaded account its default workspace
// record (accounts created before workspaces existed). Called by Open,
// after the accounts' ensureDefaultWorkspaceIDs.
func (s *OrgStore) ensureDefaultWorkspaces() {
	s.acct.eachAccount(func(a *Account) {
		if _, ok := s.workspaces[a.ID][a.DefaultWorkspaceID]; !ok {
			s.putWorkspace(defaultWorkspace(a))
		}
	})
}

// ensureDefaultWorkspacesInMemory gives every account its default
// workspace in memory when the record is not stored yet (it is written by
// the replica that created the account). Callers hold the kernel's lock.
func (s *OrgStore) ensureDefaultWorkspacesInMemory() {
	s.acct.eachAccount(func(a *Account) {
		if _, ok := s.workspaces[a.ID][a.DefaultWorkspaceID]; !ok && a.DefaultWorkspaceID != "" {
			s.workspaces.Put(defaultWorkspace(a))
		}
	})
}

// workspaceOf is a workspace's published record, by id. Callers hold the
// kernel's lock.
func (s *OrgStore) workspaceOf(accountID, id string) (*Workspace, bool) {
	w, ok := s.workspaces[accountID][id]
	return w, ok
}

// resolveWorkspace finds a workspace by id or slug. Callers hold the kernel's lock.
func (s *OrgStore) resolveWorkspace(accountID, ref string) (*Workspace, bool) {
	if w, ok := s.workspaces[accountID][ref]; ok {
		return w, true
	}
	for _, w := range s.workspaces[accountID] {
		if w.Slug == ref {
			return w, true
		}
	}
	return nil, false
}

// Workspace returns an account's workspace by id or slug.
func (s *OrgStore) Workspace(accountID, ref string) (Workspace, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	w, ok := s.resolveWorkspace(accountID, ref)
	if !ok {
		return Workspace{}, false
	}
	return *w, true
}

// Workspaces lists an account's workspaces: the default first, then by
// creation.
func (s *OrgStore) Workspaces(accountID string) []Workspace {
	s.k.RLock()
	def := ""
	if a, ok := s.acct.accountOf(accountID); ok {
		def = a.DefaultWorkspaceID
	}
	out := make([]Workspace, 0, len(s.workspaces[accountID]))
	for _, w := range s.workspaces[accountID] {
		out = append(out, *w)
	}
	s.k.Visited(len(out))
	s.k.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if (out[i].ID == def) != (out[j].ID == def) {
			return out[i].ID == def
		}
		if out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].ID < out[j].ID
		}
		return out[i].CreatedAt.Before(out[j].CreatedAt)
	})
	return out
}

// checkSlug validates a slug and its uniqueness in the account. Callers
// hold the kernel's lock.
func (s *OrgStore) checkSlug(accountID, slug, self string) error {
	if !slugPattern.MatchString(slug) {
		return fmt.Errorf("%w: slug: expected lowercase letters, digits and hyphens (at most 64)", ErrInvalid)
	}
	for _, w := range s.workspaces[accountID] {
		if w.Slug == slug && w.ID != self {
			return fmt.Errorf("%w: slug: a workspace with slug %q already exists", ErrConflict, slug)
		}
	}
	return nil
}

// CreateWorkspace creates a workspace; fn fills in its settings (name and
// slug are required).
func (s *OrgStore) CreateWorkspace(accountID string, fn func(*Workspace)) (Workspace, error) {
	t := now().UTC()
	w := &Workspace{
		ID: record.NewUUID(), AccountID: accountID, DefaultGuardrailID: record.NewUUID(),
		IOLoggingSamplingRate: 1, IsDataDiscountLoggingEnabled: true, CreatedAt: t,
		Budgets: map[BudgetInterval]*WorkspaceBudget{}, Members: map[string]*WorkspaceMember{},
	}
	fn(w)
	w.Name = strings.TrimSpace(w.Name)
	if w.Name == "" {
		return Workspace{}, fmt.Errorf("%w: name: required non-empty string", ErrInvalid)
	}
	s.k.Lock()
	if _, ok := s.acct.accountOf(accountID); !ok {
		s.k.Unlock()
		return Workspace{}, ErrNotFound
	}
	if err := s.checkSlug(accountID, w.Slug, w.ID); err != nil {
		s.k.Unlock()
		return Workspace{}, err
	}
	b := s.putWorkspace(w)
	s.k.Unlock()
	return *w, b.Wait()
}

// UpdateWorkspace applies fn to a copy of the workspace found by id or
// slug; fn may return an error to abort.
func (s *OrgStore) UpdateWorkspace(accountID, ref string, fn func(*Workspace) error) (Workspace, error) {
	return s.changeWorkspace(accountID, ref, func(cur *Workspace) (*Workspace, error) {
		w := cur.Clone()
		if err := fn(w); err != nil {
			return nil, err
		}
		w.ID, w.AccountID, w.CreatedAt, w.DefaultGuardrailID = cur.ID, cur.AccountID, cur.CreatedAt, cur.DefaultGuardrailID
		w.Usage, w.BYOKUsage, w.Members = cur.Usage, cur.BYOKUsage, cur.Members
		w.Name = strings.TrimSpace(w.Name)
		if w.Name == "" {
			return nil, fmt.Errorf("%w: name: must not be empty", ErrInvalid)
		}
		if err := s.checkSlug(accountID, w.Slug, w.ID); err != nil {
			return nil, err
		}
		t := now().UTC()
		w.UpdatedAt = &t
		return w, nil
	})
}

// changeWorkspace publishes what next derives from the workspace found by
// id or slug, and waits until it is durable: the one lock site of the
// changes of a workspace. next runs under Lock; it may refuse with an
// error, or return nil to write nothing (both: the empty workspace).
func (s *OrgStore) changeWorkspace(accountID, ref string, next func(cur *Workspace) (*Workspace, error)) (Workspace, error) {
	s.k.Lock()
	cur, ok := s.resolveWorkspace(accountID, ref)
	if !ok {
		s.k.Unlock()
		return Workspace{}, ErrNotFound
	}
	w, err := next(cur)
	if err != nil || w == nil {
		s.k.Unlock()
		return Workspace{}, err
	}
	b := s.putWorkspace(w)
	s.k.Unlock()
	return *w, b.Wait()
}

// DeleteWorkspace deletes a workspace with its budgets and guardrails. The
// default workspace cannot be deleted, nor one that still holds API keys
// or BYOK credentials (ErrConflict names the rule).
func (s *OrgStore) DeleteWorkspace(accountID, ref string) error {
	s.k.Lock()
	w, ok := s.resolveWorkspace(accountID, ref)
	if !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	if s.isDefaultWorkspace(accountID, w.ID) {
		s.k.Unlock()
		return fmt.Errorf("%w: the default workspace cannot be deleted", ErrForbidden)
	}
	n := 0
	s.acct.eachAccountKey(accountID, func(k keytable.Ref) bool {
		if k.WorkspaceID() == w.ID {
			n++
		}
		return true
	})
	if n > 0 {
		s.k.Unlock()
		return fmt.Errorf("%w: workspace %q still holds %d API key(s); delete or move them first", ErrConflict, w.Slug, n)
	}
	if n := s.sec.credentialsIn(accountID, w.ID); n > 0 {
		s.k.Unlock()
		return fmt.Errorf("%w: workspace %q still holds %d BYOK credential(s); delete them first", ErrConflict, w.Slug, n)
	}
	delete(s.workspaces[accountID], w.ID)
	s.k.MarkDirty(prefixWorkspaceUsage + accountID + "/" + w.ID)
	b := s.k.MarkDirty(workspaceKey(accountID, w.ID))
	for id, g := range s.guardrails[accountID] {
		if g.WorkspaceID == w.ID {
			s.deleteGuardrailLocked(accountID, id)
		}
	}
	s.rulesChanged()
	s.k.Unlock()
	return b.Wait()
}

// SetWorkspaceBudget creates or updates the budget of an interval; a
// non-nil includeBYOK sets the workspace-wide include_byok_in_budgets.
// Limits must strictly decrease as the interval narrows.
func (s *OrgStore) SetWorkspaceBudget(accountID, ref string, iv BudgetInterval, limit money.Amount, includeBYOK *bool) (Workspace, WorkspaceBudget, error) {
	if limit < 0 {
		return Workspace{}, WorkspaceBudget{}, fmt.Errorf("%w: limit_usd: must not be negative", ErrInvalid)
	}
	var out WorkspaceBudget
	w, err := s.UpdateWorkspace(accountID, ref, func(w *Workspace) error {
		t := now().UTC()
		b := &WorkspaceBudget{ID: record.NewUUID(), Interval: iv, CreatedAt: t}
		if cur, ok := w.Budgets[iv]; ok {
			c := *cur
			b = &c
		}
		b.Limit, b.UpdatedAt = limit, t
		w.Budgets[iv] = b
		if err := checkBudgetOrder(w.Budgets); err != nil {
			return err
		}
		if includeBYOK != nil {
			w.IncludeBYOKInBudgets = *includeBYOK
		}
		out = *b
		return nil
	})
	return w, out, err
}

// checkBudgetOrder enforces lifetime > monthly > weekly > daily among the
// budgets that are set.
func checkBudgetOrder(bs map[BudgetInterval]*WorkspaceBudget) error {
	var prev *WorkspaceBudget
	for _, iv := range record.BudgetOrder {
		b, ok := bs[iv]
		if !ok {
			continue
		}
		if prev != nil && b.Limit <= prev.Limit {
			return fmt.Errorf("%w: limit_usd: the %s budget (%s) must be greater than the %s budget (%s)",
				ErrInvalid, b.Interval, b.Limit, prev.Interval, prev.Limit)
		}
		prev = b
	}
	return nil
}

// DeleteWorkspaceBudget removes the budget of an interval.
func (s *OrgStore) DeleteWorkspaceBudget(accountID, ref string, iv BudgetInterval) error {
	_, err := s.UpdateWorkspace(accountID, ref, func(w *Workspace) error {
		if _, ok := w.Budgets[iv]; !ok {
			return fmt.Errorf("%w: no %s budget", ErrNotFound, iv)
		}
		delete(w.Budgets, iv)
		return nil
	})
	return err
}

// WorkspaceMembers lists a workspace's members; the default workspace's
// are all of the organization's active members with their role.
func (s *OrgStore) WorkspaceMembers(accountID, ref string) ([]WorkspaceMember, Workspace, error) {
	s.k.RLock()
	defer s.k.RUnlock()
	w, ok := s.resolveWorkspace(accountID, ref)
	if !ok {
		return nil, Workspace{}, ErrNotFound
	}
	var out []WorkspaceMember
	if s.isDefaultWorkspace(accountID, w.ID) {
		for _, m := range s.members[accountID] {
			if m.Active {
				out = append(out, WorkspaceMember{UserID: m.ID, Role: m.Role, CreatedAt: m.CreatedAt})
			}
		}
	} else {
		for _, m := range w.Members {
			out = append(out, *m)
		}
	}
	kernel.SortOldestFirst(out, func(r *WorkspaceMember) (time.Time, string) { return r.CreatedAt, r.UserID })
	return out, *w, nil
}

// AddWorkspaceMembers adds organization members to a workspace, each with
// its organization role (admins become workspace admins). Every user id
// must be an active member; those already in the workspace are left as
// they are. It returns the memberships added.
func (s *OrgStore) AddWorkspaceMembers(accountID, ref string, userIDs []string) ([]WorkspaceMember, error) {
	var added []WorkspaceMember
	_, err := s.updateMemberships(accountID, ref, userIDs, func(w *Workspace, m *Member, t time.Time) {
		if _, in := w.Members[m.ID]; !in {
			wm := &WorkspaceMember{UserID: m.ID, Role: m.Role, CreatedAt: t}
			w.Members[m.ID] = wm
			added = append(added, *wm)
		}
	})
	return added, err
}

// SetWorkspaceMember adds a member to a workspace with an explicit role, or
// changes its role there (for SCIM group mappings).
func (s *OrgStore) SetWorkspaceMember(accountID, ref, userID string, role MemberRole) (WorkspaceMember, error) {
	if _, ok := ParseMemberRole(string(role)); !ok {
		return WorkspaceMember{}, fmt.Errorf("%w: role: expected admin or member", ErrInvalid)
	}
	var out WorkspaceMember
	_, err := s.updateMemberships(accountID, ref, []string{userID}, func(w *Workspace, m *Member, t time.Time) {
		wm := &WorkspaceMember{UserID: m.ID, Role: role, CreatedAt: t}
		if cur, in := w.Members[m.ID]; in {
			wm.CreatedAt = cur.CreatedAt
		}
		w.Members[m.ID] = wm
		out = *wm
	})
	return out, err
}

// RemoveWorkspaceMembers removes members from a workspace. A member that
// still has API keys in the workspace cannot be removed (ErrConflict).
// It returns how many were removed.
func (s *OrgStore) RemoveWorkspaceMembers(accountID, ref string, userIDs []string) (int, error) {
	n := 0
	_, err := s.changeWorkspace(accountID, ref, func(cur *Workspace) (*Workspace, error) {
		if s.isDefaultWorkspace(accountID, cur.ID) {
			return nil, fmt.Errorf("%w: members of the default workspace are the organization's members; deactivate the member instead", ErrInvalid)
		}
		var holder string
		s.acct.eachAccountKey(accountID, func(k keytable.Ref) bool {
			if c, ok := k.Creator(); ok && k.WorkspaceID() == cur.ID && slices.Contains(userIDs, c) {
				holder = c
				return false
			}
			return true
		})
		if holder != "" {
			return nil, fmt.Errorf("%w: member %s still has API keys in this workspace", ErrConflict, holder)
		}
		w := cur.Clone()
		for _, u := range userIDs {
			if _, in := w.Members[u]; in {
				delete(w.Members, u)
				n++
			}
		}
		if n == 0 {
			return nil, nil
		}
		return w, nil
	})
	return n, err
}

// updateMemberships checks the user ids and applies fn for each to a copy
// of the workspace. Adding to the default workspace is a no-op: every
// member belongs to it.
func (s *OrgStore) updateMemberships(accountID, ref string, userIDs []string, fn func(*Workspace, *Member, time.Time)) (Workspace, error) {
	return s.changeWorkspace(accountID, ref, func(cur *Workspace) (*Workspace, error) {
		for _, u := range userIDs {
			if m, ok := s.members[accountID][u]; !ok || !m.Active {
				return nil, fmt.Errorf("%w: user %s is not a member of this organization", ErrNotFound, u)
			}
		}
		w := cur.Clone()
		t := now().UTC()
		for _, u := range userIDs {
			fn(w, s.members[accountID][u], t)
		}
		return w, nil
	})
}
