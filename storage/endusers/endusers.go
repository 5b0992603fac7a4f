// Package endusers keeps the end users that accounts' requests name (the
// `user` field): created on first use or explicitly, deactivated to
// refuse their requests.
package endusers

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/caddy-tollgate/storage/kernel"
	"github.com/tollgate-dev/caddy-tollgate/storage/record"
)

// EndUserStore keeps the end users that accounts' requests name (user).
type EndUserStore struct {
	k        *kernel.Kernel
	endUsers kernel.Records[EndUser] // by account id, then user
	// acct is the accounts end users belong to (the store's account
	// store).
	acct Accounts
	now  func() time.Time
}

// Accounts is what the end users ask of the accounts, under the kernel's
// lock, which the caller holds.
type Accounts interface {
	// AccountOf is an account's published record.
	AccountOf(id string) (*record.Account, bool)
}

// New is the end users of the accounts acct, over k, on the clock now.
func New(k *kernel.Kernel, acct Accounts, now func() time.Time) *EndUserStore {
	return &EndUserStore{k: k, endUsers: kernel.Records[EndUser]{}, acct: acct, now: now}
}

func (s *EndUserStore) Kinds() []kernel.Kind {
	return []kernel.Kind{kernel.Removable(s.endUsers.Kind(Prefix, nil), s.endUsers)}
}

// EndUser is one of an account's own users, named by the `user` field of
// inference requests. End users are created on first use (or explicitly);
// a deactivated end user's requests are refused.
type EndUser struct {
	AccountID     string     `json:"account_id"`
	User          string     `json:"user"`
	Name          *string    `json:"name"`
	Active        bool       `json:"active"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	DeactivatedAt *time.Time `json:"deactivated_at"`
}

// SetActive activates or deactivates u; a deactivation is stamped at (in
// UTC), an activation clears the stamp. It leaves u as it is when it
// already is so.
func (u *EndUser) SetActive(active bool, at time.Time) {
	if u.Active == active {
		return
	}
	u.Active = active
	if active {
		u.DeactivatedAt = nil
	} else {
		at = at.UTC()
		u.DeactivatedAt = &at
	}
}

// MaxEndUserLength bounds an end-user id (characters), as the public API
// bounds `user`.
const MaxEndUserLength = 256

func endUserTooLong(user string) bool { return utf8.RuneCountInString(user) > MaxEndUserLength }

// Prefix keys end users: e/<account id>/<user>.
const Prefix = "e/"

func endUserKey(accountID, user string) string {
	return kernel.RecordKey(Prefix, accountID, user)
}

func (u EndUser) RecordIDs() (accountID, id string) { return u.AccountID, u.User }

// ValidEndUser checks an end-user id.
func ValidEndUser(user string) error {
	if user == "" || endUserTooLong(user) {
		return fmt.Errorf("%w: user: expected a string of 1 to %d characters", record.ErrInvalid, MaxEndUserLength)
	}
	return nil
}

// ErrExists is returned when creating a record that already exists.
var ErrExists = fmt.Errorf("already exists")

// EndUserDeactivated reports whether the account deactivated this end user:
// a memory lookup for the request path. Unknown end users are active.
func (s *EndUserStore) EndUserDeactivated(accountID, user string) bool {
	u, ok := s.EndUser(accountID, user)
	return ok && !u.Active
}

// Ensure records an end user on first use, without waiting for the write
// (it rides the next group commit). Callers hold the kernel's lock (or
// run in Open).
func Ensure(s *EndUserStore, accountID, user string, t time.Time) {
	if user == "" || endUserTooLong(user) {
		return
	}
	if _, ok := s.endUsers[accountID][user]; ok {
		return
	}
	t = t.UTC()
	s.endUsers.Put(&EndUser{AccountID: accountID, User: user, Active: true, CreatedAt: t, UpdatedAt: t})
	// Only if absent: another replica may have made it and changed it (an
	// account deactivating it) before this one read that.
	s.k.MarkCreated(endUserKey(accountID, user))
}

// Has reports whether the end user is known. Callers hold the kernel's
// lock.
func Has(s *EndUserStore, accountID, user string) bool {
	_, ok := s.endUsers[accountID][user]
	return ok
}

// CreateEndUser registers an end user; ErrExists if it is known already.
func (s *EndUserStore) CreateEndUser(accountID, user string, name *string) (EndUser, error) {
	if err := ValidEndUser(user); err != nil {
		return EndUser{}, err
	}
	s.k.Lock()
	if _, ok := s.acct.AccountOf(accountID); !ok {
		s.k.Unlock()
		return EndUser{}, kernel.ErrNotFound
	}
	if _, ok := s.endUsers[accountID][user]; ok {
		s.k.Unlock()
		return EndUser{}, ErrExists
	}
	Ensure(s, accountID, user, s.now())
	u := s.endUsers[accountID][user]
	u.Name = name
	out := *u
	b := s.k.MarkDirty(endUserKey(accountID, user))
	s.k.Unlock()
	return out, b.Wait()
}

// EndUser returns one end user.
func (s *EndUserStore) EndUser(accountID, user string) (EndUser, bool) {
	return kernel.Lookup(s.k, s.endUsers, accountID, user)
}

// ListEndUsers returns an account's end users ordered by creation, then id.
func (s *EndUserStore) ListEndUsers(accountID string) []EndUser {
	out := kernel.Collect(s.k, s.endUsers, accountID, nil)
	kernel.SortOldestFirst(out, func(u *EndUser) (time.Time, string) { return u.CreatedAt, u.User })
	return out
}

// UpdateEndUser applies fn to a copy of the end user and stores it.
func (s *EndUserStore) UpdateEndUser(accountID, user string, fn func(*EndUser) error) (EndUser, error) {
	return kernel.Update(s.k, s.endUsers, Prefix, accountID, user, func(cur *EndUser) (*EndUser, error) {
		u := *cur
		if err := fn(&u); err != nil {
			return nil, err
		}
		u.UpdatedAt = s.now().UTC()
		return &u, nil
	})
}

// SetEndUserActive activates or deactivates an end user.
func (s *EndUserStore) SetEndUserActive(accountID, user string, active bool) (EndUser, error) {
	return s.UpdateEndUser(accountID, user, func(u *EndUser) error {
		u.SetActive(active, s.now())
		return nil
	})
}
