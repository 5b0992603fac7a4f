package storage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
)

// NewManagementKey describes a management key to create.
type NewManagementKey struct {
	AccountID     string
	Name          string
	ExpiresAt     *time.Time // fixed at creation
	CreatorUserID *string
}

// CreateManagementKey creates a management key and returns it with the key
// string, which is never stored and cannot be retrieved again.
func (s *AccountStore) CreateManagementKey(n NewManagementKey) (ManagementKey, string, error) {
	if strings.TrimSpace(n.Name) == "" {
		return ManagementKey{}, "", fmt.Errorf("%w: name is required", ErrInvalid)
	}
	t := now().UTC()
	if n.ExpiresAt != nil && !n.ExpiresAt.After(t) {
		return ManagementKey{}, "", fmt.Errorf("%w: expires_at must be in the future", ErrInvalid)
	}
	secret, hash, label := newSecret(ManagementKeyPrefix)
	k := ManagementKey{
		Hash: hash, AccountID: n.AccountID, Name: n.Name, Label: label,
		CreatorUserID: n.CreatorUserID, CreatedAt: t, ExpiresAt: utcPtr(n.ExpiresAt),
	}
	s.k.Lock()
	acct, ok := s.accounts[n.AccountID]
	if !ok {
		s.k.Unlock()
		return ManagementKey{}, "", ErrNotFound
	}
	if err := s.org.checkMgmtKeyCreator(acct, n.CreatorUserID); err != nil {
		s.k.Unlock()
		return ManagementKey{}, "", err
	}
	s.putMgmtKey(&k)
	b := s.k.MarkDirty(prefixMgmtKey + hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return ManagementKey{}, "", err
	}
	return k, secret, nil
}

// ManagementKeys lists an account's management keys, newest first; with an
// empty accountID it lists every account's (the operator's view).
func (s *AccountStore) ManagementKeys(accountID string) []ManagementKey {
	s.k.RLock()
	var out []ManagementKey
	if accountID == "" {
		out = make([]ManagementKey, 0, len(s.mgmtKeys))
		for _, k := range s.mgmtKeys {
			out = append(out, *k)
		}
	} else {
		out = make([]ManagementKey, 0, len(s.mgmtIdx[accountID]))
		for _, h := range s.mgmtIdx[accountID] {
			out = append(out, *s.mgmtKeys[h])
		}
	}
	s.k.Visited(len(out))
	s.k.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].Hash < out[j].Hash
	})
	return out
}

// DeleteManagementKey revokes a management key; it stops working at once.
func (s *AccountStore) DeleteManagementKey(hash string) error {
	s.k.Lock()
	if !s.dropMgmtKey(hash) {
		s.k.Unlock()
		return ErrNotFound
	}
	b := s.k.MarkDirty(prefixMgmtKey + hash)
	s.k.Unlock()
	return b.Wait()
}

// NewAPIKey describes a regular API key to create.
type NewAPIKey struct {
	AccountID          string
	WorkspaceID        string // default: the account's default workspace
	Name               string
	Limit              *money.Amount
	LimitReset         money.Interval
	IncludeBYOKInLimit bool
	ExpiresAt          *time.Time
	CreatorUserID      *string
	ExternalUser       *string
	// ByAdmin: an admin creates the key (the account's management key),
	// so its limit is an admin's (APIKey.LimitByAdmin).
	ByAdmin bool
	// Connect: the app of a key provisioned through the connect flow,
	// which needs CreatorUserID.
	Connect *ConnectApp
	// RateLimits are the key's rate limits; nil: none.
	RateLimits *RateLimits
}

