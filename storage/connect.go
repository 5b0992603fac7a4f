package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-dev/caddy-tollgate/money"
	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
)

// Connect: apps get a member's key through the OAuth PKCE flow. The member
// approves in the dashboard (or a management key with a creator asks
// through the API), which issues a short-lived authorization code bound to
// the app's code challenge and callback; the app exchanges the code with
// its verifier for a key that belongs to the member and records the app.
//
// Codes are records like keys: stored by the SHA-256 digest of the code
// string (the code itself is never stored), kept in memory, replicated
// through the change feed. Their one-time use is the store's business:
// ConsumeConnectCode hands a code out at most once, on one replica or
// several.

// CodeIDPrefix starts every authorization code string.
const CodeIDPrefix = "auth_code_"

// prefixConnectCode keys the codes: cc/<code hash>.
const prefixConnectCode = "cc/"

// ErrCodeExpired is returned for a code whose time has passed; it is
// consumed all the same.
var ErrCodeExpired = errors.New("authorization code expired")

// ConnectCode is an issued authorization code, stored by its hash.
type ConnectCode struct {
	Hash      string `json:"hash"`
	AccountID string `json:"account_id"`
	// UserID is the member who approved; the key will be theirs.
	UserID string `json:"user_id"`
	// ChallengeS256 is the code challenge as an S256 digest: the
	// challenge itself for S256, the S256 digest of the challenge for
	// plain (so that a plain challenge, which is the verifier, is never
	// stored). Method is what the app declared.
	ChallengeS256 string     `json:"challenge_s256"`
	Method        string     `json:"method"`
	CallbackURL   string     `json:"callback_url"`
	App           ConnectApp `json:"app"`
	// What the key will be.
	KeyName      string         `json:"key_name"`
	Limit        *money.Amount  `json:"limit"`
	LimitReset   money.Interval `json:"limit_reset"`
	KeyExpiresAt *time.Time     `json:"key_expires_at"`
	WorkspaceID  string         `json:"workspace_id"`
	CreatedAt    time.Time      `json:"created_at"`
	ExpiresAt    time.Time      `json:"expires_at"`
}

// NewConnectCode describes a code to issue.
type NewConnectCode struct {
	AccountID     string
	UserID        string
	ChallengeS256 string
	Method        string
	CallbackURL   string
	App           ConnectApp
	KeyName       string
	Limit         *money.Amount
	LimitReset    money.Interval
	KeyExpiresAt  *time.Time
	WorkspaceID   string // default: the account's default workspace
	TTL           time.Duration
}

func (s *AccountStore) connectKinds() []kernel.Kind {
	return []kernel.Kind{{Prefix: prefixConnectCode, Load: s.loadConnectCode,
		Reset: func() { clear(s.codes) }, Snapshot: s.connectCodeSnapshot,
		Remove: func(key string) { delete(s.codes, key[len(prefixConnectCode):]) }}}
}

func (s *AccountStore) loadConnectCode(_, v []byte) error {
	var c ConnectCode
	if err := json.Unmarshal(v, &c); err != nil {
		return err
	}
	s.codes[c.Hash] = &c
	return nil
}

func (s *AccountStore) connectCodeSnapshot(key string) any {
	if c, ok := s.codes[key[len(prefixConnectCode):]]; ok {
		return *c
	}
	return nil
}

