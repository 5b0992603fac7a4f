// Package scim keeps the SCIM records through which an organization's
// identity provider provisions its members and groups: tokens, provisioned
// users and groups, group-to-workspace mappings and the sync jobs that
// apply them. The SCIM 2.0 service that serves them over HTTP is
// handlers/scimapi; the administrative routes over mappings and sync jobs
// are handlers/admin's.
//
// The store is a domain store of package storage kept here: it registers
// itself with storage.RegisterDomain, keeps its records in memory under
// the kernel's one lock and writes them through the kernel. What it
// changes of other domains in the same atomic step (members, workspace
// memberships) it changes through storage.Locked; see StoreOf for
// reaching it from a *storage.Store.
package scim

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/textlimit"
)

// The store's errors are storage's, so that callers map them as any
// store error.
var (
	ErrNotFound = storage.ErrNotFound
	ErrInvalid  = storage.ErrInvalid
	ErrConflict = storage.ErrConflict
)

// now is the store's clock.
var now = time.Now

// domainName registers the store with package storage.
const domainName = "scim"

func init() {
	storage.RegisterDomain(storage.DomainInfo{
		Name: domainName,
		New:  func(st *storage.Store) storage.Domain { return newStore(st) },
	})
}

// StoreOf returns the SCIM store of st.
func StoreOf(st *storage.Store) *Store {
	s, _ := st.Domain(domainName).(*Store)
	return s
}

// Store keeps the SCIM records. Every method is safe for concurrent use;
// a change returns once it is durable.
type Store struct {
	k *kernel.Kernel
	// org is what it reads and changes of accounts, members, workspaces
	// and keys, under the kernel's lock.
	org storage.Locked

	// The SCIM index, guarded by the kernel's lock: by account id, then
	// by record id where an account has several.
	tokens   map[string]*Token // by account id
	byHash   map[string]string // token hash -> account id
	users    map[string]map[string]*userAttrs
	groups   map[string]map[string]*Group
	mappings map[string]map[string]*GroupMapping
	jobs     map[string]map[string]*SyncJob
	grants   map[string]*grantRecord
}

func newStore(st *storage.Store) *Store {
	return &Store{
		k: st.Kernel(), org: st.Locked(),
		tokens: map[string]*Token{}, byHash: map[string]string{},
		users: map[string]map[string]*userAttrs{}, groups: map[string]map[string]*Group{},
		mappings: map[string]map[string]*GroupMapping{}, jobs: map[string]map[string]*SyncJob{},
		grants: map[string]*grantRecord{},
	}
}

// Kinds is the SCIM records' one kind (storage.Domain).
func (s *Store) Kinds() []kernel.Kind {
	return []kernel.Kind{{Prefix: prefix, Load: s.load, Reset: s.reset, Snapshot: s.snapshot}}
}

// An organization's identity provider provisions its members (SCIM Users)
// and groups (SCIM Groups) over the SCIM 2.0 service, authenticated by the
// organization's SCIM token; group mappings turn identity-provider groups
// into workspace memberships when a sync job runs (RunSyncJob).
//
// All SCIM records live under one prefix:
//
//	sc/t/<account id>               the SCIM token (hash only)
//	sc/u/<account id>/<user id>     a member's SCIM attributes (userName, externalId)
//	sc/g/<account id>/<group id>    an identity-provider group and its members
//	sc/m/<account id>/<mapping id>  a group mapping (group -> workspace, role)
//	sc/j/<account id>/<job id>      a sync job
//	sc/s/<account id>               the memberships granted by mappings
const prefix = "sc/"

// Token is an organization's SCIM bearer token, stored as its hash.
type Token struct {
	AccountID string    `json:"account_id"`
	Hash      string    `json:"hash"`
	Label     string    `json:"label"`
	CreatedAt time.Time `json:"created_at"`
}

