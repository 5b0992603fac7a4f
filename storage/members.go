package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/mail"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// NewMember describes a member to create.
type NewMember struct {
	AccountID string
	Email     string
	FirstName *string
	LastName  *string
	Role      MemberRole // default member
}

const prefixMember = "u/" // u/<account id>/<user id>

func memberKey(accountID, id string) string { return kernel.RecordKey(prefixMember, accountID, id) }

func normalizeEmail(e string) (string, error) {
	e = strings.TrimSpace(e)
	addr, err := mail.ParseAddress(e)
	if err != nil || addr.Address != e {
		return "", fmt.Errorf("%w: email: expected an address such as ada@example.com", ErrInvalid)
	}
	return strings.ToLower(e), nil
}

// CreateMember adds a member to an organization. Emails are unique per
// organization (case-insensitive); re-creating a deactivated member's
// email reactivates it with the new fields.
func (s *OrgStore) CreateMember(n NewMember) (Member, error) {
	email, err := normalizeEmail(n.Email)
	if err != nil {
		return Member{}, err
	}
	if n.Role == "" {
		n.Role = RoleMember
	}
	if _, ok := ParseMemberRole(string(n.Role)); !ok {
		return Member{}, fmt.Errorf("%w: role: expected admin or member", ErrInvalid)
	}
	s.k.Lock()
	acct, ok := s.acct.accountOf(n.AccountID)
	if !ok {
		s.k.Unlock()
		return Member{}, ErrNotFound
	}
	if acct.Kind != AccountOrganization {
		s.k.Unlock()
		return Member{}, fmt.Errorf("%w: only organizations have members", ErrInvalid)
	}
	t := now().UTC()
	m := Member{ID: newID("user_"), AccountID: n.AccountID, CreatedAt: t}
	if cur := s.memberByEmail(n.AccountID, email); cur != nil {
		if cur.Active {
			s.k.Unlock()
			return Member{}, fmt.Errorf("%w: a member with email %s already exists", ErrConflict, email)
		}
		m = *cur
	}
	m.Email, m.FirstName, m.LastName, m.Role, m.Active, m.UpdatedAt = email, n.FirstName, n.LastName, n.Role, true, t
	s.putMember(&m)
	b := s.k.MarkDirty(memberKey(m.AccountID, m.ID))
	s.k.Unlock()
	return m, b.Wait()
}

// memberOf is a member's published record. Callers hold the kernel's lock.
func (s *OrgStore) memberOf(accountID, id string) (*Member, bool) {
	m, ok := s.members[accountID][id]
	return m, ok
}

// membersOf ranges over an organization's members, in no order. Callers
// hold the kernel's lock.
func (s *OrgStore) membersOf(accountID string) iter.Seq[*Member] {
	return maps.Values(s.members[accountID])
}

// memberByEmail finds a member by normalized email. Callers hold the kernel's lock.
func (s *OrgStore) memberByEmail(accountID, email string) *Member {
	for _, m := range s.members[accountID] {
		if m.Email == email {
			return m
		}
	}
	return nil
}

// putMember publishes a member record. Callers hold the kernel's lock.
func (s *OrgStore) putMember(m *Member) {
	prev, had := s.members[m.AccountID][m.ID]
	deactivated := had && prev.Active && !m.Active
	s.members.Put(m)
	s.rulesChanged()
	if deactivated {
		for _, fn := range s.onDeactivate {
			fn(m.AccountID, m.ID)
		}
	}
}

// OnMemberDeactivated calls fn whenever a member of an organization is
// deactivated on this replica (by an admin, the operator or SCIM), with
// the kernel's lock held, so that what fn marks dirty commits with the
// member's record: a domain store ends what the member had signed in to.
// Register it when the domain store is made.
func (s *OrgStore) OnMemberDeactivated(fn func(accountID, memberID string)) {
	s.onDeactivate = append(s.onDeactivate, fn)
}

// CurrentMember returns an organization's member for a check of rights
// that must follow a change at once on every replica (a dashboard
// session's role): on a database several replicas share it also reads the
// member's record there, so that another replica's demotion or
// deactivation counts before its change reaches this replica's memory,
// and of the two it keeps the lesser rights (memory holds this replica's
// own change before its commit). One read of one record.
func (s *OrgStore) CurrentMember(accountID, id string) (Member, bool, error) {
	m, ok := s.Member(accountID, id)
	if !ok || !s.k.Feed().Shared() {
		return m, ok, nil
	}
	var db Member
	err := s.k.Get(memberKey(accountID, id), func(v []byte) error { return json.Unmarshal(v, &db) })
	switch {
	case errors.Is(err, kernel.ErrNotFound):
		return Member{}, false, nil
	case err != nil:
		return m, true, err
	}
	m.Active = m.Active && db.Active
	if db.Role != RoleAdmin {
		m.Role = db.Role
	}
	return m, true, nil
}

// Member returns an organization's member by user id.
func (s *OrgStore) Member(accountID, id string) (Member, bool) {
	return kernel.Lookup(s.k, s.members, accountID, id)
}