// CreateAPIKey creates a regular key and returns it with the key string,
// which is never stored and cannot be retrieved again.
func (s *AccountStore) CreateAPIKey(n NewAPIKey) (APIKey, string, error) {
	if strings.TrimSpace(n.Name) == "" {
		return APIKey{}, "", fmt.Errorf("%w: name is required", ErrInvalid)
	}
	t := now().UTC()
	if n.ExpiresAt != nil && !n.ExpiresAt.After(t) {
		return APIKey{}, "", fmt.Errorf("%w: expires_at must be in the future", ErrInvalid)
	}
	secret, hash, label := newSecret(APIKeyPrefix)
	s.k.Lock()
	acct, ok := s.accounts[n.AccountID]
	if !ok {
		s.k.Unlock()
		return APIKey{}, "", ErrNotFound
	}
	if n.WorkspaceID == "" {
		n.WorkspaceID = acct.DefaultWorkspaceID
	}
	ws, ok := s.org.resolveWorkspace(n.AccountID, n.WorkspaceID)
	if !ok {
		s.k.Unlock()
		return APIKey{}, "", fmt.Errorf("%w: workspace_id %q is not a workspace of this account", ErrNotFound, n.WorkspaceID)
	}
	n.AccountID, n.WorkspaceID = acct.ID, ws.ID // the account's strings, not the request's
	if n.CreatorUserID != nil && !s.org.isAccountUser(acct, *n.CreatorUserID) {
		s.k.Unlock()
		return APIKey{}, "", fmt.Errorf("%w: creator_user_id: not a member of this account", ErrInvalid)
	}
	if n.Connect != nil && n.CreatorUserID == nil {
		s.k.Unlock()
		return APIKey{}, "", fmt.Errorf("%w: a connect key needs its member", ErrInvalid)
	}
	creator := n.CreatorUserID
	if creator == nil && acct.OwnerUserID != "" {
		owner := acct.OwnerUserID
		creator = &owner
	}
	k := APIKey{
		Hash: hash, AccountID: n.AccountID, WorkspaceID: n.WorkspaceID,
		Name: n.Name, Label: label, Limit: n.Limit, LimitReset: n.LimitReset,
		IncludeBYOKInLimit: n.IncludeBYOKInLimit, CreatorUserID: creator,
		ExternalUser: n.ExternalUser, CreatedAt: t, UpdatedAt: t,
		ExpiresAt: utcPtr(n.ExpiresAt), Seq: s.k.NextSeq(), Connect: n.Connect, RateLimits: n.RateLimits,
		LimitByAdmin: n.ByAdmin && n.Limit != nil,
	}
	s.putKey(&k)
	s.org.keyChanged()
	b := s.k.MarkDirty(prefixAPIKey + hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return APIKey{}, "", err
	}
	return k, secret, nil
}

// APIKey returns the regular key with the given hash.
func (s *AccountStore) APIKey(hash string) (APIKey, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	return s.keys.Get(hash)
}

// KeyFilter selects keys for ListAPIKeys.
type KeyFilter struct {
	AccountID       string
	WorkspaceID     string // empty: every workspace
	IncludeDisabled bool
	Offset, Limit   int
}