// CreateConnectCode issues a code for a member of the account and returns
// it with the code string, which is never stored. The member must be a
// user of the account (an active organization member, or a personal
// account's owner) and, for a workspace other than the default one, a
// member of it. Expired codes nobody exchanged are dropped on the way.
func (s *AccountStore) CreateConnectCode(n NewConnectCode) (ConnectCode, string, error) {
	t := now().UTC()
	if n.TTL <= 0 {
		return ConnectCode{}, "", fmt.Errorf("%w: a code needs a lifetime", ErrInvalid)
	}
	if n.KeyExpiresAt != nil && !n.KeyExpiresAt.After(t) {
		return ConnectCode{}, "", fmt.Errorf("%w: expires_at must be in the future", ErrInvalid)
	}
	secret, hash, _ := newSecret(CodeIDPrefix)
	s.k.Lock()
	acct, ok := s.accounts[n.AccountID]
	if !ok {
		s.k.Unlock()
		return ConnectCode{}, "", ErrNotFound
	}
	if !s.org.isAccountUser(acct, n.UserID) {
		s.k.Unlock()
		return ConnectCode{}, "", fmt.Errorf("%w: the member is not an active user of this account", ErrForbidden)
	}
	if n.WorkspaceID == "" {
		n.WorkspaceID = acct.DefaultWorkspaceID
	}
	ws, ok := s.org.resolveWorkspace(n.AccountID, n.WorkspaceID)
	if !ok {
		s.k.Unlock()
		return ConnectCode{}, "", fmt.Errorf("%w: workspace_id %q is not a workspace of this account", ErrNotFound, n.WorkspaceID)
	}
	if acct.Kind == AccountOrganization && ws.ID != acct.DefaultWorkspaceID && ws.Members[n.UserID] == nil {
		s.k.Unlock()
		return ConnectCode{}, "", fmt.Errorf("%w: workspace_id: the member is not in workspace %q", ErrForbidden, ws.Slug)
	}
	c := ConnectCode{
		Hash: hash, AccountID: n.AccountID, UserID: n.UserID,
		ChallengeS256: n.ChallengeS256, Method: n.Method, CallbackURL: n.CallbackURL, App: n.App,
		KeyName: n.KeyName, Limit: n.Limit, LimitReset: n.LimitReset, KeyExpiresAt: utcPtr(n.KeyExpiresAt),
		WorkspaceID: ws.ID, CreatedAt: t, ExpiresAt: t.Add(n.TTL),
	}
	s.codes[hash] = &c
	b := s.k.MarkDirty(prefixConnectCode + hash)
	for h, old := range s.codes {
		if !t.Before(old.ExpiresAt.Add(codeSweepGrace)) {
			delete(s.codes, h)
			s.k.MarkDirty(prefixConnectCode + h)
		}
	}
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return ConnectCode{}, "", err
	}
	return c, secret, nil
}

// codeSweepGrace is how long an expired code is kept, so that its
// exchange still learns it expired rather than that it never existed.
const codeSweepGrace = time.Hour

// ConsumeConnectCode takes the code with the given hash out of the store
// and returns it: of every call for one code, concurrent or not, on one
// replica or several, exactly one gets it; the others get ErrNotFound, as
// for a code that was never issued. An expired code is consumed and
// reported with ErrCodeExpired.
//
// On one process the kernel's lock decides. On the shared backend every
// replica holds the code in memory, so the decision is a claim in Redis
// (SET NX, kept until well after the code expires): the replica that makes
// it deletes the record, which the feed then removes everywhere.
func (s *AccountStore) ConsumeConnectCode(hash string) (ConnectCode, error) {
	var c ConnectCode
	claimer, shared := s.k.Claimer()
	if shared {
		var err error
		if c, err = s.sharedCode(hash); err != nil {
			return ConnectCode{}, err
		}
		won, err := claimer.Claim("~cc/"+hash, max(time.Until(c.ExpiresAt.Add(codeSweepGrace)), time.Minute))
		if err != nil {
			return ConnectCode{}, err
		}
		if !won {
			return ConnectCode{}, ErrNotFound
		}
	}
	s.k.Lock()
	if !shared {
		p, ok := s.codes[hash]
		if !ok {
			s.k.Unlock()
			return ConnectCode{}, ErrNotFound
		}
		c = *p
	}
	delete(s.codes, hash)
	b := s.k.MarkDirty(prefixConnectCode + hash)
	s.k.Unlock()
	if err := b.Wait(); err != nil {
		return ConnectCode{}, err
	}
	if !now().Before(c.ExpiresAt) {
		return ConnectCode{}, ErrCodeExpired
	}
	return c, nil
}

// sharedCode returns a code from memory or, when the feed has not brought
// it to this replica yet, from Redis.
func (s *AccountStore) sharedCode(hash string) (ConnectCode, error) {
	s.k.RLock()
	c, ok := s.codes[hash]
	s.k.RUnlock()
	if ok {
		return *c, nil
	}
	var out ConnectCode
	err := s.k.Backend().Get(prefixConnectCode+hash, func(v []byte) error { return json.Unmarshal(v, &out) })
	if err != nil {
		return ConnectCode{}, err
	}
	return out, nil
}

// ConnectCodes returns the number of codes in memory (issued, not yet
// exchanged nor swept), for tests.
func (s *AccountStore) ConnectCodes() int {
	s.k.RLock()
	defer s.k.RUnlock()
	return len(s.codes)
}