// MemberByEmail returns an organization's member by email.
func (s *OrgStore) MemberByEmail(accountID, email string) (Member, bool) {
	e, err := normalizeEmail(email)
	if err != nil {
		return Member{}, false
	}
	s.k.RLock()
	defer s.k.RUnlock()
	if m := s.memberByEmail(accountID, e); m != nil {
		return *m, true
	}
	return Member{}, false
}

// Members lists an organization's active members, oldest first.
func (s *OrgStore) Members(accountID string) []Member {
	out := kernel.Collect(s.k, s.members, accountID, func(m *Member) bool { return m.Active })
	sortMembers(out)
	return out
}

func sortMembers(ms []Member) {
	kernel.SortOldestFirst(ms, func(r *Member) (time.Time, string) { return r.CreatedAt, r.ID })
}

// MemberUpdate is a partial update of a member; nil fields are kept.
type MemberUpdate struct {
	Email     *string
	FirstName **string
	LastName  **string
	Role      *MemberRole
	Active    *bool
}

// UpdateMember changes a member. A role change does not rewrite the
// member's existing workspace roles; deactivating removes the member from
// every workspace.
func (s *OrgStore) UpdateMember(accountID, id string, u MemberUpdate) (Member, error) {
	if u.Email != nil {
		e, err := normalizeEmail(*u.Email)
		if err != nil {
			return Member{}, err
		}
		u.Email = &e
	}
	if u.Role != nil {
		if _, ok := ParseMemberRole(string(*u.Role)); !ok {
			return Member{}, fmt.Errorf("%w: role: expected admin or member", ErrInvalid)
		}
	}
	s.k.Lock()
	cur, ok := s.members[accountID][id]
	if !ok {
		s.k.Unlock()
		return Member{}, ErrNotFound
	}
	m := *cur
	if u.Email != nil && *u.Email != m.Email {
		if other := s.memberByEmail(accountID, *u.Email); other != nil {
			s.k.Unlock()
			return Member{}, fmt.Errorf("%w: a member with email %s already exists", ErrConflict, *u.Email)
		}
		m.Email = *u.Email
	}
	if u.FirstName != nil {
		m.FirstName = *u.FirstName
	}
	if u.LastName != nil {
		m.LastName = *u.LastName
	}
	if u.Role != nil {
		m.Role = *u.Role
	}
	if u.Active != nil {
		m.Active = *u.Active
	}
	m.UpdatedAt = now().UTC()
	s.putMember(&m)
	b := s.k.MarkDirty(memberKey(accountID, id))
	if !m.Active {
		s.leaveWorkspaces(accountID, id)
	}
	s.k.Unlock()
	return m, b.Wait()
}

// leaveWorkspaces removes a member from every workspace of its account.
// Callers hold the kernel's lock.
func (s *OrgStore) leaveWorkspaces(accountID, userID string) {
	for _, ws := range s.workspaces[accountID] {
		if _, in := ws.Members[userID]; in {
			w := ws.Clone()
			delete(w.Members, userID)
			s.putWorkspace(w)
		}
	}
}

// DeactivateMember marks a member inactive (SCIM deprovisioning).
func (s *OrgStore) DeactivateMember(accountID, id string) (Member, error) {
	f := false
	return s.UpdateMember(accountID, id, MemberUpdate{Active: &f})
}

// IsOrgAdmin reports whether userID is an active admin of the organization.
func (s *OrgStore) IsOrgAdmin(accountID, userID string) bool {
	m, ok := s.Member(accountID, userID)
	return ok && m.Active && m.Role == RoleAdmin
}

// isAccountUser reports whether userID is a user of the account: an
// active member of an organization, the owner of a personal account.
// Callers hold the kernel's lock.
func (s *OrgStore) isAccountUser(acct *Account, userID string) bool {
	if acct.Kind != AccountOrganization {
		return userID == acct.OwnerUserID
	}
	m, ok := s.members[acct.ID][userID]
	return ok && m.Active
}

// checkMgmtKeyCreator enforces that only organization admins create
// management keys: in an organization, a key created for a
// user must be created for an active admin; once the organization has
// members, every new key must name its creator. An organization without
// members yet is bootstrapped by the operator alone. Callers hold the kernel's lock.
func (s *OrgStore) checkMgmtKeyCreator(acct *Account, creator *string) error {
	if acct.Kind != AccountOrganization {
		return nil
	}
	if creator == nil {
		for _, m := range s.members[acct.ID] {
			if m.Active {
				return fmt.Errorf("%w: creator_user_id: required once the organization has members (an organization admin's user id)", ErrInvalid)
			}
		}
		return nil
	}
	m, ok := s.members[acct.ID][*creator]
	if !ok || !m.Active || m.Role != RoleAdmin {
		return fmt.Errorf("%w: only organization admins can create management keys; %s is not an admin of this organization", ErrForbidden, *creator)
	}
	return nil
}
