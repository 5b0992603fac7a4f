// Package byok keeps the accounts' own provider credentials (bring your
// own key), sealed at rest, and chooses the one a request uses.
package byok

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
	"github.com/tollgate-dev/caddy-tollgate/storage/seal"
)

// SecretStore keeps the accounts' own provider credentials (BYOK), sealed
// at rest.
type SecretStore struct {
	k    *kernel.Kernel
	byok kernel.Records[Credential] // by account id, then id
	// acct is the accounts and keys a credential names (the store's
	// account store); org the workspaces it lives in (its org store).
	acct Accounts
	org  Workspaces
	now  func() time.Time
}

// Accounts is what the credentials ask of the accounts. Its methods run
// under the kernel's lock, which the caller holds, and never take it.
type Accounts interface {
	// AccountOf is an account's published record.
	AccountOf(id string) (*record.Account, bool)
	// CheckKeyHashes refuses a hash that is not a key of the account.
	CheckKeyHashes(accountID string, hashes []string) error
}

// Workspaces is what the credentials ask of the organizations, under the
// kernel's lock.
type Workspaces interface {
	// ResolveWorkspace finds an account's workspace by id or slug.
	ResolveWorkspace(accountID, ref string) (*record.Workspace, bool)
}

// New is the credentials of the accounts acct, in the workspaces org,
// over k, on the clock now.
func New(k *kernel.Kernel, acct Accounts, org Workspaces, now func() time.Time) *SecretStore {
	return &SecretStore{k: k, byok: kernel.Records[Credential]{}, acct: acct, org: org, now: now}
}

// Prefix keys credentials: b/<account id>/<credential id>.
const Prefix = "b/"

func (s *SecretStore) Kinds() []kernel.Kind {
	return []kernel.Kind{kernel.Removable(s.byok.Kind(Prefix, func(c *Credential) { s.k.ObserveSeq(c.Seq) }), s.byok)}
}

