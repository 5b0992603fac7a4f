package storage

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/contentfilter"
	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// Guardrail restricts the keys and members it is assigned to: the models
// and providers they may use, a spending limit per key or per member, and
// data policies. Package policy decides what it admits, against
// the catalog's facts about each provider.
//
// Each workspace has a default guardrail (Workspace.DefaultGuardrailID)
// that applies to all of the workspace's traffic; it does not exist until
// it is first updated.
type Guardrail struct {
	ID          string  `json:"id"`
	AccountID   string  `json:"account_id"`
	WorkspaceID string  `json:"workspace_id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	// IsWorkspaceDefault marks the workspace's default guardrail.
	IsWorkspaceDefault bool `json:"is_workspace_default,omitempty"`

	AllowedModels      []string `json:"allowed_models"`
	AllowedProviders   []string `json:"allowed_providers"`
	IgnoredModels      []string `json:"ignored_models"`
	IgnoredProviders   []string `json:"ignored_providers"`
	AllowedDataRegions []string `json:"allowed_data_regions"`
	// Content filters, as checked and normalized by package contentfilter
	// (builtin labels system-assigned); filters is their compiled form,
	// made when the guardrail is written or loaded.
	ContentFilters        json.RawMessage `json:"content_filters,omitempty"`
	ContentFilterBuiltins json.RawMessage `json:"content_filter_builtins,omitempty"`
	filters               *contentfilter.Guard

	EnableFreeModelPublication *bool `json:"enable_free_model_publication"`
	EnableFreeModelTraining    *bool `json:"enable_free_model_training"`
	EnablePaidModelTraining    *bool `json:"enable_paid_model_training"`
	EnforceZDR                 *bool `json:"enforce_zdr"`
	EnforceZDRAnthropic        *bool `json:"enforce_zdr_anthropic"`
	EnforceZDRGoogle           *bool `json:"enforce_zdr_google"`
	EnforceZDROpenAI           *bool `json:"enforce_zdr_openai"`
	EnforceZDROther            *bool `json:"enforce_zdr_other"`
	EnforceZDRXAI              *bool `json:"enforce_zdr_xai"`

	IncludeBYOKInBudgets bool           `json:"include_byok_in_budgets"`
	Limit                *money.Amount  `json:"limit"`
	ResetInterval        money.Interval `json:"reset_interval"`

	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt *time.Time `json:"updated_at"`

	// Keys and Members are the assignments, by key hash and user id.
	Keys    map[string]*Assignment `json:"keys,omitempty"`
	Members map[string]*Assignment `json:"members,omitempty"`
}

// Assignment is one key's or member's assignment to a guardrail.
type Assignment struct {
	ID         string    `json:"id"`
	AssignedBy *string   `json:"assigned_by"`
	CreatedAt  time.Time `json:"created_at"`
}

func (g *Guardrail) clone() *Guardrail {
	c := *g
	c.Keys = maps.Clone(g.Keys)
	c.Members = maps.Clone(g.Members)
	if c.Keys == nil {
		c.Keys = map[string]*Assignment{}
	}
	if c.Members == nil {
		c.Members = map[string]*Assignment{}
	}
	return &c
}

const prefixGuardrail = "r/" // r/<account id>/<guardrail id>

func guardrailKey(accountID, id string) string {
	return kernel.RecordKey(prefixGuardrail, accountID, id)
}

func (g Guardrail) RecordIDs() (accountID, id string) { return g.AccountID, g.ID }

// putGuardrail publishes a guardrail record. Callers hold the kernel's lock.
func (s *OrgStore) putGuardrail(g *Guardrail) *kernel.Batch {
	s.rulesChanged()
	return kernel.PutDirty(s.k, s.guardrails, prefixGuardrail, g)
}

// deleteGuardrailLocked removes a guardrail. Callers hold the kernel's lock.
func (s *OrgStore) deleteGuardrailLocked(accountID, id string) {
	delete(s.guardrails[accountID], id)
	s.k.MarkDirty(guardrailKey(accountID, id))
	s.rulesChanged()
}

// checkGuardrail validates a guardrail's settings.
func checkGuardrail(g *Guardrail) error {
	g.Name = strings.TrimSpace(g.Name)
	if g.Name == "" {
		return fmt.Errorf("%w: name: required non-empty string", ErrInvalid)
	}
	if g.Limit != nil && *g.Limit < 0 {
		return fmt.Errorf("%w: limit_usd: must not be negative", ErrInvalid)
	}
	if g.Limit != nil && g.ResetInterval == money.IntervalNone {
		return fmt.Errorf("%w: reset_interval: required with limit_usd (daily, weekly or monthly)", ErrInvalid)
	}
	f, custom, builtins, err := contentfilter.Compile(g.ID, g.Name, g.ContentFilters, g.ContentFilterBuiltins)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, err)
	}
	g.filters, g.ContentFilters, g.ContentFilterBuiltins = f, custom, builtins
	return nil
}

// Filters are the guardrail's compiled content filters (nil: none).
func (g *Guardrail) Filters() *contentfilter.Guard { return g.filters }

// CreateGuardrail creates a guardrail in a workspace (default: the
// account's default workspace); fn fills in its settings.
func (s *OrgStore) CreateGuardrail(accountID string, fn func(*Guardrail) error) (Guardrail, error) {
	t := now().UTC()
	g := &Guardrail{ID: record.NewUUID(), AccountID: accountID, CreatedAt: t,
		Keys: map[string]*Assignment{}, Members: map[string]*Assignment{}}
	if err := fn(g); err != nil {
		return Guardrail{}, err
	}
	if err := checkGuardrail(g); err != nil {
		return Guardrail{}, err
	}
	s.k.Lock()
	a, ok := s.acct.accountOf(accountID)
	if !ok {
		s.k.Unlock()
		return Guardrail{}, ErrNotFound
	}
	if g.WorkspaceID == "" {
		g.WorkspaceID = a.DefaultWorkspaceID
	}
	if _, ok := s.workspaces[accountID][g.WorkspaceID]; !ok {
		s.k.Unlock()
		return Guardrail{}, fmt.Errorf("%w: workspace_id: workspace %s not found", ErrNotFound, g.WorkspaceID)
	}
	b := s.putGuardrail(g)
	s.k.Unlock()
	return *g, b.Wait()
}

// Guardrail returns a guardrail by id.
func (s *OrgStore) Guardrail(accountID, id string) (Guardrail, bool) {
	return kernel.Lookup(s.k, s.guardrails, accountID, id)
}

// Guardrails lists the guardrails of a workspace (empty: every workspace),
// oldest first.
func (s *OrgStore) Guardrails(accountID, workspaceID string) []Guardrail {
	out := kernel.Collect(s.k, s.guardrails, accountID, func(g *Guardrail) bool {
		return workspaceID == "" || g.WorkspaceID == workspaceID
	})
	kernel.SortOldestFirst(out, func(r *Guardrail) (time.Time, string) { return r.CreatedAt, r.ID })
	return out
}

// UpdateGuardrail applies fn to a copy of the guardrail. Updating a
// workspace's unconfigured default guardrail creates it (created reports
// that); its name is derived from the workspace.
func (s *OrgStore) UpdateGuardrail(accountID, id string, fn func(g *Guardrail, workspaceDefault bool) error) (g Guardrail, created bool, err error) {
	s.k.Lock()
	cur, ok := s.guardrails[accountID][id]
	var next *Guardrail
	if ok {
		next = cur.clone()
	} else {
		ws := s.workspaceByDefaultGuardrail(accountID, id)
		if ws == nil {
			s.k.Unlock()
			return Guardrail{}, false, ErrNotFound
		}
		next = &Guardrail{ID: id, AccountID: accountID, WorkspaceID: ws.ID, IsWorkspaceDefault: true,
			Name: ws.Name + " default guardrail", CreatedAt: now().UTC(),
			Keys: map[string]*Assignment{}, Members: map[string]*Assignment{}}
		created = true
	}
	if err := fn(next, next.IsWorkspaceDefault); err != nil {
		s.k.Unlock()
		return Guardrail{}, false, err
	}
	if cur != nil {
		next.ID, next.AccountID, next.WorkspaceID, next.CreatedAt = cur.ID, cur.AccountID, cur.WorkspaceID, cur.CreatedAt
		next.IsWorkspaceDefault, next.Keys, next.Members = cur.IsWorkspaceDefault, cur.Keys, cur.Members
	}
	if err := checkGuardrail(next); err != nil {
		s.k.Unlock()
		return Guardrail{}, false, err
	}
	t := now().UTC()
	next.UpdatedAt = &t
	b := s.putGuardrail(next)
	s.k.Unlock()
	return *next, created, b.Wait()
}

// workspaceByDefaultGuardrail finds the workspace whose default guardrail
// id is id. Callers hold the kernel's lock.
func (s *OrgStore) workspaceByDefaultGuardrail(accountID, id string) *Workspace {
	for _, w := range s.workspaces[accountID] {
		if w.DefaultGuardrailID == id {
			return w
		}
	}
	return nil
}

// DeleteGuardrail deletes a guardrail and its assignments.
func (s *OrgStore) DeleteGuardrail(accountID, id string) error {
	s.k.Lock()
	if _, ok := s.guardrails[accountID][id]; !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	s.deleteGuardrailLocked(accountID, id)
	b := s.k.Pending()
	s.k.Unlock()
	return b.Wait()
}

// AssignKeys assigns keys of the account to a guardrail. A key holds at
// most one guardrail: assigning replaces its previous one. It returns how
// many keys were newly assigned here.
func (s *OrgStore) AssignKeys(accountID, id string, hashes []string, by *string) (int, error) {
	check := func() error {
		for _, h := range hashes {
			if k, ok := s.acct.keyOf(h); !ok || k.AccountID != accountID {
				return fmt.Errorf("%w: API key %s not found", ErrNotFound, h)
			}
		}
		return nil
	}
	return s.assign(accountID, id, check, func(g *Guardrail, t time.Time) int {
		n := 0
		for _, h := range hashes {
			if _, in := g.Keys[h]; in {
				continue
			}
			// A key holds one guardrail: take it off any other.
			for oid, o := range s.guardrails[accountID] {
				if _, in := o.Keys[h]; in && oid != id {
					oc := o.clone()
					delete(oc.Keys, h)
					s.putGuardrail(oc)
				}
			}
			g.Keys[h] = &Assignment{ID: record.NewUUID(), AssignedBy: by, CreatedAt: t}
			n++
		}
		return n
	})
}

// assign adds assignments to a guardrail that takes them, and waits until
// they are durable: the one lock site of assigning. Under Lock, check
// refuses what cannot be assigned, then add adds to g (a copy of the
// guardrail) and returns how many are new.
func (s *OrgStore) assign(accountID, id string, check func() error, add func(g *Guardrail, t time.Time) int) (int, error) {
	s.k.Lock()
	cur, err := s.assignable(accountID, id)
	if err == nil {
		err = check()
	}
	if err != nil {
		s.k.Unlock()
		return 0, err
	}
	g := cur.clone()
	n := add(g, now().UTC())
	b := s.putGuardrail(g)
	s.k.Unlock()
	return n, b.Wait()
}

// assignable returns a guardrail that takes assignments. Callers hold the kernel's lock.
func (s *OrgStore) assignable(accountID, id string) (*Guardrail, error) {
	g, ok := s.guardrails[accountID][id]
	if !ok {
		return nil, ErrNotFound
	}
	if g.IsWorkspaceDefault {
		return nil, fmt.Errorf("%w: a workspace's default guardrail applies to all of its traffic and takes no assignments", ErrInvalid)
	}
	return g, nil
}

// UnassignKeys removes keys from a guardrail and returns how many were
// assigned.
func (s *OrgStore) UnassignKeys(accountID, id string, hashes []string) (int, error) {
	return s.unassign(accountID, id, hashes, func(g *Guardrail) map[string]*Assignment { return g.Keys })
}

// AssignMembers assigns organization members to a guardrail and returns
// how many were newly assigned.
func (s *OrgStore) AssignMembers(accountID, id string, userIDs []string, by *string) (int, error) {
	check := func() error {
		for _, u := range userIDs {
			if m, ok := s.members[accountID][u]; !ok || !m.Active {
				return fmt.Errorf("%w: user %s is not a member of this organization", ErrNotFound, u)
			}
		}
		return nil
	}
	return s.assign(accountID, id, check, func(g *Guardrail, t time.Time) int {
		n := 0
		for _, u := range userIDs {
			if _, in := g.Members[u]; !in {
				g.Members[u] = &Assignment{ID: record.NewUUID(), AssignedBy: by, CreatedAt: t}
				n++
			}
		}
		return n
	})
}

// UnassignMembers removes members from a guardrail and returns how many
// were assigned.
func (s *OrgStore) UnassignMembers(accountID, id string, userIDs []string) (int, error) {
	return s.unassign(accountID, id, userIDs, func(g *Guardrail) map[string]*Assignment { return g.Members })
}

func (s *OrgStore) unassign(accountID, id string, ids []string, of func(*Guardrail) map[string]*Assignment) (int, error) {
	s.k.Lock()
	cur, ok := s.guardrails[accountID][id]
	if !ok {
		s.k.Unlock()
		return 0, ErrNotFound
	}
	g := cur.clone()
	n := 0
	for _, x := range ids {
		if _, in := of(g)[x]; in {
			delete(of(g), x)
			n++
		}
	}
	if n == 0 {
		s.k.Unlock()
		return 0, nil
	}
	b := s.putGuardrail(g)
	s.k.Unlock()
	return n, b.Wait()
}

// KeyAssignment is a key's assignment with its guardrail and key.
type KeyAssignment struct {
	Assignment
	GuardrailID string
	Key         APIKey
}

// MemberAssignment is a member's assignment with its guardrail.
type MemberAssignment struct {
	Assignment
	GuardrailID string
	UserID      string
}

// KeyAssignments lists the key assignments of a guardrail (empty id: of
// every guardrail of the account), oldest first.
func (s *OrgStore) KeyAssignments(accountID, id string) []KeyAssignment {
	s.k.RLock()
	var out []KeyAssignment
	for gid, g := range s.guardrails[accountID] {
		if id != "" && gid != id {
			continue
		}
		for h, a := range g.Keys {
			if k, ok := s.acct.keyOf(h); ok {
				out = append(out, KeyAssignment{Assignment: *a, GuardrailID: gid, Key: *k})
			}
		}
	}
	s.k.RUnlock()
	kernel.SortOldestFirst(out, func(r *KeyAssignment) (time.Time, string) { return r.CreatedAt, r.ID })
	return out
}

// MemberAssignments lists the member assignments of a guardrail (empty id:
// of every guardrail of the account), oldest first.
func (s *OrgStore) MemberAssignments(accountID, id string) []MemberAssignment {
	s.k.RLock()
	var out []MemberAssignment
	for gid, g := range s.guardrails[accountID] {
		if id != "" && gid != id {
			continue
		}
		for u, a := range g.Members {
			out = append(out, MemberAssignment{Assignment: *a, GuardrailID: gid, UserID: u})
		}
	}
	s.k.RUnlock()
	kernel.SortOldestFirst(out, func(r *MemberAssignment) (time.Time, string) { return r.CreatedAt, r.ID })
	return out
}

// keyDeleted removes a deleted key from its guardrail. Callers hold the
// kernel's lock.
func (s *OrgStore) keyDeleted(accountID, hash string) {
	for _, g := range s.guardrails[accountID] {
		if _, in := g.Keys[hash]; in {
			c := g.clone()
			delete(c.Keys, hash)
			s.putGuardrail(c)
		}
	}
	s.rulesChanged()
}

// loaded readies a guardrail read from the database or another replica:
// its maps, and its compiled filters (a stored filter that no longer
// compiles makes the guardrail refuse every request).
func (g *Guardrail) loaded() {
	g.initMaps()
	f, _, _, err := contentfilter.Compile(g.ID, g.Name, g.ContentFilters, g.ContentFilterBuiltins)
	if err != nil {
		f = contentfilter.Unusable(g.ID, g.Name)
	}
	g.filters = f
}

// initMaps gives a loaded guardrail the maps that JSON leaves nil.
func (g *Guardrail) initMaps() {
	if g.Keys == nil {
		g.Keys = map[string]*Assignment{}
	}
	if g.Members == nil {
		g.Members = map[string]*Assignment{}
	}
}