// userAttrs holds the SCIM attributes of a member that the member record
// does not: the identity provider's userName and externalId. The SCIM id
// of a user is its member id.
type userAttrs struct {
	AccountID  string    `json:"account_id"`
	UserID     string    `json:"user_id"`
	UserName   string    `json:"user_name"`
	ExternalID *string   `json:"external_id"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Group is a group the identity provider pushed, with its members'
// user ids.
type Group struct {
	ID          string          `json:"id"`
	AccountID   string          `json:"account_id"`
	DisplayName string          `json:"display_name"`
	ExternalID  *string         `json:"external_id"`
	Members     map[string]bool `json:"members"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// MemberIDs returns the group's member ids, sorted.
func (g Group) MemberIDs() []string {
	out := make([]string, 0, len(g.Members))
	for id := range g.Members {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// GroupMapping maps an identity-provider group to a workspace role.
type GroupMapping struct {
	ID          string             `json:"id"`
	AccountID   string             `json:"account_id"`
	GroupID     string             `json:"scim_group_id"`
	WorkspaceID string             `json:"workspace_id"`
	Role        storage.MemberRole `json:"role"`
	CreatedAt   time.Time          `json:"created_at"`
	UpdatedAt   time.Time          `json:"updated_at"`
}

// SyncJob is one application of the group mappings.
type SyncJob struct {
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

// grantRecord records, per account, which workspace memberships a mapping
// granted: "<workspace id>/<user id>" -> mapping ids. Memberships without
// an entry were added by hand and are never removed by a sync.
type grantRecord struct {
	AccountID string              `json:"account_id"`
	Grants    map[string][]string `json:"grants"`
}

func recordKey(kind, accountID string, id ...string) string {
	k := prefix + kind + "/" + accountID
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

// isOrganization reports whether the account exists and is an
// organization. Callers hold the kernel's lock.
func (s *Store) isOrganization(accountID string) bool {
	a, ok := s.org.Account(accountID)
	return ok && a.Kind == storage.AccountOrganization
}

// TokenPrefix starts every SCIM token.
const TokenPrefix = "sk-tg-scim-v1-"

// RotateToken issues the organization's SCIM token, replacing the
// previous one; the secret is returned once and only its hash is kept.
func (s *Store) RotateToken(accountID string) (string, Token, error) {
	secret, hash, label := storage.NewSecret(TokenPrefix)
	s.k.Lock()
	acct, ok := s.org.Account(accountID)
	if !ok {
		s.k.Unlock()
		return "", Token{}, ErrNotFound
	}
	if acct.Kind != storage.AccountOrganization {
		s.k.Unlock()
		return "", Token{}, fmt.Errorf("%w: only organizations have a SCIM service", ErrInvalid)
	}
	if old, ok := s.tokens[accountID]; ok {
		delete(s.byHash, old.Hash)
	}
	t := &Token{AccountID: accountID, Hash: hash, Label: label, CreatedAt: now().UTC()}
	s.tokens[accountID] = t
	s.byHash[hash] = accountID
	b := s.k.MarkDirty(recordKey("t", accountID))
	s.k.Unlock()
	return secret, *t, b.Wait()
}

// TokenInfo returns the organization's SCIM token record (no secret).
func (s *Store) TokenInfo(accountID string) (Token, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	t, ok := s.tokens[accountID]
	if !ok {
		return Token{}, false
	}
	return *t, true
}

// RevokeToken deletes the organization's SCIM token.
func (s *Store) RevokeToken(accountID string) error {
	s.k.Lock()
	t, ok := s.tokens[accountID]
	if !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	delete(s.byHash, t.Hash)
	delete(s.tokens, accountID)
	b := s.k.MarkDirty(recordKey("t", accountID))
	s.k.Unlock()
	return b.Wait()
}

// Account resolves a SCIM token to its organization.
func (s *Store) Account(secret string) (storage.Account, bool) {
	if !strings.HasPrefix(secret, TokenPrefix) {
		return storage.Account{}, false
	}
	h := storage.HashSecret(secret)
	s.k.RLock()
	defer s.k.RUnlock()
	id, ok := s.byHash[h]
	if !ok {
		return storage.Account{}, false
	}
	return s.org.Account(id)
}

// User is a member with its SCIM attributes.
type User struct {
	storage.Member
	UserName   string
	ExternalID *string
}

// userOf is the member as the SCIM service shows it. Callers hold the
// kernel's lock.
func (s *Store) userOf(m *storage.Member) User {
	r := User{Member: *m, UserName: m.Email}
	if u, ok := s.users[m.AccountID][m.ID]; ok {
		r.UserName, r.ExternalID = u.UserName, u.ExternalID
	}
	return r
}

// Users lists the members the SCIM service shows: every active member
// and the deactivated members the identity provider provisioned (so that
// it can reactivate them), oldest first.
func (s *Store) Users(accountID string) []User {
	s.k.RLock()
	var ms []storage.Member
	for m := range s.org.Members(accountID) {
		if _, provisioned := s.users[accountID][m.ID]; m.Active || provisioned {
			ms = append(ms, *m)
		}
	}
	sortOldestFirst(ms, func(m *storage.Member) (time.Time, string) { return m.CreatedAt, m.ID })
	out := make([]User, len(ms))
	for i := range ms {
		out[i] = s.userOf(&ms[i])
	}
	s.k.RUnlock()
	return out
}

// User returns a member as the SCIM service shows it.
func (s *Store) User(accountID, id string) (User, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	m, ok := s.org.Member(accountID, id)
	if !ok {
		return User{}, false
	}
	if _, provisioned := s.users[accountID][id]; !m.Active && !provisioned {
		return User{}, false
	}
	return s.userOf(m), true
}

// UserInput is what the identity provider sets on a user.
type UserInput struct {
	UserName   string
	ExternalID *string
	Email      string
	FirstName  *string
	LastName   *string
	Active     bool
}

// checkText bounds the user's strings as the gateway's other
// administrative bodies are bounded (names and ids: 256 characters, no
// control characters).
func (in UserInput) checkText() error {
	return checkStrings([]attr{{"userName", &in.UserName}, {"externalId", in.ExternalID},
		{"emails.value", &in.Email}, {"name.givenName", in.FirstName}, {"name.familyName", in.LastName}})
}

// attr is a SCIM attribute's name and string value (nil: absent).
type attr struct {
	name  string
	value *string
}

// checkStrings checks each present attribute against its bounds
// (textlimit.Check); the error names the attribute.
func checkStrings(attrs []attr) error {
	for _, a := range attrs {
		if a.value == nil {
			continue
		}
		if err := textlimit.Check(a.name, *a.value); err != nil {
			return fmt.Errorf("%w: %s", ErrInvalid, err)
		}
	}
	return nil
}

// ProvisionUser creates a member (or reactivates a deactivated one with
// the same email) from the identity provider, role member, with its SCIM
// attributes, in one commit. A userName or email already used by another
// shown user is a conflict.
func (s *Store) ProvisionUser(accountID string, in UserInput) (User, error) {
	return s.putUser(accountID, "", in)
}

// ReplaceUser sets a member's attributes from the identity provider,
// in one commit. Deactivating removes the member from every workspace, as
// storage's UpdateMember does.
func (s *Store) ReplaceUser(accountID, id string, in UserInput) (User, error) {
	return s.putUser(accountID, id, in)
}

// putUser creates (id "") or replaces a SCIM user and its member.
func (s *Store) putUser(accountID, id string, in UserInput) (User, error) {
	in.UserName = strings.TrimSpace(in.UserName)
	if in.UserName == "" {
		return User{}, fmt.Errorf("%w: userName: required", ErrInvalid)
	}
	if err := in.checkText(); err != nil {
		return User{}, err
	}
	email, err := storage.NormalizeEmail(in.Email)
	if err != nil {
		return User{}, fmt.Errorf("%w: emails: a member needs an email address (the primary email, or a userName that is one)", ErrInvalid)
	}
	s.k.Lock()
	r, b, err := s.putUserLocked(accountID, id, email, in)
	s.k.Unlock()
	if err != nil {
		return User{}, err
	}
	return r, b.Wait()
}

// putUserLocked is putUser's change. Callers hold the kernel's lock.
func (s *Store) putUserLocked(accountID, id, email string, in UserInput) (User, *kernel.Batch, error) {
	if !s.isOrganization(accountID) {
		return User{}, nil, ErrNotFound
	}
	t := now().UTC()
	var m storage.Member
	if id == "" {
		m = storage.Member{ID: storage.NewUserID(), AccountID: accountID, Role: storage.RoleMember, CreatedAt: t}
		if cur := s.org.MemberByEmail(accountID, email); cur != nil {
			if cur.Active {
				return User{}, nil, fmt.Errorf("%w: a member with email %s already exists", ErrConflict, email)
			}
			m = *cur // a deactivated member comes back
		}
	} else {
		cur, ok := s.org.Member(accountID, id)
		if !ok {
			return User{}, nil, ErrNotFound
		}
		m = *cur
		if other := s.org.MemberByEmail(accountID, email); other != nil && other.ID != id {
			return User{}, nil, fmt.Errorf("%w: a member with email %s already exists", ErrConflict, email)
		}
	}
	for o := range s.org.Members(accountID) {
		if o.ID == m.ID {
			continue
		}
		if _, provisioned := s.users[accountID][o.ID]; (o.Active || provisioned) && strings.EqualFold(s.userOf(o).UserName, in.UserName) {
			return User{}, nil, fmt.Errorf("%w: userName %s is already in use", ErrConflict, in.UserName)
		}
	}
	m.Email, m.FirstName, m.LastName, m.Active, m.UpdatedAt = email, in.FirstName, in.LastName, in.Active, t
	b := s.org.PutMember(&m)
	if !m.Active {
		s.org.LeaveWorkspaces(accountID, m.ID)
	}
	u := &userAttrs{AccountID: accountID, UserID: m.ID, UserName: in.UserName, ExternalID: in.ExternalID, CreatedAt: t, UpdatedAt: t}
	if cur, ok := s.users[accountID][m.ID]; ok {
		u.CreatedAt = cur.CreatedAt
	}
	put(s.users, accountID, m.ID, u)
	s.k.MarkDirty(recordKey("u", accountID, m.ID))
	return s.userOf(&m), b, nil
}

// DeleteUser deprovisions a member in one commit: it is deactivated
// (its id stays on its keys; out of every workspace), removed from every
// group, and no longer shown by the SCIM service.
func (s *Store) DeleteUser(accountID, id string) error {
	s.k.Lock()
	cur, ok := s.org.Member(accountID, id)
	if !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	m := *cur
	m.Active, m.UpdatedAt = false, now().UTC()
	b := s.org.PutMember(&m)
	s.org.LeaveWorkspaces(accountID, id)
	delete(s.users[accountID], id)
	s.k.MarkDirty(recordKey("u", accountID, id))
	for gid, g := range s.groups[accountID] {
		if g.Members[id] {
			c := g.clone()
			delete(c.Members, id)
			c.UpdatedAt = now().UTC()
			s.groups[accountID][gid] = c
			s.k.MarkDirty(recordKey("g", accountID, gid))
		}
	}
	s.k.Unlock()
	return b.Wait()
}

func (g *Group) clone() *Group {
	c := *g
	c.Members = make(map[string]bool, len(g.Members))
	for k, v := range g.Members {
		c.Members[k] = v
	}
	return &c
}

// Groups lists the organization's identity-provider groups, oldest
// first.
func (s *Store) Groups(accountID string) []Group {
	s.k.RLock()
	out := make([]Group, 0, len(s.groups[accountID]))
	for _, g := range s.groups[accountID] {
		out = append(out, *g.clone())
	}
	s.k.RUnlock()
	sortOldestFirst(out, func(g *Group) (time.Time, string) { return g.CreatedAt, g.ID })
	return out
}

// Group returns one group.
func (s *Store) Group(accountID, id string) (Group, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	g, ok := s.groups[accountID][id]
	if !ok {
		return Group{}, false
	}
	return *g.clone(), true
}

// checkGroup validates a group's fields. Callers hold the kernel's lock.
func (s *Store) checkGroup(g *Group) error {
	g.DisplayName = strings.TrimSpace(g.DisplayName)
	if g.DisplayName == "" {
		return fmt.Errorf("%w: displayName: required", ErrInvalid)
	}
	if err := checkStrings([]attr{{"displayName", &g.DisplayName}, {"externalId", g.ExternalID}}); err != nil {
		return err
	}
	for _, o := range s.groups[g.AccountID] {
		if o.ID != g.ID && strings.EqualFold(o.DisplayName, g.DisplayName) {
			return fmt.Errorf("%w: a group named %q already exists", ErrConflict, g.DisplayName)
		}
	}
	for id := range g.Members {
		if m, ok := s.org.Member(g.AccountID, id); !ok || !m.Active {
			return fmt.Errorf("%w: members: %s is not an active user of this organization", ErrInvalid, id)
		}
	}
	return nil
}

// CreateGroup stores a new identity-provider group.
func (s *Store) CreateGroup(accountID, displayName string, externalID *string, members []string) (Group, error) {
	t := now().UTC()
	g := &Group{ID: storage.NewUUID(), AccountID: accountID, DisplayName: displayName, ExternalID: externalID,
		Members: map[string]bool{}, CreatedAt: t, UpdatedAt: t}
	for _, m := range members {
		g.Members[m] = true
	}
	s.k.Lock()
	if !s.isOrganization(accountID) {
		s.k.Unlock()
		return Group{}, ErrNotFound
	}
	if err := s.checkGroup(g); err != nil {
		s.k.Unlock()
		return Group{}, err
	}
	put(s.groups, accountID, g.ID, g)
	b := s.k.MarkDirty(recordKey("g", accountID, g.ID))
	s.k.Unlock()
	return *g.clone(), b.Wait()
}

// UpdateGroup applies fn to a copy of the group and stores it.
func (s *Store) UpdateGroup(accountID, id string, fn func(*Group) error) (Group, error) {
	s.k.Lock()
	cur, ok := s.groups[accountID][id]
	if !ok {
		s.k.Unlock()
		return Group{}, ErrNotFound
	}
	g := cur.clone()
	if err := fn(g); err != nil {
		s.k.Unlock()
		return Group{}, err
	}
	g.ID, g.AccountID, g.CreatedAt, g.UpdatedAt = cur.ID, cur.AccountID, cur.CreatedAt, now().UTC()
	if err := s.checkGroup(g); err != nil {
		s.k.Unlock()
		return Group{}, err
	}
	s.groups[accountID][id] = g
	b := s.k.MarkDirty(recordKey("g", accountID, id))
	s.k.Unlock()
	return *g.clone(), b.Wait()
}

// DeleteGroup deletes a group. Its mappings stay until the next sync
// job, which removes the memberships they granted and then the mappings
// (counted as deleted_groups).
func (s *Store) DeleteGroup(accountID, id string) error {
	s.k.Lock()
	if _, ok := s.groups[accountID][id]; !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	delete(s.groups[accountID], id)
	b := s.k.MarkDirty(recordKey("g", accountID, id))
	s.k.Unlock()
	return b.Wait()
}

// GroupMappings lists the organization's mappings, oldest first.
func (s *Store) GroupMappings(accountID string) []GroupMapping {
	s.k.RLock()
	out := make([]GroupMapping, 0, len(s.mappings[accountID]))
	for _, m := range s.mappings[accountID] {
		out = append(out, *m)
	}
	s.k.RUnlock()
	sortOldestFirst(out, func(m *GroupMapping) (time.Time, string) { return m.CreatedAt, m.ID })
	return out
}

// GroupMapping returns one mapping.
func (s *Store) GroupMapping(accountID, id string) (GroupMapping, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	return copyOf(s.mappings, accountID, id)
}

// CreateGroupMapping maps a group to a workspace (id or slug) with a
// role, and applies it at once: the group's active members who are not in
// the workspace join it with the role (memberships granted by the mapping).
// The group and the workspace must exist; the default workspace (whose
// members are all of the organization's) cannot be mapped. Creating a
// mapping that exists with the same role returns it and re-applies it;
// with another role it is a conflict. It returns the mapping and how many
// memberships it added.
func (s *Store) CreateGroupMapping(accountID, groupID, workspaceRef string, role storage.MemberRole) (GroupMapping, int, error) {
	if err := checkMappingRole(role); err != nil {
		return GroupMapping{}, 0, err
	}
	s.k.Lock()
	m, err := s.createMappingLocked(accountID, groupID, workspaceRef, role)
	if err != nil {
		s.k.Unlock()
		return GroupMapping{}, 0, err
	}
	b := s.k.MarkDirty(recordKey("m", accountID, m.ID))
	added := s.applyMappingLocked(accountID, m)
	s.k.Unlock()
	return m, added, b.Wait()
}

// checkMappingRole validates a mapping's role.
func checkMappingRole(role storage.MemberRole) error {
	if _, ok := storage.ParseMemberRole(string(role)); !ok {
		return fmt.Errorf("%w: role: expected admin or member", ErrInvalid)
	}
	return nil
}

// createMappingLocked checks and stores a new mapping, or returns the
// existing one of the same role. Callers hold the kernel's lock.
func (s *Store) createMappingLocked(accountID, groupID, workspaceRef string, role storage.MemberRole) (GroupMapping, error) {
	if _, ok := s.groups[accountID][groupID]; !ok {
		return GroupMapping{}, fmt.Errorf("%w: scim_group_id: no SCIM group %s", ErrNotFound, groupID)
	}
	w, ok := s.org.ResolveWorkspace(accountID, workspaceRef)
	if !ok {
		return GroupMapping{}, fmt.Errorf("%w: workspace_id: no workspace %s", ErrNotFound, workspaceRef)
	}
	if a, ok := s.org.Account(accountID); ok && a.DefaultWorkspaceID == w.ID {
		return GroupMapping{}, fmt.Errorf("%w: workspace_id: the default workspace's members are all of the organization's members; map another workspace", ErrInvalid)
	}
	for _, m := range s.mappings[accountID] {
		if m.GroupID == groupID && m.WorkspaceID == w.ID {
			if m.Role == role {
				return *m, nil
			}
			return GroupMapping{}, fmt.Errorf("%w: group %s is already mapped to workspace %s with role %s (mapping %s); update that mapping instead", ErrConflict, groupID, w.ID, m.Role, m.ID)
		}
	}
	t := now().UTC()
	m := &GroupMapping{ID: storage.NewUUID(), AccountID: accountID, GroupID: groupID, WorkspaceID: w.ID, Role: role, CreatedAt: t, UpdatedAt: t}
	put(s.mappings, accountID, m.ID, m)
	return *m, nil
}

// applyMappingLocked adds the mapping's group members missing from its
// workspace (granted by it) and records it as a source of the memberships
// it already granted. It never removes nor changes a role: sync jobs
// reconcile. Callers hold the kernel's lock.
func (s *Store) applyMappingLocked(accountID string, m GroupMapping) int {
	g, ok := s.groups[accountID][m.GroupID]
	if !ok {
		return 0
	}
	grants := s.grantsOf(accountID)
	touched := map[string]*storage.Workspace{}
	w := s.touchWorkspace(accountID, m.WorkspaceID, touched)
	if w == nil {
		return 0
	}
	added := 0
	t := now().UTC()
	for _, uid := range g.MemberIDs() {
		if mem, ok := s.org.Member(accountID, uid); !ok || !mem.Active {
			continue
		}
		k := m.WorkspaceID + "/" + uid
		if _, in := w.Members[uid]; !in {
			w.Members[uid] = &storage.WorkspaceMember{UserID: uid, Role: m.Role, CreatedAt: t}
			grants.Grants[k] = []string{m.ID}
			added++
		} else if src, granted := grants.Grants[k]; granted && !slices.Contains(src, m.ID) {
			grants.Grants[k] = append(append([]string(nil), src...), m.ID)
		}
	}
	if added > 0 {
		s.publishTouched(touched)
	}
	s.k.MarkDirty(recordKey("s", accountID))
	return added
}

// UpdateGroupMapping changes a mapping's role; memberships follow at
// the next sync job.
func (s *Store) UpdateGroupMapping(accountID, id string, role storage.MemberRole) (GroupMapping, error) {
	if err := checkMappingRole(role); err != nil {
		return GroupMapping{}, err
	}
	s.k.Lock()
	cur, ok := s.mappings[accountID][id]
	if !ok {
		s.k.Unlock()
		return GroupMapping{}, ErrNotFound
	}
	m := *cur
	m.Role, m.UpdatedAt = role, now().UTC()
	s.mappings[accountID][id] = &m
	b := s.k.MarkDirty(recordKey("m", accountID, id))
	s.k.Unlock()
	return m, b.Wait()
}

// DeleteGroupMapping deletes a mapping. keepMembers false removes the
// memberships that only this mapping granted (a member with API keys in
// the workspace keeps its membership, then counted as manual); true keeps
// them as manually managed. It returns how many memberships were removed.
func (s *Store) DeleteGroupMapping(accountID, id string, keepMembers bool) (int, error) {
	s.k.Lock()
	if _, ok := s.mappings[accountID][id]; !ok {
		s.k.Unlock()
		return 0, ErrNotFound
	}
	delete(s.mappings[accountID], id)
	b := s.k.MarkDirty(recordKey("m", accountID, id))
	removed := 0
	g := s.grantsOf(accountID)
	touched := map[string]*storage.Workspace{}
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
	s.k.MarkDirty(recordKey("s", accountID))
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

// grantsOf returns the account's grants record, creating it. Callers
// hold the kernel's lock.
func (s *Store) grantsOf(accountID string) *grantRecord {
	g, ok := s.grants[accountID]
	if !ok {
		g = &grantRecord{AccountID: accountID, Grants: map[string][]string{}}
		s.grants[accountID] = g
	}
	return g
}

// removeGrantedMembership removes a membership from a (cloned, touched)
// workspace unless the member has keys there. Callers hold the kernel's lock.
func (s *Store) removeGrantedMembership(accountID, wsID, userID string, touched map[string]*storage.Workspace) bool {
	w := s.touchWorkspace(accountID, wsID, touched)
	if w == nil {
		return false
	}
	if _, in := w.Members[userID]; !in || s.org.HasKeysIn(wsID, userID) {
		return false
	}
	delete(w.Members, userID)
	return true
}

// touchWorkspace returns a writable copy of a workspace, once per
// operation. Callers hold the kernel's lock.
func (s *Store) touchWorkspace(accountID, wsID string, touched map[string]*storage.Workspace) *storage.Workspace {
	if w, ok := touched[wsID]; ok {
		return w
	}
	w := s.org.WorkspaceCopy(accountID, wsID)
	if w != nil {
		touched[wsID] = w
	}
	return w
}

// publishTouched publishes the changed workspaces. Callers hold the kernel's lock.
func (s *Store) publishTouched(touched map[string]*storage.Workspace) {
	for _, w := range touched {
		s.org.PutWorkspace(w)
	}
}

// SyncJob returns a sync job.
func (s *Store) SyncJob(accountID, id string) (SyncJob, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	return copyOf(s.jobs, accountID, id)
}

// load decodes one SCIM record.
func (s *Store) load(k, v []byte) error {
	key := string(k)
	kind, rest, _ := strings.Cut(key[len(prefix):], "/")
	switch kind {
	case "t":
		return decodeInto(v, func(t *Token) {
			s.tokens[t.AccountID] = t
			s.byHash[t.Hash] = t.AccountID
		})
	case "u":
		return decodeInto(v, func(u *userAttrs) { put(s.users, u.AccountID, u.UserID, u) })
	case "g":
		return decodeInto(v, func(g *Group) {
			if g.Members == nil {
				g.Members = map[string]bool{}
			}
			put(s.groups, g.AccountID, g.ID, g)
		})
	case "m":
		return decodeInto(v, func(m *GroupMapping) { put(s.mappings, m.AccountID, m.ID, m) })
	case "j":
		return decodeInto(v, func(j *SyncJob) {
			if j.Status == SyncQueued || j.Status == SyncRunning {
				// Its changes and its outcome commit together: an
				// unfinished job at load changed nothing.
				msg := "interrupted by a restart before it finished; nothing was applied, run a new sync job"
				t := now().UTC()
				j.Status, j.ErrorMessage, j.FinishedAt = SyncFailed, &msg, &t
				s.k.MarkDirty(key)
			}
			put(s.jobs, j.AccountID, j.ID, j)
		})
	case "s":
		return decodeInto(v, func(g *grantRecord) {
			if g.Grants == nil {
				g.Grants = map[string][]string{}
			}
			s.grants[g.AccountID] = g
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

// snapshot is Kind.Snapshot for a SCIM key. Callers hold the kernel's lock.
func (s *Store) snapshot(key string) any {
	kind, rest, _ := strings.Cut(key[len(prefix):], "/")
	accountID, id, _ := strings.Cut(rest, "/")
	switch kind {
	case "t":
		if t, ok := s.tokens[accountID]; ok {
			return *t
		}
	case "u":
		if u, ok := s.users[accountID][id]; ok {
			return *u
		}
	case "g":
		if g, ok := s.groups[accountID][id]; ok {
			return *g.clone()
		}
	case "m":
		if m, ok := s.mappings[accountID][id]; ok {
			return *m
		}
	case "j":
		if j, ok := s.jobs[accountID][id]; ok {
			return *j
		}
	case "s":
		if g, ok := s.grants[accountID]; ok {
			c := grantRecord{AccountID: accountID, Grants: make(map[string][]string, len(g.Grants))}
			for k, v := range g.Grants {
				c.Grants[k] = append([]string(nil), v...)
			}
			return c
		}
	}
	return nil
}

// sortOldestFirst sorts records by creation time, then by id (what key
// returns), so that records created in one clock tick keep a stable order.
func sortOldestFirst[T any](rs []T, key func(*T) (created time.Time, id string)) {
	slices.SortFunc(rs, func(a, b T) int {
		ta, ida := key(&a)
		tb, idb := key(&b)
		if c := ta.Compare(tb); c != 0 {
			return c
		}
		return strings.Compare(ida, idb)
	})
}