// Credential is a BYOK (bring your own key) provider credential: an
// account's own key for an upstream provider. The key itself is kept only
// sealed (see Sealer), bound to the record id; Label is a masked snippet of
// it for display.
//
// The allowlists restrict who may use the credential; nil means no
// restriction. Slices of a Credential returned by the store are shared and
// must not be modified.
type Credential struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	// WorkspaceID is the workspace the credential is scoped to: only keys
	// of that workspace use it. "" is global (every workspace of the
	// account); the API creates no global credential, and one stored
	// before workspaces held credentials is moved to the account's default
	// workspace when the store opens (see ensureCredentialWorkspaces).
	WorkspaceID         string    `json:"workspace_id"`
	Provider            string    `json:"provider"`
	Name                *string   `json:"name"`
	Label               string    `json:"label"`
	Disabled            bool      `json:"disabled"`
	IsFallback          bool      `json:"is_fallback"`
	IsBYOKOnly          bool      `json:"is_byok_only"`
	IsRequired          bool      `json:"is_required"`
	DeclaredZDR         *bool     `json:"declared_zdr"`
	AllowedModels       []string  `json:"allowed_models"`
	AllowedAPIKeyHashes []string  `json:"allowed_api_key_hashes"`
	AllowedUserIDs      []string  `json:"allowed_user_ids"`
	SortOrder           int       `json:"sort_order"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
	// Seq orders credentials by creation even within one clock tick.
	Seq uint64 `json:"seq"`
	// Sealed is the provider key, sealed with the record id as additional
	// data.
	Sealed []byte `json:"sealed"`
}

// SetSecret seals a new provider key into the credential and regenerates
// its label. The credential's ID must be set.
func (c *Credential) SetSecret(sealer *seal.Sealer, secret string) {
	c.Sealed = sealer.Seal([]byte(secret), []byte(c.ID))
	c.Label = seal.Mask(secret)
}

// Open returns the credential's provider key in plaintext. Callers keep it
// only as long as the request that needs it.
func (c Credential) Open(sealer *seal.Sealer) (string, error) {
	if sealer == nil {
		return "", seal.ErrUnseal
	}
	b, err := sealer.Open(c.Sealed, []byte(c.ID))
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func (c Credential) clone() Credential {
	c.AllowedModels = slices.Clone(c.AllowedModels)
	c.AllowedAPIKeyHashes = slices.Clone(c.AllowedAPIKeyHashes)
	c.AllowedUserIDs = slices.Clone(c.AllowedUserIDs)
	c.Sealed = slices.Clone(c.Sealed)
	if c.Name != nil {
		n := *c.Name
		c.Name = &n
	}
	if c.DeclaredZDR != nil {
		z := *c.DeclaredZDR
		c.DeclaredZDR = &z
	}
	return c
}

// NewBYOK describes a BYOK credential to create.
type NewBYOK struct {
	AccountID   string
	WorkspaceID string // id or slug; default: the account's default workspace
	Provider    string
	Name        *string
	// Secret is the provider key; it is sealed before it is stored.
	Secret                                             string
	Disabled, IsFallback, IsBYOKOnly, IsRequired       bool
	DeclaredZDR                                        *bool
	AllowedModels, AllowedAPIKeyHashes, AllowedUserIDs []string
}

func (c Credential) RecordIDs() (accountID, id string) { return c.AccountID, c.ID }

// CreateBYOK creates a credential in a workspace of the account, sealing
// its secret with sealer; ErrInvalid names an unknown workspace.
func (s *SecretStore) CreateBYOK(n NewBYOK, sealer *seal.Sealer) (Credential, error) {
	if sealer == nil {
		return Credential{}, fmt.Errorf("%w: BYOK is not configured", record.ErrInvalid)
	}
	if n.Secret == "" {
		return Credential{}, fmt.Errorf("%w: key is required", record.ErrInvalid)
	}
	if strings.TrimSpace(n.Provider) == "" {
		return Credential{}, fmt.Errorf("%w: provider is required", record.ErrInvalid)
	}
	t := s.now().UTC()
	c := Credential{
		ID: record.NewUUID(), AccountID: n.AccountID, Provider: n.Provider, Name: n.Name,
		Disabled: n.Disabled, IsFallback: n.IsFallback, IsBYOKOnly: n.IsBYOKOnly, IsRequired: n.IsRequired,
		DeclaredZDR: n.DeclaredZDR, AllowedModels: n.AllowedModels, AllowedAPIKeyHashes: n.AllowedAPIKeyHashes,
		AllowedUserIDs: n.AllowedUserIDs, CreatedAt: t, UpdatedAt: t,
	}
	c = c.clone()
	c.SetSecret(sealer, n.Secret)
	err := kernel.Create(s.k, s.byok, Prefix, func() (*Credential, error) {
		acct, ok := s.acct.AccountOf(n.AccountID)
		if !ok {
			return nil, kernel.ErrNotFound
		}
		if n.WorkspaceID == "" {
			n.WorkspaceID = acct.DefaultWorkspaceID
		}
		ws, ok := s.org.ResolveWorkspace(n.AccountID, n.WorkspaceID)
		if !ok {
			return nil, fmt.Errorf("%w: workspace_id: %q is not a workspace of this account", record.ErrInvalid, n.WorkspaceID)
		}
		c.WorkspaceID = ws.ID
		if err := s.acct.CheckKeyHashes(n.AccountID, c.AllowedAPIKeyHashes); err != nil {
			return nil, err
		}
		for _, o := range s.byok[n.AccountID] {
			if o.Provider == c.Provider && o.WorkspaceID == c.WorkspaceID {
				c.SortOrder = max(c.SortOrder, o.SortOrder+1)
			}
		}
		c.Seq = s.k.NextSeq()
		return &c, nil
	})
	if err != nil {
		return Credential{}, err
	}
	return c, nil
}

// BYOK returns one of an account's credentials; another account's
// credential is not found.
func (s *SecretStore) BYOK(accountID, id string) (Credential, bool) {
	return kernel.Lookup(s.k, s.byok, accountID, id)
}

// BYOKFilter selects credentials for ListBYOK.
type BYOKFilter struct {
	AccountID     string
	WorkspaceID   string // a workspace id; empty: every workspace
	Provider      string // empty: every provider
	Offset, Limit int    // Limit 0: no limit
}

// ListBYOK returns one page of an account's credentials, most recent
// first, and how many match the filter in all.
func (s *SecretStore) ListBYOK(f BYOKFilter) ([]Credential, int) {
	all := kernel.Collect(s.k, s.byok, f.AccountID, func(c *Credential) bool {
		return (f.WorkspaceID == "" || c.WorkspaceID == f.WorkspaceID) && (f.Provider == "" || c.Provider == f.Provider)
	})
	return kernel.NewestFirstPage(all, func(c *Credential) uint64 { return c.Seq }, f.Offset, f.Limit)
}

// UpdateBYOK applies fn to a copy of the credential and persists the
// result; fn may return an error to abort without writing, and may rotate
// the secret with SetSecret. Identity, ownership, provider, workspace and
// position cannot be changed through it.
func (s *SecretStore) UpdateBYOK(accountID, id string, fn func(*Credential) error) (Credential, error) {
	return kernel.Update(s.k, s.byok, Prefix, accountID, id, func(cur *Credential) (*Credential, error) {
		c := cur.clone()
		if err := fn(&c); err != nil {
			return nil, err
		}
		c.ID, c.AccountID, c.WorkspaceID, c.Provider = cur.ID, cur.AccountID, cur.WorkspaceID, cur.Provider
		c.SortOrder, c.CreatedAt, c.Seq = cur.SortOrder, cur.CreatedAt, cur.Seq
		if !slices.Equal(c.AllowedAPIKeyHashes, cur.AllowedAPIKeyHashes) {
			if err := s.acct.CheckKeyHashes(accountID, c.AllowedAPIKeyHashes); err != nil {
				return nil, err
			}
		}
		c.UpdatedAt = s.now().UTC()
		return &c, nil
	})
}

// DeleteBYOK removes a credential and its sealed key; it stops being used
// at once.
func (s *SecretStore) DeleteBYOK(accountID, id string) error {
	return kernel.Delete(s.k, s.byok, Prefix, accountID, id)
}

// BYOKUse is the request a credential would serve. An empty field is
// unknown: a credential whose allowlist restricts it does not match.
type BYOKUse struct {
	// WorkspaceID is the calling key's workspace: only its credentials
	// (and global ones) serve the request.
	WorkspaceID string
	KeyHash     string
	Model       string // public model id
	UserID      string // the calling key's creator
}

// BYOKFor returns the enabled credential of the account's default
// workspace for the provider that is tried first, among those with no
// allowlist restriction. Memory only.
func (s *SecretStore) BYOKFor(accountID, provider string) (Credential, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	var ws string
	if a, ok := s.acct.AccountOf(accountID); ok {
		ws = a.DefaultWorkspaceID
	}
	return s.byokFor(accountID, provider, BYOKUse{WorkspaceID: ws})
}

// BYOKForRequest is BYOKFor for a request: credentials whose allowlists
// exclude use are skipped. Non-fallback credentials come before fallback
// ones, then by sort_order, then oldest first.
func (s *SecretStore) BYOKForRequest(accountID, provider string, use BYOKUse) (Credential, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	return s.byokFor(accountID, provider, use)
}

// byokFor is BYOKForRequest. Callers hold the kernel's lock.
func (s *SecretStore) byokFor(accountID, provider string, use BYOKUse) (Credential, bool) {
	var best *Credential
	for _, c := range s.byok[accountID] {
		if c.Provider != provider || c.Disabled || !c.allows(use) {
			continue
		}
		if best == nil || c.triedBefore(best) {
			best = c
		}
	}
	if best == nil {
		return Credential{}, false
	}
	return *best, true
}

// CredentialsIn counts the account's credentials in a workspace. Callers
// hold the kernel's lock.
func CredentialsIn(s *SecretStore, accountID, workspaceID string) int {
	n := 0
	for _, c := range s.byok[accountID] {
		if c.WorkspaceID == workspaceID {
			n++
		}
	}
	return n
}

// EnsureWorkspaces moves the credentials stored before they belonged to a
// workspace into their account's default workspace. Called by the store's
// Open, after the accounts have their default workspace's id.
func EnsureWorkspaces(s *SecretStore) {
	for accountID, creds := range s.byok {
		a, ok := s.acct.AccountOf(accountID)
		if !ok {
			continue
		}
		for _, cr := range creds {
			if cr.WorkspaceID == "" {
				c := cr.clone()
				c.WorkspaceID = a.DefaultWorkspaceID
				kernel.PutDirty(s.k, s.byok, Prefix, &c)
			}
		}
	}
}

func (c *Credential) triedBefore(o *Credential) bool {
	if c.IsFallback != o.IsFallback {
		return !c.IsFallback
	}
	if c.SortOrder != o.SortOrder {
		return c.SortOrder < o.SortOrder
	}
	return c.Seq < o.Seq
}

func (c *Credential) allows(u BYOKUse) bool {
	if c.WorkspaceID != "" && c.WorkspaceID != u.WorkspaceID {
		return false
	}
	in := func(list []string, v string) bool { return list == nil || (v != "" && slices.Contains(list, v)) }
	return in(c.AllowedAPIKeyHashes, u.KeyHash) && in(c.AllowedModels, u.Model) && in(c.AllowedUserIDs, u.UserID)
}