// ListAPIKeys returns one page of an account's keys, most recent first.
// It walks the account's own keys from the newest (keytable.Index) and stops
// at the page's end, copying only the page's records under the lock; the
// order (creation, Seq) never changes, so a key created or deleted while a
// client pages shifts later offsets by one, never reorders them.
func (s *AccountStore) ListAPIKeys(f KeyFilter) []APIKey {
	out := []APIKey{}
	s.k.RLock()
	defer s.k.RUnlock()
	ak := s.accountKeysRLocked(f.AccountID)
	if ak == nil {
		return out
	}
	skip, visited := f.Offset, 0
	for i := ak.Len() - 1; i >= 0; i-- {
		visited++
		slot := ak.Slot(i)
		if (f.WorkspaceID != "" && s.keys.SlotWorkspace(slot) != f.WorkspaceID) || (s.keys.SlotDisabled(slot) && !f.IncludeDisabled) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		out = append(out, s.keys.At(slot))
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	s.k.Visited(visited)
	return out
}

// UpdateAPIKey applies fn to a copy of the key and persists the result; fn
// may return an error to abort without writing. Identity, ownership and
// counters cannot be changed through it.
func (s *AccountStore) UpdateAPIKey(hash string, fn func(*APIKey) error) (APIKey, error) {
	s.k.Lock()
	cur, ok := s.keys.Get(hash)
	if !ok {
		s.k.Unlock()
		return APIKey{}, ErrNotFound
	}
	k := cur
	if err := fn(&k); err != nil {
		s.k.Unlock()
		return APIKey{}, err
	}
	k.Hash, k.AccountID, k.Label, k.CreatedAt, k.Seq = cur.Hash, cur.AccountID, cur.Label, cur.CreatedAt, cur.Seq
	k.Usage, k.BYOKUsage = cur.Usage, cur.BYOKUsage
	k.UpdatedAt = now().UTC()
	s.putKey(&k)
	s.org.keyChanged()
	b := s.k.MarkDirty(prefixAPIKey + hash)
	s.k.Unlock()
	return k, b.Wait()
}

// CheckKeyChange applies the rule of what an admin set on a key to next,
// a change of cur: a limit (with its reset and whether BYOK counts) that
// an admin set, and an admin's disable, are an admin's to change. A
// member's change of them is ErrForbidden, naming the field; byAdmin (an
// organization admin, the account's owner, its management key) changes
// anything and makes what it changes the admin's. Call it from the
// function given to UpdateAPIKey, with cur the record before the change.
func CheckKeyChange(cur APIKey, next *APIKey, byAdmin bool) error {
	limitChanged := !sameAmount(cur.Limit, next.Limit) || cur.LimitReset != next.LimitReset ||
		cur.IncludeBYOKInLimit != next.IncludeBYOKInLimit
	if !byAdmin {
		if cur.LimitByAdmin && limitChanged {
			return fmt.Errorf("%w: limit: an organization admin set this key's limit; only an admin can change or remove it", ErrForbidden)
		}
		if !sameRateLimits(cur.RateLimits, next.RateLimits) {
			return fmt.Errorf("%w: rate_limits: only an organization admin can change a key's rate limits", ErrForbidden)
		}
		if cur.DisabledByAdmin && cur.Disabled && !next.Disabled {
			return fmt.Errorf("%w: disabled: an organization admin disabled this key; only an admin can enable it", ErrForbidden)
		}
	}
	if limitChanged {
		next.LimitByAdmin = byAdmin && next.Limit != nil
	}
	if cur.Disabled != next.Disabled {
		next.DisabledByAdmin = byAdmin && next.Disabled
	}
	return nil
}

func sameRateLimits(a, b *RateLimits) bool {
	return !a.Any() && !b.Any() || a != nil && b != nil && *a == *b
}

func sameAmount(a, b *money.Amount) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// DeleteAPIKey removes a regular key; it stops working at once.
func (s *AccountStore) DeleteAPIKey(hash string) error {
	s.k.Lock()
	accountID, ok := s.dropKey(hash)
	if !ok {
		s.k.Unlock()
		return ErrNotFound
	}
	s.org.keyDeleted(accountID, hash)
	b := s.k.MarkDirty(prefixAPIKey + hash)
	s.k.Unlock()
	return b.Wait()
}

// Principal is the authenticated caller behind a key string.
//
// Key is a copy of the key's record, made for the caller (the store holds
// keys in a compact table, keytable.Table); MgmtKey points at the store's
// snapshot, which is never modified (every change publishes a new
// record). Callers must not modify MgmtKey.
type Principal struct {
	Management bool
	Hash       string
	AccountID  string
	// Key is the regular key's record (an empty record for management keys).
	Key *APIKey
	// MgmtKey is the management key's record (empty for regular keys).
	MgmtKey *ManagementKey
}

// Shared empty records, so that a principal's other kind reads as zero.
var (
	noAPIKey        = &APIKey{}
	noManagementKey = &ManagementKey{}
)

// Authenticate resolves a key string from memory, with no disk access. It
// returns ErrNotFound for an unknown key; disabled and expired keys are
// returned so that the caller can say why they are refused.
func (s *AccountStore) Authenticate(secret string) (Principal, error) {
	return s.AuthenticateInto(secret, nil)
}

// AuthenticateInto is Authenticate reading a regular key's record into k,
// which the caller allocated (with what it keeps the principal in: one
// allocation less per request); k nil: a record of its own.
func (s *AccountStore) AuthenticateInto(secret string, k *APIKey) (Principal, error) {
	hash := HashSecret(secret)
	s.k.RLock()
	defer s.k.RUnlock()
	if slot, ok := s.keys.Lookup(hash); ok {
		if k == nil {
			k = new(APIKey)
		}
		s.keys.Read(slot, hash, k)
		return Principal{Hash: hash, AccountID: k.AccountID, Key: k, MgmtKey: noManagementKey}, nil
	}
	if m, ok := s.mgmtKeys[hash]; ok {
		return Principal{Management: true, Hash: hash, AccountID: m.AccountID, Key: noAPIKey, MgmtKey: m}, nil
	}
	return Principal{Key: noAPIKey, MgmtKey: noManagementKey}, ErrNotFound
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// checkKeyHashes checks that every hash is a regular key of the account.
// Callers hold the kernel's lock.
func (s *AccountStore) checkKeyHashes(accountID string, hashes []string) error {
	for _, h := range hashes {
		if a, ok := s.keys.AccountOf(h); !ok || a != accountID {
			return fmt.Errorf("%w: allowed_api_key_hashes: %q is not an API key of this account", ErrInvalid, h)
		}
	}
	return nil
}
