package storage

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// SCIMStore keeps the SCIM service's records: tokens, provisioned users
// and groups, group-to-workspace mappings and sync jobs.
type SCIMStore struct {
	k    *kernel.Kernel
	scim *scimState
	// the domain stores it reads or updates, under the same lock
	acct *AccountStore
	org  *OrgStore
}

func (s *SCIMStore) kinds() []kernel.Kind {
	return []kernel.Kind{{Prefix: prefixSCIM, Load: s.loadSCIM, Snapshot: s.scimSnapshot}}
}

// SCIM: an organization's identity provider provisions its members (SCIM
// Users) and groups (SCIM Groups) over the SCIM 2.0 service, authenticated
// by the organization's SCIM token; group mappings turn identity-provider
// groups into workspace memberships when a sync job runs (scimsync.go).
//
// All SCIM records live under one prefix:
//
//	sc/t/<account id>               the SCIM token (hash only)
//	sc/u/<account id>/<user id>     a member's SCIM attributes (userName, externalId)
//	sc/g/<account id>/<group id>    an identity-provider group and its members
//	sc/m/<account id>/<mapping id>  a group mapping (group -> workspace, role)
//	sc/j/<account id>/<job id>      a sync job
//	sc/s/<account id>               the memberships granted by mappings
const prefixSCIM = "sc/"

// SCIMToken is an organization's SCIM bearer token, stored as its hash.
type SCIMToken struct {
	AccountID string    `json:"account_id"`
	Hash      string    `json:"hash"`
	Label     string    `json:"label"`
	CreatedAt time.Time `json:"created_at"`
}

