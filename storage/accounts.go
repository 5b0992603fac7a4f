package storage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/codec"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/keytable"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// AccountStore keeps accounts, their credit purchases and their keys,
// regular and management: who may call the gateway, and on whose account.
type AccountStore struct {
	k         *kernel.Kernel
	accounts  map[string]*Account
	keys      *keytable.Table           // by hash
	mgmtKeys  map[string]*ManagementKey // by hash
	keyIdx    keytable.Index            // keys by account
	mgmtIdx   mgmtKeyIndex              // management keys by account
	purchases map[string][]Purchase     // by account id
	codes     map[string]*ConnectCode   // connect authorization codes, by hash
	// org is the organizations its keys and codes belong to (OrgStore).
	org accountOrgs
}

// accountOrgs is what the accounts ask of the organizations: the
// workspaces and members a key or code names, and telling them of a key
// that changed. Its methods run under the kernel's lock, which the
// caller holds, and never take it (see Store).
type accountOrgs interface {
	// putWorkspace publishes a new account's default workspace.
	putWorkspace(w *Workspace) *kernel.Batch
	// resolveWorkspace finds an account's workspace by id or slug.
	resolveWorkspace(accountID, ref string) (*Workspace, bool)
	// isAccountUser reports whether userID is a user of the account.
	isAccountUser(acct *Account, userID string) bool
	// checkMgmtKeyCreator refuses a management key's creator who may not
	// create one.
	checkMgmtKeyCreator(acct *Account, creator *string) error
	// keyChanged: a key was created or changed (its rules may differ).
	keyChanged()
	// keyDeleted: a key of the account is gone (its assignments go too).
	keyDeleted(accountID, hash string)
}

// Database key prefixes of the accounts' records.
const (
	prefixAccount  = "a/"
	prefixPurchase = "p/" // p/<account id>/<purchase id>, append-only
	prefixMgmtKey  = "m/"
	prefixAPIKey   = "k/"
)

// kinds are the accounts' kinds of record.
func (s *AccountStore) kinds() []kernel.Kind {
	return []kernel.Kind{
		{Prefix: prefixAccount, Load: s.loadAccount, Reset: func() { clear(s.accounts) }, Snapshot: s.accountSnapshot,
			Remove: func(key string) { delete(s.accounts, key[len(prefixAccount):]) }},
		{Prefix: prefixPurchase, Load: s.loadPurchase, Reset: func() { clear(s.purchases) }, Append: true},
		{Prefix: prefixMgmtKey, Load: s.loadMgmtKey, Reset: func() { clear(s.mgmtKeys); clear(s.mgmtIdx) }, Snapshot: s.mgmtKeySnapshot,
			Remove: func(key string) { s.dropMgmtKey(key[len(prefixMgmtKey):]) }},
		{Prefix: prefixAPIKey, Load: s.loadAPIKey, Reset: func() { s.keys.Reset(); clear(s.keyIdx) }, Snapshot: s.apiKeySnapshot,
			Remove: func(key string) { s.dropKey(key[len(prefixAPIKey):]) }},
		s.connectKinds()[0],
	}
}

// NewAccount describes an account to create.
type NewAccount struct {
	Name            string
	Kind            AccountKind
	Billing         Billing // default prepaid
	RateLimitExempt bool
	// RateLimits are the account's own rate limits; nil: the gateway's
	// defaults.
	RateLimits *RateLimits
}

// CreateAccount creates an account with its default workspace.
func (s *AccountStore) CreateAccount(na NewAccount) (Account, error) {
	if strings.TrimSpace(na.Name) == "" {
		return Account{}, fmt.Errorf("%w: name is required", ErrInvalid)
	}
	if na.Kind != AccountPersonal && na.Kind != AccountOrganization {
		return Account{}, fmt.Errorf("%w: type must be %q or %q", ErrInvalid, AccountPersonal, AccountOrganization)
	}
	if na.Billing == "" {
		na.Billing = BillingPrepaid
	}
	t := now().UTC()
	a := Account{
		Name:               na.Name,
		Kind:               na.Kind,
		Billing:            na.Billing,
		RateLimitExempt:    na.RateLimitExempt,
		RateLimits:         na.RateLimits,
		DefaultWorkspaceID: record.NewUUID(),
		CreatedAt:          t,
		UpdatedAt:          t,
	}
	if na.Kind == AccountOrganization {
		a.ID = newID("org_")
	} else {
		a.ID = newID("user_")
		a.OwnerUserID = a.ID
	}
	s.k.Lock()
	s.accounts[a.ID] = &a
	s.org.putWorkspace(defaultWorkspace(&a))
	b := s.k.MarkDirty(prefixAccount + a.ID)
	s.k.Unlock()
	return a, b.Wait()
}