// SCIMUser holds the SCIM attributes of a member that the member record
// does not: the identity provider's userName and externalId. The SCIM id
// of a user is its member id.
type SCIMUser struct {
	AccountID  string    `json:"account_id"`
	UserID     string    `json:"user_id"`
	UserName   string    `json:"user_name"`
	ExternalID *string   `json:"external_id"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// SCIMGroup is a group the identity provider pushed, with its members'
// user ids.
type SCIMGroup struct {
	ID          string          `json:"id"`
	AccountID   string          `json:"account_id"`
	DisplayName string          `json:"display_name"`
	ExternalID  *string         `json:"external_id"`
	Members     map[string]bool `json:"members"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// MemberIDs returns the group's member ids, sorted.
func (g SCIMGroup) MemberIDs() []string {
	out := make([]string, 0, len(g.Members))
	for id := range g.Members {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// SCIMGroupMapping maps an identity-provider group to a workspace role.
type SCIMGroupMapping struct {
	ID          string     `json:"id"`
	AccountID   string     `json:"account_id"`
	GroupID     string     `json:"scim_group_id"`
	WorkspaceID string     `json:"workspace_id"`
	Role        MemberRole `json:"role"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
}

// SCIMSyncJob is one application of the group mappings.
type SCIMSyncJob struct {
	ID            string     `json:"id"`
	AccountID     string     `json:"account_id"`
	Status        string     `json:"status"` // queued, running, succeeded, failed
	ErrorMessage  *string    `json:"error_message"`
	SyncedGroups  *int       `json:"synced_groups"`
	DeletedGroups *int       `json:"deleted_groups"`
	Added         *int       `json:"added_memberships"`
	Updated       *int       `json:"updated_memberships"`
	Removed       *int       `json:"removed_memberships"`
	Kept          *int       `json:"kept_memberships"` // removals refused: the member has API keys there
	CreatedAt     time.Time  `json:"created_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
}

// Sync job statuses.
const (
	SyncQueued    = "queued"
	SyncRunning   = "running"
	SyncSucceeded = "succeeded"
	SyncFailed    = "failed"
)

// scimGrants records, per account, which workspace memberships a mapping
// granted: "<workspace id>/<user id>" -> mapping ids. Memberships without
// an entry were added by hand and are never removed by a sync.
type scimGrants struct {
	AccountID string              `json:"account_id"`
	Grants    map[string][]string `json:"grants"`
}

// scimState is the in-memory SCIM index. Guarded by the kernel's lock.
type scimState struct {
	tokens   map[string]*SCIMToken // by account id
	byHash   map[string]string     // token hash -> account id
	users    map[string]map[string]*SCIMUser
	groups   map[string]map[string]*SCIMGroup
	mappings map[string]map[string]*SCIMGroupMapping
	jobs     map[string]map[string]*SCIMSyncJob
	grants   map[string]*scimGrants
}

func newSCIMState() *scimState {
	return &scimState{
		tokens: map[string]*SCIMToken{}, byHash: map[string]string{},
		users: map[string]map[string]*SCIMUser{}, groups: map[string]map[string]*SCIMGroup{},
		mappings: map[string]map[string]*SCIMGroupMapping{}, jobs: map[string]map[string]*SCIMSyncJob{},
		grants: map[string]*scimGrants{},
	}
}

func scimKey(kind, accountID string, id ...string) string {
	k := prefixSCIM + kind + "/" + accountID
	for _, i := range id {
		k += "/" + i
	}
	return k
}

func put[T any](m map[string]map[string]*T, accountID, id string, v *T) {
	if m[accountID] == nil {
		m[accountID] = map[string]*T{}
	}
	m[accountID][id] = v
}

// copyOf returns a copy of m[accountID][id]. Callers hold the kernel's lock.
func copyOf[T any](m map[string]map[string]*T, accountID, id string) (T, bool) {
	v, ok := m[accountID][id]
	if !ok {
		var zero T
		return zero, false
	}
	return *v, true
}

// SCIMTokenPrefix starts every SCIM token.
const SCIMTokenPrefix = "sk-tg-scim-v1-"

// RotateSCIMToken issues the organization's SCIM token, replacing the
// previous one; the secret is returned once and only its hash is kept.
func (s *SCIMStore) RotateSCIMToken(accountID string) (string, SCIMToken, error) {
	secret, hash, label := newSecret(SCIMTokenPrefix)
	s.k.Lock()
	acct, ok := s.acct.accounts[accountID]
	if !ok {
		s.k.Unlock()
		return "", SCIMToken{}, ErrNotFound
	}
	if acct.Kind != AccountOrganization {
		s.k.Unlock()
		return "", SCIMToken{}, fmt.Errorf("%w: only organizations have a SCIM service", ErrInvalid)
	}
	if old, ok := s.scim.tokens[accountID]; ok {
		delete(s.scim.byHash, old.Hash)
	}
	t := &SCIMToken{AccountID: accountID, Hash: hash, Label: label, CreatedAt: now().UTC()}
	s.scim.tokens[accountID] = t
	s.scim.byHash[hash] = accountID
	b := s.k.MarkDirty(scimKey("t", accountID))
	s.k.Unlock()
	return secret, *t, b.Wait()
}

// SCIMTokenInfo returns the organization's SCIM token record (no secret).
func (s *SCIMStore) SCIMTokenInfo(accountID string) (SCIMToken, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	t, ok := s.scim.tokens[accountID]
	if !ok {
		return SCIMToken{}, false
	}
	return *t, true
}

// RevokeSCIMToken deletes the organization's SCIM token.
func (s *SCIMStore) RevokeSCIMToken(accountID string) error {
	s.k.Lock()
	t, ok := s.scim.tokens[accountID]
	if !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	delete(s.scim.byHash, t.Hash)
	delete(s.scim.tokens, accountID)
	b := s.k.MarkDirty(scimKey("t", accountID))
	s.k.Unlock()
	return b.Wait()
}

// SCIMAccount resolves a SCIM token to its organization.
func (s *SCIMStore) SCIMAccount(secret string) (Account, bool) {
	if !strings.HasPrefix(secret, SCIMTokenPrefix) {
		return Account{}, false
	}
	h := HashSecret(secret)
	s.k.RLock()
	defer s.k.RUnlock()
	id, ok := s.scim.byHash[h]
	if !ok {
		return Account{}, false
	}
	a, ok := s.acct.accounts[id]
	if !ok {
		return Account{}, false
	}
	return *a, true
}

// SCIMUserRecord is a member with its SCIM attributes.
type SCIMUserRecord struct {
	Member
	UserName   string
	ExternalID *string
}

func (s *SCIMStore) scimUserRecord(m *Member) SCIMUserRecord {
	r := SCIMUserRecord{Member: *m, UserName: m.Email}
	if u, ok := s.scim.users[m.AccountID][m.ID]; ok {
		r.UserName, r.ExternalID = u.UserName, u.ExternalID
	}
	return r
}

// SCIMUsers lists the members the SCIM service shows: every active member
// and the deactivated members the identity provider provisioned (so that
// it can reactivate them), oldest first.
func (s *SCIMStore) SCIMUsers(accountID string) []SCIMUserRecord {
	s.k.RLock()
	var ms []Member
	for _, m := range s.org.members[accountID] {
		if _, provisioned := s.scim.users[accountID][m.ID]; m.Active || provisioned {
			ms = append(ms, *m)
		}
	}
	sortMembers(ms)
	out := make([]SCIMUserRecord, len(ms))
	for i := range ms {
		out[i] = s.scimUserRecord(&ms[i])
	}
	s.k.RUnlock()
	return out
}

// SCIMUser returns a member as the SCIM service shows it.
func (s *SCIMStore) SCIMUser(accountID, id string) (SCIMUserRecord, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	m, ok := s.org.members[accountID][id]
	if !ok {
		return SCIMUserRecord{}, false
	}
	if _, provisioned := s.scim.users[accountID][id]; !m.Active && !provisioned {
		return SCIMUserRecord{}, false
	}
	return s.scimUserRecord(m), true
}

// SCIMUserInput is what the identity provider sets on a user.
type SCIMUserInput struct {
	UserName   string
	ExternalID *string
	Email      string
	FirstName  *string
	LastName   *string
	Active     bool
}

// ProvisionSCIMUser creates a member (or reactivates a deactivated one with
// the same email) from the identity provider, role member, with its SCIM
// attributes, in one commit. A userName or email already used by another
// shown user is a conflict.
func (s *SCIMStore) ProvisionSCIMUser(accountID string, in SCIMUserInput) (SCIMUserRecord, error) {
	return s.putSCIMUser(accountID, "", in)
}

// ReplaceSCIMUser sets a member's attributes from the identity provider,
// in one commit. Deactivating removes the member from every workspace, as
// UpdateMember does.
func (s *SCIMStore) ReplaceSCIMUser(accountID, id string, in SCIMUserInput) (SCIMUserRecord, error) {
	return s.putSCIMUser(accountID, id, in)
}

// putSCIMUser creates (id "") or replaces a SCIM user and its member.
func (s *SCIMStore) putSCIMUser(accountID, id string, in SCIMUserInput) (SCIMUserRecord, error) {
	in.UserName = strings.TrimSpace(in.UserName)
	if in.UserName == "" {
		return SCIMUserRecord{}, fmt.Errorf("%w: userName: required", ErrInvalid)
	}
	email, err := normalizeEmail(in.Email)
	if err != nil {
		return SCIMUserRecord{}, fmt.Errorf("%w: emails: a member needs an email address (the primary email, or a userName that is one)", ErrInvalid)
	}
	s.k.Lock()
	r, b, err := s.putSCIMUserLocked(accountID, id, email, in)
	s.k.Unlock()
	if err != nil {
		return SCIMUserRecord{}, err
	}
	return r, b.Wait()
}

// putSCIMUserLocked is putSCIMUser's change. Callers hold the kernel's lock.
func (s *SCIMStore) putSCIMUserLocked(accountID, id, email string, in SCIMUserInput) (SCIMUserRecord, *kernel.Batch, error) {
	acct, ok := s.acct.accounts[accountID]
	if !ok || acct.Kind != AccountOrganization {
		return SCIMUserRecord{}, nil, ErrNotFound
	}
	t := now().UTC()
	var m Member
	if id == "" {
		m = Member{ID: newID("user_"), AccountID: accountID, Role: RoleMember, CreatedAt: t}
		if cur := s.org.memberByEmail(accountID, email); cur != nil {
			if cur.Active {
				return SCIMUserRecord{}, nil, fmt.Errorf("%w: a member with email %s already exists", ErrConflict, email)
			}
			m = *cur // a deactivated member comes back
		}
	} else {
		cur, ok := s.org.members[accountID][id]
		if !ok {
			return SCIMUserRecord{}, nil, ErrNotFound
		}
		m = *cur
		if other := s.org.memberByEmail(accountID, email); other != nil && other.ID != id {
			return SCIMUserRecord{}, nil, fmt.Errorf("%w: a member with email %s already exists", ErrConflict, email)
		}
	}
	for _, o := range s.org.members[accountID] {
		if o.ID == m.ID {
			continue
		}
		if _, provisioned := s.scim.users[accountID][o.ID]; (o.Active || provisioned) && strings.EqualFold(s.scimUserRecord(o).UserName, in.UserName) {
			return SCIMUserRecord{}, nil, fmt.Errorf("%w: userName %s is already in use", ErrConflict, in.UserName)
		}
	}
	m.Email, m.FirstName, m.LastName, m.Active, m.UpdatedAt = email, in.FirstName, in.LastName, in.Active, t
	s.org.putMember(&m)
	b := s.k.MarkDirty(memberKey(accountID, m.ID))
	if !m.Active {
		s.leaveWorkspacesLocked(accountID, m.ID)
	}
	u := &SCIMUser{AccountID: accountID, UserID: m.ID, UserName: in.UserName, ExternalID: in.ExternalID, CreatedAt: t, UpdatedAt: t}
	if cur, ok := s.scim.users[accountID][m.ID]; ok {
		u.CreatedAt = cur.CreatedAt
	}
	put(s.scim.users, accountID, m.ID, u)
	s.k.MarkDirty(scimKey("u", accountID, m.ID))
	return s.scimUserRecord(&m), b, nil
}

// leaveWorkspacesLocked removes a member from every workspace of its
// account. Callers hold the kernel's lock.
func (s *SCIMStore) leaveWorkspacesLocked(accountID, userID string) {
	for _, ws := range s.org.workspaces[accountID] {
		if _, in := ws.Members[userID]; in {
			w := ws.clone()
			delete(w.Members, userID)
			s.org.putWorkspace(w)
			s.k.MarkDirty(workspaceKey(accountID, w.ID))
		}
	}
}

// DeleteSCIMUser deprovisions a member in one commit: it is deactivated
// (its id stays on its keys; out of every workspace), removed from every
// group, and no longer shown by the SCIM service.
func (s *SCIMStore) DeleteSCIMUser(accountID, id string) error {
	s.k.Lock()
	cur, ok := s.org.members[accountID][id]
	if !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	m := *cur
	m.Active, m.UpdatedAt = false, now().UTC()
	s.org.putMember(&m)
	b := s.k.MarkDirty(memberKey(accountID, id))
	s.leaveWorkspacesLocked(accountID, id)
	delete(s.scim.users[accountID], id)
	s.k.MarkDirty(scimKey("u", accountID, id))
	for gid, g := range s.scim.groups[accountID] {
		if g.Members[id] {
			c := g.clone()
			delete(c.Members, id)
			c.UpdatedAt = now().UTC()
			s.scim.groups[accountID][gid] = c
			s.k.MarkDirty(scimKey("g", accountID, gid))
		}
	}
	s.k.Unlock()
	return b.Wait()
}

func (g *SCIMGroup) clone() *SCIMGroup {
	c := *g
	c.Members = make(map[string]bool, len(g.Members))
	for k, v := range g.Members {
		c.Members[k] = v
	}
	return &c
}

// SCIMGroups lists the organization's identity-provider groups, oldest
// first.
func (s *SCIMStore) SCIMGroups(accountID string) []SCIMGroup {
	s.k.RLock()
	out := make([]SCIMGroup, 0, len(s.scim.groups[accountID]))
	for _, g := range s.scim.groups[accountID] {
		out = append(out, *g.clone())
	}
	s.k.RUnlock()
	sortOldestFirst(out, func(g *SCIMGroup) (time.Time, string) { return g.CreatedAt, g.ID })
	return out
}

// SCIMGroup returns one group.
func (s *SCIMStore) SCIMGroup(accountID, id string) (SCIMGroup, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	g, ok := s.scim.groups[accountID][id]
	if !ok {
		return SCIMGroup{}, false
	}
	return *g.clone(), true
}

// checkGroup validates a group's fields. Callers hold the kernel's lock.
func (s *SCIMStore) checkGroup(g *SCIMGroup) error {
	g.DisplayName = strings.TrimSpace(g.DisplayName)
	if g.DisplayName == "" {
		return fmt.Errorf("%w: displayName: required", ErrInvalid)
	}
	for _, o := range s.scim.groups[g.AccountID] {
		if o.ID != g.ID && strings.EqualFold(o.DisplayName, g.DisplayName) {
			return fmt.Errorf("%w: a group named %q already exists", ErrConflict, g.DisplayName)
		}
	}
	for id := range g.Members {
		if m, ok := s.org.members[g.AccountID][id]; !ok || !m.Active {
			return fmt.Errorf("%w: members: %s is not an active user of this organization", ErrInvalid, id)
		}
	}
	return nil
}

// CreateSCIMGroup stores a new identity-provider group.
func (s *SCIMStore) CreateSCIMGroup(accountID, displayName string, externalID *string, members []string) (SCIMGroup, error) {
	t := now().UTC()
	g := &SCIMGroup{ID: newUUID(), AccountID: accountID, DisplayName: displayName, ExternalID: externalID,
		Members: map[string]bool{}, CreatedAt: t, UpdatedAt: t}
	for _, m := range members {
		g.Members[m] = true
	}
	s.k.Lock()
	if a, ok := s.acct.accounts[accountID]; !ok || a.Kind != AccountOrganization {
		s.k.Unlock()
		return SCIMGroup{}, ErrNotFound
	}
	if err := s.checkGroup(g); err != nil {
		s.k.Unlock()
		return SCIMGroup{}, err
	}
	put(s.scim.groups, accountID, g.ID, g)
	b := s.k.MarkDirty(scimKey("g", accountID, g.ID))
	s.k.Unlock()
	return *g.clone(), b.Wait()
}

// UpdateSCIMGroup applies fn to a copy of the group and stores it.
func (s *SCIMStore) UpdateSCIMGroup(accountID, id string, fn func(*SCIMGroup) error) (SCIMGroup, error) {
	s.k.Lock()
	cur, ok := s.scim.groups[accountID][id]
	if !ok {
		s.k.Unlock()
		return SCIMGroup{}, ErrNotFound
	}
	g := cur.clone()
	if err := fn(g); err != nil {
		s.k.Unlock()
		return SCIMGroup{}, err
	}
	g.ID, g.AccountID, g.CreatedAt, g.UpdatedAt = cur.ID, cur.AccountID, cur.CreatedAt, now().UTC()
	if err := s.checkGroup(g); err != nil {
		s.k.Unlock()
		return SCIMGroup{}, err
	}
	s.scim.groups[accountID][id] = g
	b := s.k.MarkDirty(scimKey("g", accountID, id))
	s.k.Unlock()
	return *g.clone(), b.Wait()
}

// DeleteSCIMGroup deletes a group. Its mappings stay until the next sync
// job, which removes the memberships they granted and then the mappings
// (counted as deleted_groups).
func (s *SCIMStore) DeleteSCIMGroup(accountID, id string) error {
	s.k.Lock()
	if _, ok := s.scim.groups[accountID][id]; !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	delete(s.scim.groups[accountID], id)
	b := s.k.MarkDirty(scimKey("g", accountID, id))
	s.k.Unlock()
	return b.Wait()
}

// SCIMGroupMappings lists the organization's mappings, oldest first.
func (s *SCIMStore) SCIMGroupMappings(accountID string) []SCIMGroupMapping {
	s.k.RLock()
	out := make([]SCIMGroupMapping, 0, len(s.scim.mappings[accountID]))
	for _, m := range s.scim.mappings[accountID] {
		out = append(out, *m)
	}
	s.k.RUnlock()
	sortOldestFirst(out, func(m *SCIMGroupMapping) (time.Time, string) { return m.CreatedAt, m.ID })
	return out
}

// SCIMGroupMapping returns one mapping.
func (s *SCIMStore) SCIMGroupMapping(accountID, id string) (SCIMGroupMapping, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	return copyOf(s.scim.mappings, accountID, id)
}

// CreateSCIMGroupMapping maps a group to a workspace (id or slug) with a
// role, and applies it at once: the group's active members who are not in
// the workspace join it with the role (memberships granted by the mapping).
// The group and the workspace must exist; the default workspace (whose
// members are all of the organization's) cannot be mapped. Creating a
// mapping that exists with the same role returns it and re-applies it;
// with another role it is a conflict. It returns the mapping and how many
// memberships it added.
func (s *SCIMStore) CreateSCIMGroupMapping(accountID, groupID, workspaceRef string, role MemberRole) (SCIMGroupMapping, int, error) {
	if err := checkMappingRole(role); err != nil {
		return SCIMGroupMapping{}, 0, err
	}
	s.k.Lock()
	m, err := s.createMappingLocked(accountID, groupID, workspaceRef, role)
	if err != nil {
		s.k.Unlock()
		return SCIMGroupMapping{}, 0, err
	}
	b := s.k.MarkDirty(scimKey("m", accountID, m.ID))
	added := s.applyMappingLocked(accountID, m)
	s.k.Unlock()
	return m, added, b.Wait()
}

// checkMappingRole validates a mapping's role.
func checkMappingRole(role MemberRole) error {
	if _, ok := ParseMemberRole(string(role)); !ok {
		return fmt.Errorf("%w: role: expected admin or member", ErrInvalid)
	}
	return nil
}

// createMappingLocked checks and stores a new mapping, or returns the
// existing one of the same role. Callers hold the kernel's lock.
func (s *SCIMStore) createMappingLocked(accountID, groupID, workspaceRef string, role MemberRole) (SCIMGroupMapping, error) {
	if _, ok := s.scim.groups[accountID][groupID]; !ok {
		return SCIMGroupMapping{}, fmt.Errorf("%w: scim_group_id: no SCIM group %s", ErrNotFound, groupID)
	}
	w, ok := s.org.resolveWorkspace(accountID, workspaceRef)
	if !ok {
		return SCIMGroupMapping{}, fmt.Errorf("%w: workspace_id: no workspace %s", ErrNotFound, workspaceRef)
	}
	if a := s.acct.accounts[accountID]; a != nil && a.DefaultWorkspaceID == w.ID {
		return SCIMGroupMapping{}, fmt.Errorf("%w: workspace_id: the default workspace's members are all of the organization's members; map another workspace", ErrInvalid)
	}
	for _, m := range s.scim.mappings[accountID] {
		if m.GroupID == groupID && m.WorkspaceID == w.ID {
			if m.Role == role {
				return *m, nil
			}
			return SCIMGroupMapping{}, fmt.Errorf("%w: group %s is already mapped to workspace %s with role %s (mapping %s); update that mapping instead", ErrConflict, groupID, w.ID, m.Role, m.ID)
		}
	}
	t := now().UTC()
	m := &SCIMGroupMapping{ID: newUUID(), AccountID: accountID, GroupID: groupID, WorkspaceID: w.ID, Role: role, CreatedAt: t, UpdatedAt: t}
	put(s.scim.mappings, accountID, m.ID, m)
	return *m, nil
}

// applyMappingLocked adds the mapping's group members missing from its
// workspace (granted by it) and records it as a source of the memberships
// it already granted. It never removes nor changes a role: sync jobs
// reconcile. Callers hold the kernel's lock.
func (s *SCIMStore) applyMappingLocked(accountID string, m SCIMGroupMapping) int {
	g, ok := s.scim.groups[accountID][m.GroupID]
	if !ok {
		return 0
	}
	grants := s.scimGrantsOf(accountID)
	touched := map[string]*Workspace{}
	w := s.touchWorkspace(accountID, m.WorkspaceID, touched)
	if w == nil {
		return 0
	}
	added := 0
	t := now().UTC()
	for _, uid := range g.MemberIDs() {
		if mem, ok := s.org.members[accountID][uid]; !ok || !mem.Active {
			continue
		}
		k := m.WorkspaceID + "/" + uid
		if _, in := w.Members[uid]; !in {
			w.Members[uid] = &WorkspaceMember{UserID: uid, Role: m.Role, CreatedAt: t}
			grants.Grants[k] = []string{m.ID}
			added++
		} else if src, granted := grants.Grants[k]; granted && !slicesContains(src, m.ID) {
			grants.Grants[k] = append(append([]string(nil), src...), m.ID)
		}
	}
	if added > 0 {
		s.publishTouched(touched)
	}
	s.k.MarkDirty(scimKey("s", accountID))
	return added
}

func slicesContains(ids []string, id string) bool {
	for _, i := range ids {
		if i == id {
			return true
		}
	}
	return false
}

// UpdateSCIMGroupMapping changes a mapping's role; memberships follow at
// the next sync job.
func (s *SCIMStore) UpdateSCIMGroupMapping(accountID, id string, role MemberRole) (SCIMGroupMapping, error) {
	if err := checkMappingRole(role); err != nil {
		return SCIMGroupMapping{}, err
	}
	s.k.Lock()
	cur, ok := s.scim.mappings[accountID][id]
	if !ok {
		s.k.Unlock()
		return SCIMGroupMapping{}, ErrNotFound
	}
	m := *cur
	m.Role, m.UpdatedAt = role, now().UTC()
	s.scim.mappings[accountID][id] = &m
	b := s.k.MarkDirty(scimKey("m", accountID, id))
	s.k.Unlock()
	return m, b.Wait()
}

// DeleteSCIMGroupMapping deletes a mapping. keepMembers false removes the
// memberships that only this mapping granted (a member with API keys in
// the workspace keeps its membership, then counted as manual); true keeps
// them as manually managed. It returns how many memberships were removed.
func (s *SCIMStore) DeleteSCIMGroupMapping(accountID, id string, keepMembers bool) (int, error) {
	s.k.Lock()
	if _, ok := s.scim.mappings[accountID][id]; !ok {
		s.k.Unlock()
		return 0, ErrNotFound
	}
	delete(s.scim.mappings[accountID], id)
	b := s.k.MarkDirty(scimKey("m", accountID, id))
	removed := 0
	g := s.scimGrantsOf(accountID)
	touched := map[string]*Workspace{}
	for k, ids := range g.Grants {
		rest := without(ids, id)
		if len(rest) == len(ids) {
			continue
		}
		if len(rest) > 0 {
			g.Grants[k] = rest
			continue
		}
		delete(g.Grants, k)
		if keepMembers {
			continue
		}
		wsID, userID, _ := strings.Cut(k, "/")
		if s.removeGrantedMembership(accountID, wsID, userID, touched) {
			removed++
		}
	}
	s.publishTouched(touched)
	s.k.MarkDirty(scimKey("s", accountID))
	s.k.Unlock()
	return removed, b.Wait()
}

func without(ids []string, id string) []string {
	out := make([]string, 0, len(ids))
	for _, i := range ids {
		if i != id {
			out = append(out, i)
		}
	}
	return out
}

// scimGrantsOf returns the account's grants record, creating it. Callers
// hold the kernel's lock.
func (s *SCIMStore) scimGrantsOf(accountID string) *scimGrants {
	g, ok := s.scim.grants[accountID]
	if !ok {
		g = &scimGrants{AccountID: accountID, Grants: map[string][]string{}}
		s.scim.grants[accountID] = g
	}
	return g
}

// memberHasKeysIn reports whether the user created API keys in the
// workspace (such a member cannot be removed from it). Callers hold the kernel's lock.
func (s *SCIMStore) memberHasKeysIn(wsID, userID string) bool {
	for _, k := range s.acct.keys {
		if k.WorkspaceID == wsID && k.CreatorUserID != nil && *k.CreatorUserID == userID {
			return true
		}
	}
	return false
}

// removeGrantedMembership removes a membership from a (cloned, touched)
// workspace unless the member has keys there. Callers hold the kernel's lock.
func (s *SCIMStore) removeGrantedMembership(accountID, wsID, userID string, touched map[string]*Workspace) bool {
	w := s.touchWorkspace(accountID, wsID, touched)
	if w == nil {
		return false
	}
	if _, in := w.Members[userID]; !in || s.memberHasKeysIn(wsID, userID) {
		return false
	}
	delete(w.Members, userID)
	return true
}

// touchWorkspace returns a writable copy of a workspace, once per
// operation. Callers hold the kernel's lock.
func (s *SCIMStore) touchWorkspace(accountID, wsID string, touched map[string]*Workspace) *Workspace {
	if w, ok := touched[wsID]; ok {
		return w
	}
	cur, ok := s.org.workspaces[accountID][wsID]
	if !ok {
		return nil
	}
	w := cur.clone()
	touched[wsID] = w
	return w
}

// publishTouched publishes the changed workspaces. Callers hold the kernel's lock.
func (s *SCIMStore) publishTouched(touched map[string]*Workspace) {
	for _, w := range touched {
		s.org.putWorkspace(w)
		s.k.MarkDirty(workspaceKey(w.AccountID, w.ID))
	}
}

// SCIMSyncJob returns a sync job.
func (s *SCIMStore) SCIMSyncJob(accountID, id string) (SCIMSyncJob, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	return copyOf(s.scim.jobs, accountID, id)
}

// loadSCIM decodes one SCIM record.
func (s *SCIMStore) loadSCIM(k, v []byte) error {
	key := string(k)
	kind, rest, _ := strings.Cut(key[len(prefixSCIM):], "/")
	switch kind {
	case "t":
		return decodeInto(v, func(t *SCIMToken) {
			s.scim.tokens[t.AccountID] = t
			s.scim.byHash[t.Hash] = t.AccountID
		})
	case "u":
		return decodeInto(v, func(u *SCIMUser) { put(s.scim.users, u.AccountID, u.UserID, u) })
	case "g":
		return decodeInto(v, func(g *SCIMGroup) {
			if g.Members == nil {
				g.Members = map[string]bool{}
			}
			put(s.scim.groups, g.AccountID, g.ID, g)
		})
	case "m":
		return decodeInto(v, func(m *SCIMGroupMapping) { put(s.scim.mappings, m.AccountID, m.ID, m) })
	case "j":
		return decodeInto(v, func(j *SCIMSyncJob) {
			if j.Status == SyncQueued || j.Status == SyncRunning {
				// Its changes and its outcome commit together: an
				// unfinished job at load changed nothing.
				msg := "interrupted by a restart before it finished; nothing was applied, run a new sync job"
				t := now().UTC()
				j.Status, j.ErrorMessage, j.FinishedAt = SyncFailed, &msg, &t
				s.k.MarkDirty(key)
			}
			put(s.scim.jobs, j.AccountID, j.ID, j)
		})
	case "s":
		return decodeInto(v, func(g *scimGrants) {
			if g.Grants == nil {
				g.Grants = map[string][]string{}
			}
			s.scim.grants[g.AccountID] = g
		})
	}
	return fmt.Errorf("unknown SCIM record %q (%s)", key, rest)
}

// decodeInto decodes a stored JSON record and hands it to keep.
func decodeInto[T any](v []byte, keep func(*T)) error {
	r := new(T)
	if err := json.Unmarshal(v, r); err != nil {
		return err
	}
	keep(r)
	return nil
}

// scimSnapshot is snapshot for a SCIM key. Callers hold the kernel's lock.
func (s *SCIMStore) scimSnapshot(key string) any {
	kind, rest, _ := strings.Cut(key[len(prefixSCIM):], "/")
	accountID, id, _ := strings.Cut(rest, "/")
	switch kind {
	case "t":
		if t, ok := s.scim.tokens[accountID]; ok {
			return *t
		}
	case "u":
		if u, ok := s.scim.users[accountID][id]; ok {
			return *u
		}
	case "g":
		if g, ok := s.scim.groups[accountID][id]; ok {
			return *g.clone()
		}
	case "m":
		if m, ok := s.scim.mappings[accountID][id]; ok {
			return *m
		}
	case "j":
		if j, ok := s.scim.jobs[accountID][id]; ok {
			return *j
		}
	case "s":
		if g, ok := s.scim.grants[accountID]; ok {
			c := scimGrants{AccountID: accountID, Grants: make(map[string][]string, len(g.Grants))}
			for k, v := range g.Grants {
				c.Grants[k] = append([]string(nil), v...)
			}
			return c
		}
	}
	return nil
}