// Account returns the account with the given id.
func (s *AccountStore) Account(id string) (Account, bool) {
	a, ok := s.AccountSnapshot(id)
	if !ok {
		return Account{}, false
	}
	return *a, true
}

// AccountSnapshot returns the account's current record without copying it;
// the record is never modified (changes publish a new one), and callers
// must not modify it.
func (s *AccountStore) AccountSnapshot(id string) (*Account, bool) {
	s.k.RLock()
	defer s.k.RUnlock()
	a, ok := s.accounts[id]
	return a, ok
}

// Accounts lists all accounts, oldest first.
func (s *AccountStore) Accounts() []Account {
	s.k.RLock()
	out := make([]Account, 0, len(s.accounts))
	for _, a := range s.accounts {
		out = append(out, *a)
	}
	s.k.RUnlock()
	kernel.SortOldestFirst(out, func(r *Account) (time.Time, string) { return r.CreatedAt, r.ID })
	return out
}

// UpdateAccount applies fn to a copy of the account and persists the result.
// fn may return an error to abort without writing.
func (s *AccountStore) UpdateAccount(id string, fn func(*Account) error) (Account, error) {
	s.k.Lock()
	cur, ok := s.accounts[id]
	if !ok {
		s.k.Unlock()
		return Account{}, ErrNotFound
	}
	a := *cur
	if err := fn(&a); err != nil {
		s.k.Unlock()
		return Account{}, err
	}
	// Identity and money are not editable here.
	a.ID, a.CreditsPurchased, a.Purchases, a.Usage, a.BYOKUsage = cur.ID, cur.CreditsPurchased, cur.Purchases, cur.Usage, cur.BYOKUsage
	a.FreeModelRequests, a.FreeModelMinute = cur.FreeModelRequests, cur.FreeModelMinute
	a.UpdatedAt = now().UTC()
	s.accounts[id] = &a
	b := s.k.MarkDirty(prefixAccount + a.ID)
	s.k.Unlock()
	return a, b.Wait()
}

// RecordPurchase adds a credit purchase to an account, atomically with the
// account's purchased total; a purchase that would take the total beyond
// MaxAmount is refused, never wrapped.
func (s *AccountStore) RecordPurchase(accountID string, amount money.Amount, note string) (Purchase, Account, error) {
	if amount <= 0 {
		return Purchase{}, Account{}, fmt.Errorf("%w: amount must be positive", ErrInvalid)
	}
	s.k.Lock()
	cur, ok := s.accounts[accountID]
	if !ok {
		s.k.Unlock()
		return Purchase{}, Account{}, ErrNotFound
	}
	total, ok := money.AddAmounts(cur.CreditsPurchased, amount)
	if !ok {
		s.k.Unlock()
		return Purchase{}, Account{}, fmt.Errorf("%w: amount: the account's total_credits (%s) plus this purchase would exceed %s",
			ErrInvalid, cur.CreditsPurchased, money.MaxAmount)
	}
	t := now().UTC()
	p := Purchase{ID: newID("pur_"), AccountID: accountID, Amount: amount, Note: note, CreatedAt: t}
	a := *cur
	a.CreditsPurchased = total
	a.Purchases++
	a.UpdatedAt = t
	s.accounts[a.ID] = &a
	s.purchases[accountID] = append(s.purchases[accountID], p)
	s.k.MarkDirty(prefixAccount + a.ID)
	b := s.k.Append(prefixPurchase+accountID+"/"+p.ID, p)
	s.k.Unlock()
	return p, a, b.Wait()
}

// Purchases lists an account's credit purchases, oldest first.
func (s *AccountStore) Purchases(accountID string) []Purchase {
	s.k.RLock()
	out := append([]Purchase(nil), s.purchases[accountID]...)
	s.k.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// accountOf is the account's published record, never modified (a change
// publishes a new one). Callers hold the kernel's lock.
func (s *AccountStore) accountOf(id string) (*Account, bool) {
	a, ok := s.accounts[id]
	return a, ok
}

// keyOf is the API key's published record, never modified. Callers hold
// the kernel's lock.
func (s *AccountStore) keyOf(hash string) (*APIKey, bool) {
	k, ok := s.keys.Get(hash)
	if !ok {
		return nil, false
	}
	return &k, true
}

// creatorHasKeysIn reports whether the user created API keys in the
// workspace. Callers hold the kernel's lock.
func (s *AccountStore) creatorHasKeysIn(workspaceID, userID string) bool {
	found := false
	s.keys.Each(func(slot uint32) bool {
		if c, ok := s.keys.SlotCreator(slot); ok && c == userID && s.keys.SlotWorkspace(slot) == workspaceID {
			found = true
		}
		return !found
	})
	return found
}

// eachAccount calls fn with every account. Callers hold the kernel's lock.
func (s *AccountStore) eachAccount(fn func(*Account)) {
	for _, a := range s.accounts {
		fn(a)
	}
}

// ensureDefaultWorkspaceIDs gives every loaded account a default workspace
// id, and every key without a workspace its account's default (records
// stored before workspaces existed). Called by Open, before the
// organizations' ensureDefaultWorkspaces.
func (s *AccountStore) ensureDefaultWorkspaceIDs() {
	for id, a := range s.accounts {
		if a.DefaultWorkspaceID == "" {
			c := *a
			c.DefaultWorkspaceID = record.NewUUID()
			s.accounts[id] = &c
			s.k.MarkDirty(prefixAccount + c.ID)
		}
	}
	var moved []APIKey
	s.keys.Each(func(slot uint32) bool {
		if s.keys.SlotWorkspace(slot) == "" {
			if a, ok := s.accounts[s.keys.SlotAccount(slot)]; ok {
				c := s.keys.At(slot)
				c.WorkspaceID = a.DefaultWorkspaceID
				moved = append(moved, c)
			}
		}
		return true
	})
	for i := range moved {
		s.putKey(&moved[i])
		s.k.MarkDirty(prefixAPIKey + moved[i].Hash)
	}
}

// accountWorkspace resolves the workspace of a new record of an account
// that has only its default workspace: "" is the default, any other id
// must be it. Callers hold the kernel's lock.
func (s *AccountStore) accountWorkspace(accountID, workspaceID string) (string, error) {
	acct, ok := s.accounts[accountID]
	if !ok {
		return "", fmt.Errorf("%w: account", ErrNotFound)
	}
	if workspaceID != "" && workspaceID != acct.DefaultWorkspaceID {
		return "", fmt.Errorf("%w: workspace", ErrNotFound)
	}
	return acct.DefaultWorkspaceID, nil
}

func (s *AccountStore) loadAccount(_, v []byte) error {
	var a Account
	if err := codec.Decode(v, &a, record.FastAccount); err != nil {
		return err
	}
	s.accounts[a.ID] = &a
	return nil
}

func (s *AccountStore) loadPurchase(_, v []byte) error {
	var p Purchase
	if err := codec.Decode(v, &p, record.FastPurchase); err != nil {
		return err
	}
	s.purchases[p.AccountID] = append(s.purchases[p.AccountID], p)
	return nil
}

func (s *AccountStore) loadMgmtKey(_, v []byte) error {
	var m ManagementKey
	if err := codec.Decode(v, &m, record.FastMgmtKey); err != nil {
		return err
	}
	s.putMgmtKey(&m)
	return nil
}

func (s *AccountStore) loadAPIKey(_, v []byte) error {
	var k APIKey
	if err := record.DecodeAPIKey(v, &k); err != nil {
		return err
	}
	s.putKey(&k)
	s.k.ObserveSeq(k.Seq)
	return nil
}

func (s *AccountStore) accountSnapshot(key string) any {
	if a, ok := s.accounts[key[len(prefixAccount):]]; ok {
		return record.AccountJSON(*a)
	}
	return nil
}

func (s *AccountStore) apiKeySnapshot(key string) any {
	if k, ok := s.keys.Get(key[len(prefixAPIKey):]); ok {
		return record.APIKeyJSON(k)
	}
	return nil
}

func (s *AccountStore) mgmtKeySnapshot(key string) any {
	if m, ok := s.mgmtKeys[key[len(prefixMgmtKey):]]; ok {
		return *m
	}
	return nil
}
